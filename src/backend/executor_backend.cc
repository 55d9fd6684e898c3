#include <fstream>
#include <sstream>

#include "unisched/backend/pool_backend.h"

namespace unisched::backend {

namespace {

std::vector<std::string> NodesByRank(const std::vector<executor::LaunchSpec>& gang) {
  std::vector<std::string> nodes;
  for (const auto& task : gang) nodes.push_back(task.node);
  return nodes;
}

}  // namespace

// A gang's tasks start one after another on their nodes; should one fail to
// launch, the tasks launched before it are stopped (its failure, reported
// as that task's result, makes the gang book cancel the attempt) and those
// after it are never started: the attempt ends as a launch failure naming
// that rank and node, on every node.
Status ExecutorBackend::Launch(const AttemptLaunch& launch) {
  if (launch.gang.empty()) return executor_.Launch(launch.spec);
  gangs_.Expect(launch.spec.job_id, launch.spec.attempt, NodesByRank(launch.gang));
  return LaunchTasks(launch.gang, /*report_first=*/false);
}

// Each task in turn; from the first that cannot start, that one and the
// rest end as launch failures through the gang book (which stops those
// started). A gang's rank 0 failing started nothing: unless `report_first`,
// its error is returned for the controller to make the failure.
Status ExecutorBackend::LaunchTasks(const std::vector<executor::LaunchSpec>& tasks, bool report_first) {
  for (size_t rank = 0; rank < tasks.size(); ++rank) {
    Status s = executor_.Launch(tasks[rank]);
    if (s.ok()) continue;
    const model::JobId job = tasks[rank].job_id;
    const int attempt = tasks[rank].attempt;
    if (rank == 0 && !report_first) {
      gangs_.Forget(job, attempt);
      return s;
    }
    for (size_t unstarted = rank; unstarted < tasks.size(); ++unstarted) {
      executor::RunResult failed = executor::LaunchFailure(job, attempt, s.error());
      failed.task = tasks[unstarted].task;
      if (unstarted != rank) {
        failed.reason = "not started: rank " + std::to_string(rank) + " could not be launched";
        failed.transient = false;
      }
      gangs_.OnTaskResult(std::move(failed));
    }
    break;
  }
  return Status::Ok();
}

// As a gang's launch: should a task fail to start, the step's tasks
// started before it are stopped and the rest never start.
Status ExecutorBackend::LaunchStep(model::JobId job, int attempt, int step,
                                   const std::vector<executor::LaunchSpec>& tasks) {
  gangs_.ExpectStep(job, attempt, step, NodesByRank(tasks));
  return LaunchTasks(tasks, /*report_first=*/true);
}

void ExecutorBackend::Cancel(model::JobId job, int attempt, bool preempt) {
  executor_.Cancel(job, attempt, preempt);
}

void ExecutorBackend::Recover(const AttemptLaunch& launch) {
  if (launch.gang.empty()) {
    executor_.Recover(launch.spec);
    return;
  }
  gangs_.Expect(launch.spec.job_id, launch.spec.attempt, NodesByRank(launch.gang));
  for (const auto& task : launch.gang) executor_.Recover(task);
}

std::string ExecutorBackend::ReadLog(model::JobId job, int attempt, int task, std::string_view stream,
                                     LogRange range) const {
  const std::string path = executor_.LogPath(job, attempt, task, stream);
  if (path.empty()) return {};
  std::ifstream in(path, std::ios::binary);
  if (!in || !in.seekg(static_cast<std::streamoff>(range.offset))) return {};
  if (range.max_bytes == SIZE_MAX) {
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  std::string text(range.max_bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(range.max_bytes));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

void ExecutorBackend::Release(model::JobId job, int attempt) {
  executor_.Release(job, attempt);
}

void ExecutorBackend::ReleaseAllExcept(const std::set<std::pair<model::JobId, int>>& running) {
  executor_.ReleaseAllExcept(running);
}

void ExecutorBackend::Forget(model::JobId job, int attempt) {
  gangs_.Forget(job, attempt);
  executor_.Forget(job, attempt);
}

void ExecutorBackend::Shutdown() {
  // The executor is not this backend's: whoever made it stops it (the
  // daemon stops its local executor and agent hub once, after the backends).
}

}  // namespace unisched::backend
