#include "testing/fake_executor.h"

#include <chrono>
#include <thread>

namespace unisched::testing {

Status FakeExecutor::Launch(const executor::LaunchSpec& spec) {
  std::lock_guard lock(mu_);
  if (fail_next_) {
    Error error = *fail_next_;
    fail_next_.reset();
    return error;
  }
  launched_.push_back(spec);
  return Status::Ok();
}

void FakeExecutor::Cancel(model::JobId job_id, int attempt, bool preempt) {
  std::lock_guard lock(mu_);
  cancelled_.push_back({job_id, attempt, preempt});
}

void FakeExecutor::Recover(const executor::LaunchSpec& spec) {
  std::lock_guard lock(mu_);
  recovered_.push_back(spec);
}

std::string FakeExecutor::LogPath(model::JobId job_id, int attempt, int task, std::string_view stream) const {
  return "/nonexistent/" + std::to_string(job_id) + "/" + std::to_string(attempt) + "." + std::to_string(task) + "/" +
         std::string(stream);
}

void FakeExecutor::Forget(model::JobId job_id, int attempt) {
  (void)job_id;
  (void)attempt;
}

void FakeExecutor::Release(model::JobId job_id, int attempt) {
  std::lock_guard lock(mu_);
  released_.emplace_back(job_id, attempt);
}

void FakeExecutor::ReleaseAllExcept(const std::set<std::pair<model::JobId, int>>& running) {
  (void)running;
}

void FakeExecutor::FailNextLaunch(Error error) {
  std::lock_guard lock(mu_);
  fail_next_ = std::move(error);
}

std::vector<executor::LaunchSpec> FakeExecutor::Launched() const {
  std::lock_guard lock(mu_);
  return launched_;
}

std::vector<executor::LaunchSpec> FakeExecutor::Recovered() const {
  std::lock_guard lock(mu_);
  return recovered_;
}

std::vector<FakeExecutor::Cancellation> FakeExecutor::Cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

std::vector<std::pair<model::JobId, int>> FakeExecutor::Released() const {
  std::lock_guard lock(mu_);
  return released_;
}

std::optional<executor::LaunchSpec> FakeExecutor::LaunchOf(model::JobId job, int attempt) const {
  std::lock_guard lock(mu_);
  for (const auto& spec : launched_) {
    if (spec.job_id == job && spec.attempt == attempt) return spec;
  }
  return std::nullopt;
}

bool Eventually(const std::function<bool()>& condition, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace unisched::testing
