#pragma once
// Live config versions, the daemon's side (docs/config-versions.md): which
// version is in force at start, and every change after (POST /v1/config,
// rollback, promote, SIGHUP). The store keeps the versions and the head
// (unisched/store/config_versions.h); the pure parts (what differs, what
// may change live, a canary's merge, the impact) are config/change.h and
// service/config_impact.h. This puts them together, commits, and swaps the
// daemon's LiveConfig.

#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "unisched/config/change.h"
#include "unisched/config/config.h"
#include "unisched/config/live.h"
#include "unisched/model/job.h"
#include "unisched/service/planes.h"
#include "unisched/store/store.h"

namespace unisched::daemon {

// How the daemon's file meets the store's versions at start.
struct ConfigAdoption {
  bool file_given = false;  // --config FILE (else the embedded default)
  bool apply_file = false;  // --apply-config: the file becomes the current version
  // A replica coming back as a standby after it stopped leading: the
  // store's version, whatever the file says (it was checked at the start).
  bool trust_store = false;
};

class ConfigKeeper final : public service::ConfigPlane {
 public:
  // `local`: this daemon's file as loaded (--listen, --state-dir applied);
  // its server and store sections are this replica's own.
  ConfigKeeper(store::Store& store, config::Config local, std::string source);

  // The config in force at start: version 1 is seeded from the file when
  // the store has none; the store's current version when the file says the
  // same (server and store aside), or when no --config was given, or with
  // trust_store; the file as a new current version with apply_file;
  // otherwise an error listing the differences and what to do.
  Result<config::Config> Adopt(const ConfigAdoption& how);
  // The store's head as this replica's config (current, canary merged):
  // what a replica taking the lease runs.
  Result<config::Config> LoadInForce();
  // Once the leader's parts run: where versions go in force, what the
  // impact reads, and what else a new version needs (users into the store,
  // credentials cache), called after the swap.
  void Attach(config::LiveConfig& live, std::function<std::vector<model::Job>()> active_jobs,
              std::function<void(const config::Config&)> on_applied);

  // service::ConfigPlane
  Result<nlohmann::json> Show(std::optional<int64_t> number) override;
  Result<nlohmann::json> Versions(int limit) override;
  Result<nlohmann::json> Apply(const ApplyRequest& request, const std::string& actor) override;
  Result<nlohmann::json> Rollback(std::optional<int64_t> number, const std::string& actor) override;
  Result<nlohmann::json> Promote(const std::string& actor) override;

 private:
  // Version `number` loaded as this replica's config.
  Result<config::Config> LoadVersion(int64_t number);
  // The config a head puts in force, and the head's current version alone.
  struct InForce {
    config::Config effective;
    config::Config current;
  };
  Result<InForce> Build(const store::ConfigHead& head);
  // An error naming each difference that cannot be applied live, with its
  // reason: of `from_current` (the current version's text against
  // `next_text`), and of `next_text`'s server and store against this
  // replica's file; nullopt when every one can.
  std::optional<Error> RefuseNotLive(const std::vector<config::ConfigDifference>& from_current,
                                     const std::string& next_text) const;
  // Commits `change`, then puts the new head in force.
  Result<store::ConfigHead> Commit(store::ConfigChange change);
  nlohmann::json HeadJson() const;

  store::Store& store_;
  const config::Config local_;
  const std::string source_;
  std::mutex mu_;  // one change at a time; guards what follows
  config::LiveConfig* live_ = nullptr;
  std::function<std::vector<model::Job>()> active_jobs_;
  std::function<void(const config::Config&)> on_applied_;
  store::ConfigHead head_;
  config::Config current_;  // the head's current version (no canary)
};

}  // namespace unisched::daemon
