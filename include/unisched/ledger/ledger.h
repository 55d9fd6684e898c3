#pragma once
// What a job's run is charged (docs/ledger.md): pure functions of the job
// record, its allocation and an interval. The controller charges running
// attempts with them every accounting interval and closes each attempt with
// its final entries; reconciliation recomputes a finished attempt's usage
// with the very same functions and compares it with the ledger's sums.

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "unisched/common/time.h"
#include "unisched/model/cluster.h"
#include "unisched/model/job.h"

namespace unisched::ledger {

// Metric names (the columns of GET /v1/usage; units in docs/ledger.md).
inline constexpr const char* kCpuCoreSeconds = "cpu_core_seconds";    // allocated cpus x seconds
inline constexpr const char* kCpuSecondsUsed = "cpu_seconds_used";    // user + system CPU (rusage)
inline constexpr const char* kMemoryMbSeconds = "memory_mb_seconds";  // allocated MB x seconds
inline constexpr const char* kGpuSeconds = "gpu_seconds";             // allocated GPU cards x seconds (detail: model)
inline constexpr const char* kInstanceSeconds = "instance_seconds";   // elastic pools: one per job x seconds
inline constexpr const char* kStorageGbHours = "storage_gb_hours";    // sampled bytes on disk / 1e9 x hours
inline constexpr const char* kNetworkBytesIn = "network_bytes_in";    // bytes a job's stage-in fetched
inline constexpr const char* kNetworkBytesOut = "network_bytes_out";  // bytes a job's stage-out sent

// Metrics measured by sampling the system rather than derived from a job's
// allocation and run: reconciliation cannot recompute them.
inline bool IsSampledMetric(const std::string& metric) {
  return metric == kStorageGbHours;
}

// One charge: a metric on one node (detail: the GPU model for gpu_seconds).
struct Charge {
  std::string metric;
  std::string detail;
  std::string node;
  double quantity = 0;
};
using ChargeKey = std::tuple<std::string, std::string, std::string>;  // metric, detail, node

// One row of the ledger: a quantity of one metric charged to someone over
// [start, end). Stored as is (store::LedgerEntry) and summed by GET /v1/usage.
struct Entry {
  std::string key;  // unique: a write replayed with the same key adds nothing
  model::JobId job = 0;
  int attempt = 0;
  std::string user, project, queue, pool, workload_kind, node;
  std::string metric;  // cpu_core_seconds, memory_mb_seconds, gpu_seconds, instance_seconds, cpu_seconds_used
  std::string detail;  // e.g. the GPU model of gpu_seconds
  // storage_gb_hours: the storage tier the bytes lie in (hot, cold,
  // scratch or a site's; config storage.tiers); "" for every other metric
  // and for storage charged before tiers existed (schema version 17).
  std::string tier;
  double quantity = 0;
  Timestamp start{}, end{};
  bool final = false;  // closes the attempt: quantity = its whole usage - its interim charges
  Timestamp recorded_at{};
};

// Who an entry charges: a job's attempt (JobSubject), an API sandbox, a
// project's storage. `id` begins every key of its entries.
struct Subject {
  std::string id;  // "<job>/<attempt>", "sandbox/<n>", ...
  model::JobId job = 0;
  int attempt = 0;  // of a sandbox: its number
  std::string user, project, queue, pool, workload_kind;
};
Subject JobSubject(const model::Job& job, int attempt);

// The one way entries are made: `charge` over [from, to) of `subject`
// (final: the attempt's closing entry). The key is
// "<subject id>/<metric>/<detail>/<node>/<from in Unix ms | final>": one
// per subject, charge and interval, so a replayed write adds nothing.
Entry MakeEntry(const Subject& subject, const Charge& charge, Timestamp from, Timestamp to, bool final,
                Timestamp recorded_at);

// What the allocation of `attempt` costs over [from, to): cpu core-seconds,
// memory MB-seconds and GPU card-seconds per model on each node, and for a
// job of an elastic pool one instance over the interval. A job of a pool
// whose backend places jobs has no shares: its request is charged, to the
// backend's name. Nothing for an empty or inverted interval.
std::vector<Charge> AllocatedCharges(const model::ClusterSpec& cluster, const model::Job& job,
                                     const model::Attempt& attempt, Timestamp from, Timestamp to);

// The whole usage of a finished attempt: its allocation over its run as the
// supervisor recorded it (start to end), plus the CPU time it used. Empty
// for an attempt that never started.
std::map<ChargeKey, double> AttemptUsage(const model::ClusterSpec& cluster, const model::Job& job,
                                         const model::Attempt& attempt);

// Reconciliation of finished attempts against the ledger.
struct Discrepancy {
  std::string kind;  // missing | duplicated | mismatched
  model::JobId job = 0;
  int attempt = 0;
  std::string metric, detail, node;
  double expected = 0;
  double recorded = 0;
};
struct Reconciliation {
  int64_t attempts_checked = 0;
  int64_t missing = 0;
  int64_t duplicated = 0;
  int64_t mismatched = 0;
  // Attempts with ledger entries whose job record no longer exists.
  int64_t unverifiable_attempts = 0;
  std::vector<Discrepancy> details;
};
// `recorded`: the ledger's sums of the attempt, and how many of its entries
// repeat another. A metric expected but absent is missing; present but off
// by more than `tolerance` (relative, and 1e-6 absolute) is mismatched.
void ReconcileAttempt(model::JobId job, int attempt, const std::map<ChargeKey, double>& expected,
                      const std::map<ChargeKey, double>& recorded, int64_t duplicated_entries, double tolerance,
                      Reconciliation& out);

}  // namespace unisched::ledger
