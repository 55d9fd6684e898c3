#pragma once
// The daemon's slow periodic chores, on a thread of their own so the control
// loop never waits for a disk walk or a full ledger scan (docs/ledger.md):
//  * storage sampling: every store.storage_sample_interval_seconds, the
//    bytes on disk of each project's storage_paths, of its directories on
//    shared file systems and of each running job's work directory, and the
//    bytes its lifecycle archives keep in object stores, charged to the
//    ledger as storage_gb_hours, each in its storage tier;
//  * reconciliation: every store.reconcile_interval_seconds, the ledger
//    against the job records; each discrepancy becomes a warning event on its
//    job (once) and the counts become unisched_ledger_discrepancies{kind};
//  * every minute: the audit trail pruned to store.audit_retention_days and
//    store.audit_max_rows, and the minute chores of others (OnMinute: the
//    API's tally of unauthenticated requests).

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "daemon/lifecycle.h"
#include "unisched/common/time.h"
#include "unisched/config/config.h"
#include "unisched/config/live.h"
#include "unisched/metrics/metrics.h"
#include "unisched/store/store.h"

namespace unisched::daemon {

// Bytes allocated on disk under `dir` (st_blocks x 512 of every file and
// directory, hard links once, symlinks not followed, as `du -s` counts);
// nothing if `dir` cannot be read.
std::optional<uint64_t> DiskUsageBytes(const std::string& dir);

// GB-hours of `bytes` held over `seconds` (GB = 10^9 bytes).
inline double GbHours(uint64_t bytes, double seconds) {
  return static_cast<double>(bytes) / 1e9 * seconds / 3600.0;
}

class Housekeeper {
 public:
  // `work_root`: where the executor puts job work directories (<work_root>/<job>).
  Housekeeper(const config::LiveConfig& live, store::Store& store, metrics::Metrics& metrics, const Clock& clock,
              std::string work_root);
  ~Housekeeper();
  Housekeeper(const Housekeeper&) = delete;
  Housekeeper& operator=(const Housekeeper&) = delete;

  void Start();
  void Stop();
  // REQUIRES: before Start. Told the discrepancy count of every reconciliation.
  void OnReconciled(std::function<void(int64_t)> callback) { on_reconciled_ = std::move(callback); }
  // REQUIRES: before Start. Called every minute from the housekeeping thread.
  void OnMinute(std::function<void(Timestamp)> callback) { on_minute_ = std::move(callback); }
  // Measures what lifecycle rules archived to object stores at each sample
  // (Lifecycle::MeasureArchives); unset: archives are not charged. Set
  // before Start.
  void MeasureArchivesWith(std::function<std::vector<ArchivedBytes>(Timestamp)> measure) {
    measure_archives_ = std::move(measure);
  }

  // Deletes audit records past their retention or the size bound (public
  // for tests). Returns how many went.
  int64_t PruneAudit(Timestamp now);

  // One storage sample for the sampling interval that ended last before
  // `now` (public for tests). Returns the entries it appended.
  int SampleStorage(Timestamp now);
  // One reconciliation (public for tests).
  void Reconcile(Timestamp now);

 private:
  void Loop();

  // The config in force; current_config() is its version now.
  const config::LiveConfig& live_;
  const config::Config& current_config() const { return live_.Current(); }
  store::Store& store_;
  metrics::Metrics& metrics_;
  const Clock& clock_;
  const std::string work_root_;

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;

  // Owned by the housekeeping thread.
  // Discrepancies already raised as events: (job, attempt, kind, metric, detail, node).
  std::set<std::tuple<int64_t, int, std::string, std::string, std::string, std::string>> reported_;
  std::set<std::string> unreadable_paths_;  // warned about once
  std::function<void(int64_t)> on_reconciled_;
  std::function<void(Timestamp)> on_minute_;
  std::function<std::vector<ArchivedBytes>(Timestamp)> measure_archives_;
};

}  // namespace unisched::daemon
