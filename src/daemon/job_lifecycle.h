#pragma once
// The controller's jobs part: the active jobs (pending, held, running) and
// every change of their state. Each change updates the job in memory, adds
// its stored row and event to the batch, moves the counts and quota tallies,
// opens or closes its charges, and leaves what its pool's backend must do
// (launch, stop, release) for after the batch is committed. Runs on the
// control thread only. It never runs a cycle: a change that may let another
// job start says so (TakeWantsCycle).
//
//   PENDING --start--> RUNNING --result--> COMPLETED | FAILED | TIMEOUT | CANCELLED
//      ^  \--hold--> HELD --release--/        |  (retry, preemption, node failure:
//      |                                      |   back to PENDING with a new attempt)
//      +--------------------------------------+

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "daemon/accounting.h"
#include "daemon/batch.h"
#include "daemon/dependency_book.h"
#include "daemon/node_book.h"
#include "daemon/run_time_book.h"
#include "unisched/backend/pool_backend.h"
#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/config/config.h"
#include "unisched/config/live.h"
#include "unisched/executor/executor.h"
#include "unisched/executor/wire.h"
#include "unisched/metrics/metrics.h"
#include "unisched/model/job.h"
#include "unisched/policy/quota.h"
#include "unisched/scheduler/scheduler.h"
#include "unisched/service/planes.h"
#include "unisched/service/secret_vault.h"
#include "unisched/store/store.h"

namespace unisched::daemon {

class JobLifecycle {
 public:
  using JobCounts = std::map<std::tuple<model::JobState, std::string, std::string>, int64_t>;  // (state, queue, pool)
  using JobAction = service::ControlPlane::JobAction;

  // `on_result`: where a launch that fails is reported, as a result.
  JobLifecycle(const config::LiveConfig& live, store::Store& store, metrics::Metrics& metrics, const Clock& clock,
               NodeBook& nodes, Accounting& accounting, std::function<void(executor::RunResult)> on_result);

  // REQUIRES: before Load. Checked by the controller.
  void SetBackends(backend::BackendSet backends) { backends_ = std::move(backends); }
  const backend::BackendSet& backends() const { return backends_; }

  // What a restart hands back to the backends once the loop runs.
  struct Recovery {
    backend::PoolBackend* backend;
    backend::AttemptLaunch launch;
  };
  struct Restart {
    std::vector<Recovery> recover;
    // Stops asked for before the restart, sent again once adopted: (backend, job, attempt, preempt).
    std::vector<std::tuple<backend::PoolBackend*, model::JobId, int, bool>> stop;
  };
  // The store's active jobs and counts; running attempts hold their nodes,
  // quotas and charges again.
  Restart Load(std::vector<model::Job> active, JobCounts counts, Timestamp now);

  // A committed submission.
  void Admit(model::Job job);
  // The plan started it on `allocation` (empty: its pool's backend places it).
  void StartAttempt(Batch& batch, model::JobId id, const model::Allocation& allocation, Timestamp now);
  void Preempt(Batch& batch, const scheduler::Preemption& preemption);
  void ApplyResult(Batch& batch, const executor::RunResult& result);
  void ApplyControl(Batch& batch, model::JobId id, JobAction action, const std::string& actor,
                    const std::function<void(Result<model::Job>)>& done);
  // PATCH /v1/jobs/{id}, planned by service::PlanJobUpdate: applied if the
  // job still waits (PENDING or HELD), else 409.
  void ApplyUpdate(Batch& batch, model::JobId id, const service::ControlPlane::JobChange& change,
                   const std::string& actor, const std::function<void(Result<model::Job>)>& done);
  // What a job's tasks get to reach the daemon (`unisched step`): the
  // secret job tokens are made with, and the daemon's URL as this machine's
  // jobs reach it (an agent puts its own). Set once the daemon listens.
  void SetJobAccess(std::string token_secret, std::string url);
  // Where a launch reads its job's secrets (docs/secrets.md). REQUIRES:
  // before the first launch. Null: a job that names secrets is not launched
  // (a transient failure, saying `problem`: it waits for a daemon that can).
  void SetSecretVault(const service::SecretVault* vault, std::string problem) {
    vault_ = vault;
    vault_problem_ = std::move(problem);
  }
  // A step of a running job: its tasks and its view, numbered by `next_step`,
  // and the backend to launch them on. `attempt` 0: any running attempt.
  struct PlannedStep {
    backend::PoolBackend* backend = nullptr;
    std::vector<executor::LaunchSpec> tasks;
    service::StepView view;
    std::vector<std::function<Status(store::Transaction&)>> audits;  // the uses of the job's secrets
  };
  Result<PlannedStep> PlanStep(model::JobId id, int attempt, const service::StepRequest& request,
                               const std::function<int()>& next_step, Timestamp now) const;
  // Every attempt running on `node` ends NODE_FAIL; its job is requeued or ends.
  void FailJobsOnNode(Batch& batch, const std::string& node, const std::string& why, Timestamp now);
  // Attempts an agent on `node` says it runs that are not the current
  // attempt of a job running there: to stop and forget.
  std::vector<executor::CancelCommand> StaleOn(const std::string& node,
                                               const std::vector<executor::AttemptRef>& running) const;
  // An API sandbox begins (+1) or ends (-1): it holds its scope's quota
  // like a running job (docs/sandboxes.md).
  void TallyHolder(const policy::JobScope& scope, const policy::Amount& amount, int sign);

