#pragma once
// Resource requests and allocations. cpus, memory_mb and gpus are per node,
// as in the public contract; a job with nodes=N asks for N such slices.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace unisched::model {

using Labels = std::map<std::string, std::string>;

struct ResourceRequest {
  int nodes = 1;
  int cpus = 1;
  int64_t memory_mb = 0;  // 0 until the queue default is applied
  int gpus = 0;
  std::string gpu_model;         // empty: any model
  int64_t walltime_seconds = 0;  // 0 until the queue default is applied
  // Tasks started on each node when the job runs as a gang (launch
  // per_node), and the shape step launches default to; `cpus` is per node,
  // so each task has cpus / tasks_per_node (Slurm's --ntasks-per-node).
  int tasks_per_node = 1;
  bool operator==(const ResourceRequest&) const = default;
};

// What one node gives one job.
struct NodeAllocation {
  std::string node;
  int cpus = 0;
  int64_t memory_mb = 0;
  std::vector<int> gpu_indices;  // device indices on that node (CUDA_VISIBLE_DEVICES)
  // The model of each of those devices, in the same order, as the fit chose
  // them: what the ledger charges GPU-seconds per (docs/ledger.md). Empty in
  // attempts stored before it existed (the ledger then looks the model up).
  std::vector<std::string> gpu_models{};
  // The node's logical CPUs (0 .. its cpus - 1) the share holds, `cpus` of
  // them, lowest free first: its tasks' CPU sets (UNISCHED_CPU_SET, pinned
  // where the node's CPUs are real, docs/execution.md). Empty in attempts
  // stored before it existed.
  std::vector<int> cpu_ids{};
  bool operator==(const NodeAllocation&) const = default;
};

using Allocation = std::vector<NodeAllocation>;

}  // namespace unisched::model
