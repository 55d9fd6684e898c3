#pragma once
// The synthetic cluster of the cycle benchmarks (unisched-cycle-bench,
// unisched-pass-bench): `nodes` nodes in two pools (a fifth GPU nodes with
// eight H100s, the rest 64-CPU nodes), a fairshare queue on the CPU pool
// and a priority-with-quota queue on the GPU pool, twenty projects; and the
// twenty request shapes its pending jobs draw from.

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "unisched/model/cluster.h"

namespace unisched::bench {

inline model::ClusterSpec SyntheticCluster(int nodes, model::BackfillMode mode, int reservation_depth) {
  model::ClusterSpec c;
  const int gpu_nodes = nodes / 5;
  model::PoolSpec cpu{"cpu-pool", model::PoolKind::kCpu, {}, {}, mode, reservation_depth};
  model::PoolSpec gpu{"gpu-pool", model::PoolKind::kGpu, {}, {}, mode, reservation_depth};
  for (int i = 0; i < nodes; ++i) {
    model::NodeSpec n;
    const bool is_gpu = i < gpu_nodes;
    char name[64];
    std::snprintf(name, sizeof name, "x86-%s-%05d", is_gpu ? "c32m512g8-train" : "c64m256-hpc", i);
    n.name = name;
    n.pool = is_gpu ? "gpu-pool" : "cpu-pool";
    n.cpus = is_gpu ? 32 : 64;
    n.memory_mb = is_gpu ? 524288 : 262144;
    if (is_gpu) {
      for (int g = 0; g < 8; ++g) n.gpus.push_back({g, "h100", 80});
    }
    (is_gpu ? gpu : cpu).nodes.push_back(n.name);
    c.nodes.push_back(n);
  }
  c.pools = {cpu, gpu};
  model::QueueSpec hpc{"hpc", "cpu-pool", {}, {}, 0};
  hpc.policy.type = "fairshare";
  model::QueueSpec train{"train", "gpu-pool", {}, {}, 0};
  train.policy.type = "priority-with-quota";
  train.policy.project_quota.gpus = 2000;
  c.queues = {hpc, train};
  for (int p = 0; p < 20; ++p) c.projects.push_back({"project-" + std::to_string(p), 1.0 + p % 3, {}, {}});
  return c;
}

struct Shape {
  int nodes, cpus, gpus;
  int64_t memory_mb, walltime;
};

inline const std::vector<Shape>& CpuShapes() {
  static const std::vector<Shape> kShapes = {
      {1, 1, 0, 1024, 600},       {1, 4, 0, 8192, 3600},     {1, 8, 0, 16384, 7200},    {1, 16, 0, 32768, 14400},
      {1, 32, 0, 65536, 43200},   {1, 64, 0, 131072, 86400}, {2, 64, 0, 131072, 86400}, {4, 64, 0, 131072, 172800},
      {8, 64, 0, 131072, 259200}, {1, 2, 0, 2048, 1800},     {1, 12, 0, 24576, 21600},  {16, 64, 0, 131072, 259200},
  };
  return kShapes;
}

inline const std::vector<Shape>& GpuShapes() {
  static const std::vector<Shape> kShapes = {
      {1, 4, 1, 65536, 3600},     {1, 8, 2, 131072, 14400},   {1, 16, 4, 262144, 43200}, {1, 32, 8, 524288, 86400},
      {2, 32, 8, 524288, 172800}, {4, 32, 8, 524288, 259200}, {1, 4, 1, 32768, 600},     {8, 32, 8, 524288, 604800},
  };
  return kShapes;
}

}  // namespace unisched::bench
