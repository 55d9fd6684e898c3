// Workflows' graph and decisions (model/workflow.h).

#include "unisched/model/workflow.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace unisched::model {

namespace {

enum class Category { kOpen, kDone, kBlocked };

Category CategoryOf(const TaskInstance& instance) {
  switch (instance.state) {
    case InstanceState::kWaiting:
    case InstanceState::kReleased:
      return Category::kOpen;
    case InstanceState::kSucceeded:
      return Category::kDone;
    case InstanceState::kFailed:
      return instance.failure_ignored ? Category::kDone : Category::kBlocked;
    case InstanceState::kSkipped:
    case InstanceState::kCancelled:
      return Category::kBlocked;
  }
  return Category::kOpen;
}

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

Error Invalid(const std::string& field, const std::string& message) {
  return Error::Unprocessable("invalid_value", message, field);
}

std::string InstanceName(const std::string& task, int64_t i, const WorkflowTask* spec) {
  if (spec == nullptr || spec->scatter.empty()) return task;
  return task + "[" + std::to_string(i) + "]";
}

}  // namespace

std::string_view ToString(FailureThen then) {
  switch (then) {
    case FailureThen::kFail:
      return "fail";
    case FailureThen::kSkip:
      return "skip";
    case FailureThen::kContinue:
      return "continue";
  }
  return "fail";
}

std::optional<FailureThen> FailureThenFromString(std::string_view text) {
  for (auto then : {FailureThen::kFail, FailureThen::kSkip, FailureThen::kContinue}) {
    if (ToString(then) == text) return then;
  }
  return std::nullopt;
}

std::string_view ToString(InstanceState state) {
  switch (state) {
    case InstanceState::kWaiting:
      return "WAITING";
    case InstanceState::kReleased:
      return "RELEASED";
    case InstanceState::kSucceeded:
      return "SUCCEEDED";
    case InstanceState::kFailed:
      return "FAILED";
    case InstanceState::kSkipped:
      return "SKIPPED";
    case InstanceState::kCancelled:
      return "CANCELLED";
  }
  return "WAITING";
}

std::optional<InstanceState> InstanceStateFromString(std::string_view text) {
  for (auto state : {InstanceState::kWaiting, InstanceState::kReleased, InstanceState::kSucceeded,
                     InstanceState::kFailed, InstanceState::kSkipped, InstanceState::kCancelled}) {
    if (ToString(state) == text) return state;
  }
  return std::nullopt;
}

std::string_view ToString(WorkflowState state) {
  switch (state) {
    case WorkflowState::kRunning:
      return "RUNNING";
    case WorkflowState::kSucceeded:
      return "SUCCEEDED";
    case WorkflowState::kFailed:
      return "FAILED";
    case WorkflowState::kCancelled:
      return "CANCELLED";
  }
  return "RUNNING";
}

std::optional<WorkflowState> WorkflowStateFromString(std::string_view text) {
  for (auto state :
       {WorkflowState::kRunning, WorkflowState::kSucceeded, WorkflowState::kFailed, WorkflowState::kCancelled}) {
    if (ToString(state) == text) return state;
  }
  return std::nullopt;
}

