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
// Thread-safe; the sink and the canceller are called without its lock.

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
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
  // Stops every task of an attempt (the executor's Cancel).
  using Canceller = std::function<void(model::JobId, int)>;

  explicit GangBook(Sink sink) : sink_(std::move(sink)) {}
  void SetCanceller(Canceller cancel) { cancel_ = std::move(cancel); }

  // The attempt runs as these tasks (index = rank), on these nodes. Again
  // for the same attempt (a recovery): keeps what was reported already.
  void Expect(model::JobId job, int attempt, std::vector<std::string> nodes);
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
  const Sink sink_;
  Canceller cancel_;
  mutable std::mutex mu_;
  std::map<std::pair<model::JobId, int>, Gang> gangs_;  // GUARDED_BY(mu_)
};

}  // namespace unisched::backend
