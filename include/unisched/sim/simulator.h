#pragma once
// Trace replay on a virtual clock (docs/simulate.md): the jobs of a trace are
// submitted to the real scheduler (scheduler::Scheduler::Decide) at their
// submit times, start when a plan starts them, and end after their run time.
// No processes, no sockets, no wall clock.
//
// Event order, as the reference simulator pyss has it (see
// shared/traces/hpc-kth-sp2/README.md). At each distinct time t:
//   1. jobs that end at t and ran exactly their wall-time limit are freed
//      (pyss's availability profile shows them free at t already);
//   2. each job submitted at t, in trace order: added, then one Decide;
//   3. each job that ends at t, in the order the jobs started: freed (if not
//      yet), then one Decide.
// Every start of a plan is applied at once: the job leaves `pending`, its
// allocation is added to the nodes, and its end is queued at start + run.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/config/config.h"
#include "unisched/model/cluster.h"
#include "unisched/model/fit.h"
#include "unisched/scheduler/scheduler.h"
#include "unisched/sim/trace.h"

namespace unisched::sim {

// What a job's trace size means.
enum class SizeUnit { kCpus, kGpus };

// The cluster a trace is replayed on, and where its jobs go.
struct SimCluster {
  scheduler::SchedulerConfig config;
  std::vector<model::NodeUsage> nodes;  // the pool's nodes, all free
  std::string queue;                    // every job is submitted here
  std::string pool;                     // the queue's pool
  SizeUnit unit = SizeUnit::kCpus;
  int64_t capacity = 0;     // cpus (or GPUs) of the pool: the utilization's denominator
  int largest_node = 0;     // most cpus (or GPUs) on one node
  std::string description;  // for the log, e.g. "one pool of 100 processors"
  // Each EASY or conservative pass starts from the profile the pass before
  // it left (scheduler::Snapshot::previous_profile), the room of jobs that
  // ended early since given back. Off: every pass builds its profile (the
  // same starts, slower; tests compare the two).
  bool carry_profiles = true;

  // The request a job of `size` cpus (or GPUs) makes: one node when one node
  // can hold it, else the fewest nodes of the largest kind, split evenly
  // (rounded up). GPU jobs ask for one cpu per node.
  model::ResourceRequest RequestFor(int size, int64_t walltime_seconds) const;
  // Whether the request fits the empty pool at all.
  bool CanEverFit(const model::ResourceRequest& request) const;
};

// One pool "sim-pool" with one node "sim-node-01" of `processors` cpus and
// one FIFO queue "sim" (all priorities equal: submit order decides).
SimCluster CpuCluster(int processors, model::BackfillChoice backfill);
// The same with one node of `gpus` GPUs (cpus and memory never bind).
SimCluster GpuCluster(int gpus, model::BackfillChoice backfill);
// A configured cluster: jobs go to the default queue of workload kind hpc
// (SWF) or ai-training (Philly), else the first queue; the pool is that
// queue's and the nodes are that pool's. `backfill` set: every pool uses it.
Result<SimCluster> ConfiguredCluster(const config::Config& config, TraceFormat format,
                                     std::optional<model::BackfillChoice> backfill);

struct Metrics {
  int64_t jobs = 0;
  double avg_wait_seconds = 0;      // start - submit
  double avg_bounded_slowdown = 0;  // max(1, (wait + run) / max(run, 10 s))
  double utilization = 0;           // sum(run * size) / (capacity * makespan)
  double makespan_seconds = 0;      // max(end) - min(submit)
  double avg_jct_seconds = 0;       // end - submit (job completion time)
};
inline constexpr double kBoundedSlowdownThresholdSeconds = 10;

// The metrics of a finished replay; start_ms[i] is when jobs[i] started.
Metrics ComputeMetrics(const std::vector<TraceJob>& jobs, const std::vector<int64_t>& start_ms, int64_t capacity);

// How good the predictions of a replay on a pool that plans with predicted
// run times were: each job's prediction at its submission against its run.
struct PredictionAccuracy {
  int64_t predicted = 0;          // jobs with a prediction (their user had run before)
  int64_t under = 0;              // of which predicted shorter than they ran
  double absolute_error_sum = 0;  // seconds
  double MeanAbsoluteError() const { return predicted ? absolute_error_sum / static_cast<double>(predicted) : 0; }
  double UnderShare() const { return predicted ? static_cast<double>(under) / static_cast<double>(predicted) : 0; }
};

// How far the start a job was promised when it was submitted (its
// reservation after its arrival's pass: the daemon's `estimated_start`) was
// from its real start. EASY promises one only to a job that arrives to an
// empty queue and cannot start; conservative to every job that cannot
// start; FCFS to none.
struct EstimateAccuracy {
  int64_t estimated = 0;            // jobs given an estimate at submission
  int64_t late = 0;                 // of which started after it
  double median_error_seconds = 0;  // of |start - estimate|, nearest rank
  double p90_error_seconds = 0;     // the same, 90th percentile
  double median_early_seconds = 0;  // of estimate - start (> 0: started earlier than promised)
  double LateShare() const { return estimated ? static_cast<double>(late) / static_cast<double>(estimated) : 0; }
};
// start_ms[i] and estimate_ms[i]: jobs[i]'s start and the estimate it got at
// submission (-1: none).
EstimateAccuracy ComputeEstimateAccuracy(const std::vector<int64_t>& start_ms, const std::vector<int64_t>& estimate_ms);

struct SimulationResult {
  Metrics metrics;
  PredictionAccuracy prediction;  // all zero unless the pool predicts
  EstimateAccuracy estimates;
  std::vector<int64_t> start_ms;  // per job, in the order of the jobs given; -1: never started
  int64_t passes = 0;             // Decide calls
  int64_t never_started = 0;      // still pending when no event was left
  int64_t max_pending = 0;        // the longest queue a pass saw
};

// done of total events (a submission or an end each) handled; called now
// and then, and with done == total once the replay is over.
using ProgressCallback = std::function<void(int64_t done, int64_t total)>;

// Replays `jobs` (distinct ids; submitted by time, in the given order among
// equal times) on `cluster`. Every job should fit the empty pool
// (SimCluster::CanEverFit); one that cannot is counted in never_started.
SimulationResult Simulate(const std::vector<TraceJob>& jobs, const SimCluster& cluster,
                          const ProgressCallback& progress = {});

}  // namespace unisched::sim
