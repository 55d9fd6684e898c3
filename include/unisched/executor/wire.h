#pragma once
// The executor over the network: what the daemon and a node agent
// (`unisched agent`, docs/agents.md) send each other as JSON. An agent runs
// attempts with the same local executor and supervisor as the daemon's
// local nodes; only the launch specs, cancels and results travel.
//
//   agent -> daemon  POST /v1/agents/heartbeat  Heartbeat   (long-poll: held up to wait_ms)
//   daemon -> agent  200                        Commands
//   agent -> daemon  POST /v1/agents/results    {"node", "results": [RunResult...]}

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/executor/executor.h"
#include "unisched/model/cluster.h"

namespace unisched::executor {

// with_secrets false: without the secrets' values, for a copy kept on disk
// (an agent's record of what it launched, which only recovery reads).
nlohmann::json LaunchSpecToJson(const LaunchSpec& spec, bool with_secrets = true);
Result<LaunchSpec> LaunchSpecFromJson(const nlohmann::json& doc);
nlohmann::json RunResultToJson(const RunResult& result);
Result<RunResult> RunResultFromJson(const nlohmann::json& doc);

// What an agent says about its node, every heartbeat.
struct Heartbeat {
  std::string node;
  std::string pool;
  int cpus = 0;                            // detected (or declared with --cpus)
  int64_t memory_mb = 0;                   // detected (or --memory-mb)
  std::vector<model::GpuDevice> gpus;      // nvidia-smi, or --gpus
  model::Labels labels;                    // --labels
  std::string address;                     // how other nodes reach this one (--address; a gang's MASTER_ADDR)
  std::vector<AttemptRef> running;         // attempts whose supervisors run on the node
  bool healthy = true;                     // the pool's health check passed (or there is none)
  std::string health_message;              // why not
  int wait_ms = 0;                         // hold the answer this long when there is nothing to send
  std::vector<StagingProgress> staging{};  // tasks staging data now (docs/data.md)
  // Attempts recovered after the agent restarted whose stage-out needs the
  // object stores' keys, which it keeps only in memory: the daemon sends
  // their launches again (Executor::NeedingStoreKeys).
  std::vector<AttemptRef> needs_store_keys{};
};
nlohmann::json HeartbeatToJson(const Heartbeat& heartbeat);
Result<Heartbeat> HeartbeatFromJson(const nlohmann::json& doc);

struct HealthCheck {
  std::vector<std::string> command;  // empty: none
  int interval_seconds = 60;
  int timeout_seconds = 10;
  bool operator==(const HealthCheck&) const = default;
};

struct CancelCommand {
  model::JobId job = 0;
  int attempt = 0;
  bool preempt = false;
  bool stale = false;        // not the job's current attempt any more: stop it and forget it
  std::vector<int> tasks{};  // only these of the attempt's tasks (a step's); empty: all
};

// What the daemon answers a heartbeat with.
struct Commands {
  std::string node_state;  // up | draining | drained | down
  int heartbeat_interval_seconds = 5;
  std::vector<LaunchSpec> launch;
  std::vector<CancelCommand> cancel;
  HealthCheck health_check;
};
nlohmann::json CommandsToJson(const Commands& commands);
Result<Commands> CommandsFromJson(const nlohmann::json& doc);

}  // namespace unisched::executor
