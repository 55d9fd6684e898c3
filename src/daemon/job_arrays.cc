// The array part of JobLifecycle (job_lifecycle.h, docs/arrays.md): a task
// split off its parent when the plan starts it, its end counted in the
// parent, and the parent's own end.

#include <spdlog/spdlog.h>

#include "daemon/job_lifecycle.h"

namespace unisched::daemon {

using model::Job;
using model::JobState;

namespace {

void StoreJob(Batch& batch, const Job& job) {
  batch.writes.push_back([copy = job](store::Transaction& t) -> Status { return t.UpdateJob(copy); });
}

}  // namespace

Job* JobLifecycle::ArrayParentOf(model::JobId task_id) {
  auto entry = array_parents_.upper_bound(task_id);
  if (entry == array_parents_.begin()) return nullptr;
  --entry;
  auto parent_it = active_.find(entry->second);
  if (parent_it == active_.end() || !parent_it->second.array) return nullptr;
  const model::JobArray& array = *parent_it->second.array;
  if (task_id < array.first_task_id || task_id - array.first_task_id >= array.indices.Count()) return nullptr;
  return &parent_it->second;
}

bool JobLifecycle::SplitArrayTask(Batch& batch, model::JobId task_id, Timestamp now) {
  Job* found = ArrayParentOf(task_id);
  if (!found || found->state != JobState::kPending) return false;
  Job& parent = *found;
  model::JobArray& array = *parent.array;
  const int64_t index = array.indices.At(task_id - array.first_task_id);
  if (!array.waiting.Remove(index)) return false;
  Job task = model::ArrayTaskOf(parent, index);
  ++job_counts_[{task.state, task.queue, task.pool}];
  batch.writes.push_back([copy = task, event = store::JobEvent{now, "submitted",
                                                               "task " + model::ArrayTaskName(parent.id, index) +
                                                                   " of array " + std::to_string(parent.id) +
                                                                   " starts"}](store::Transaction& t) -> Status {
    auto id = t.InsertJob(copy, "");
    if (!id.ok()) return id.error();
    return t.AppendEvent(copy.id, event);
  });
  active_.emplace(task_id, std::move(task));
  if (!parent.started_at) parent.started_at = now;
  if (array.waiting.empty()) {
    Transition(batch, parent, JobState::kRunning, "", "started", "every task of the array has started");
  } else {
    StoreJob(batch, parent);
  }
  return true;
}

bool JobLifecycle::ControlWaitingArrayTask(Batch& batch, model::JobId id, JobAction action, const std::string& actor,
                                           const std::function<void(Result<Job>)>& done) {
  Job* found = ArrayParentOf(id);
  if (!found) return false;
  Job& parent = *found;
  model::JobArray& array = *parent.array;
  const int64_t index = array.indices.At(id - array.first_task_id);
  if (!array.waiting.Contains(index)) return false;
  const std::string name = model::ArrayTaskName(parent.id, index);
  if (action != JobAction::kCancel) {
    done(Error::Conflict("invalid_state", "task " + name + " has not started: hold or release its array " +
                                              std::to_string(parent.id) +
                                              ", or cancel the task (a waiting task has "
                                              "nothing to requeue)"));
    return true;
  }
  auto task = CancelWaitingArrayTask(batch, id, "cancelled by " + actor + " before it started");
  batch.after_commit.push_back([done, task = *task] { done(task); });
  return true;
}

std::optional<Job> JobLifecycle::CancelWaitingArrayTask(Batch& batch, model::JobId id, const std::string& reason) {
  Job* found = ArrayParentOf(id);
  if (!found) return std::nullopt;
  Job& parent = *found;
  model::JobArray& array = *parent.array;
  const int64_t index = array.indices.At(id - array.first_task_id);
  if (!array.waiting.Remove(index)) return std::nullopt;
  ++array.tasks_failed;
  Job task = model::ArrayTaskOf(parent, index);
  task.state = JobState::kCancelled;
  task.state_reason = reason;
  task.ended_at = clock_.Now();
  dependencies_.Ended(id, JobState::kCancelled);
  batch.writes.push_back([parent_id = parent.id,
                          event = store::JobEvent{clock_.Now(), "task_cancelled",
                                                  "task " + model::ArrayTaskName(parent.id, index) + ": " + reason}](
                             store::Transaction& t) -> Status { return t.AppendEvent(parent_id, event); });
  spdlog::info("array {}: task {} cancelled before it started: {}", parent.id, index, reason);
  EndArrayIfDone(batch, parent);
  wants_cycle_ = true;
  return task;
}

void JobLifecycle::ArrayTaskEnded(Batch& batch, const Job& task) {
  auto parent_it = active_.find(task.array_task->array_job_id);
  if (parent_it == active_.end() || !parent_it->second.array) return;
  Job& parent = parent_it->second;
  model::JobArray& array = *parent.array;
  ++(task.state == JobState::kCompleted ? array.tasks_completed : array.tasks_failed);
  Changed(parent.id);  // a task under max_running may start now
  EndArrayIfDone(batch, parent);
}

void JobLifecycle::EndArrayIfDone(Batch& batch, Job& parent) {
  const model::JobArray& array = *parent.array;
  if (!array.waiting.empty() || array.ActiveTasks() > 0) {
    StoreJob(batch, parent);
    return;
  }
  // Slurm's array state: COMPLETED when every task did, else FAILED;
  // CANCELLED when it was cancelled.
  const JobState to = parent.cancel_requested  ? JobState::kCancelled
                      : array.tasks_failed > 0 ? JobState::kFailed
                                               : JobState::kCompleted;
  parent.ended_at = clock_.Now();
  const std::string summary =
      std::to_string(array.tasks_completed) + " of " + std::to_string(array.indices.Count()) + " tasks completed";
  Transition(batch, parent, to, to == JobState::kCompleted ? "" : summary, "array_ended", summary);
  last_ended_array_ = parent;
  active_.erase(parent.id);
}

Job JobLifecycle::CancelArray(Batch& batch, model::JobId parent_id, const std::string& actor) {
  auto parent_it = active_.find(parent_id);
  if (parent_it == active_.end() || !parent_it->second.array) return {};
  Job last = parent_it->second;
  {
    Job& parent = parent_it->second;
    model::JobArray& array = *parent.array;
    parent.cancel_requested = true;
    parent.stop_requested_at = clock_.Now();
    // Tasks that never started end with the array, counted as not completed.
    array.tasks_failed += array.waiting.Count();
    array.waiting = {};
    batch.writes.push_back(
        [copy = parent, event = store::JobEvent{clock_.Now(), "cancel_requested", "cancel requested by " + actor}](
            store::Transaction& t) -> Status {
          if (auto s = t.UpdateJob(copy); !s.ok()) return s;
          return t.AppendEvent(copy.id, event);
        });
  }
  std::vector<model::JobId> tasks;
  for (const auto& [id, job] : active_) {
    if (job.array_task && job.array_task->array_job_id == parent_id) tasks.push_back(id);
  }
  const auto noop = [](Result<Job>) {};
  for (model::JobId id : tasks) ApplyControl(batch, id, JobAction::kCancel, actor, noop);
  // No task was active: the array ends now (else with its last task).
  if (auto still = active_.find(parent_id); still != active_.end()) {
    last = still->second;
    EndArrayIfDone(batch, still->second);  // may end it (and erase it)
  }
  if (last_ended_array_ && last_ended_array_->id == parent_id) last = *last_ended_array_;
  wants_cycle_ = true;
  return last;
}

}  // namespace unisched::daemon
