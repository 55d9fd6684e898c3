#pragma once
// `unisched simulate` without its terminal: options in, a report out. The CLI
// (src/cli/simulate.cc) parses the flags, draws the progress bar and prints.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/model/cluster.h"
#include "unisched/sim/simulator.h"
#include "unisched/sim/trace.h"

namespace unisched::sim {

struct SimulateOptions {
  std::string trace_path;
  std::string config_path;                      // empty: --processors or --gpus describe the cluster
  std::optional<int> processors;                // SWF without a config
  std::optional<int> gpus;                      // Philly without a config
  std::optional<model::BackfillChoice> policy;  // unset: easy, or the config's pools as configured
  std::optional<double> planned_share;          // predicted policies: PoolSpec::planned_share (default 0.2)
};

struct SimulationReport {
  TraceFormat format = TraceFormat::kSwf;
  CleaningReport cleaning;
  int64_t dropped_unplaceable = 0;  // kept by cleaning, but no node shape of the pool can hold them
  std::string cluster;              // SimCluster::description
  std::string policy;               // "easy", or "as configured"
  SimulationResult result;
  double replay_seconds = 0;  // wall time of the replay itself (not reading the trace)
  // Every replayed job's start, by its trace id (SWF field 1; Philly: data
  // row), in ascending id order: what `--starts FILE` writes.
  struct JobStart {
    int64_t source_id = 0;
    int64_t start_ms = 0;
  };
  std::vector<JobStart> starts;
};

// Checks the options, reads and cleans the trace, builds the cluster and
// replays it. Cleaning and drops are logged to `log`. Errors (unreadable
// file, bad config, missing --processors/--gpus...) carry a message for the
// user.
Result<SimulationReport> RunSimulation(const SimulateOptions& options, std::ostream& log,
                                       const ProgressCallback& progress = {});

// The human-readable summary printed on stdout.
std::string FormatSummary(const SimulationReport& report);

// One line per started job, `<trace id> <start time in seconds>`, in trace id
// order: the format of the reference schedules in shared/anchors/pyss, so the
// two compare with diff or sha256sum. Whole seconds print without decimals.
std::string FormatStarts(const SimulationReport& report);

}  // namespace unisched::sim
