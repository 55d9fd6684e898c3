#pragma once
// `unisched agent`: the compute-node agent (docs/agents.md). Registers its
// node with the daemon, heartbeats, runs the attempts it is sent with the
// same local executor and supervisor as the daemon's local nodes, and
// reports their results, keyed by (job id, attempt).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "unisched/model/cluster.h"

namespace unisched::agent {

// `unisched agent --server URL --token-file FILE --node NAME --pool POOL [...]`.
int RunAgent(int argc, char** argv);

// GPUs from `nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits`
// output: "0, NVIDIA H100 80GB HBM3, 81559" -> {0, "h100", 80}. The model is
// the first word of the name after "NVIDIA", lower-cased.
std::vector<model::GpuDevice> ParseNvidiaSmi(const std::string& csv);

}  // namespace unisched::agent
