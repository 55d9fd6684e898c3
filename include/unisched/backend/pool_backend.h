#pragma once
// The pool-backend port (docs/adr/0006-pool-backend-port.md): every pool is
// served by one backend, behind this interface, and the controller talks to
// backends only. Two kinds of placement:
//   kDaemon:  the daemon's scheduler chooses the nodes; the backend runs the
//             attempt on them (the local nodes, the node agents).
//   kBackend: the backend chooses (another cluster's own scheduler); the
//             daemon only admits the job by queue order, quotas and budgets,
//             and the backend's result says where it ran (placed_on).
// A backend never changes a job: it runs attempts and reports how each
// ended, once, through the result sink it was made with.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "unisched/backend/gang.h"
#include "unisched/common/log_range.h"
#include "unisched/common/status.h"
#include "unisched/executor/executor.h"
#include "unisched/model/job.h"

namespace unisched::backend {

enum class Placement { kDaemon, kBackend };

// One attempt as a backend gets it: what to run, where the daemon placed it
// (empty for kBackend placement), and what the job asked for, per node as
// the job states it, for a backend that places it itself.
struct AttemptLaunch {
  executor::LaunchSpec spec;
  model::Allocation allocation;
  model::ResourceRequest resources;
  model::Labels constraints;
  // A gang (launch per_node, more than one task): every task's spec, by
  // rank, each naming its node; empty: `spec` alone, on the first node. A
  // backend that places jobs itself runs `spec`.
  std::vector<executor::LaunchSpec> gang{};
};

class PoolBackend {
 public:
  // Called once per attempt that ends, from a backend thread, with no
  // backend lock held.
  using ResultSink = executor::Executor::ResultSink;
  virtual ~PoolBackend() = default;

  virtual Placement placement() const = 0;
  // Starts the attempt on its allocation (kBackend: where it chooses).
  // Idempotent per (job, attempt). An error means nothing was started; its
  // code is executor::kTransientLaunchCode when trying again later may work.
  virtual Status Launch(const AttemptLaunch& launch) = 0;
  // Starts step `step` of a running attempt: its tasks (task numbers
  // step * service::kStepTaskStride + rank, each naming its node). The
  // step's end goes to the step sink its executor's gang book has.
  virtual Status LaunchStep(model::JobId job, int attempt, int step, const std::vector<executor::LaunchSpec>& tasks) {
    (void)job, (void)attempt, (void)step, (void)tasks;
    return Error::Unprocessable("no_steps", "this pool's backend places jobs itself and runs no steps");
  }
  // Stops the attempt (preempt: with its preempt grace); its result follows
  // with outcome kCancelled. Unknown or ended attempts: no-op.
  virtual void Cancel(model::JobId job, int attempt, bool preempt) = 0;
  // After a daemon restart, for an attempt the store records as running:
  // collect, adopt or launch it, as executor::Executor::Recover.
  virtual void Recover(const AttemptLaunch& launch) = 0;
  // The output stream ("stdout" or "stderr") of an attempt's task (0 unless
  // it is a gang's rank) as far as this backend keeps it, the bytes of
  // `range`; empty when it keeps none.
  virtual std::string ReadLog(model::JobId job, int attempt, int task, std::string_view stream,
                              LogRange range) const = 0;
  // The attempt's end is durably recorded: what was kept only to recover it may go.
  virtual void Release(model::JobId job, int attempt) {
    (void)job;
    (void)attempt;
  }
  // After a restart, before any Recover or Launch: Release for every
  // attempt this backend still holds except those in `running`.
  virtual void ReleaseAllExcept(const std::set<std::pair<model::JobId, int>>& running) { (void)running; }
  // Retention: the attempt's output goes; attempt 0: every attempt of the job.
  virtual void Forget(model::JobId job, int attempt) = 0;
  // Stops watching; what runs keeps running where the backend allows it.
  virtual void Shutdown() = 0;
};

// Which backend serves which pool. The controller asks it by the job's pool;
// work not tied to a pool (releases of jobs it no longer holds, retention)
// goes to every distinct backend, each ignoring attempts it does not know.
class BackendSet {
 public:
  void Serve(const std::string& pool, PoolBackend* backend) {
    by_pool_[pool] = backend;
    distinct_.insert(backend);
  }
  // The backend of `pool`; null when none serves it.
  PoolBackend* For(const std::string& pool) const {
    auto it = by_pool_.find(pool);
    return it == by_pool_.end() ? nullptr : it->second;
  }
  const std::set<PoolBackend*>& Distinct() const { return distinct_; }

 private:
  std::map<std::string, PoolBackend*, std::less<>> by_pool_;
  std::set<PoolBackend*> distinct_;
};

// A backend of kDaemon placement over an executor (the local executor, the
// agent hub): an attempt runs on its allocation's first node, the one
// LaunchSpec::node names, or as a gang of tasks on all its nodes, whose
// results `gangs` (the executor's sink) makes one; its output is the
// executor's log files. The executor stays its owner's to shut down.
class ExecutorBackend final : public PoolBackend {
 public:
  ExecutorBackend(executor::Executor& executor, GangBook& gangs) : executor_(executor), gangs_(gangs) {}
  Placement placement() const override { return Placement::kDaemon; }
  Status Launch(const AttemptLaunch& launch) override;
  Status LaunchStep(model::JobId job, int attempt, int step, const std::vector<executor::LaunchSpec>& tasks) override;
  void Cancel(model::JobId job, int attempt, bool preempt) override;
  void Recover(const AttemptLaunch& launch) override;
  std::string ReadLog(model::JobId job, int attempt, int task, std::string_view stream, LogRange range) const override;
  void Release(model::JobId job, int attempt) override;
  void ReleaseAllExcept(const std::set<std::pair<model::JobId, int>>& running) override;
  void Forget(model::JobId job, int attempt) override;
  void Shutdown() override;

 private:
  Status LaunchTasks(const std::vector<executor::LaunchSpec>& tasks, bool report_first);
  executor::Executor& executor_;
  GangBook& gangs_;
};

}  // namespace unisched::backend
