// The endpoints only node agents call (docs/agents.md): heartbeats, which
// fetch the node's commands, and the results of attempts that ended there.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/body.h"
#include "api/call.h"
#include "api/responses.h"
#include "api/text.h"
#include "unisched/api/api.h"
#include "unisched/executor/wire.h"

namespace unisched::api {

using nlohmann::json;

void Api::AgentHeartbeat(Call& call) {
  call.MarkAudited();  // every few seconds from every agent: not an audit trail
  if (!ctx_.agents) {
    call.reply(ErrorResponse(503, "unavailable", "this daemon serves no node agents"));
    return;
  }
  auto body = body::ParseObject(call.request.body, R"({"node": "...", "pool": "...", "resources": {...}})");
  if (!body.ok()) {
    call.reply(FromError(body.error()));
    return;
  }
  auto heartbeat = executor::HeartbeatFromJson(*body);
  if (!heartbeat.ok()) {
    call.reply(FromError(heartbeat.error()));
    return;
  }
  auto reply = call.reply;
  ctx_.agents->Heartbeat(
      call.principal->node_pool, std::move(*heartbeat), [reply](Result<executor::Commands> commands) {
        reply(commands.ok() ? Json(200, executor::CommandsToJson(*commands)) : FromError(commands.error()));
      });
}

void Api::AgentResults(Call& call) {
  call.MarkAudited();
  if (!ctx_.agents) {
    call.reply(ErrorResponse(503, "unavailable", "this daemon serves no node agents"));
    return;
  }
  auto parsed = body::ParseObject(call.request.body, R"({"node": "NAME", "results": [...]})");
  std::string node;
  std::optional<Error> invalid = parsed.ok() ? body::ReadString(*parsed, "node", "node", 256, node) : parsed.error();
  if (!invalid && !parsed->value("results", json()).is_array()) {
    invalid = body::WrongType("results", "a list of results", parsed->value("results", json()));
  }
  if (invalid) {
    call.reply(FromError(*invalid));
    return;
  }
  std::vector<executor::RunResult> results;
  for (size_t i = 0; i < (*parsed)["results"].size(); ++i) {
    auto result = executor::RunResultFromJson((*parsed)["results"][i]);
    if (!result.ok()) {
      const std::string field = "results[" + std::to_string(i) + "]";
      call.reply(FromError(Error::BadRequest("malformed_value", field + ": " + result.error().message, field)));
      return;
    }
    results.push_back(std::move(*result));
  }
  auto ignored = ctx_.agents->Results(call.principal->node_pool, node, std::move(results));
  if (!ignored.ok()) {
    call.reply(FromError(ignored.error()));
    return;
  }
  json list = json::array();
  for (const auto& i : *ignored) {
    list.push_back({{"job_id", std::to_string(i.job_id)}, {"attempt", i.attempt}, {"reason", i.reason}});
  }
  call.reply(Json(200, {{"accepted", true}, {"ignored", std::move(list)}}));
}

// An agent ships its tasks' output (docs/agents.md, "Logs"): the bytes of
// the body at `offset` of the stream, the rest named in the query.
void Api::AgentLogs(Call& call) {
  if (!ctx_.agents) {
    call.reply(ErrorResponse(503, "unavailable", "this daemon serves no node agents"));
    return;
  }
  // The route checked each value's form and bounds (400 unparsable, 422
  // out of bounds); a parameter left out is 422 as a missing body field is.
  for (const char* required : {"node", "job", "attempt", "stream", "offset"}) {
    if (!call.Query(required)) {
      call.reply(ErrorResponse(422, "missing_field", std::string(required) + " is required in the query", required));
      return;
    }
  }
  const executor::AttemptRef task{call.QueryInt("job", 0), static_cast<int>(call.QueryInt("attempt", 1)),
                                  static_cast<int>(call.QueryInt("task", 0))};
  auto size = ctx_.agents->AppendLog(call.principal->node_pool, *call.Query("node"), task, *call.Query("stream"),
                                     call.QueryInt("offset", 0), call.request.body);
  call.reply(size.ok() ? Json(200, {{"size", *size}}) : FromError(size.error()));
}

}  // namespace unisched::api
