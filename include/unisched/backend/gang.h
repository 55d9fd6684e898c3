#pragma once
// Gangs: an attempt that runs as several tasks at once (launch per_node,
// docs/execution.md "Multi-node jobs") ends as one. The executor under a
// pool backend reports each task's end; the gang book stands between it and
// the controller, which sees one result per attempt as for any other:
//   * all or nothing: the first task that ends other than completed stops
//     the rest (Cancel of the attempt, on every node);
//   * once every task has reported, the attempt's result: completed when all
//     completed, else how the first one ended, with its rank and node in the
//     reason; the exit code is the highest of the tasks' (as Slurm reports a
//     job's), and each task's end is kept (RunResult::tasks);
//   * results of attempts that are not gangs pass straight through.
// Steps (commands started inside a running attempt, `unisched step`) are
// gangs too: task s * step_stride + r is rank r of step s. A step's result
// goes to the step sink, and a failing rank stops that step's tasks only;
// the attempt's own end stops every step still running, as Slurm ends a
// batch job's steps with it.
// Thread-safe; the sinks and the canceller are called without its lock.

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "unisched/executor/executor.h"

namespace unisched::backend {

// The pure part: how a gang's task results make the attempt's.
executor::RunResult GangResult(model::JobId job, int attempt, const std::vector<executor::RunResult>& tasks,
                               const std::vector<std::string>& nodes, std::optional<int> first_failed_rank);

class GangBook {
 public:
  using Sink = std::function<void(executor::RunResult)>;
  // A step's end: its number and its tasks' result made one (task 0).
  using StepSink = std::function<void(int step, executor::RunResult)>;
  // Stops tasks of an attempt: these (empty: all of them).
  using Canceller = std::function<void(model::JobId, int, const std::vector<int>&)>;

  explicit GangBook(Sink sink, int step_stride = 1 << 16) : sink_(std::move(sink)), step_stride_(step_stride) {}
  void SetCanceller(Canceller cancel) { cancel_ = std::move(cancel); }
  void SetStepSink(StepSink sink) { step_sink_ = std::move(sink); }

  // The attempt runs as these tasks (index = rank), on these nodes. Again
  // for the same attempt (a recovery): keeps what was reported already.
  void Expect(model::JobId job, int attempt, std::vector<std::string> nodes) {
    ExpectStep(job, attempt, 0, std::move(nodes));
  }
  // Step `step` (from 1) of the attempt runs as these ranks on these nodes.
  void ExpectStep(model::JobId job, int attempt, int step, std::vector<std::string> nodes);
  int step_stride() const { return step_stride_; }
  // One task's end (the executor's sink).
  void OnTaskResult(executor::RunResult result);
  // The attempt's result is recorded, or its job forgotten: no more to wait for.
  void Forget(model::JobId job, int attempt);
  // Tasks of gangs still waited for (tests, diagnostics).
  size_t Waiting() const;

 private:
  struct Gang {
    std::vector<std::string> nodes;            // by rank
    std::map<int, executor::RunResult> ended;  // by rank
    std::optional<int> first_failed;           // the rank whose end stopped the rest
  };
  using Key = std::tuple<model::JobId, int, int>;  // (job, attempt, step)
  const Sink sink_;
  const int step_stride_;
  StepSink step_sink_;
  Canceller cancel_;
  mutable std::mutex mu_;
  std::map<Key, Gang> gangs_;  // GUARDED_BY(mu_)
};

}  // namespace unisched::backend