Status ValidateWorkflowGraph(const WorkflowSpec& spec) {
  if (spec.tasks.empty()) return Invalid("tasks", "a workflow needs at least one task");
  if (spec.tasks.size() > kMaxWorkflowTasks) {
    return Invalid("tasks", "a workflow may have at most " + std::to_string(kMaxWorkflowTasks) +
                                " tasks; scatter one task over a list instead of repeating it");
  }
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < spec.tasks.size(); ++i) {
    const std::string field = "tasks[" + std::to_string(i) + "].name";
    const std::string& name = spec.tasks[i].name;
    if (!ValidName(name)) return Invalid(field, "a task name is 1-64 characters of A-Z a-z 0-9 _ . -");
    if (!index.emplace(name, i).second) return Invalid(field, "two tasks are named '" + name + "'; rename one");
  }
  std::set<std::string> alternatives;
  for (const auto& task : spec.tasks) {
    if (!task.on_failure.alternative.empty()) alternatives.insert(task.on_failure.alternative);
  }
  size_t instances = 0;
  for (size_t i = 0; i < spec.tasks.size(); ++i) {
    const WorkflowTask& task = spec.tasks[i];
    const std::string at = "tasks[" + std::to_string(i) + "]";
    std::set<std::string> seen;
    for (size_t j = 0; j < task.after.size(); ++j) {
      const std::string field = at + ".after[" + std::to_string(j) + "]";
      const std::string& up = task.after[j];
      if (up == task.name) return Invalid(field, "task '" + task.name + "' cannot run after itself");
      if (!index.count(up)) return Invalid(field, "no task is named '" + up + "'");
      if (alternatives.count(up)) {
        return Invalid(field, "'" + up + "' is an alternative: depend on the task it stands in for");
      }
      if (!seen.insert(up).second) return Invalid(field, "'" + up + "' is named twice");
    }
    const OnFailure& f = task.on_failure;
    if (f.retries < 0 || f.retries > 100) return Invalid(at + ".on_failure.retries", "must be 0-100");
    for (auto [factor, name] :
         {std::pair{f.change.memory_factor, "memory_factor"}, std::pair{f.change.walltime_factor, "walltime_factor"}}) {
      if (!std::isfinite(factor) || factor < 0.1 || factor > 64) {
        return Invalid(at + ".on_failure.change." + name, "must be a number from 0.1 to 64");
      }
    }
    for (size_t k = 0; k < task.scatter.size(); ++k) {
      const std::string& item = task.scatter[k];
      if (item.size() > 4096 || item.find('\0') != std::string::npos) {
        return Invalid(at + ".scatter.over[" + std::to_string(k) + "]",
                       "an item is at most 4096 bytes, without NUL: name a file holding a larger one");
      }
    }
    if (!f.alternative.empty()) {
      const std::string field = at + ".on_failure.alternative";
      auto alt = index.find(f.alternative);
      if (alt == index.end()) return Invalid(field, "no task is named '" + f.alternative + "'");
      if (f.alternative == task.name) return Invalid(field, "a task cannot be its own alternative");
      if (alternatives.count(task.name)) {
        return Invalid(field, "'" + task.name + "' is an alternative itself; alternatives do not chain");
      }
      const WorkflowTask& other = spec.tasks[alt->second];
      if (!other.after.empty() || !other.scatter.empty()) {
        return Invalid(field, "alternative '" + f.alternative +
                                  "' must have no `after` and no `scatter`: it takes the place (and the "
                                  "item) of the instance that failed");
      }
    }
    if (alternatives.count(task.name)) continue;  // an alternative has no instances of its own
    instances += task.Instances();
  }
  if (instances > kMaxWorkflowInstances) {
    return Invalid("tasks", "a workflow may have at most " + std::to_string(kMaxWorkflowInstances) +
                                " task instances (" + std::to_string(instances) + " asked); split it");
  }
  // Cycles: Kahn's walk must reach every task.
  std::map<std::string, int> indegree;
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& task : spec.tasks) {
    indegree[task.name] += 0;
    for (const auto& up : task.after) {
      ++indegree[task.name];
      out[up].push_back(task.name);
    }
  }
  std::vector<std::string> ready;
  for (const auto& [name, degree] : indegree) {
    if (degree == 0) ready.push_back(name);
  }
  size_t reached = 0;
  while (!ready.empty()) {
    const std::string name = ready.back();
    ready.pop_back();
    ++reached;
    for (const auto& next : out[name]) {
      if (--indegree[next] == 0) ready.push_back(next);
    }
  }
  if (reached != spec.tasks.size()) {
    for (size_t i = 0; i < spec.tasks.size(); ++i) {
      if (indegree[spec.tasks[i].name] > 0 && !spec.tasks[i].after.empty()) {
        return Invalid("tasks[" + std::to_string(i) + "].after",
                       "task '" + spec.tasks[i].name + "' is on a cycle: no task may (indirectly) run after itself");
      }
    }
  }
  return Status::Ok();
}

