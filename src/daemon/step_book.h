#pragma once
// The steps of running jobs (`unisched step`, docs/execution.md "Steps"):
// numbered per job, held in memory while they run and for a while after
// (the step's caller reads its end). The controller stores each change it
// makes here (store::StepRecord) and restores the steps of active jobs at
// start, so numbering goes on after a restart; older ended steps are read
// from the store. Thread-safe.

#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
  // Steps of active jobs as the store holds them (at start): numbering
  // goes on after the highest.
  void Restore(std::vector<service::StepView> steps);
  // The step's tasks have all ended (the gang book's step sink): the step
  // as it is now, or nullopt when it is not known (forgotten already).
  std::optional<service::StepView> Ended(model::JobId job, int step, const executor::RunResult& result);
  // A step that could not be launched: FAILED with `reason`.
  std::optional<service::StepView> Failed(model::JobId job, int step, const std::string& reason, Timestamp at);
  // The attempt ended: its steps still RUNNING end CANCELLED with `reason`
  // (those whose own end was not seen: a restart lost their tasks' reports).
  // A step's own end, reported later, replaces that.
  std::vector<service::StepView> EndRunning(model::JobId job, int attempt, const std::string& reason, Timestamp at);
  Result<service::StepView> Get(model::JobId job, int step) const;

 private:
  mutable std::mutex mu_;
  std::map<model::JobId, int> last_step_;                            // GUARDED_BY(mu_)
  std::map<std::pair<model::JobId, int>, service::StepView> steps_;  // GUARDED_BY(mu_)
  std::deque<std::pair<model::JobId, int>> ended_;                   // GUARDED_BY(mu_): oldest first

  // Marks an ended step to be forgotten in its turn. REQUIRES: mu_ held.
  void Retire(std::pair<model::JobId, int> key);
};

}  // namespace unisched::daemon
