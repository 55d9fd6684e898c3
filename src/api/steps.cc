// Steps (/v1/jobs/{id}/steps): commands started inside a running job on its
// nodes, as `unisched step` does from a batch script (srun's part in
// Slurm), docs/execution.md "Steps". A job's own token (UNISCHED_JOB_TOKEN)
// may start and follow steps of its own attempt; its owner, its queue's
// admins and platform-admins may too.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "api/body.h"
#include "api/call.h"
#include "api/responses.h"
#include "api/text.h"
#include "unisched/api/api.h"
#include "unisched/auth/auth.h"
#include "unisched/service/step_json.h"

namespace unisched::api {

using nlohmann::json;

namespace {

constexpr int64_t kMaxStepNodes = 4096;
constexpr size_t kMaxArgBytes = 128 * 1024;  // one argument; Linux's MAX_ARG_STRLEN

Result<service::StepRequest> ParseStep(const json& body) {
  if (auto e = body::CheckKeys(body, "", {"command", "nodes", "tasks_per_node", "node_names", "env"})) return *e;
  service::StepRequest request;
  if (auto e = body::ReadStringList(body, "command", "command", kMaxArgBytes, request.command, true)) return *e;
  if (request.command.empty() || request.command.front().empty()) {
    return Error::Unprocessable("missing_field",
                                "command is required: the program and its arguments, e.g. [\"hostname\"]", "command");
  }
  for (size_t i = 0; i < request.command.size(); ++i) {
    if (auto e = body::CheckNoNul(request.command[i], "command[" + std::to_string(i) + "]")) return *e;
  }
  if (body.contains("nodes") && !body["nodes"].is_null()) {
    int64_t nodes = 0;
    if (auto e = body::ReadInt(body, "nodes", "nodes", 1, kMaxStepNodes, nodes)) return *e;
    request.nodes = static_cast<int>(nodes);
  }
  if (body.contains("tasks_per_node") && !body["tasks_per_node"].is_null()) {
    int64_t per_node = 0;
    if (auto e = body::ReadInt(body, "tasks_per_node", "tasks_per_node", 1, service::kStepTaskStride - 1, per_node)) {
      return *e;
    }
    request.tasks_per_node = static_cast<int>(per_node);
  }
  if (auto e = body::ReadStringList(body, "node_names", "node_names", 255, request.node_names)) return *e;
  if (auto env = body.find("env"); env != body.end() && !env->is_null()) {
    if (!env->is_object()) return body::WrongType("env", "an object of strings", *env);
    for (const auto& [key, value] : env->items()) {
      if (!value.is_string()) return body::WrongType("env." + key, "a string", value);
      if (auto e = body::CheckNoNul(key + value.get<std::string>(), "env." + key)) return *e;
      request.env[key] = value.get<std::string>();
    }
  }
  return request;
}

}  // namespace

// The job the path names, as the caller may see it; nullopt once the
// refusal is sent (no steps here, or no such job for the caller).
std::optional<model::Job> Api::StepsJob(Call& call) {
  if (!ctx_.steps) {
    call.reply(ErrorResponse(503, "unavailable", "this daemon runs no steps"));
    return std::nullopt;
  }
  auto job = ctx_.jobs->VisibleJob(*call.principal, call.Param("id"));
  if (!job.ok()) {
    call.reply(FromError(job.error()));
    return std::nullopt;
  }
  return std::move(*job);
}

void Api::StartStep(Call& call) {
  auto job = StepsJob(call);
  if (!job) return;
  // A job's token starts steps of its own attempt; a person who may control
  // the job, of whichever attempt runs.
  const auth::Principal& who = *call.principal;
  if (who.job_id == 0 && !auth::CanControlJob(who, *job)) {
    call.reply(ErrorResponse(403, "forbidden",
                             "only the job's owner, its queue's admins, platform-admins and the job itself "
                             "(UNISCHED_JOB_TOKEN) start its steps"));
    return;
  }
  auto body = body::ParseObject(call.request.body, R"({"command": ["hostname"], "nodes": 2})");
  if (!body.ok()) {
    call.reply(FromError(body.error()));
    return;
  }
  auto request = ParseStep(*body);
  if (!request.ok()) {
    call.reply(FromError(request.error()));
    return;
  }
  auto reply = call.reply;
  const model::JobId id = job->id;
  ctx_.steps->StartStep(id, who.job_attempt, std::move(*request), [reply, id](Result<service::StepView> started) {
    if (!started.ok()) {
      reply(FromError(started.error()));
      return;
    }
    HttpResponse r = Json(201, service::StepToJson(*started));
    r.headers.emplace_back("Location", "/v1/jobs/" + std::to_string(id) + "/steps/" + std::to_string(started->step));
    reply(std::move(r));
  });
}

void Api::GetStep(Call& call) {
  auto job = StepsJob(call);
  if (!job) return;
  const auto step = ParseInt64(call.Param("step"));
  if (!step || *step < 1 || *step >= (int64_t{1} << 30)) {
    call.reply(ErrorResponse(404, "not_found", "no step " + call.Param("step") + ": steps are numbered from 1"));
    return;
  }
  auto found = ctx_.steps->GetStep(job->id, static_cast<int>(*step));
  call.reply(found.ok() ? Json(200, service::StepToJson(*found)) : FromError(found.error()));
}

}  // namespace unisched::api
