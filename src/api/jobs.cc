// The job endpoints (/v1/jobs...): submit, list, get, cancel, hold, release,
// log, events, and JobView, the job as they answer it. Changes go through
// the job service; reads go to the store and the published view.

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "api/body.h"
#include "api/call.h"
#include "api/responses.h"
#include "api/submission.h"
#include "unisched/api/api.h"
#include "unisched/codec/job_json.h"
#include "unisched/model/words.h"

namespace unisched::api {

using nlohmann::json;

namespace {

using model::JobState;

// The stored job plus what the last scheduling cycle said about it. While a
// job is pending, `priority` is the multifactor priority it is ordered by and
// `priority_factors` its named terms (docs/policy/priority.md); otherwise
// `priority` is the job's own value (the adjustment term).
json JobView(const model::Job& job, const ClusterView* view) {
  json out = codec::JobToJson(job);
  json reasons = json::array();
  model::PriorityFactors factors;
  factors.adjustment = job.priority;
  std::optional<Timestamp> estimated_start;
  if (job.state == JobState::kHeld) {
    reasons.push_back({{"code", "Held"}, {"message", "held; release it to let it be scheduled"}});
  } else if (job.state == JobState::kPending && view) {
    if (auto it = view->pending->find(job.id); it != view->pending->end()) {
      for (const auto& r : it->second.Reasons()) reasons.push_back({{"code", r.code}, {"message", r.message}});
      factors = it->second.priority;
      estimated_start = it->second.estimated_start;
    }
  }
  out["pending_reasons"] = std::move(reasons);
  out["priority"] = factors.Total();
  out["priority_factors"] = {{"fairshare", factors.fairshare},
                             {"age", factors.age},
                             {"tier", factors.tier},
                             {"size", factors.size},
                             {"adjustment", factors.adjustment}};
  out["estimated_start"] = estimated_start ? json(FormatRfc3339(*estimated_start)) : json(nullptr);
  return out;
}

}  // namespace

void Api::SubmitJob(Call& call) {
  auto body = body::ParseObject(call.request.body, R"({"workload": {"kind": "hpc"}, "command": ["true"]})");
  if (!body.ok()) {
    call.reply(FromError(body.error()));
    return;
  }
  auto parsed = ParseSubmission(*body);
  if (!parsed.ok()) {
    call.reply(FromError(parsed.error()));
    return;
  }
  // Refusals are audited by the API as any other call; an accepted job's
  // record is committed with it.
  auto state = call.state;
  auto reply = call.reply;
  ctx_.jobs->Submit(*call.principal, std::move(parsed).value(), call.request.Header("idempotency-key"), "POST /v1/jobs",
                    [this, state, reply](Result<service::JobService::Submitted> submitted) {
                      if (!submitted.ok()) {
                        reply(FromError(submitted.error()));
                        return;
                      }
                      state->audited = true;
                      if (submitted->replayed) {
                        auto r = Json(201, JobView(*submitted->replayed, ctx_.jobs->View().get()));
                        r.headers.emplace_back("Idempotent-Replayed", "true");
                        reply(std::move(r));
                        return;
                      }
                      HttpResponse r;
                      r.status = 201;
                      r.body = *submitted->document;
                      r.headers.emplace_back("Location", "/v1/jobs/" + std::to_string(submitted->id));
                      reply(std::move(r));
                    });
}

void Api::ListJobs(Call& call) {
  store::JobFilter filter;
  if (auto state = call.Query("state")) filter.state = model::ParseJobState(*state);
  for (auto [key, slot] : {std::pair{"queue", &filter.queue}, std::pair{"pool", &filter.pool},
                           std::pair{"project", &filter.project}, std::pair{"user", &filter.user}}) {
    if (auto value = call.Query(key)) *slot = *value;
  }
  filter.limit = static_cast<int>(call.QueryInt("limit", 100));
  if (auto cursor = call.Query("cursor")) filter.cursor = call.QueryInt("cursor", 0);
  const auth::Principal& who = *call.principal;
  if (!auth::IsPlatformAdmin(who)) {
    filter.visible_projects = who.projects;
    if (who.role == auth::Role::kQueueAdmin) filter.visible_queues = who.queues;
  }
  auto page = ctx_.store->ListJobs(filter);
  auto view = ctx_.control->View();
  json jobs = json::array();
  for (const auto& job : page.jobs) jobs.push_back(JobView(job, view.get()));
  call.reply(Json(200, {{"jobs", std::move(jobs)},
                        {"total", page.total},
                        {"next_cursor", page.next_cursor ? json(std::to_string(*page.next_cursor)) : json(nullptr)}}));
}

void Api::GetJob(Call& call) {
  auto job = ctx_.jobs->VisibleJob(*call.principal, call.Param("id"));
  if (!job.ok()) {
    call.reply(FromError(job.error()));
    return;
  }
  call.reply(Json(200, JobView(*job, ctx_.control->View().get())));
}

void Api::ControlJobAction(Call& call, ControlPlane::JobAction action) {
  auto reply = call.reply;
  ctx_.jobs->Control(*call.principal, call.Param("id"), action, [reply, this](Result<model::Job> result) {
    if (!result.ok()) {
      reply(FromError(result.error()));
      return;
    }
    reply(Json(200, JobView(*result, ctx_.control->View().get())));
  });
}

void Api::CancelJob(Call& call) {
  ControlJobAction(call, ControlPlane::JobAction::kCancel);
}
void Api::HoldJob(Call& call) {
  ControlJobAction(call, ControlPlane::JobAction::kHold);
}
void Api::ReleaseJob(Call& call) {
  ControlJobAction(call, ControlPlane::JobAction::kRelease);
}

void Api::JobLog(Call& call) {
  auto job = ctx_.jobs->VisibleJob(*call.principal, call.Param("id"));
  if (!job.ok()) {
    call.reply(FromError(job.error()));
    return;
  }
  const std::string stream = call.Query("stream").value_or("stdout");  // the route allows stdout and stderr
  HttpResponse r;
  r.content_type = "text/plain; charset=utf-8";
  // ?attempt=N: an earlier attempt's output (a retried or requeued job);
  // by default the current one's.
  const model::Attempt* attempt = job->CurrentAttempt();
  if (call.Query("attempt")) {
    const int64_t wanted = call.QueryInt("attempt", 0);
    auto found = std::find_if(job->attempts.begin(), job->attempts.end(),
                              [wanted](const model::Attempt& a) { return a.number == wanted; });
    if (found == job->attempts.end()) {
      call.reply(ErrorResponse(
          404, "not_found",
          "job " + std::to_string(job->id) + " has no attempt " + std::to_string(wanted) +
              (job->attempts.empty() ? " (it has not started)"
                                     : "; its attempts are 1 to " + std::to_string(job->attempts.back().number)),
          "attempt"));
      return;
    }
    attempt = &*found;
  }
  if (!attempt) {
    call.reply(std::move(r));  // not started: no output yet
    return;
  }
  // ?rank=R or ?node=NAME (its first task): one task of a gang
  // (launch per_node) or, with ?step=S, of a step; a batch job's one task
  // is rank 0 on its first node.
  std::vector<std::string> rank_nodes;  // the node of each rank
  int task_base = 0;
  int attempt_number = attempt->number;
  if (call.Query("step")) {
    auto step = ctx_.steps ? ctx_.steps->GetStep(job->id, static_cast<int>(call.QueryInt("step", 0)))
                           : Result<service::StepView>(Error::NotFound("this daemon runs no steps"));
    if (!step.ok()) {
      call.reply(FromError(step.error()));
      return;
    }
    rank_nodes = step->nodes;
    task_base = step->step * service::kStepTaskStride;
    attempt_number = step->attempt;
  } else if (job->launch == model::LaunchMode::kPerNode) {
    const int per_node = std::max(job->resources.tasks_per_node, 1);
    for (const auto& a : attempt->allocation) rank_nodes.insert(rank_nodes.end(), per_node, a.node);
  } else if (!attempt->allocation.empty()) {
    rank_nodes.push_back(attempt->allocation.front().node);
  }
  const int64_t tasks = std::max<int64_t>(static_cast<int64_t>(rank_nodes.size()), 1);
  int64_t rank = 0;
  if (auto node = call.Query("node")) {
    auto at = std::find(rank_nodes.begin(), rank_nodes.end(), *node);
    if (at == rank_nodes.end()) {
      std::vector<std::string> names;
      for (const std::string& n : rank_nodes) {
        if (names.empty() || names.back() != n) names.push_back(n);
      }
      call.reply(ErrorResponse(404, "not_found",
                               "no task of job " + std::to_string(job->id) + (call.Query("step") ? "'s step" : "") +
                                   " ran on node " + *node + "; its tasks' nodes: " + model::Join(names, ','),
                               "node"));
      return;
    }
    rank = at - rank_nodes.begin();
  }
  if (call.Query("rank")) {
    rank = call.QueryInt("rank", -1);  // the route checked it is an integer from 0
    if (rank >= tasks) {
      call.reply(ErrorResponse(404, "not_found",
                               "job " + std::to_string(job->id) + " has no rank " + std::to_string(rank) +
                                   "; its ranks are 0 to " + std::to_string(tasks - 1),
                               "rank"));
      return;
    }
  }
  r.body = ctx_.read_log(*job, attempt_number, task_base + static_cast<int>(rank), stream);
  call.reply(std::move(r));
}

void Api::JobEvents(Call& call) {
  auto job = ctx_.jobs->VisibleJob(*call.principal, call.Param("id"));
  if (!job.ok()) {
    call.reply(FromError(job.error()));
    return;
  }
  json events = json::array();
  for (const auto& e : ctx_.store->ListEvents(job->id)) {
    events.push_back({{"time", FormatRfc3339(e.time)}, {"kind", e.kind}, {"message", e.message}});
  }
  call.reply(Json(200, {{"events", std::move(events)}}));
}

}  // namespace unisched::api