WorkflowRun::WorkflowRun(WorkflowSpec& spec, WorkflowStatus& status) : spec_(spec), status_(status) {
  Index();
}

void WorkflowRun::Index() {
  task_index_.clear();
  dependants_.clear();
  tallies_.clear();
  for (size_t i = 0; i < spec_.tasks.size(); ++i) {
    task_index_[spec_.tasks[i].name] = i;
    for (const auto& up : spec_.tasks[i].after) dependants_[up].push_back(spec_.tasks[i].name);
  }
  for (const auto& [task, instances] : status_.instances) {
    Tally& tally = tallies_[task];
    for (const auto& instance : instances) {
      switch (CategoryOf(instance)) {
        case Category::kOpen:
          ++tally.open;
          break;
        case Category::kDone:
          ++tally.done;
          break;
        case Category::kBlocked:
          ++tally.blocked;
          break;
      }
    }
  }
}

const WorkflowTask* WorkflowRun::Task(const std::string& name) const {
  auto it = task_index_.find(name);
  return it == task_index_.end() ? nullptr : &spec_.tasks[it->second];
}

const WorkflowTask* FindTask(const WorkflowSpec& spec, const std::string& name) {
  for (const auto& task : spec.tasks) {
    if (task.name == name) return &task;
  }
  return nullptr;
}

std::map<InstanceState, int64_t> CountInstances(const WorkflowStatus& status) {
  std::map<InstanceState, int64_t> counts;
  for (const auto& [task, instances] : status.instances) {
    for (const auto& instance : instances) ++counts[instance.state];
  }
  return counts;
}

void WorkflowRun::Event(Timestamp now, std::string kind, const std::string& task, int64_t instance,
                        std::string message) {
  status_.events.push_back({now, std::move(kind), task, instance, std::move(message)});
  if (status_.events.size() > kMaxWorkflowEvents) {
    status_.events.erase(status_.events.begin(),
                         status_.events.begin() + static_cast<long>(status_.events.size() - kMaxWorkflowEvents));
  }
}

void WorkflowRun::SetState(const std::string& task, int64_t i, InstanceState to) {
  TaskInstance& instance = status_.instances[task][static_cast<size_t>(i)];
  Tally& tally = tallies_[task];
  auto count = [&](int sign) {
    switch (CategoryOf(instance)) {
      case Category::kOpen:
        tally.open += sign;
        break;
      case Category::kDone:
        tally.done += sign;
        break;
      case Category::kBlocked:
        tally.blocked += sign;
        break;
    }
  };
  count(-1);
  instance.state = to;
  if (to != InstanceState::kFailed) instance.failure_ignored = false;
  count(+1);
}

bool WorkflowRun::Corresponding(const WorkflowTask& task, const WorkflowTask& upstream) const {
  return !task.scatter.empty() && !upstream.scatter.empty() && task.scatter.size() == upstream.scatter.size();
}

WorkflowRun::Readiness WorkflowRun::ReadinessOf(const WorkflowTask& task, int64_t i, std::string* blocker) const {
  Readiness readiness = Readiness::kReady;
  for (const auto& up_name : task.after) {
    const WorkflowTask* up = Task(up_name);
    if (up == nullptr) continue;
    const auto& ups = status_.instances.at(up_name);
    if (Corresponding(task, *up) || up->scatter.empty()) {
      const int64_t j = up->scatter.empty() ? 0 : i;
      switch (CategoryOf(ups[static_cast<size_t>(j)])) {
        case Category::kBlocked:
          *blocker = InstanceName(up_name, j, up);
          return Readiness::kBlocked;
        case Category::kOpen:
          readiness = Readiness::kWait;
          break;
        case Category::kDone:
          break;
      }
      continue;
    }
    const Tally& tally = tallies_.at(up_name);
    if (tally.blocked > 0) {
      *blocker = up_name + " (" + std::to_string(tally.blocked) + " of its instances)";
      return Readiness::kBlocked;
    }
    if (tally.open > 0) readiness = Readiness::kWait;
  }
  return readiness;
}

