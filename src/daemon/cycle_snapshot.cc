#include "daemon/cycle_snapshot.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <string_view>
#include <unordered_map>

#include "unisched/policy/dependency.h"

namespace unisched::daemon {

using model::Job;
using model::JobState;

scheduler::RunningJob SnapshotOfRunning(const config::Config& config, const Job& job, Timestamp now,
                                        int64_t predicted_run_seconds) {
  const model::Attempt* a = job.CurrentAttempt();
  scheduler::JobFacts facts = scheduler::FactsOf(job);
  facts.predicted_run_seconds = predicted_run_seconds;
  scheduler::RunningJob r =
      scheduler::StartedJob(std::move(facts), a ? a->allocation : model::Allocation{}, job.started_at.value_or(now));
  if (job.cancel_requested || job.preempting_for || job.requeue_requested) {
    const model::QueueSpec* queue = config.cluster.FindQueue(job.queue);
    const int grace =
        job.preempting_for && queue ? queue->policy.preempt_grace_seconds : config.executor.kill_grace_seconds;
    r.expected_end = std::min(r.expected_end, job.stop_requested_at.value_or(now) + std::chrono::seconds(grace));
  }
  r.preempting_for = job.preempting_for;
  r.stopping = job.cancel_requested;
  return r;
}

model::PendingInfo HeldBackInfo(const std::string& pool, std::string code, std::string message) {
  model::PendingInfo info;
  info.own = std::make_shared<const std::vector<model::PendingReason>>(
      std::vector<model::PendingReason>{{std::move(code), std::move(message)}});
  info.pool = std::make_shared<const std::string>(pool);
  return info;
}

namespace {

// aftercorr (docs/arrays.md): task i of `job` (an array) waits for task i
// of each array its aftercorr terms name to end COMPLETED; where a named
// array has no index i, that array does not hold it back. Offers the
// waiting tasks whose corresponding tasks completed, in index order, up to
// `room`; those that wait are held back on the parent with reason
// Dependency; those whose corresponding task ended otherwise (or never
// ran) can never start.
template <class OfferTask>
void OfferCorrespondingTasks(const Job& job, int64_t room, const CycleState& state, CycleSnapshot& out,
                             const OfferTask& offer_task) {
  const model::JobArray& array = *job.array;
  // The named arrays: active ones from the controller, ended ones from the book.
  std::vector<std::pair<model::JobId, std::optional<model::JobArray>>> named;
  for (const auto& term : job.dependency.terms) {
    if (term.type != model::DependencyType::kAfterCorr) continue;
    for (model::JobId id : term.jobs) {
      auto it = state.active.find(id);
      if (it != state.active.end()) {
        named.emplace_back(id, it->second.array);
      } else {
        named.emplace_back(id, state.ended_array ? state.ended_array(id) : std::nullopt);
      }
    }
  }
  int64_t offered = 0, waiting = 0, limited = 0;
  std::string first_why;
  for (int64_t index : array.waiting.First(array.waiting.Count())) {
    bool ready = true, never = false;
    std::string why;
    for (const auto& [id, other] : named) {
      if (!other) {
        never = true;
        why = "job " + std::to_string(id) + " is no array (aftercorr)";
        break;
      }
      const auto task = model::ArrayTaskId(*other, index);
      if (!task) continue;  // no task i there
      const std::string name = model::ArrayTaskName(id, index);
      if (other->waiting.Contains(index)) {
        ready = false;
        why = "task " + name + " to end COMPLETED (aftercorr; it has not started)";
        continue;
      }
      std::optional<model::JobState> s;
      if (auto it = state.active.find(*task); it != state.active.end()) {
        s = it->second.state;
      } else if (state.ended_state) {
        s = state.ended_state(*task);
      }
      if (s == model::JobState::kCompleted) continue;
      if (!s || model::IsTerminal(*s)) {
        never = true;
        why = "task " + name + (s ? " ended " + std::string(model::ToString(*s)) : std::string(" never ran")) +
              "; aftercorr needs it COMPLETED";
        break;
      }
      ready = false;
      why = "task " + name + " to end COMPLETED (aftercorr; it is " + std::string(model::ToString(*s)) + ")";
    }
    const model::JobId task_id = array.first_task_id + array.indices.OrdinalOf(index).value_or(0);
    if (never) {
      out.never_satisfied.emplace_back(task_id, why);
    } else if (!ready) {
      if (waiting++ == 0) first_why = why;
    } else if (offered < room) {
      offer_task(job, index);
      ++offered;
    } else {
      ++limited;
    }
  }
  if (waiting > 0) {
    out.held_back.emplace_back(
        job.id,
        HeldBackInfo(job.pool, "Dependency", std::to_string(waiting) + " tasks wait, the first for " + first_why));
  } else if (limited > 0) {
    out.held_back.emplace_back(job.id, HeldBackInfo(job.pool, "JobArrayTaskLimit",
                                                    std::to_string(limited) + " tasks wait: the array runs at most " +
                                                        std::to_string(array.max_running) + " at once"));
  }
}

}  // namespace

CycleSnapshot BuildCycleSnapshot(const config::Config& config, const CycleState& state, Timestamp now) {
  CycleSnapshot out;
  scheduler::Snapshot& snapshot = out.snapshot;
  snapshot.budget_use = state.budget_use;
  snapshot.nodes = state.nodes;
  // Fairshare factors only for the (project, user) pairs of jobs in queues
  // that weigh fairshare, each computed once. Asked for every job (tens of
  // thousands running): the queue's weight and the pairs already done are
  // looked up by views, without copying a name.
  std::unordered_map<std::string_view, bool> weighs_fairshare;
  std::set<std::pair<std::string_view, std::string_view>> fairshare_done;
  auto add_fairshare = [&](const Job& job) {
    auto [weighs, fresh] = weighs_fairshare.try_emplace(job.queue, false);
    if (fresh) {
      const model::QueueSpec* queue = config.cluster.FindQueue(job.queue);
      weighs->second = queue && queue->policy.Weights().fairshare > 0;
    }
    if (!weighs->second || !fairshare_done.emplace(job.project, job.user).second) return;
    snapshot.fairshare.emplace(
        std::make_pair(job.project, job.user),
        policy::FairshareFactor(state.fairshare_usage, config.cluster.projects, job.project, job.user));
  };
  // Sized once: with a deep backlog the vector holds 100,000 jobs and its
  // regrowth (copies and fresh pages) cost more than filling it.
  snapshot.pending.reserve(state.candidates ? state.candidates->size() : state.pending_hint);
  out.offered_from.reserve(snapshot.pending.capacity());
  auto offer_one = [&](const Job& job) -> scheduler::PendingJob& {
    out.offered_from.push_back(&job);
    scheduler::PendingJob& p = snapshot.pending.emplace_back();
    static_cast<scheduler::JobFacts&>(p) = scheduler::FactsOf(job);
    if (state.run_times) p.predicted_run_seconds = state.run_times->PredictionFor(job);
    p.constraints = job.constraints;
    p.preempted_by = job.preempted_by;
    if (auto r = state.reservations.find(job.id); r != state.reservations.end()) {
      p.reserved_start = r->second.start;
      p.reserved_nodes = r->second.nodes;
    }
    add_fairshare(job);
    return p;
  };
  // An array offers its waiting tasks as pending jobs of their own (the
  // parent's facts, each task's id), at most max_running minus those active;
  // the rest wait with Slurm's reason JobArrayTaskLimit (docs/arrays.md).
  auto offer_task = [&](const Job& job, int64_t index) {
    const model::JobArray& array = *job.array;
    scheduler::PendingJob& p = offer_one(job);
    p.id = array.first_task_id + array.indices.OrdinalOf(index).value_or(0);
    if (out.first_offered_task.empty() || out.first_offered_task.back().first != job.id) {
      out.first_offered_task.emplace_back(job.id, p.id);
    }
    if (auto r = state.reservations.find(p.id); r != state.reservations.end()) {
      p.reserved_start = r->second.start;
      p.reserved_nodes = r->second.nodes;
    } else {
      p.reserved_start.reset();
      p.reserved_nodes.clear();
    }
  };
  auto offer = [&](const Job& job) {
    if (!job.array) {
      offer_one(job);
      return;
    }
    const model::JobArray& array = *job.array;
    int64_t room = array.waiting.Count();
    if (array.max_running > 0) {
      room = std::min(room, std::max<int64_t>(0, array.max_running - array.ActiveTasks()));
    }
    // An event pass looks at the first few jobs of the queue; an array's
    // tasks are in index order there, so its first few are enough.
    if (state.most_tasks > 0) room = std::min(room, state.most_tasks);
    if (job.dependency.HasAfterCorr()) {
      OfferCorrespondingTasks(job, room, state, out, offer_task);
      return;
    }
    for (int64_t index : array.waiting.First(room)) offer_task(job, index);
    // The cap holds the rest back; while an offered task still waits, the
    // array's reason is that task's instead (the controller's choice).
    if (room < array.waiting.Count()) {
      out.held_back.emplace_back(
          job.id, HeldBackInfo(job.pool, "JobArrayTaskLimit",
                               std::to_string(array.waiting.Count() - room) + " tasks wait: the array runs at most " +
                                   std::to_string(array.max_running) + " at once"));
    }
  };
  // Jobs whose dependency is checked once every job has been seen (a
  // singleton needs the earliest active job of its user and name).
  std::vector<const Job*> dependent;
  bool any_singleton = false;
  // Active arrays by their first task's id, for dependencies on tasks: a
  // task that has not started has no job of its own (afterok:123_7 names
  // it by its id). Built on the first dependency on a job that is not
  // active, if any.
  std::map<model::JobId, const Job*> arrays;
  bool arrays_built = false;
  auto consider = [&](const Job& job) {
    if (job.state == JobState::kPending && job.eligible_at && *job.eligible_at > now) {
      // Never started nor waiting out a retry: its --begin (begin_at).
      const bool retrying =
          job.state_reason == "Retry" || job.state_reason == "NodeFail" || job.state_reason == "LaunchRetry";
      if (!retrying && job.attempts.empty()) {
        out.held_back.emplace_back(
            job.id, HeldBackInfo(job.pool, "BeginTime",
                                 "not to start before " + FormatRfc3339(*job.eligible_at) + " (--begin)"));
        return;
      }
      const bool launch = job.state_reason == "LaunchRetry";
      out.held_back.emplace_back(
          job.id, HeldBackInfo(job.pool, launch ? "LaunchRetry" : "Retry",
                               std::string(launch ? "waiting to retry the launch until " : "waiting to retry until ") +
                                   FormatRfc3339(*job.eligible_at) + " (" + job.state_reason + ")"));
      return;
    }
    if (job.state == JobState::kPending) {
      // A dependency is met once, before the first start: a requeued job
      // (it has attempts) is not held back again.
      if (!job.dependency.empty() && job.attempts.empty()) {
        dependent.push_back(&job);
        any_singleton = any_singleton || job.dependency.HasSingleton();
        return;
      }
      offer(job);
    } else if (job.state == JobState::kRunning && !job.array) {  // a parent runs nothing itself
      snapshot.running.push_back(
          SnapshotOfRunning(config, job, now, state.run_times ? state.run_times->PredictionFor(job) : 0));
      add_fairshare(job);  // a running job's priority decides whether it may be preempted
    }
  };
  if (state.candidates) {
    for (const Job* job : *state.candidates) consider(*job);
  } else {
    for (const auto& [id, job] : state.active) consider(job);
  }
  if (!dependent.empty()) {
    // The earliest active (pending, held or running) job per user and name:
    // a singleton waits for it unless it is that job. `active` is in id
    // order, which is submission order.
    std::map<std::pair<std::string_view, std::string_view>, model::JobId> first_of_name;
    if (any_singleton) {
      for (const auto& [id, job] : state.active) first_of_name.try_emplace({job.user, job.name}, id);
    }
    const policy::JobStateLookup state_of = [&](model::JobId id) -> std::optional<JobState> {
      if (auto it = state.active.find(id); it != state.active.end()) return it->second.state;
      if (!arrays_built) {
        for (const auto& [active_id, job] : state.active) {
          if (job.array) arrays.emplace(job.array->first_task_id, &job);
        }
        arrays_built = true;
      }
      if (auto after = arrays.upper_bound(id); after != arrays.begin()) {
        const Job& parent = *std::prev(after)->second;
        const model::JobArray& array = *parent.array;
        if (id - array.first_task_id < array.indices.Count()) {
          const int64_t index = array.indices.At(id - array.first_task_id);
          if (array.waiting.Contains(index))
            return parent.state == JobState::kHeld ? JobState::kHeld : JobState::kPending;
          // Started and ended (a row), or cancelled before it started (none).
          std::optional<JobState> ended = state.ended_state ? state.ended_state(id) : std::nullopt;
          return ended ? ended : std::optional<JobState>(JobState::kCancelled);
        }
      }
      if (state.ended_state) return state.ended_state(id);
      return std::nullopt;
    };
    for (const Job* job : dependent) {
      model::JobId blocker = 0;
      if (job->dependency.HasSingleton()) {
        auto first = first_of_name.find({job->user, job->name});
        if (first != first_of_name.end() && first->second != job->id) blocker = first->second;
      }
      // aftercorr is checked task by task when the array is offered.
      policy::DependencyCheck check = policy::CheckDependency(
          job->dependency.HasAfterCorr() ? job->dependency.WithoutAfterCorr() : job->dependency, state_of, blocker);
      switch (check.status) {
        case policy::DependencyStatus::kMet:
          offer(*job);
          break;
        case policy::DependencyStatus::kWaiting:
          out.held_back.emplace_back(job->id, HeldBackInfo(job->pool, "Dependency", "waits for " + check.why));
          break;
        case policy::DependencyStatus::kNever:
          out.never_satisfied.emplace_back(job->id, std::move(check.why));
          break;
      }
    }
  }
  for (const auto& [scope, amount] : state.sandbox_holds) {
    snapshot.quota_holders.push_back({std::get<0>(scope), std::get<1>(scope), std::get<2>(scope), amount});
  }
  return out;
}

}  // namespace unisched::daemon
