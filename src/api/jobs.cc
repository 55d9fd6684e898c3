// The job endpoints (/v1/jobs...): submit, list, get, cancel, hold, release,
// events (the log: job_log.cc), and JobView, the job as they answer it. Changes go through
// the job service; reads go to the store and the published view.

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "api/body.h"
#include "api/call.h"
#include "api/responses.h"
#include "api/submission.h"
#include "api/usage_figures.h"
#include "unisched/api/api.h"
#include "unisched/codec/batch_json.h"
#include "unisched/codec/job_json.h"
#include "unisched/model/words.h"

namespace unisched::api {

using nlohmann::json;

namespace {

// An array's tasks cancelled before they started, by index: they have no
// row (GET /v1/jobs?array= lists them after the waiting ones).
std::vector<int64_t> NeverStartedTasks(const store::Store& store, const model::Job& parent) {
  // Neither waiting nor with a row of their own (a task has one once it
  // starts): the rows in the array's id range are counted first, and read
  // only when some task is missing.
  const model::JobArray& a = *parent.array;
  store::JobFilter range;
  range.ids = std::make_pair(a.first_task_id, a.first_task_id + a.indices.Count());
  range.limit = 0;
  const int64_t started = store.ListJobs(range).total;
  if (a.indices.Count() - a.waiting.Count() - started <= 0) return {};
  std::unordered_set<model::JobId> with_rows;
  range.limit = 1000;
  for (;;) {
    auto rows = store.ListJobs(range);
    for (const auto& job : rows.jobs) with_rows.insert(job.id);
    if (!rows.next_cursor) break;
    range.cursor = rows.next_cursor;
  }
  std::vector<int64_t> indices;
  for (int64_t ordinal = 0; ordinal < a.indices.Count(); ++ordinal) {
    const int64_t index = a.indices.At(ordinal);
    if (!a.waiting.Contains(index) && !with_rows.count(a.first_task_id + ordinal)) indices.push_back(index);
  }
  return indices;
}

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
  int64_t predicted_run_seconds = 0;
  if (job.state == JobState::kHeld) {
    reasons.push_back({{"code", "Held"}, {"message", "held; release it to let it be scheduled"}});
  } else if (job.state == JobState::kPending && view) {
    auto it = view->pending->find(job.id);
    // A waiting task not offered this cycle waits as its array does.
    if (it == view->pending->end() && job.array_task) it = view->pending->find(job.array_task->array_job_id);
    if (it != view->pending->end()) {
      for (const auto& r : it->second.Reasons()) reasons.push_back({{"code", r.code}, {"message", r.message}});
      factors = it->second.priority;
      // A job held back from the cycle (a retry's backoff, a dependency)
      // has no ranked terms, but its own adjustment still holds.
      factors.adjustment = job.priority;
      estimated_start = it->second.estimated_start;
      predicted_run_seconds = it->second.predicted_run_seconds;
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
  out["predicted_run_seconds"] = predicted_run_seconds > 0 ? json(predicted_run_seconds) : json(nullptr);
  return out;
}

}  // namespace

void Api::SubmitJob(Call& call) {
  auto body = body::ParseObject(call.request.body, R"({"workload": {"kind": "hpc"}, "command": ["true"]})");
  if (!body.ok()) {
    call.reply(FromError(body.error()));
    return;
  }
  std::vector<model::BatchWarning> warnings;
  auto parsed = ParseSubmission(*body, &warnings);
  if (!parsed.ok()) {
    call.reply(FromError(parsed.error()));
    return;
  }
  // A batch script's directives that were read but not followed: in the
  // 201 answer only (docs/slurm-users.md), never stored with the job.
  struct WithWarnings {
    json warnings;
    bool warned;
    json operator()(json job) const {
      if (warned) job["warnings"] = warnings;
      return job;
    }
  } with_warnings{codec::BatchWarningsToJson(warnings), !warnings.empty()};
  // Refusals are audited by the API as any other call; an accepted job's
  // record is committed with it.
  auto state = call.state;
  auto reply = call.reply;
  ctx_.jobs->Submit(*call.principal, std::move(parsed).value(), call.request.Header("idempotency-key"), "POST /v1/jobs",
                    [this, state, reply, with_warnings](Result<service::JobService::Submitted> submitted) {
                      if (!submitted.ok()) {
                        reply(FromError(submitted.error()));
                        return;
                      }
                      state->audited = true;
                      if (submitted->replayed) {
                        auto r = Json(201, with_warnings(JobView(*submitted->replayed, ctx_.jobs->View().get())));
                        r.headers.emplace_back("Idempotent-Replayed", "true");
                        reply(std::move(r));
                        return;
                      }
                      HttpResponse r;
                      r.status = 201;
                      // The stored document as it is, unless there are warnings to add.
                      r.body = with_warnings.warned ? with_warnings(json::parse(*submitted->document)).dump()
                                                    : *submitted->document;
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
  // ?array=ID: that array's tasks, expanded: those started (their own
  // rows, newest first), then those still waiting in the array as they
  // will start, page after page (docs/arrays.md).
  std::optional<model::Job> parent;
  if (auto array = call.Query("array")) {
    auto found = ctx_.jobs->VisibleJob(who, *array);
    if (!found.ok()) {
      call.reply(FromError(found.error()));
      return;
    }
    if (!found->array) {
      call.reply(FromError(Error::Unprocessable(
          "invalid_value", "job " + *array + " is not an array; list it with GET /v1/jobs/" + *array, "array")));
      return;
    }
    const model::JobArray& a = *found->array;
    filter.ids = std::make_pair(a.first_task_id, a.first_task_id + a.indices.Count());
    parent = std::move(found).value();
  }
  // Past the started tasks (their own rows), the tasks that have none are
  // paged by their position: first those waiting (as they will start),
  // then those cancelled before they started. A cursor above the array's
  // last task id is end + 1 + position (started tasks' cursors are their
  // ids, below it).
  const int64_t limit = filter.limit;
  std::optional<int64_t> rowless_from;
  int64_t array_end = 0;
  if (parent) {
    array_end = parent->array->first_task_id + parent->array->indices.Count();
    if (filter.cursor && *filter.cursor > array_end) {
      rowless_from = *filter.cursor - array_end - 1;
      filter.cursor.reset();
      filter.limit = 1;  // only its total: the started tasks came on earlier pages
    }
  }
  auto page = ctx_.store->ListJobs(filter);
  auto view = ctx_.control->View();
  json jobs = json::array();
  if (rowless_from) {
    page.jobs.clear();
    page.next_cursor.reset();
  }
  for (const auto& job : page.jobs) jobs.push_back(JobView(job, view.get()));
  if (parent) {
    const model::JobArray& a = *parent->array;
    const bool waits = parent->state == JobState::kPending || parent->state == JobState::kHeld;
    // Which rowless tasks the filter wants: waiting ones with no state
    // filter; never started ones with none or CANCELLED.
    const bool with_waiting = waits && !filter.state.has_value();
    const bool with_never_started = !filter.state.has_value() || *filter.state == JobState::kCancelled;
    std::vector<int64_t> never_started;
    if (with_never_started) never_started = NeverStartedTasks(*ctx_.store, *parent);
    const int64_t waiting = with_waiting ? a.waiting.Count() : 0;
    const int64_t rowless = waiting + static_cast<int64_t>(never_started.size());
    page.total += rowless;
    if (!page.next_cursor) {
      const int64_t from = rowless_from.value_or(0);
      const int64_t room = std::max<int64_t>(0, limit - static_cast<int64_t>(jobs.size()));
      const int64_t until = std::min(rowless, from + room);
      for (int64_t position = from; position < until; ++position) {
        if (position < waiting) {
          model::Job task = model::ArrayTaskOf(*parent, a.waiting.At(position));
          if (parent->state == JobState::kHeld) {
            task.state = JobState::kHeld;
            task.state_reason = parent->state_reason;
          }
          jobs.push_back(JobView(task, view.get()));
        } else {
          model::Job task = model::ArrayTaskOf(*parent, never_started[static_cast<size_t>(position - waiting)]);
          task.state = JobState::kCancelled;
          task.state_reason = "cancelled before it started";
          jobs.push_back(JobView(task, view.get()));
        }
      }
      if (until < rowless) page.next_cursor = array_end + 1 + until;
    }
  }
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
  json view = JobView(*job, ctx_.control->View().get());
  view["usage"] = JobUsage(*job);
  // A running job's phase (docs/data.md): staging_in, running, staging_out.
  view["phase"] = nullptr;
  view["progress"] = nullptr;
  if (job->state == model::JobState::kRunning) {
    if (auto staging = ctx_.control->StagingOf(job->id)) {
      view["phase"] = staging->phase;
      view["progress"] = {{"bytes_done", staging->bytes_done}, {"bytes_total", staging->bytes_total}};
    } else {
      view["phase"] = "running";
    }
  }
  call.reply(Json(200, std::move(view)));
}

// What the ledger holds for the job (docs/ledger.md): every attempt's
// entries summed by metric, interim ones of a running attempt included,
// priced and in instance-minutes as a usage row is. A metric without
// entries is absent, not zero.
json Api::JobUsage(const model::Job& job) const {
  std::map<std::string, double> metrics;
  for (const auto& attempt : job.attempts) {
    for (const auto& [key, quantity] : ctx_.store->LoadLedgerCharged(job.id, attempt.number).sums) {
      metrics[std::get<0>(key)] += quantity;
    }
  }
  if (!metrics.empty()) {
    const model::PoolSpec* pool = ctx_.config->Current().cluster.FindPool(job.pool);
    if (pool && !pool->prices.empty()) metrics["cost"] = CostAtPrices(metrics, pool);
    AddDerivedMetrics(metrics);
  }
  return metrics;
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

void Api::RequeueJob(Call& call) {
  ControlJobAction(call, ControlPlane::JobAction::kRequeue);
}

void Api::UpdateJob(Call& call) {
  auto body = body::ParseObject(call.request.body, R"({"resources": {"walltime_seconds": 600}})");
  if (!body.ok()) {
    call.reply(FromError(body.error()));
    return;
  }
  auto update = ParseJobUpdate(*body);
  if (!update.ok()) {
    call.reply(FromError(update.error()));
    return;
  }
  auto reply = call.reply;
  ctx_.jobs->Update(*call.principal, call.Param("id"), *update, [reply, this](Result<model::Job> result) {
    if (!result.ok()) {
      reply(FromError(result.error()));
      return;
    }
    reply(Json(200, JobView(*result, ctx_.control->View().get())));
  });
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
