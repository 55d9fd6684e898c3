#include "daemon/step_book.h"

#include <algorithm>

namespace unisched::daemon {

using executor::JobStateOf;

int StepBook::Next(model::JobId job) {
  std::lock_guard lock(mu_);
  return ++last_step_[job];
}

void StepBook::Started(service::StepView view) {
  std::lock_guard lock(mu_);
  const std::pair key{view.job_id, view.step};
  steps_.insert_or_assign(key, std::move(view));
}

void StepBook::Restore(std::vector<service::StepView> steps) {
  std::lock_guard lock(mu_);
  for (service::StepView& view : steps) {
    const std::pair key{view.job_id, view.step};
    int& last = last_step_[view.job_id];
    last = std::max(last, view.step);
    const bool ended = view.state != model::JobState::kRunning;
    steps_.insert_or_assign(key, std::move(view));
    if (ended) Retire(key);
  }
}

void StepBook::Retire(std::pair<model::JobId, int> key) {
  ended_.push_back(key);
  while (ended_.size() > kEndedKept) {
    steps_.erase(ended_.front());
    ended_.pop_front();
  }
}

std::optional<service::StepView> StepBook::Failed(model::JobId job, int step, const std::string& reason, Timestamp at) {
  std::lock_guard lock(mu_);
  auto it = steps_.find({job, step});
  if (it == steps_.end() || it->second.state != model::JobState::kRunning) return std::nullopt;
  it->second.state = model::JobState::kFailed;
  it->second.reason = reason;
  it->second.ended_at = at;
  service::StepView view = it->second;
  Retire(it->first);
  return view;
}

std::vector<service::StepView> StepBook::EndRunning(model::JobId job, int attempt, const std::string& reason,
                                                    Timestamp at) {
  std::lock_guard lock(mu_);
  std::vector<service::StepView> ended;
  for (auto it = steps_.lower_bound({job, 1}); it != steps_.end() && it->first.first == job; ++it) {
    service::StepView& view = it->second;
    if (view.attempt != attempt || view.state != model::JobState::kRunning) continue;
    view.state = model::JobState::kCancelled;
    view.reason = reason;
    view.ended_at = at;
    ended.push_back(view);
  }
  for (const service::StepView& view : ended) Retire({view.job_id, view.step});
  return ended;
}

std::optional<service::StepView> StepBook::Ended(model::JobId job, int step, const executor::RunResult& result) {
  std::lock_guard lock(mu_);
  auto it = steps_.find({job, step});
  if (it == steps_.end()) return std::nullopt;  // forgotten already
  service::StepView& view = it->second;
  const bool was_running = view.state == model::JobState::kRunning;
  view.state = JobStateOf(result.outcome);
  view.exit_code = result.exit_code;
  view.reason = result.reason;
  view.ended_at = result.ended_at;
  view.tasks.clear();
  if (result.tasks.empty()) {  // a step of one task: its own result
    view.tasks.push_back(
        {0, view.nodes.empty() ? "" : view.nodes.front(), view.state, result.exit_code, result.reason});
  }
  for (const executor::TaskEnd& t : result.tasks) {
    view.tasks.push_back({t.rank, t.node, JobStateOf(t.outcome), t.exit_code, t.reason});
  }
  service::StepView now = view;
  if (was_running) Retire(it->first);  // else retired when it was marked ended
  return now;
}

Result<service::StepView> StepBook::Get(model::JobId job, int step) const {
  std::lock_guard lock(mu_);
  auto it = steps_.find({job, step});
  if (it == steps_.end()) {
    return Error::NotFound("job " + std::to_string(job) + " has no step " + std::to_string(step));
  }
  return it->second;
}

}  // namespace unisched::daemon
