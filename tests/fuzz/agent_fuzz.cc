// Fuzz target: the agent protocol (include/unisched/executor/wire.h), what
// `unisched agent` and the daemon send each other over HTTP. The input is a
// JSON text, read as each message that arrives as one:
//  - by the daemon, the body of POST /v1/agents/heartbeat (body::ParseObject
//    then HeartbeatFromJson) and of POST /v1/agents/results (the same body
//    parser, the "node" and "results" checks, RunResultFromJson of each
//    result), in the order src/api/agents.cc reads them;
//  - by the agent, the answer to its heartbeat (CommandsFromJson, with each
//    launch spec's LaunchSpecFromJson) and its own spec and result files
//    (src/agent/agent.cc).
// A message that decodes must encode and decode again to the same message.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "api/body.h"
#include "fuzz_check.h"
#include "unisched/executor/wire.h"

namespace {

using nlohmann::json;
namespace executor = unisched::executor;

void CheckHeartbeat(const executor::Heartbeat& heartbeat) {
  const json encoded = executor::HeartbeatToJson(heartbeat);
  auto again = executor::HeartbeatFromJson(encoded);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(executor::HeartbeatToJson(*again) == encoded);
}

void CheckResult(const executor::RunResult& result) {
  const json encoded = executor::RunResultToJson(result);
  auto again = executor::RunResultFromJson(encoded);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(executor::RunResultToJson(*again) == encoded);
}

void CheckCommands(const executor::Commands& commands) {
  const json encoded = executor::CommandsToJson(commands);
  auto again = executor::CommandsFromJson(encoded);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(executor::CommandsToJson(*again) == encoded);
}

void CheckLaunchSpec(const executor::LaunchSpec& spec) {
  const json encoded = executor::LaunchSpecToJson(spec);
  auto again = executor::LaunchSpecFromJson(encoded);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(executor::LaunchSpecToJson(*again) == encoded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  // The daemon's side.
  auto body = unisched::api::body::ParseObject(text, R"({"node": "...", "pool": "...", "resources": {...}})");
  if (body.ok()) {
    if (auto heartbeat = executor::HeartbeatFromJson(*body); heartbeat.ok()) CheckHeartbeat(*heartbeat);
    std::string node;
    if (!unisched::api::body::ReadString(*body, "node", "node", 256, node) &&
        body->value("results", json()).is_array()) {
      for (const json& item : (*body)["results"]) {
        if (auto result = executor::RunResultFromJson(item); result.ok()) CheckResult(*result);
      }
    }
  }

  // The agent's side: it parses answers and files with exceptions off.
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (auto commands = executor::CommandsFromJson(doc); commands.ok()) CheckCommands(*commands);
  if (auto spec = executor::LaunchSpecFromJson(doc); spec.ok()) CheckLaunchSpec(*spec);
  if (auto result = executor::RunResultFromJson(doc); result.ok()) CheckResult(*result);
  return 0;
}