  const std::map<model::JobId, model::Job>& active() const { return active_; }
  const JobCounts& counts() const { return job_counts_; }
  // Active arrays by their first task's id -> the parent's id, and a count
  // of its changes (the controller republishes it only then).
  const std::map<model::JobId, model::JobId>& array_parents() const { return array_parents_; }
  uint64_t array_parents_changes() const { return array_parents_changes_; }
  // What running jobs and sandboxes hold, per quota scope.
  const policy::QuotaTally& running_usage() const { return running_usage_; }
  // Predicted run times: learned from ended jobs, one per active job.
  RunTimeBook& run_times() { return run_times_; }
  // How the jobs waiting jobs depend on ended.
  DependencyBook& dependencies() { return dependencies_; }
  // A PENDING job whose dependency can never hold ends CANCELLED with
  // `reason` (scheduler.kill_invalid_dependency); anything else is left.
  void CancelUnsatisfiable(Batch& batch, model::JobId id, const std::string& reason);
  // Where the ends of workflows' jobs (those with UNISCHED_WORKFLOW_ID in
  // their environment) are told, once the end is committed
  // (service::WorkflowBook::JobEnded). REQUIRES: before the first job ends.
  void SetWorkflowJobEnded(std::function<void(model::JobId, model::JobState, std::string)> ended) {
    workflow_job_ended_ = std::move(ended);
  }
  // Whether a change since the last call may let a pending job start.
  bool TakeWantsCycle() { return std::exchange(wants_cycle_, false); }
  // Jobs that since the last call may wait in a new place in their queue:
  // submitted, requeued, released, updated, or an array whose task ended
  // (a task slot is free). The controller's event passes offer them beside
  // the head of the queue (KeptOrder).
  std::vector<model::JobId> TakeChanged() { return std::exchange(changed_, {}); }
  // Forgets the dependants that no longer wait (started, ended, or named a
  // job that had ended before they came): the controller's full passes.
  void PruneDependants();

