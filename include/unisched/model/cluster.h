#pragma once
// The static shape of the cluster: pools, nodes, queues and routing rules, as
// typed values. The config adapter builds a ClusterSpec from YAML; the router
// and the scheduler read it. Nothing here does I/O.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unisched/model/resources.h"

namespace unisched::model {

enum class WorkloadKind { kHpc, kAiTraining, kAiInference, kAgent };
std::string_view ToString(WorkloadKind kind);  // "hpc", "ai-training", "ai-inference", "agent"
std::optional<WorkloadKind> ParseWorkloadKind(std::string_view text);

enum class PoolKind { kCpu, kGpu, kElastic };
std::string_view ToString(PoolKind kind);  // "cpu", "gpu", "elastic"
std::optional<PoolKind> ParsePoolKind(std::string_view text);

enum class NodeState { kUp, kDraining, kDrained, kDown };
std::string_view ToString(NodeState state);  // "up", "draining", "drained", "down"
std::optional<NodeState> ParseNodeState(std::string_view text);

struct GpuDevice {
  int index = 0;      // device index handed to jobs in CUDA_VISIBLE_DEVICES
  std::string model;  // e.g. "h100"
  int memory_gb = 0;
  bool operator==(const GpuDevice&) const = default;
};

struct NodeSpec {
  std::string name;  // architecture-spec-purpose, e.g. x86-c64m256-hpc-01
  std::string pool;
  Labels labels;  // the pool's labels merged under the node's own
  int cpus = 0;
  int64_t memory_mb = 0;
  std::vector<GpuDevice> gpus;
  bool operator==(const NodeSpec&) const = default;
};

struct PoolSpec {
  std::string name;
  PoolKind kind = PoolKind::kCpu;
  Labels labels;
  std::vector<std::string> nodes;  // names, in config order
};

// The seed's queue policy block. Fields the policy issue acts on (fairshare,
// quota, preemption, scale-in) are parsed and validated now so configs written
// today keep their meaning.
struct QueuePolicy {
  std::string type = "fifo";  // fifo | fairshare | priority-with-quota | elastic
  std::optional<double> max_walltime_hours;
  std::optional<double> default_walltime_hours;
  std::optional<int64_t> default_memory_mb_per_cpu;
  std::optional<int> gpu_quota_per_project;
  bool preemptible = true;
  std::optional<int> scale_in_idle_seconds;
  std::optional<int> max_concurrency;
};

struct QueueSpec {
  std::string name;
  std::string pool;
  QueuePolicy policy;
  std::vector<WorkloadKind> workload_kinds;  // kinds this queue serves; empty: any
  int priority_tier = 0;                     // higher tiers are ordered first
};

// One routing rule: when every present condition holds, the job goes to queue.
struct RoutingRule {
  std::string name;
  std::optional<WorkloadKind> kind;
  Labels features;  // workload feature key -> required value
  std::optional<int> min_gpus;
  std::optional<int> max_gpus;
  std::string queue;
};

struct ClusterSpec {
  std::vector<PoolSpec> pools;
  std::vector<NodeSpec> nodes;
  std::vector<QueueSpec> queues;
  std::vector<RoutingRule> routing_rules;  // tried in order; first match wins

  const PoolSpec* FindPool(std::string_view name) const;
  const QueueSpec* FindQueue(std::string_view name) const;
  const NodeSpec* FindNode(std::string_view name) const;
  // The default queue of a workload kind: the first queue that lists the kind
  // in workload_kinds, else nullptr.
  const QueueSpec* DefaultQueueFor(WorkloadKind kind) const;
};

}  // namespace unisched::model
