#pragma once
// The measuring part of `unisched baseline` (docs/baseline.md): ordinary
// jobs on the chosen pools, submitted as the caller, and API sandboxes;
// what they measured becomes the body of POST /v1/baselines. What cannot
// be measured is recorded as skipped, with the reason.

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/session.h"

namespace unisched::cli {

struct BaselineOptions {
  std::vector<std::string> pools;  // empty: every pool with nodes
  int size = 2048;                 // the DGEMM's matrix order n
  int repeats = 3;                 // timed multiplies per DGEMM job
  int samples = 5;                 // samples per latency figure
  std::string binary;              // the unisched the jobs run, at the same path on every node
  std::string mpirun = "mpirun";   // OpenMPI's launcher on the pools' nodes, for the cross-node DGEMM
  int job_timeout_seconds = 600;   // a job not ended by then (pending included) is cancelled
};

// The memory (MB) of the three n x n matrices of doubles a DGEMM holds.
int64_t MatricesMb(int n);
// The memory (MB) a DGEMM job of size n asks for on a node of `cpus`: its
// matrices, and room for the program and OpenBLAS's buffers.
int64_t KernelMemoryMb(int n, int cpus);

// Measures the cluster; the run for POST /v1/baselines, or nullopt when the
// cluster could not be read (reported on stderr). Progress goes to `log`.
std::optional<nlohmann::json> MeasureBaseline(Session& session, const BaselineOptions& options, std::ostream& log);

}  // namespace unisched::cli
