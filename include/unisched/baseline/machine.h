#pragma once
// The facts of the machine a figure was measured on, recorded with every
// baseline run (docs/baseline.md): by the daemon for its own host, and by
// each DGEMM job for its node.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace unisched::baseline {

struct MachineFacts {
  std::string hostname;
  std::string cpu_model;  // "model name" of /proc/cpuinfo
  int cpus = 0;           // online CPUs
  int64_t memory_mb = 0;  // MemTotal of /proc/meminfo
  std::string kernel;     // uname: release and version
};

// This machine's facts; what cannot be read is left empty (0).
MachineFacts ReadMachineFacts();
nlohmann::json ToJson(const MachineFacts& facts);

}  // namespace unisched::baseline