void WorkflowRun::Dependants(const std::string& task, int64_t i, bool gather_changed,
                             std::vector<std::pair<std::string, int64_t>>& out) const {
  auto it = dependants_.find(task);
  if (it == dependants_.end()) return;
  const WorkflowTask* up = Task(task);
  for (const auto& name : it->second) {
    const WorkflowTask* down = Task(name);
    if (Corresponding(*down, *up)) {
      out.emplace_back(name, i);
    } else if (gather_changed || up->scatter.empty()) {
      for (size_t j = 0; j < down->Instances(); ++j) out.emplace_back(name, static_cast<int64_t>(j));
    }
  }
}

void WorkflowRun::ReleaseInstance(const WorkflowTask& task, int64_t i, WorkflowActions& actions, Timestamp now) {
  TaskInstance& instance = status_.instances[task.name][static_cast<size_t>(i)];
  SetState(task.name, i, InstanceState::kReleased);
  ++instance.tries;
  const int retry = instance.tool_tries++;
  instance.reason.clear();
  actions.releases.push_back({task.name, i, instance.tool, instance.tries, retry});
  std::string message = "released" + (instance.tool.empty() ? "" : " with alternative " + instance.tool);
  if (retry > 0) message += ", retry " + std::to_string(retry);
  Event(now, retry > 0 ? "workflow_retry" : "workflow_released", task.name, i, message);
}

void WorkflowRun::Settle(std::vector<std::pair<std::string, int64_t>> check, WorkflowActions& actions, Timestamp now) {
  // In order: released as written, dependants after what they depend on.
  for (size_t next = 0; next < check.size(); ++next) {
    const auto [name, i] = check[next];
    if (status_.state != WorkflowState::kRunning) return;
    const WorkflowTask* task = Task(name);
    auto found = status_.instances.find(name);
    if (task == nullptr || found == status_.instances.end()) continue;
    if (found->second[static_cast<size_t>(i)].state != InstanceState::kWaiting) continue;
    std::string blocker;
    switch (ReadinessOf(*task, i, &blocker)) {
      case Readiness::kWait:
        break;
      case Readiness::kReady:
        ReleaseInstance(*task, i, actions, now);
        break;
      case Readiness::kBlocked: {
        const int64_t blocked_before = tallies_[name].blocked;
        SetState(name, i, InstanceState::kSkipped);
        found->second[static_cast<size_t>(i)].reason = "skipped: " + blocker + " did not succeed";
        Event(now, "workflow_skipped", name, i, found->second[static_cast<size_t>(i)].reason);
        Dependants(name, i, blocked_before == 0, check);
        break;
      }
    }
  }
}

void WorkflowRun::FinishIfDone(Timestamp now) {
  if (status_.state != WorkflowState::kRunning) return;
  int64_t blocked = 0;
  for (const auto& [task, tally] : tallies_) {
    if (tally.open > 0) return;
    blocked += tally.blocked;
  }
  status_.state = blocked > 0 ? WorkflowState::kFailed : WorkflowState::kSucceeded;
  status_.reason = blocked > 0 ? std::to_string(blocked) + " task instances failed or were skipped" : "";
  Event(now, blocked > 0 ? "workflow_failed" : "workflow_succeeded", "", 0,
        blocked > 0 ? status_.reason : "every task instance succeeded");
}

WorkflowActions WorkflowRun::Start(Timestamp now) {
  std::set<std::string> alternatives;
  for (const auto& task : spec_.tasks) {
    if (!task.on_failure.alternative.empty()) alternatives.insert(task.on_failure.alternative);
  }
  status_ = {};
  for (const auto& task : spec_.tasks) {
    if (alternatives.count(task.name)) continue;
    status_.instances[task.name].resize(task.Instances());
  }
  Index();
  Event(now, "workflow_submitted", "", 0, std::to_string(spec_.tasks.size()) + " tasks");
  WorkflowActions actions;
  std::vector<std::pair<std::string, int64_t>> check;
  for (const auto& task : spec_.tasks) {
    if (!task.after.empty() || alternatives.count(task.name)) continue;
    for (size_t i = 0; i < task.Instances(); ++i) check.emplace_back(task.name, static_cast<int64_t>(i));
  }
  Settle(std::move(check), actions, now);
  FinishIfDone(now);
  return actions;
}

