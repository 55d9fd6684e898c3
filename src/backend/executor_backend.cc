#include <fstream>
#include <sstream>

#include "unisched/backend/pool_backend.h"

namespace unisched::backend {

Status ExecutorBackend::Launch(const AttemptLaunch& launch) {
  return executor_.Launch(launch.spec);
}

void ExecutorBackend::Cancel(model::JobId job, int attempt, bool preempt) {
  executor_.Cancel(job, attempt, preempt);
}

void ExecutorBackend::Recover(const AttemptLaunch& launch) {
  executor_.Recover(launch.spec);
}

std::string ExecutorBackend::ReadLog(model::JobId job, int attempt, std::string_view stream) const {
  const std::string path = executor_.LogPath(job, attempt, stream);
  if (path.empty()) return {};
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void ExecutorBackend::Release(model::JobId job, int attempt) {
  executor_.Release(job, attempt);
}

void ExecutorBackend::ReleaseAllExcept(const std::set<std::pair<model::JobId, int>>& running) {
  executor_.ReleaseAllExcept(running);
}

void ExecutorBackend::Forget(model::JobId job, int attempt) {
  executor_.Forget(job, attempt);
}

void ExecutorBackend::Shutdown() {
  // The executor is not this backend's: whoever made it stops it (the
  // daemon stops its local executor and agent hub once, after the backends).
}

}  // namespace unisched::backend