 private:
  // Arrays (job_arrays.cc, docs/arrays.md). The plan started `task_id`, a
  // task still waiting in its array's parent: it becomes an active job of
  // its own (its row inserted, the parent's waiting indices stored). False:
  // no waiting task has that id.
  bool SplitArrayTask(Batch& batch, model::JobId task_id, Timestamp now);
  // A task ended (from Transition): counted in its parent, which ends with
  // its last task.
  void ArrayTaskEnded(Batch& batch, const model::Job& task);
  // `action` on a task still waiting in its array (`id` is its task id): a
  // cancel takes its index out of the array's waiting ones; hold, release
  // and requeue are 409 (they apply to the whole array). False: no task of
  // an active array waits with that id.
  bool ControlWaitingArrayTask(Batch& batch, model::JobId id, JobAction action, const std::string& actor,
                               const std::function<void(Result<model::Job>)>& done);
  // Takes a task still waiting in its array out of it (it never starts):
  // CANCELLED with `reason`, counted in the parent, an event on the parent.
  // The task as it ended; nullopt: no task of an active array waits with that id.
  std::optional<model::Job> CancelWaitingArrayTask(Batch& batch, model::JobId id, const std::string& reason);
  // The parent whose tasks' ids include `task_id`, if it is active.
  model::Job* ArrayParentOf(model::JobId task_id);
  // Stores the parent, or ends it when no task waits or runs.
  void EndArrayIfDone(Batch& batch, model::Job& parent);
  // Cancels the array: its waiting tasks never start, its active ones are
  // cancelled; it ends CANCELLED with the last of them. Returns the parent
  // as it is then.
  model::Job CancelArray(Batch& batch, model::JobId parent_id, const std::string& actor);
  // Changes a job's state: counts, the stored row and an event.
  void Transition(Batch& batch, model::Job& job, model::JobState to, std::string reason, const std::string& event_kind,
                  const std::string& message);
  void ReleaseAllocation(const model::Attempt& attempt);
  // Running jobs' shares of quota scopes, as the scheduler and the API count them.
  void TallyRunning(const model::Job& job, int sign);
  // A preempted attempt has ended: requeue the job or cancel it, per its queue.
  void FinishPreemption(Batch& batch, model::Job& job, model::Attempt& attempt);
  // Asks a RUNNING job's attempt to stop (SIGTERM, SIGKILL after the kill
  // grace): the job's row and an event of `event_kind` are stored, and its
  // backend told once they are committed.
  void StopAttempt(Batch& batch, model::Job& job, const std::string& event_kind, const std::string& message);
  // A requeued attempt has stopped: the job goes back to PENDING.
  void FinishRequeue(Batch& batch, model::Job& job, model::Attempt& attempt);
  // Its attempt ended `ended` (FAILED or NODE_FAIL): back to PENDING when its
  // queue or the job allows a retry (policy::DecideRetry). False: it ends.
  bool RequeueForRetry(Batch& batch, model::Job& job, model::JobState ended, Timestamp now);
  // master_address: rank 0's node as the others reach it (the job's MASTER_ADDR).
  executor::LaunchSpec MakeLaunchSpec(const model::Job& job, const std::string& master_address) const;
  // The ids a job of `user` in `project` runs as (executor.user_accounts):
  // uid 0 when the user has none (the launch is then refused).
  executor::UnixIds AllocatedIds(const store::UserRecord& user, const std::string& project) const;
  // An allocated id, from the store once, then from memory: an allocation
  // never changes.
  std::optional<int64_t> UnixId(const std::string& kind, const std::string& name) const;
  // The current attempt as its backend gets it. Without secrets when it is
  // recovered: its tasks run already, with theirs.
  backend::AttemptLaunch AttemptLaunchOf(const model::Job& job) const;
  // The job's secrets into each task of `launch` (its first and its gang's),
  // and an audit record of each use into `batch`. An error names the secret
  // that could not be read; the launch then fails (transient when the store
  // could not be read).
  Status AddSecrets(Batch& batch, const model::Job& job, std::vector<executor::LaunchSpec*> tasks) const;
  // The job's data staging for its current attempt (docs/data.md): every
  // task stages in on its node, the first task alone stages out; the stores
  // it names with their credentials, each credential's use audited into
  // `batch` (none: a recovery, whose attempt was audited at its launch).
  Status AddStaging(Batch* batch, const model::Job& job, std::vector<executor::LaunchSpec*> tasks) const;
  backend::PoolBackend& BackendOf(const model::Job& job) const;
  std::string BackendNameOf(const model::Job& job) const;

  // The config in force; current_config() is its version now.
  const config::LiveConfig& live_;
  const config::Config& current_config() const { return live_.Current(); }
  store::Store& store_;
  metrics::Metrics& metrics_;
  const Clock& clock_;
  NodeBook& node_book_;
  // UNISCHED_JOB_TOKEN and UNISCHED_URL for a launch's environment.
  void AddJobAccess(executor::LaunchSpec& spec) const;
  std::string job_token_secret_;
  std::string job_url_;
  const service::SecretVault* vault_ = nullptr;
  std::string vault_problem_;
  Accounting& accounting_;
  std::function<void(executor::RunResult)> on_result_;
  std::function<void(model::JobId, model::JobState, std::string)> workflow_job_ended_;
  backend::BackendSet backends_;

  std::map<model::JobId, model::Job> active_;
  // Active arrays' parents by their first task's id: a task id's parent is
  // the entry at or before it.
  std::map<model::JobId, model::JobId> array_parents_;
  uint64_t array_parents_changes_ = 0;
  std::optional<model::Job> last_ended_array_;  // the parent EndArrayIfDone ended last, as it ended
  JobCounts job_counts_;
  policy::QuotaTally running_usage_;
  bool wants_cycle_ = false;
  std::vector<model::JobId> changed_;  // TakeChanged
  // Waits for its dependency: told as changed when a job it names starts
  // or ends (DependencyBook::NoteWaiting).
  static bool WaitsOnDependency(const model::Job& job);
  // A pending job changed its place: a cycle is due, and event passes offer it.
  void Changed(model::JobId id) {
    changed_.push_back(id);
    wants_cycle_ = true;
  }
  RunTimeBook run_times_;
  DependencyBook dependencies_;
  mutable std::map<std::pair<std::string, std::string>, int64_t> unix_ids_;  // (kind, name) -> id
};

}  // namespace unisched::daemon
