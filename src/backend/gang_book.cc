#include <algorithm>

#include "unisched/backend/gang.h"

namespace unisched::backend {

executor::RunResult GangResult(model::JobId job, int attempt, const std::vector<executor::RunResult>& tasks,
                               const std::vector<std::string>& nodes, std::optional<int> first_failed_rank) {
  using executor::RunOutcome;
  executor::RunResult r;
  r.job_id = job;
  r.attempt = attempt;
  r.outcome = RunOutcome::kCompleted;
  const executor::RunResult* failed = nullptr;
  if (first_failed_rank && static_cast<size_t>(*first_failed_rank) < tasks.size()) {
    failed = &tasks[static_cast<size_t>(*first_failed_rank)];
  }
  for (const executor::RunResult& t : tasks) {
    if (!failed && t.outcome != RunOutcome::kCompleted) failed = &t;
  }
  bool others_stopped = false;
  for (size_t rank = 0; rank < tasks.size(); ++rank) {
    const executor::RunResult& t = tasks[rank];
    const std::string node = rank < nodes.size() ? nodes[rank] : std::string();
    r.tasks.push_back({static_cast<int>(rank), node, t.outcome, t.exit_code, t.reason});
    // The job's exit code is its tasks' highest, as Slurm's is.
    if (t.exit_code && (!r.exit_code || *t.exit_code > *r.exit_code)) r.exit_code = t.exit_code;
    if (t.started_at && (!r.started_at || *t.started_at < *r.started_at)) r.started_at = t.started_at;
    if (t.ended_at && (!r.ended_at || *t.ended_at > *r.ended_at)) r.ended_at = t.ended_at;
    // The gang's run lasted as long as its longest task; CPU adds up over
    // them; the largest process is the largest of any task's.
    r.usage.wall_seconds = std::max(r.usage.wall_seconds, t.usage.wall_seconds);
    r.usage.user_cpu_seconds += t.usage.user_cpu_seconds;
    r.usage.system_cpu_seconds += t.usage.system_cpu_seconds;
    r.usage.max_rss_kb = std::max(r.usage.max_rss_kb, t.usage.max_rss_kb);
    if (failed && &t != failed && t.outcome == RunOutcome::kCancelled && failed->outcome != RunOutcome::kCancelled) {
      others_stopped = true;
    }
  }
  r.reported_by = tasks.empty() ? std::string() : tasks.front().reported_by;
  if (failed) {
    const size_t rank = static_cast<size_t>(failed - tasks.data());
    r.outcome = failed->outcome;
    r.transient = failed->outcome == RunOutcome::kLaunchFailed && failed->transient;
    std::string why = failed->reason.empty() ? std::string(executor::ToString(failed->outcome)) : failed->reason;
    r.reason = "rank " + std::to_string(rank) + " on node " + (rank < nodes.size() ? nodes[rank] : "?") + ": " + why;
    if (others_stopped) r.reason += "; the gang's other tasks were stopped";
  }
  return r;
}

void GangBook::ExpectStep(model::JobId job, int attempt, int step, std::vector<std::string> nodes) {
  std::lock_guard lock(mu_);
  gangs_[{job, attempt, step}].nodes = std::move(nodes);
}

void GangBook::OnTaskResult(executor::RunResult result) {
  const model::JobId job = result.job_id;
  const int attempt = result.attempt;
  const int step = result.task / step_stride_;
  const int rank = result.task % step_stride_;
  std::optional<executor::RunResult> whole;
  std::optional<std::vector<int>> stop;  // tasks to stop (empty: all the attempt's)
  {
    std::lock_guard lock(mu_);
    auto it = gangs_.find({job, attempt, step});
    if (it == gangs_.end()) {
      // A gang's task after its gang ended (a repeat): its result was made
      // already. An attempt that is not a gang is its task 0.
      if (result.task != 0) return;
      whole = std::move(result);
    } else {
      Gang& gang = it->second;
      if (rank < 0 || static_cast<size_t>(rank) >= gang.nodes.size() || gang.ended.count(rank) != 0) return;
      if (result.outcome != executor::RunOutcome::kCompleted && !gang.first_failed) {
        gang.first_failed = rank;
        if (gang.ended.size() + 1 < gang.nodes.size()) {
          // All or nothing: the attempt's gang ends on every node (its
          // steps with it); a step's failure stops that step's tasks.
          stop.emplace();
          if (step != 0) {
            for (size_t r = 0; r < gang.nodes.size(); ++r) stop->push_back(step * step_stride_ + static_cast<int>(r));
          }
        }
      }
      gang.ended.emplace(rank, std::move(result));
      if (gang.ended.size() == gang.nodes.size()) {
        std::vector<executor::RunResult> tasks;
        for (auto& [r, t] : gang.ended) tasks.push_back(std::move(t));
        whole = GangResult(job, attempt, tasks, gang.nodes, gang.first_failed);
        gangs_.erase(it);
      }
    }
    // The attempt itself ended: steps still running end with it.
    if (whole && step == 0 && !stop) {
      auto other = gangs_.lower_bound({job, attempt, 1});
      if (other != gangs_.end() && std::get<0>(other->first) == job && std::get<1>(other->first) == attempt) {
        stop.emplace();
      }
    }
  }
  if (stop && cancel_) cancel_(job, attempt, *stop);
  if (!whole) return;
  if (step == 0) {
    sink_(std::move(*whole));
  } else if (step_sink_) {
    step_sink_(step, std::move(*whole));
  }
}

void GangBook::Forget(model::JobId job, int attempt) {
  std::lock_guard lock(mu_);
  for (auto it = gangs_.lower_bound({job, attempt > 0 ? attempt : 0, 0});
       it != gangs_.end() && std::get<0>(it->first) == job && (attempt <= 0 || std::get<1>(it->first) == attempt);) {
    it = gangs_.erase(it);
  }
}

size_t GangBook::Waiting() const {
  std::lock_guard lock(mu_);
  size_t waiting = 0;
  for (const auto& [key, gang] : gangs_) waiting += gang.nodes.size() - gang.ended.size();
  return waiting;
}

}  // namespace unisched::backend
