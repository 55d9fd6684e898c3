#pragma once
// `unisched simulate`: the trace replay (docs/simulate.md). Needs no daemon.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "unisched/sim/simulate.h"

namespace unisched::cli {

inline constexpr const char* kSimulateUsage =
    "usage: unisched simulate --trace FILE [--config FILE] [--processors N] [--gpus N] "
    "[--policy fcfs|easy|conservative|easy-predicted|conservative-predicted] [--planned-share X] [--json] "
    "[--starts FILE]";

// The one object `--json` prints: jobs, avg_wait_seconds, avg_bounded_slowdown,
// utilization, makespan_seconds, plus avg_jct_seconds and gpu_utilization for
// a GPU (Philly) trace.
nlohmann::json SimulationJson(const sim::SimulationReport& report);

// `words`: the arguments after "simulate". Returns the exit status: 0 done,
// 1 the replay failed (unreadable trace, bad config...), 2 a usage error.
int RunSimulate(const std::vector<std::string>& words);

}  // namespace unisched::cli
