#pragma once
// An executor that runs nothing: it records what the daemon asks of it
// (launch, cancel, recover, release, forget), so a test of the controller
// sees every decision and plays the results back itself
// (Controller::OnRunResult), at the moment the test chooses.

#include <functional>
#include <mutex>
#include <set>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/executor/executor.h"

namespace unisched::testing {

class FakeExecutor final : public executor::Executor {
 public:
  struct Cancellation {
    model::JobId job = 0;
    int attempt = 0;
    bool preempt = false;
  };

  Status Launch(const executor::LaunchSpec& spec) override;
  void Cancel(model::JobId job_id, int attempt, bool preempt = false) override;
  void CancelTasks(model::JobId job_id, int attempt, const std::vector<int>& tasks) override {
    (void)tasks;
    Cancel(job_id, attempt, false);
  }
  void Recover(const executor::LaunchSpec& spec) override;
  std::string LogPath(model::JobId job_id, int attempt, int task, std::string_view stream) const override;
  void Forget(model::JobId job_id, int attempt) override;
  void Release(model::JobId job_id, int attempt) override;
  void ReleaseAllExcept(const std::set<std::pair<model::JobId, int>>& running) override;
  void Shutdown() override {}

  // The next launch fails with `error` (once).
  void FailNextLaunch(Error error);

  std::vector<executor::LaunchSpec> Launched() const;
  std::vector<executor::LaunchSpec> Recovered() const;
  std::vector<Cancellation> Cancelled() const;
  std::vector<std::pair<model::JobId, int>> Released() const;
  // The launch of (job, attempt), once it happened.
  std::optional<executor::LaunchSpec> LaunchOf(model::JobId job, int attempt) const;

 private:
  mutable std::mutex mu_;
  std::vector<executor::LaunchSpec> launched_, recovered_;
  std::vector<Cancellation> cancelled_;
  std::vector<std::pair<model::JobId, int>> released_;
  std::optional<Error> fail_next_;
};

// Polls `condition` until it holds or `seconds` pass; true when it held.
// For waiting on another thread's work, never for measuring time.
bool Eventually(const std::function<bool()>& condition, double seconds = 10);

}  // namespace unisched::testing
