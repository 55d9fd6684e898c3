#pragma once
// The steps of running jobs (`unisched step`, docs/execution.md "Steps"):
// numbered per job, held in memory while they run and for a while after
// (the step's caller reads its end), never stored: a step is part of its
// attempt, whose end the store records. Thread-safe.

#include <deque>
#include <map>
#include <mutex>
#include <utility>

#include "unisched/executor/executor.h"
#include "unisched/service/planes.h"

namespace unisched::daemon {

class StepBook {
 public:
  // Ended steps kept for their callers to read; older ones are forgotten.
  static constexpr size_t kEndedKept = 10'000;

  // The next step number of the job (1, 2, ...).
  int Next(model::JobId job);
  void Started(service::StepView view);
  // The step's tasks have all ended (the gang book's step sink).
  void Ended(model::JobId job, int step, const executor::RunResult& result);
  Result<service::StepView> Get(model::JobId job, int step) const;

 private:
  mutable std::mutex mu_;
  std::map<model::JobId, int> last_step_;                            // GUARDED_BY(mu_)
  std::map<std::pair<model::JobId, int>, service::StepView> steps_;  // GUARDED_BY(mu_)
  std::deque<std::pair<model::JobId, int>> ended_;                   // GUARDED_BY(mu_): oldest first
};

}  // namespace unisched::daemon
