#pragma once
// `unisched baseline`: launch check 6, the performance baseline
// (docs/baseline.md). Measures the chosen pools with ordinary jobs and
// sandboxes (baseline_run.h), records the run (POST /v1/baselines) and
// compares it with the previous run of the same pools. Its kernels, run
// inside those jobs, are subcommands of the same binary and need no daemon.

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/session.h"
#include "unisched/baseline/baseline.h"

namespace unisched::cli {

inline constexpr const char* kBaselineUsage =
    "[--pools P[,P...]] [--size N] [--repeat R] [--samples K] [--timeout SECONDS] [--binary PATH] "
    "[--mpirun PATH] [--compare [--margin PCT]] [--json]\n"
    "       unisched baseline list [--pools P[,P...]] [--limit N] [--json]\n"
    "       unisched baseline show ID [--json]\n"
    "       unisched baseline compare OLD_ID NEW_ID [--margin PCT] [--json]\n"
    "       unisched baseline dgemm [--size N] [--repeat R] [--threads T] [--mpi]   (the kernel, inside a job)\n"
    "       unisched baseline gpu-check [--device PATTERN]                 (whether the job's GPUs are real)\n"
    "  Runs DGEMM on every node of the pools (default: all), across their nodes at once and over MPI, job start\n"
    "  and sandbox latencies and the multi-GPU speed-up (baseline.gpu_command) as ordinary jobs, and records\n"
    "  the run (platform-admin). Defaults: --size 2048 --repeat 3 --samples 5 --timeout 600 --margin 10.\n"
    "  --compare: each figure against the previous run of the same pools. Exit status: 0 done, 1 failed,\n"
    "  2 usage error, 3 a figure got worse by more than the margin.";

// Exit status of `--compare` and `compare` when a figure got worse by more
// than the margin.
inline constexpr int kBaselineWorse = 3;

std::vector<FlagSpec> BaselineFlags();

// `unisched baseline dgemm|gpu-check ...` (words: after "baseline"), or
// nullopt when words[0] is not a kernel (the run and its reads need a
// daemon: RunBaseline).
std::optional<int> RunBaselineKernel(const std::vector<std::string>& words);

// The run, list, show and compare; positionals[0] is the subcommand, if any.
// `usage_failure` prints a usage error and returns the exit status.
int RunBaseline(Session& session, const ParsedArgs& args, const std::function<int(const std::string&)>& usage_failure);

// For people: a recorded run (the API's JSON) and a comparison of two.
std::string FormatBaseline(const nlohmann::json& run);
std::string FormatComparison(const std::vector<baseline::Change>& changes, const nlohmann::json& previous,
                             double margin_percent);

}  // namespace unisched::cli