WorkflowActions WorkflowRun::JobEnded(const std::string& task_name, int64_t i, WorkflowJobId job, bool succeeded,
                                      bool cancelled, const std::string& reason, Timestamp now) {
  WorkflowActions actions;
  auto found = status_.instances.find(task_name);
  const WorkflowTask* task = Task(task_name);
  if (found == status_.instances.end() || task == nullptr || i < 0 || static_cast<size_t>(i) >= found->second.size()) {
    return actions;
  }
  TaskInstance& instance = found->second[static_cast<size_t>(i)];
  if (instance.state != InstanceState::kReleased || instance.jobs.empty() || instance.jobs.back() != job) {
    return actions;
  }
  std::vector<std::pair<std::string, int64_t>> check;
  if (succeeded) {
    const Tally before = tallies_[task_name];
    SetState(task_name, i, InstanceState::kSucceeded);
    instance.reason.clear();
    Event(now, "workflow_task_succeeded", task_name, i, "job " + std::to_string(job) + " completed");
    // A gather is ready only when its last open instance is done.
    Dependants(task_name, i, before.open == 1 && before.blocked == 0, check);
  } else if (cancelled || status_.state != WorkflowState::kRunning) {
    const int64_t blocked_before = tallies_[task_name].blocked;
    SetState(task_name, i, InstanceState::kCancelled);
    instance.reason = reason.empty() ? "cancelled" : reason;
    Event(now, "workflow_task_cancelled", task_name, i, "job " + std::to_string(job) + ": " + instance.reason);
    if (status_.state == WorkflowState::kRunning) {
      // Someone cancelled the task's job: its dependants can never run.
      Dependants(task_name, i, blocked_before == 0, check);
    }
  } else {
    const WorkflowTask* tool = instance.tool.empty() ? task : Task(instance.tool);
    if (tool == nullptr) tool = task;
    const std::string failed = "job " + std::to_string(job) + " failed" + (reason.empty() ? "" : ": " + reason);
    if (instance.tool_tries <= tool->on_failure.retries) {
      SetState(task_name, i, InstanceState::kWaiting);
      Event(now, "workflow_task_failed", task_name, i, failed + "; retrying");
      ReleaseInstance(*task, i, actions, now);
      return actions;
    }
    if (instance.tool.empty() && !task->on_failure.alternative.empty()) {
      instance.tool = task->on_failure.alternative;
      instance.tool_tries = 0;
      SetState(task_name, i, InstanceState::kWaiting);
      Event(now, "workflow_alternative", task_name, i, failed + "; switching to " + instance.tool);
      ReleaseInstance(*task, i, actions, now);
      return actions;
    }
    const int64_t blocked_before = tallies_[task_name].blocked;
    const FailureThen then = task->on_failure.then;
    instance.failure_ignored = then == FailureThen::kContinue;  // before SetState: it decides the tally
    SetState(task_name, i, InstanceState::kFailed);
    instance.reason = failed;
    Event(now, "workflow_task_failed", task_name, i, failed + "; then " + std::string(ToString(then)));
    switch (then) {
      case FailureThen::kFail:
        status_.state = WorkflowState::kFailed;
        status_.reason = "task " + InstanceName(task_name, i, task) + " failed: " + failed;
        Event(now, "workflow_failed", task_name, i, status_.reason);
        for (const auto& [name, instances] : status_.instances) {
          for (const auto& other : instances) {
            if (other.state == InstanceState::kReleased && !other.jobs.empty())
              actions.cancel.push_back(other.jobs.back());
          }
        }
        return actions;
      case FailureThen::kSkip:
        Dependants(task_name, i, blocked_before == 0, check);
        break;
      case FailureThen::kContinue: {
        const Tally now_tally = tallies_[task_name];
        Dependants(task_name, i, now_tally.open == 0 && now_tally.blocked == 0, check);
        break;
      }
    }
  }
  Settle(std::move(check), actions, now);
  FinishIfDone(now);
  return actions;
}

