#include "daemon/step_book.h"

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

void StepBook::Ended(model::JobId job, int step, const executor::RunResult& result) {
  std::lock_guard lock(mu_);
  auto it = steps_.find({job, step});
  if (it == steps_.end()) return;  // forgotten already
  service::StepView& view = it->second;
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
  ended_.emplace_back(job, step);
  while (ended_.size() > kEndedKept) {
    steps_.erase(ended_.front());
    ended_.pop_front();
  }
}

Result<service::StepView> StepBook::Get(model::JobId job, int step) const {
  std::lock_guard lock(mu_);
  auto it = steps_.find({job, step});
  if (it == steps_.end()) {
    return Error::NotFound("job " + std::to_string(job) + " has no step " + std::to_string(step) +
                           " (steps are kept in memory while they run and a while after: " +
                           std::to_string(kEndedKept) + " ended ones in all)");
  }
  return it->second;
}

}  // namespace unisched::daemon
