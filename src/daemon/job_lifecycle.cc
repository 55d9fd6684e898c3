// The controller's jobs part (job_lifecycle.h).

#include "daemon/job_lifecycle.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "daemon/launch_spec.h"
#include "unisched/auth/auth.h"
#include "unisched/model/words.h"
#include "unisched/model/workflow.h"
#include "unisched/policy/retry.h"
#include "unisched/service/unix_accounts.h"

namespace unisched::daemon {
namespace {

using model::Job;
using model::JobState;

using executor::JobStateOf;

}  // namespace

JobLifecycle::JobLifecycle(const config::LiveConfig& live, store::Store& store, metrics::Metrics& metrics,
                           const Clock& clock, NodeBook& nodes, Accounting& accounting,
                           std::function<void(executor::RunResult)> on_result)
    : live_(live),
      store_(store),
      metrics_(metrics),
      clock_(clock),
      node_book_(nodes),
      accounting_(accounting),
      on_result_(std::move(on_result)),
      dependencies_(store) {}

JobLifecycle::Restart JobLifecycle::Load(std::vector<Job> active, JobCounts counts, Timestamp now) {
  job_counts_ = std::move(counts);
  Restart restart;
  for (auto& job : active) {
    if (job.state == JobState::kRunning) {
      if (const model::Attempt* a = job.CurrentAttempt()) {
        node_book_.Apply(a->allocation, +1);
        TallyRunning(job, +1);
        accounting_.ResumeCharging(job, *a, store_.LoadLedgerCharged(job.id, a->number), now);
        backend::AttemptLaunch launch = AttemptLaunchOf(job);
        if (!job.data.empty()) {
          // Its stage-out still needs the stores (a failure shows when it runs).
          std::vector<executor::LaunchSpec*> tasks{&launch.spec};
          for (executor::LaunchSpec& task : launch.gang) tasks.push_back(&task);
          if (Status s = AddStaging(nullptr, job, tasks); !s.ok()) {
            spdlog::warn("job {}: its data staging cannot be recovered: {}", job.id, s.error().message);
          }
        }
        restart.recover.push_back({&BackendOf(job), std::move(launch)});
        if (job.cancel_requested || job.preempting_for || job.requeue_requested) {
          restart.stop.emplace_back(&BackendOf(job), job.id, a->number,
                                    !job.cancel_requested && job.preempting_for.has_value());
        }
      }
    }
    if (job.array) {
      array_parents_.emplace(job.array->first_task_id, job.id);
      ++array_parents_changes_;
    }
    if (WaitsOnDependency(job)) dependencies_.NoteWaiting(job);
    active_.emplace(job.id, std::move(job));
  }
  return restart;
}

bool JobLifecycle::WaitsOnDependency(const Job& job) {
  return (job.state == JobState::kPending || job.state == JobState::kHeld) && !job.dependency.empty() &&
         job.attempts.empty();
}

void JobLifecycle::PruneDependants() {
  dependencies_.PruneWaiting([this](model::JobId id) {
    auto it = active_.find(id);
    return it != active_.end() && WaitsOnDependency(it->second);
  });
}

void JobLifecycle::Admit(Job job) {
  ++job_counts_[{job.state, job.queue, job.pool}];
  const model::JobId id = job.id;
  if (job.array) {
    array_parents_.emplace(job.array->first_task_id, id);
    ++array_parents_changes_;
  }
  if (WaitsOnDependency(job)) dependencies_.NoteWaiting(job);
  active_.emplace(id, std::move(job));
  Changed(id);
}

void JobLifecycle::StartAttempt(Batch& batch, model::JobId id, const model::Allocation& allocation, Timestamp now) {
  auto it = active_.find(id);
  // A task of an array is split off its parent when it starts.
  if (it == active_.end() && SplitArrayTask(batch, id, now)) it = active_.find(id);
  if (it == active_.end() || it->second.state != JobState::kPending) return;
  Job& job = it->second;
  node_book_.Apply(allocation, +1);
  model::Attempt attempt;
  attempt.number = static_cast<int>(job.attempts.size()) + 1;
  attempt.allocation = allocation;
  attempt.state = JobState::kRunning;
  attempt.started_at = now;
  job.attempts.push_back(attempt);
  job.started_at = now;
  job.eligible_at.reset();
  TallyRunning(job, +1);
  accounting_.BeginCharging(job.id, attempt.number, now);
  const std::string where = attempt.allocation.empty()
                                ? "handed to backend " + BackendNameOf(job) + " of pool " + job.pool
                                : "on " + model::Join(job.NodeNames(), ',');
  Transition(batch, job, JobState::kRunning, "", "started", "attempt " + std::to_string(attempt.number) + " " + where);
  metrics_.CountStart(job.pool);
  // Launch only after the RUNNING state is durable: a crash in between is
  // recovered by launching the attempt then (it never claimed its directory).
  // The launch reads the user's account from the store; a store that cannot
  // be read now (a PostgreSQL server down) makes it a transient launch
  // failure: nothing started, so the job gets a new attempt once the store
  // is back, without a failure counted against it or its node (and the
  // daemon does not end).
  std::optional<backend::AttemptLaunch> built;
  Error unreadable = Error::Unavailable("");
  try {
    built = AttemptLaunchOf(job);
  } catch (const store::StoreFailure& e) {
    unreadable =
        executor::TransientLaunchError("not launched: the store could not be read (" + e.error().message + ")");
  }
  if (built && (!job.secrets.empty() || !job.data.empty())) {
    std::vector<executor::LaunchSpec*> tasks{&built->spec};
    for (executor::LaunchSpec& task : built->gang) tasks.push_back(&task);
    Status s = AddSecrets(batch, job, tasks);
    if (s.ok()) s = AddStaging(&batch, job, tasks);
    if (!s.ok()) {
      unreadable = s.error();
      built.reset();
    }
  }
  batch.after_commit.push_back(
      [this, backend = &BackendOf(job), launch = std::move(built), unreadable, id = job.id, number = attempt.number] {
        Status s = launch ? backend->Launch(*launch) : Status(unreadable);
        if (!s.ok()) {
          executor::RunResult failed = executor::LaunchFailure(id, number, s.error());
          failed.ended_at = clock_.Now();
          on_result_(std::move(failed));
        }
      });
}

std::vector<executor::CancelCommand> JobLifecycle::StaleOn(const std::string& node,
                                                           const std::vector<executor::AttemptRef>& running) const {
  std::vector<executor::CancelCommand> stale;
  for (const auto& ref : running) {
    auto it = active_.find(ref.job);
    const model::Attempt* current = it == active_.end() ? nullptr : it->second.CurrentAttempt();
    const bool here = current && current->number == ref.attempt && it->second.state == JobState::kRunning &&
                      std::any_of(current->allocation.begin(), current->allocation.end(),
                                  [&](const model::NodeAllocation& a) { return a.node == node; });
    if (!here) stale.push_back({ref.job, ref.attempt, false, true});
  }
  return stale;
}

void JobLifecycle::TallyHolder(const policy::JobScope& scope, const policy::Amount& amount, int sign) {
  if (sign > 0) {
    running_usage_.Add(scope, amount);
  } else {
    running_usage_.Remove(scope, amount);
  }
}

void JobLifecycle::Transition(Batch& batch, Job& job, JobState to, std::string reason, const std::string& event_kind,
                              const std::string& message) {
  if (job.state != to) {
    --job_counts_[{job.state, job.queue, job.pool}];
    ++job_counts_[{to, job.queue, job.pool}];
    if (model::IsTerminal(to)) metrics_.CountFinish(std::string(model::ToString(to)), job.pool);
  }
  job.state = to;
  if (model::IsTerminal(to)) {
    if (!job.array) run_times_.Ended(job);  // a parent ran nothing itself
    dependencies_.Ended(job.id, to);
  }
  // Its dependants may start now (after: its start; afterok...: its end); a
  // deep queue's event passes offer only jobs changed since the full pass.
  if (to == JobState::kRunning || model::IsTerminal(to)) {
    for (model::JobId waiting : dependencies_.TakeWaiting(job.id, model::IsTerminal(to))) Changed(waiting);
  }
  job.state_reason = std::move(reason);
  if (model::IsTerminal(to) && workflow_job_ended_ && job.env.count(model::kWorkflowIdVariable) > 0) {
    batch.after_commit.push_back(
        [ended = workflow_job_ended_, id = job.id, to, why = job.state_reason] { ended(id, to, why); });
  }
  batch.writes.push_back(
      [copy = job, event = store::JobEvent{clock_.Now(), event_kind, message}](store::Transaction& t) -> Status {
        if (auto s = t.UpdateJob(copy); !s.ok()) return s;
        return t.AppendEvent(copy.id, event);
      });
  if (model::IsTerminal(to)) {
    if (job.array && array_parents_.erase(job.array->first_task_id) > 0) ++array_parents_changes_;
    if (job.array_task) ArrayTaskEnded(batch, job);
  }
}

void JobLifecycle::CancelUnsatisfiable(Batch& batch, model::JobId id, const std::string& reason) {
  auto it = active_.find(id);
  // A task still waiting in its array (aftercorr): it never starts.
  if (it == active_.end()) {
    CancelWaitingArrayTask(batch, id, "DependencyNeverSatisfied: " + reason);
    return;
  }
  if (it->second.state != JobState::kPending) return;
  Job& job = it->second;
  job.ended_at = clock_.Now();
  Transition(batch, job, JobState::kCancelled, "DependencyNeverSatisfied: " + reason, "cancelled",
             "dependency never satisfied: " + reason);
  spdlog::info("job {} cancelled: its dependency can never hold ({})", id, reason);
  active_.erase(it);
  wants_cycle_ = true;  // its own dependants learn it in the next cycle
}

void JobLifecycle::Preempt(Batch& batch, const scheduler::Preemption& p) {
  auto it = active_.find(p.victim);
  if (it == active_.end() || it->second.state != JobState::kRunning || it->second.preempting_for ||
      it->second.cancel_requested) {
    return;
  }
  Job& victim = it->second;
  victim.preempting_for = p.preemptor;
  victim.stop_requested_at = clock_.Now();
  const std::string then = p.requeue ? "then back to PENDING" : "then CANCELLED";
  const std::string message = "preempted by job " + std::to_string(p.preemptor) + ": SIGTERM, SIGKILL after " +
                              std::to_string(p.grace_seconds) + " s, " + then;
  batch.writes.push_back(
      [copy = victim, victim_event = store::JobEvent{clock_.Now(), "preempted", message}, preemptor = p.preemptor,
       preemptor_event =
           store::JobEvent{clock_.Now(), "preempting", "preempting job " + std::to_string(p.victim) + " to make room"}](
          store::Transaction& t) -> Status {
        if (auto s = t.UpdateJob(copy); !s.ok()) return s;
        if (auto s = t.AppendEvent(copy.id, victim_event); !s.ok()) return s;
        return t.AppendEvent(preemptor, preemptor_event);
      });
  batch.after_commit.push_back([backend = &BackendOf(victim), id = victim.id,
                                attempt = victim.CurrentAttempt()->number] { backend->Cancel(id, attempt, true); });
  metrics_.CountPreemption(victim.pool, victim.queue);
  spdlog::info("job {} preempted by job {}", p.victim, p.preemptor);
}

void JobLifecycle::FinishPreemption(Batch& batch, Job& job, model::Attempt& attempt) {
  const model::JobId preemptor = *job.preempting_for;
  const model::QueueSpec* queue = current_config().cluster.FindQueue(job.queue);
  const bool requeue = !queue || queue->policy.preempt_action == model::PreemptAction::kRequeue;
  attempt.state = JobState::kCancelled;
  attempt.reason = "preempted by job " + std::to_string(preemptor);
  job.preempting_for.reset();
  job.requeue_requested = false;  // preempted first: its queue's preempt_action decides
  job.stop_requested_at.reset();
  job.preempted_by.push_back(preemptor);
  Changed(job.id);
  if (requeue) {
    job.exit_code.reset();
    job.started_at.reset();
    job.ended_at.reset();
    Transition(batch, job, JobState::kPending, "Preempted", "requeued",
               "preempted by job " + std::to_string(preemptor) + "; back to PENDING for attempt " +
                   std::to_string(attempt.number + 1));
    return;
  }
  Transition(batch, job, JobState::kCancelled, "Preempted", "cancelled",
             "preempted by job " + std::to_string(preemptor) + "; its queue cancels preempted jobs");
  active_.erase(job.id);
}

void JobLifecycle::StopAttempt(Batch& batch, Job& job, const std::string& event_kind, const std::string& message) {
  job.stop_requested_at = clock_.Now();
  batch.writes.push_back(
      [copy = job, event = store::JobEvent{clock_.Now(), event_kind, message}](store::Transaction& t) -> Status {
        if (auto s = t.UpdateJob(copy); !s.ok()) return s;
        return t.AppendEvent(copy.id, event);
      });
  batch.after_commit.push_back([backend = &BackendOf(job), id = job.id, attempt = job.CurrentAttempt()->number] {
    backend->Cancel(id, attempt, false);
  });
}

void JobLifecycle::FinishRequeue(Batch& batch, Job& job, model::Attempt& attempt) {
  attempt.state = JobState::kCancelled;
  attempt.reason = "requeued";
  job.requeue_requested = false;
  job.stop_requested_at.reset();
  job.exit_code.reset();
  job.started_at.reset();
  job.ended_at.reset();
  Changed(job.id);
  Transition(batch, job, JobState::kPending, "Requeued", "requeued",
             "requeued: attempt " + std::to_string(attempt.number) + " stopped; back to PENDING for attempt " +
                 std::to_string(attempt.number + 1));
}

void JobLifecycle::TallyRunning(const Job& job, int sign) {
  const policy::JobScope scope{job.queue, job.project, job.user};
  const policy::Amount amount = policy::AmountOf(job.resources);
  if (sign > 0) {
    running_usage_.Add(scope, amount);
  } else {
    running_usage_.Remove(scope, amount);
  }
}

void JobLifecycle::ReleaseAllocation(const model::Attempt& attempt) {
  node_book_.Apply(attempt.allocation, -1);
}

void JobLifecycle::ApplyResult(Batch& batch, const executor::RunResult& result) {
  auto it = active_.find(result.job_id);
  model::Attempt* attempt = it == active_.end() ? nullptr : it->second.CurrentAttempt();
  if (!attempt || attempt->number != result.attempt || it->second.state != JobState::kRunning) {
    spdlog::info("ignoring report of stale attempt {}.{}", result.job_id, result.attempt);
    // The store holds how this attempt ended (or its job is gone): its
    // control files have no more work to do once this batch is in too.
    // Which backend held it is not known here: each ignores what it does not hold.
    batch.after_commit.push_back([this, id = result.job_id, number = result.attempt] {
      for (backend::PoolBackend* b : backends_.Distinct()) b->Release(id, number);
    });
    return;
  }
  // An agent's report counts only for an attempt on its own node (the hub
  // checks this too; this is the authority's own check).
  if (!result.reported_by.empty() &&
      std::none_of(attempt->allocation.begin(), attempt->allocation.end(),
                   [&](const model::NodeAllocation& a) { return a.node == result.reported_by; })) {
    spdlog::warn("ignoring report of attempt {}.{} from node {}: the attempt does not run there", result.job_id,
                 result.attempt, result.reported_by);
    return;
  }
  Job& job = it->second;
  const Timestamp now = clock_.Now();
  const JobState to = JobStateOf(result.outcome);
  // Once this batch is committed the store has the result, so the attempt's
  // control files (on a tmpfs, counted per attempt) have done their work.
  batch.after_commit.push_back(
      [backend = &BackendOf(job), id = result.job_id, number = result.attempt] { backend->Release(id, number); });
  TallyRunning(job, -1);
  // A backend that places jobs says where it ran them; no other report may.
  if (attempt->allocation.empty() && !result.placed_on.empty()) attempt->placed_on = result.placed_on;
  if (job.preempting_for && result.outcome == executor::RunOutcome::kCancelled && !job.cancel_requested) {
    attempt->process_started_at = result.started_at;
    attempt->ended_at = result.ended_at.value_or(now);
    attempt->exit_code = result.exit_code;
    attempt->usage = result.usage;
    ReleaseAllocation(*attempt);
    accounting_.CloseCharging(batch, job, *attempt);
    FinishPreemption(batch, job, *attempt);
    return;
  }
  if (job.requeue_requested && result.outcome == executor::RunOutcome::kCancelled && !job.cancel_requested) {
    attempt->process_started_at = result.started_at;
    attempt->ended_at = result.ended_at.value_or(now);
    attempt->exit_code = result.exit_code;
    attempt->usage = result.usage;
    ReleaseAllocation(*attempt);
    accounting_.CloseCharging(batch, job, *attempt);
    FinishRequeue(batch, job, *attempt);
    return;
  }
  // It ended on its own (or was cancelled by a person) while being
  // preempted or requeued: it ends as it ended.
  job.preempting_for.reset();
  job.requeue_requested = false;
  attempt->state = to;
  attempt->process_started_at = result.started_at;
  attempt->ended_at = result.ended_at.value_or(now);
  attempt->exit_code = result.exit_code;
  attempt->reason = result.reason;
  attempt->usage = result.usage;
  attempt->transient = result.outcome == executor::RunOutcome::kLaunchFailed && result.transient;
  attempt->tasks.clear();
  for (const executor::TaskEnd& t : result.tasks) {
    attempt->tasks.push_back({t.rank, t.node, JobStateOf(t.outcome), t.exit_code, t.reason});
  }
  job.exit_code = result.exit_code;
  job.ended_at = attempt->ended_at;
  ReleaseAllocation(*attempt);
  accounting_.CloseCharging(batch, job, *attempt);
  if (to == JobState::kFailed && !job.cancel_requested) {
    // A node short of descriptors for a moment is no black hole: draining
    // it would turn a squeeze into an outage (its launches are retried).
    if (!attempt->transient && node_book_.CountFailure(batch, attempt->allocation, now)) wants_cycle_ = true;
    if (RequeueForRetry(batch, job, to, now)) return;
  }
  std::string reason = result.reason;
  if (to == JobState::kCancelled && reason.empty()) reason = "cancelled";
  std::string message = std::string(executor::ToString(result.outcome));
  if (result.exit_code) message += ", exit code " + std::to_string(*result.exit_code);
  if (!result.reason.empty()) message += ": " + result.reason;
  Transition(batch, job, to, reason, std::string(executor::ToString(result.outcome)), message);
  active_.erase(it);
  wants_cycle_ = true;
}

bool JobLifecycle::RequeueForRetry(Batch& batch, Job& job, JobState ended, Timestamp now) {
  const model::QueueSpec* queue = current_config().cluster.FindQueue(job.queue);
  if (!queue) return false;
  const policy::RetryDecision retry = policy::DecideRetry(queue->policy, job, ended, now);
  if (!retry.requeue) return false;
  job.exit_code.reset();
  job.started_at.reset();
  job.ended_at.reset();
  job.cancel_requested = false;
  job.stop_requested_at.reset();
  job.eligible_at.reset();
  if (retry.eligible_at > now) job.eligible_at = retry.eligible_at;
  Transition(batch, job, JobState::kPending, retry.state_reason, "requeued", retry.message);
  spdlog::info("job {}: {}", job.id, retry.message);
  Changed(job.id);
  return true;
}

void JobLifecycle::ApplyControl(Batch& batch, model::JobId id, JobAction action, const std::string& actor,
                                const std::function<void(Result<Job>)>& done) {
  auto it = active_.find(id);
  if (it == active_.end() && ControlWaitingArrayTask(batch, id, action, actor, done)) return;
  if (it == active_.end()) {
    auto stored = store_.GetJob(id);
    if (!stored.ok()) {
      done(stored.error());
      return;
    }
    std::string message = "job " + std::to_string(id) + " already ended " + std::string(model::ToString(stored->state));
    if (action == JobAction::kRequeue) message += "; a finished job stays finished: submit it again to run it again";
    done(Error::Conflict("job_finished", message));
    return;
  }
  Job& job = it->second;
  auto reply_after_commit = [&batch, &done](const Job& copy) {
    batch.after_commit.push_back([done, copy] { done(copy); });
  };
  if (job.array && action == JobAction::kCancel) {
    reply_after_commit(CancelArray(batch, id, actor));
    return;
  }
  if (job.array && action == JobAction::kRequeue) {
    done(Error::Conflict("invalid_state",
                         "job " + std::to_string(id) + " is an array; requeue its tasks (ID_INDEX ids) one by one"));
    return;
  }
  switch (action) {
    case JobAction::kCancel:
      if (job.state == JobState::kRunning) {
        if (!job.cancel_requested) {
          job.cancel_requested = true;
          StopAttempt(batch, job, "cancel_requested", "cancel requested by " + actor);
        }
        reply_after_commit(job);
        return;
      }
      job.ended_at = clock_.Now();
      Transition(batch, job, JobState::kCancelled, "cancelled by " + actor, "cancelled", "cancelled by " + actor);
      reply_after_commit(job);
      active_.erase(it);
      wants_cycle_ = true;
      return;
    case JobAction::kHold:
      if (job.state != JobState::kPending) {
        done(Error::Conflict("invalid_state", "only PENDING jobs can be held; job " + std::to_string(id) + " is " +
                                                  std::string(model::ToString(job.state))));
        return;
      }
      Transition(batch, job, JobState::kHeld, "held by " + actor, "held", "held by " + actor);
      reply_after_commit(job);
      wants_cycle_ = true;
      return;
    case JobAction::kRequeue:
      if (job.state != JobState::kRunning) {
        reply_after_commit(job);  // PENDING or HELD: it waits already
        return;
      }
      if (job.cancel_requested) {
        done(Error::Conflict("invalid_state",
                             "job " + std::to_string(id) + " is being cancelled; it cannot be requeued"));
        return;
      }
      if (!job.requeue_requested && !job.preempting_for) {
        job.requeue_requested = true;
        StopAttempt(batch, job, "requeue_requested",
                    "requeue requested by " + actor + ": its attempt is stopped, then PENDING again");
      }
      reply_after_commit(job);
      return;
    case JobAction::kRelease:
      if (job.state != JobState::kHeld) {
        done(Error::Conflict("invalid_state", "only HELD jobs can be released; job " + std::to_string(id) + " is " +
                                                  std::string(model::ToString(job.state))));
        return;
      }
      Transition(batch, job, JobState::kPending, "", "released", "released by " + actor);
      reply_after_commit(job);
      Changed(job.id);
      return;
  }
}

void JobLifecycle::ApplyUpdate(Batch& batch, model::JobId id, const service::ControlPlane::JobChange& change,
                               const std::string& actor, const std::function<void(Result<Job>)>& done) {
  auto it = active_.find(id);
  if (it == active_.end() || (it->second.state != JobState::kPending && it->second.state != JobState::kHeld)) {
    done(Error::Conflict("invalid_state", "job " + std::to_string(id) +
                                              " is no longer PENDING or HELD: only waiting jobs can be updated"));
    return;
  }
  Job& job = it->second;
  if (job.queue != change.queue || job.pool != change.pool) {
    --job_counts_[{job.state, job.queue, job.pool}];
    ++job_counts_[{job.state, change.queue, change.pool}];
  }
  job.queue = change.queue;
  job.pool = change.pool;
  job.routing = {change.pool, change.queue, change.routing_reason};
  job.config_version = change.config_version;
  job.resources.walltime_seconds = change.walltime_seconds;
  job.priority = change.priority;
  batch.writes.push_back(
      [copy = job, event = store::JobEvent{clock_.Now(), "updated", change.summary + " (by " + actor + ")"}](
          store::Transaction& t) -> Status {
        if (auto s = t.UpdateJob(copy); !s.ok()) return s;
        return t.AppendEvent(copy.id, event);
      });
  batch.after_commit.push_back([done, copy = job] { done(copy); });
  Changed(id);
}

void JobLifecycle::FailJobsOnNode(Batch& batch, const std::string& node, const std::string& why, Timestamp now) {
  std::vector<model::JobId> on_node;
  for (const auto& [id, job] : active_) {
    const model::Attempt* a = job.CurrentAttempt();
    if (job.state != JobState::kRunning || !a) continue;
    for (const auto& alloc : a->allocation) {
      if (alloc.node == node) on_node.push_back(id);
    }
  }
  for (model::JobId id : on_node) {
    Job& job = active_.at(id);
    model::Attempt& attempt = *job.CurrentAttempt();
    TallyRunning(job, -1);
    // The run as the daemon saw it: from its start until the node was lost.
    if (!attempt.started_at) attempt.started_at = job.started_at.value_or(now);
    attempt.ended_at = now;
    attempt.state = JobState::kNodeFail;
    attempt.reason = why;
    job.preempting_for.reset();
    ReleaseAllocation(attempt);
    accounting_.CloseCharging(batch, job, attempt);
    // Stopped on the node if it still runs there (a partition, not a dead
    // machine); its late report is ignored (the attempt is not current).
    batch.after_commit.push_back(
        [backend = &BackendOf(job), id, number = attempt.number] { backend->Cancel(id, number, false); });
    if (!job.cancel_requested && RequeueForRetry(batch, job, JobState::kNodeFail, now)) continue;
    job.exit_code.reset();
    job.ended_at = now;
    Transition(batch, job, JobState::kNodeFail, "NodeFail", "node_fail", why);
    active_.erase(id);
  }
  wants_cycle_ = true;
}

backend::PoolBackend& JobLifecycle::BackendOf(const Job& job) const {
  // SetBackends checked that every pool of the config has one.
  return *backends_.For(job.pool);
}

std::string JobLifecycle::BackendNameOf(const Job& job) const {
  const model::PoolSpec* pool = current_config().cluster.FindPool(job.pool);
  return pool ? pool->backend : std::string("?");
}

backend::AttemptLaunch JobLifecycle::AttemptLaunchOf(const Job& job) const {
  const model::Allocation& allocation = job.CurrentAttempt()->allocation;
  // Rank 0's node, as the other nodes reach it (its agent's address).
  const std::string master = allocation.empty() ? std::string() : node_book_.AddressOf(allocation.front().node);
  backend::AttemptLaunch launch{MakeLaunchSpec(job, master), allocation, job.resources, job.constraints};
  launch.gang = BuildGangSpecs(launch.spec, job, launch.spec.unix_user, master);
  AddJobAccess(launch.spec);
  for (executor::LaunchSpec& task : launch.gang) AddJobAccess(task);
  return launch;
}

void JobLifecycle::SetJobAccess(std::string token_secret, std::string url) {
  job_token_secret_ = std::move(token_secret);
  job_url_ = std::move(url);
}

void JobLifecycle::AddJobAccess(executor::LaunchSpec& spec) const {
  if (job_token_secret_.empty()) return;
  spec.env["UNISCHED_JOB_TOKEN"] = auth::MintJobToken(job_token_secret_, spec.job_id, spec.attempt);
  spec.env["UNISCHED_URL"] = job_url_;
}

Result<JobLifecycle::PlannedStep> JobLifecycle::PlanStep(model::JobId id, int attempt,
                                                         const service::StepRequest& request,
                                                         const std::function<int()>& next_step, Timestamp now) const {
  auto it = active_.find(id);
  const Job* job = it == active_.end() ? nullptr : &it->second;
  if (!job || job->state != JobState::kRunning || !job->CurrentAttempt()) {
    return Error::Conflict("job_not_running", "job " + std::to_string(id) +
                                                  " is not running: steps start inside a running job's allocation");
  }
  const model::Attempt& current = *job->CurrentAttempt();
  if (attempt != 0 && current.number != attempt) {
    return Error::Conflict("attempt_ended", "attempt " + std::to_string(attempt) + " of job " + std::to_string(id) +
                                                " has ended (attempt " + std::to_string(current.number) +
                                                " runs): its token starts no steps");
  }
  if (current.allocation.empty()) {
    return Error::Unprocessable("no_steps", "job " + std::to_string(id) + " runs in pool " + job->pool +
                                                ", whose backend places jobs itself: it runs no steps");
  }
  const std::string master = node_book_.AddressOf(current.allocation.front().node);
  const executor::LaunchSpec first = MakeLaunchSpec(*job, master);
  const int step = next_step();
  auto tasks = BuildStepSpecs(first, *job, request, step, first.unix_user);
  if (!tasks.ok()) return tasks.error();
  PlannedStep planned;
  planned.backend = &BackendOf(*job);
  for (executor::LaunchSpec& task : *tasks) {
    AddJobAccess(task);
    planned.view.nodes.push_back(task.node);
  }
  if (!job->secrets.empty()) {
    // A step's tasks are the job's too: they get its secrets.
    std::vector<executor::LaunchSpec*> step_tasks;
    for (executor::LaunchSpec& task : *tasks) step_tasks.push_back(&task);
    Batch audits;
    if (Status s = AddSecrets(audits, *job, std::move(step_tasks)); !s.ok()) return s.error();
    planned.audits = std::move(audits.writes);
  }
  planned.view.job_id = id;
  planned.view.attempt = current.number;
  planned.view.step = step;
  planned.view.tasks_per_node = request.tasks_per_node.value_or(std::max(job->resources.tasks_per_node, 1));
  planned.view.started_at = now;
  planned.tasks = std::move(*tasks);
  return planned;
}

executor::LaunchSpec JobLifecycle::MakeLaunchSpec(const Job& job, const std::string& master_address) const {
  // A daemon running as root runs each job as its user's mapped account (the
  // dedicated unisched-job by default). A daemon started by an ordinary user
  // (development) cannot switch accounts: jobs run as that user.
  const bool as_root = ::geteuid() == 0;
  std::string unix_user;
  std::optional<executor::UnixIds> ids;
  if (as_root) {
    unix_user = current_config().executor.default_unix_user;
    if (auto user = store_.GetUser(job.user)) {
      if (!user->unix_user.empty()) {
        unix_user = user->unix_user;
      } else if (service::UsesAllocatedAccount(current_config().executor.user_accounts, *user)) {
        // Its own uid: no job of another user may read its files or signal it.
        unix_user = user->name;
        ids = AllocatedIds(*user, job.project);
      }
    }
  }
  executor::LaunchSpec spec = BuildLaunchSpec(current_config(), job, unix_user, as_root, master_address);
  spec.ids = std::move(ids);
  return spec;
}

executor::UnixIds JobLifecycle::AllocatedIds(const store::UserRecord& user, const std::string& project) const {
  executor::UnixIds ids;
  auto uid = UnixId("user", user.name);
  auto gid = UnixId("project", project);
  if (!uid || !gid) return ids;  // uid 0: refused at launch, with the reason
  ids.uid = static_cast<uint32_t>(*uid);
  ids.gid = static_cast<uint32_t>(*gid);
  // Every project's group, so a shared project directory (group-owned,
  // setgid) is open to its members' jobs whichever project they run under.
  for (const auto& p : user.projects) {
    if (auto g = UnixId("project", p)) ids.groups.push_back(static_cast<uint32_t>(*g));
  }
  if (std::find(ids.groups.begin(), ids.groups.end(), ids.gid) == ids.groups.end()) ids.groups.push_back(ids.gid);
  return ids;
}

std::optional<int64_t> JobLifecycle::UnixId(const std::string& kind, const std::string& name) const {
  const auto key = std::make_pair(kind, name);
  if (auto it = unix_ids_.find(key); it != unix_ids_.end()) return it->second;
  auto id = store_.FindUnixId(kind, name);
  if (id) unix_ids_.emplace(key, *id);
  return id;
}

}  // namespace unisched::daemon
