#pragma once
// What the agent finds out about its node (docs/agents.md): the address
// other nodes reach it on, its memory and GPUs, and whether the pool's
// health check passes. Internal to src/agent.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "unisched/executor/wire.h"
#include "unisched/model/cluster.h"

namespace unisched::agent {

// The address this machine reaches `url`'s host from ("" when unknown).
std::string DetectAddress(const std::string& url);
// MemTotal of /proc/meminfo, in MB (0 when unreadable).
int64_t DetectMemoryMb();
// nvidia-smi's GPUs (none without it).
std::vector<model::GpuDevice> DetectGpus();
// Runs the pool's health check: exit 0 within the timeout is healthy;
// otherwise false and why.
std::pair<bool, std::string> RunHealthCheck(const executor::HealthCheck& check);

}  // namespace unisched::agent
