#pragma once
// Storage lifecycle (config storage.lifecycle, docs/data.md "Lifecycle"):
// old files of shared file systems archived to an object store's cold
// bucket (then removed), old objects of a bucket expired. Run by the daemon
// every storage.lifecycle_interval_minutes on a thread of its own, and on
// demand (POST /v1/storage/lifecycle/run, with ?dry_run=true only listing
// what would move). Every file archived and object expired is a cluster
// event; each run's use of a store's credentials is audited.

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/config/live.h"
#include "unisched/service/secret_vault.h"
#include "unisched/store/store.h"

namespace unisched::daemon {

struct LifecycleAction {
  std::string rule;
  std::string action;  // "archive" or "expire"
  std::string source;  // a file's path, or an object's s3://STORE/bucket/key
  std::string target;  // archive: the object it becomes; expire: ""
  int64_t bytes = 0;
  double age_days = 0;
  std::string error;  // why it failed ("" when done, or on a dry run)
};

// The age in days of something last modified at `modified`, at `now`.
inline double AgeDays(Timestamp modified, Timestamp now) {
  return std::chrono::duration<double>(now - modified).count() / 86400.0;
}

// What a project keeps archived under one prefix of an object store (Run
// puts a project's files under <archive_to><project>/), in its store's tier.
struct ArchivedBytes {
  std::string project;  // "" for a file system without project directories
  std::string where;    // s3://STORE/bucket/prefix
  std::string tier;     // the object store's (config storage.object_stores[].tier)
  uint64_t bytes = 0;
};

class Lifecycle {
 public:
  // `vault` may be null (no secrets key): rules that need a store then fail, saying so.
  Lifecycle(const config::LiveConfig& live, store::Store& store, const service::SecretVault* vault, const Clock& clock);
  ~Lifecycle();
  Lifecycle(const Lifecycle&) = delete;
  Lifecycle& operator=(const Lifecycle&) = delete;

  void Start();
  void Stop();

  // Applies every rule now (one run at a time); `dry_run` moves nothing and
  // records no event (its use of a store's keys to list is audited).
  // `actor` is who asked ("system" for the schedule).
  Result<std::vector<LifecycleAction>> Run(bool dry_run, const std::string& actor);

  // The bytes under every archive prefix of the archive rules, listed now
  // with the stores' credentials (each use audited); a prefix that cannot be
  // listed is left out (logged), so storage sampling charges it absent, not
  // zero.
  std::vector<ArchivedBytes> MeasureArchives(Timestamp now);

 private:
  void Loop();

  const config::LiveConfig& live_;
  store::Store& store_;
  const service::SecretVault* vault_;
  const Clock& clock_;
  std::mutex run_mu_;  // one run at a time
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace unisched::daemon
