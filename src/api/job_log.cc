// GET /v1/jobs/{id}/log: one task's output (stdout or stderr) of one attempt
// or step, whole or, with ?follow=true, streamed while it is written.

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/call.h"
#include "api/log_follower.h"
#include "api/responses.h"
#include "unisched/api/api.h"
#include "unisched/model/words.h"

namespace unisched::api {

namespace {

// The task whose output is asked for: its attempt and its task number
// within the attempt (service::kStepTaskStride apart per step).
struct LogTask {
  int attempt = 0;
  int task = 0;
  std::optional<int> step;  // a step's task: it ends with the step
};

bool AttemptMayWrite(const store::Store& store, model::JobId id, int attempt) {
  auto job = store.GetJob(id);
  if (!job.ok()) return job.error().kind != ErrorKind::kNotFound;  // a store hiccup ends no stream
  auto it = std::find_if(job->attempts.begin(), job->attempts.end(),
                         [attempt](const model::Attempt& a) { return a.number == attempt; });
  if (it == job->attempts.end()) return !model::IsTerminal(job->state);  // not started yet
  return it->state == model::JobState::kRunning;
}

}  // namespace

void Api::JobLog(Call& call) {
  auto job = ctx_.jobs->VisibleJob(*call.principal, call.Param("id"));
  if (!job.ok()) {
    call.reply(FromError(job.error()));
    return;
  }
  const std::string stream = call.Query("stream").value_or("stdout");  // the route allows stdout and stderr
  const bool follow = call.Query("follow").value_or("false") == "true";
  const std::string job_name = "job " + std::to_string(job->id);
  auto not_found = [&call](const std::string& message, const std::string& field) {
    call.reply(ErrorResponse(404, "not_found", message, field));
  };
  // ?attempt=N: an earlier attempt's output (a retried or requeued job);
  // by default the current one's, or, when following a job waiting to
  // start (first or again), the one it starts next.
  const model::Attempt* attempt = job->CurrentAttempt();
  std::optional<int> next_attempt;
  if (call.Query("attempt")) {
    const int64_t wanted = call.QueryInt("attempt", 0);
    auto found = std::find_if(job->attempts.begin(), job->attempts.end(),
                              [wanted](const model::Attempt& a) { return a.number == wanted; });
    if (found == job->attempts.end()) {
      return not_found(
          job_name + " has no attempt " + std::to_string(wanted) +
              (job->attempts.empty() ? " (it has not started)"
                                     : "; its attempts are 1 to " + std::to_string(job->attempts.back().number)),
          "attempt");
    }
    attempt = &*found;
  } else if (follow && !model::IsTerminal(job->state) && job->state != model::JobState::kRunning) {
    next_attempt = attempt ? attempt->number + 1 : 1;
    attempt = nullptr;
  }

  // The ranks' nodes: ?rank=R or ?node=NAME (its first task) picks one task
  // of a gang (launch per_node) or, with ?step=S, of a step; a batch job's
  // one task is rank 0 on its first node.
  std::vector<std::string> rank_nodes;
  LogTask target;
  target.attempt = attempt ? attempt->number : next_attempt.value_or(0);
  int64_t tasks = 1;
  if (call.Query("step")) {
    auto step = ctx_.steps ? ctx_.steps->GetStep(job->id, static_cast<int>(call.QueryInt("step", 0)))
                           : Result<service::StepView>(Error::NotFound("this daemon runs no steps"));
    if (!step.ok()) {
      call.reply(FromError(step.error()));
      return;
    }
    rank_nodes = step->nodes;
    target.step = step->step;
    target.task = step->step * service::kStepTaskStride;
    target.attempt = step->attempt;
  } else if (job->launch == model::LaunchMode::kPerNode) {
    const int per_node = std::max(job->resources.tasks_per_node, 1);
    if (attempt) {
      for (const auto& a : attempt->allocation) rank_nodes.insert(rank_nodes.end(), per_node, a.node);
    } else {
      tasks = static_cast<int64_t>(std::max(job->resources.nodes, 1)) * per_node;  // its shape, before it has nodes
    }
  } else if (attempt && !attempt->allocation.empty()) {
    rank_nodes.push_back(attempt->allocation.front().node);
  }
  if (!rank_nodes.empty()) tasks = static_cast<int64_t>(rank_nodes.size());
  int64_t rank = 0;
  if (auto node = call.Query("node")) {
    if (!attempt && !target.step) {
      call.reply(ErrorResponse(409, "not_started",
                               job_name + " has not started, so it has no nodes yet; follow a task by ?rank=", "node"));
      return;
    }
    auto at = std::find(rank_nodes.begin(), rank_nodes.end(), *node);
    if (at == rank_nodes.end()) {
      std::vector<std::string> names;
      for (const std::string& n : rank_nodes) {
        if (names.empty() || names.back() != n) names.push_back(n);
      }
      return not_found("no task of " + job_name + (target.step ? "'s step" : "") + " ran on node " + *node +
                           "; its tasks' nodes: " + model::Join(names, ','),
                       "node");
    }
    rank = at - rank_nodes.begin();
  }
  if (call.Query("rank")) {
    rank = call.QueryInt("rank", -1);  // the route checked it is an integer from 0
    if (rank >= tasks) {
      return not_found(
          job_name + " has no rank " + std::to_string(rank) + "; its ranks are 0 to " + std::to_string(tasks - 1),
          "rank");
    }
  }
  target.task += static_cast<int>(rank);

  HttpResponse r;
  r.content_type = "text/plain; charset=utf-8";
  auto read = [read_log = ctx_.read_log, job = *job, target, stream](LogRange range) {
    return target.attempt == 0 ? std::string() : read_log(job, target.attempt, target.task, stream, range);
  };
  if (!follow) {
    r.body = read(LogRange{});  // not started: no output yet
    call.reply(std::move(r));
    return;
  }
  // Following: the body ends when the attempt (or step) does; a requeued
  // job's next attempt is another stream (?attempt=N, or follow again).
  std::function<bool()> live;
  if (target.step) {
    live = [steps = ctx_.steps, id = job->id, step = *target.step] {
      auto view = steps->GetStep(id, step);
      return view.ok() && view->state == model::JobState::kRunning;
    };
  } else {
    live = [store = ctx_.store, id = job->id, number = target.attempt] { return AttemptMayWrite(*store, id, number); };
  }
  r.headers.emplace_back("X-Unisched-Attempt", std::to_string(target.attempt));
  r.headers.emplace_back("Cache-Control", "no-store");
  r.source = std::make_shared<LogFollower>(std::move(read), std::move(live));
  call.reply(std::move(r));
}

}  // namespace unisched::api