WorkflowActions WorkflowRun::Reconcile(Timestamp now) {
  WorkflowActions actions;
  if (status_.state != WorkflowState::kRunning) return actions;
  std::vector<std::pair<std::string, int64_t>> check;
  for (const auto& [name, instances] : status_.instances) {
    for (size_t i = 0; i < instances.size(); ++i) {
      if (instances[i].state == InstanceState::kWaiting) check.emplace_back(name, static_cast<int64_t>(i));
    }
  }
  Settle(std::move(check), actions, now);
  FinishIfDone(now);
  return actions;
}

WorkflowActions WorkflowRun::Cancel(const std::string& actor, Timestamp now) {
  WorkflowActions actions;
  if (IsEnded(status_.state) && status_.state != WorkflowState::kFailed) return actions;
  status_.state = WorkflowState::kCancelled;
  status_.reason = "cancelled by " + actor;
  for (auto& [name, instances] : status_.instances) {
    for (size_t i = 0; i < instances.size(); ++i) {
      if (instances[i].state == InstanceState::kReleased && !instances[i].jobs.empty()) {
        actions.cancel.push_back(instances[i].jobs.back());
      } else if (instances[i].state == InstanceState::kWaiting) {
        SetState(name, static_cast<int64_t>(i), InstanceState::kCancelled);
        instances[i].reason = status_.reason;
      }
    }
  }
  Event(now, "workflow_cancelled", "", 0, status_.reason);
  return actions;
}

WorkflowActions WorkflowRun::Resume(const std::string& actor, Timestamp now) {
  WorkflowActions actions;
  if (status_.state == WorkflowState::kRunning || status_.state == WorkflowState::kSucceeded) return actions;
  std::vector<std::pair<std::string, int64_t>> check;
  int64_t again = 0;
  for (auto& [name, instances] : status_.instances) {
    for (size_t i = 0; i < instances.size(); ++i) {
      TaskInstance& instance = instances[i];
      const bool rerun = instance.state == InstanceState::kFailed || instance.state == InstanceState::kSkipped ||
                         instance.state == InstanceState::kCancelled;
      if (rerun) {
        SetState(name, static_cast<int64_t>(i), InstanceState::kWaiting);
        instance.tool.clear();
        instance.tool_tries = 0;
        instance.reason.clear();
        ++again;
      }
      if (instance.state == InstanceState::kWaiting) check.emplace_back(name, static_cast<int64_t>(i));
    }
  }
  status_.state = WorkflowState::kRunning;
  status_.reason.clear();
  Event(now, "workflow_resumed", "", 0,
        "resumed by " + actor + ": " + std::to_string(again) + " task instances wait again");
  Settle(std::move(check), actions, now);
  FinishIfDone(now);
  return actions;
}

WorkflowActions WorkflowRun::AddTasks(std::vector<WorkflowTask> tasks, Timestamp now) {
  WorkflowActions actions;
  if (status_.state == WorkflowState::kCancelled) return actions;
  std::set<std::string> alternatives;
  for (const auto& task : spec_.tasks) {
    if (!task.on_failure.alternative.empty()) alternatives.insert(task.on_failure.alternative);
  }
  for (const auto& task : tasks) {
    if (!task.on_failure.alternative.empty()) alternatives.insert(task.on_failure.alternative);
  }
  std::vector<std::pair<std::string, int64_t>> check;
  for (auto& task : tasks) {
    if (!alternatives.count(task.name)) {
      status_.instances[task.name].resize(task.Instances());
      for (size_t i = 0; i < task.Instances(); ++i) check.emplace_back(task.name, static_cast<int64_t>(i));
    }
    spec_.tasks.push_back(std::move(task));
  }
  Index();
  if (status_.state == WorkflowState::kSucceeded) status_.state = WorkflowState::kRunning;
  Event(now, "workflow_tasks_added", "", 0, std::to_string(tasks.size()) + " tasks added");
  Settle(std::move(check), actions, now);
  FinishIfDone(now);
  return actions;
}

}  // namespace unisched::model
