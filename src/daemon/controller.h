#pragma once
// The controller owns the authoritative live state (active jobs, node usage)
// on one control thread. Every mutation arrives as a command in its inbox:
// committed submissions, cancel/hold/release, node drain/resume, run results.
// One loop iteration applies the commands, runs a scheduling cycle when
// something changed (or on the periodic tick), commits every resulting store
// write in ONE transaction, and only then acts: launches, signals, replies.
// Readers never enter the loop: they read the store and the published view.
//
// Its parts, each owned by the control thread:
//   JobLifecycle  the active jobs and every change of their state (job_lifecycle.h)
//   NodeBook      nodes: usage, state, drains, agents' heartbeats (node_book.h)
//   Accounting    ledger charges, budgets, fair-share usage (accounting.h)
//   AlertBook     alert rules and firing alerts (alert_book.h)
//   the cycle     BuildCycleSnapshot (cycle_snapshot.h), scheduler::Decide, and
//                 the plan applied through JobLifecycle (RunCycle below)
// The controller itself is the loop: inbox, cycles, the one commit, the view.

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "daemon/accounting.h"
#include "daemon/agent_hub.h"
#include "daemon/alert_book.h"
#include "daemon/batch.h"
#include "daemon/cycle_snapshot.h"
#include "daemon/job_lifecycle.h"
#include "daemon/kept_order.h"
#include "daemon/node_book.h"
#include "daemon/notifier.h"
#include "daemon/step_book.h"
#include "unisched/backend/pool_backend.h"
#include "unisched/common/time.h"
#include "unisched/config/config.h"
#include "unisched/config/live.h"
#include "unisched/executor/executor.h"
#include "unisched/metrics/metrics.h"
#include "unisched/policy/quota.h"
#include "unisched/scheduler/scheduler.h"
#include "unisched/service/planes.h"
#include "unisched/store/store.h"

namespace unisched::daemon {

class Controller final : public service::ControlPlane, public service::StepPlane, public AgentSink {
 public:
  Controller(const config::LiveConfig& live, store::Store& store, metrics::Metrics& metrics, const Clock& clock);
  ~Controller() override;

  // REQUIRES: called once, before Start. The backend of every pool
  // (docs/adr/0006-pool-backend-port.md); an error names a pool without
  // one, or served by a backend of the wrong placement.
  Status SetBackends(backend::BackendSet backends);
  // REQUIRES: before Start. Where alerts go besides the store, the log and metrics.
  void SetNotifier(WebhookNotifier* notifier) { alerts_.SetNotifier(notifier); }
  // From the housekeeper: what the last ledger reconciliation found.
  void SetLedgerDiscrepancies(int64_t count) { ledger_discrepancies_ = count; }
  // REQUIRES: before Start. Where steps are kept (the gang books' step sink feeds it).
  void SetStepBook(StepBook* steps) { steps_ = steps; }
  // What jobs get to call the daemon (LaunchSpec env UNISCHED_JOB_TOKEN and
  // UNISCHED_URL, JobLifecycle::SetJobAccess); applied in the loop.
  void SetJobAccess(std::string token_secret, std::string url);
  // REQUIRES: before Start. Where launches read their jobs' secrets.
  void SetSecretVault(const service::SecretVault* vault, std::string problem);
  // REQUIRES: before Start. Where workflows' jobs' ends are told (JobLifecycle::SetWorkflowJobEnded).
  void SetWorkflowJobEnded(std::function<void(model::JobId, model::JobState, std::string)> ended) {
    jobs_.SetWorkflowJobEnded(std::move(ended));
  }
  // Loads state from the store, recovers running attempts, starts the loop.
  void Start();
  // Stops the loop; running jobs keep running (their supervisors outlive us).
  void Stop();
  // REQUIRES: after Stop (the loop no longer changes the jobs). Whether any
  // job is RUNNING: its attempt may not have made its directory yet.
  bool AnyRunning() const;
  bool Ready() const { return ready_.load(); }

  // From the backends' threads (the executors, the agent hub).
  void OnRunResult(executor::RunResult result) override;
  // From the gang books: every task of a step has ended.
  void OnStepEnded(int step, executor::RunResult result);
  // From the agent hub: a node agent's heartbeat (docs/agents.md).
  void OnAgentHeartbeat(executor::Heartbeat heartbeat, std::function<void(HeartbeatAnswer)> done) override;

  // service::ControlPlane
  void JobCommitted(model::Job job) override;
  void UpdateJob(model::JobId id, JobChange change, std::string actor,
                 std::function<void(Result<model::Job>)> done) override;
  void ControlJob(model::JobId id, JobAction action, std::string actor,
                  std::function<void(Result<model::Job>)> done) override;
  void SetNodeState(std::string node, bool drain, std::string reason, std::string actor,
                    std::function<void(Result<service::ClusterView::Node>)> done) override;
  std::shared_ptr<const service::ClusterView> View() const override;
  std::optional<Staging> StagingOf(model::JobId id) const override;
  // The executors whose staging StagingOf reports (the local one, the
  // agents'); set before Start.
  void SetStagingExecutors(std::vector<const executor::Executor*> executors) {
    staging_executors_ = std::move(executors);
  }

  // service::StepPlane
  void StartStep(model::JobId job, int attempt, service::StepRequest request,
                 std::function<void(Result<service::StepView>)> done) override;
  Result<service::StepView> GetStep(model::JobId job, int step) const override;
  void CountSandbox(const std::string& queue, const std::string& project, const std::string& user,
                    const policy::Amount& amount, int sign) override;

 private:
  using Command = std::function<void(Batch&)>;

  void Post(Command command);
  void Loop();
  // A full pass ranks and explains every pending job; otherwise, with a
  // deep queue, an event pass looks at its head (kept_order.h).
  void RunCycle(Batch& batch, Timestamp now, bool full);
  void Commit(Batch& batch);
  void Publish();
  void SweepRetention(Batch& batch, Timestamp now);

  void ApplyNodeState(Batch& batch, const std::string& name, bool drain, const std::string& reason,
                      const std::string& actor, const std::function<void(Result<service::ClusterView::Node>)>& done);
  // Agent nodes: registration, resources, health, stale attempts.
  void ApplyHeartbeat(Batch& batch, const executor::Heartbeat& heartbeat,
                      const std::function<void(HeartbeatAnswer)>& done);
  // Agent nodes silent for longer than the heartbeat timeout go down.
  void CheckHeartbeats(Batch& batch, Timestamp now);

  // The config in force; current_config() is its version now.
  const config::LiveConfig& live_;
  const config::Config& current_config() const { return live_.Current(); }
  store::Store& store_;
  metrics::Metrics& metrics_;
  const Clock& clock_;
  scheduler::Scheduler scheduler_;
  const config::Config* scheduler_built_from_;  // the version scheduler_ was built from

  // Inbox: guarded by mu_.
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Command> inbox_;
  bool stopping_ = false;

  // Owned by the control thread.
  // Nodes: usage, state, reasons, agents' heartbeats.
  NodeBook node_book_;
  // What Publish last set the job and node gauges to.
  std::map<std::tuple<model::JobState, std::string, std::string>, int64_t> published_job_counts_;
  // API sandboxes by (queue, project, user): quota holders of every cycle.
  service::SandboxHolds sandbox_holds_;
  // sandbox_holds_ as views share it, replaced when a sandbox begins or ends.
  std::shared_ptr<const service::SandboxHolds> published_sandbox_holds_ = std::make_shared<service::SandboxHolds>();
  // The active arrays as last published (ClusterView::array_parents), and
  // which change of JobLifecycle's they are.
  std::vector<const executor::Executor*> staging_executors_;
  std::shared_ptr<const std::map<model::JobId, model::JobId>> published_array_parents_ =
      std::make_shared<std::map<model::JobId, model::JobId>>();
  uint64_t published_array_changes_ = 0;
  // Ledger charges, budget use and fairshare usage.
  Accounting accounting_;
  // The active jobs and every change of their state.
  JobLifecycle jobs_;
  StepBook* steps_ = nullptr;
  // Firing alerts and where changes go.
  AlertBook alerts_;
  // The last cycle's reservations, handed back to the next (conservative
  // pools keep them and move them only earlier).
  std::unordered_map<model::JobId, scheduler::Reservation> reservations_;
  std::map<std::pair<std::string, std::string>, int> pending_by_reason_;  // (pool, code) -> jobs
  // From the last cycle; shared with the published views.
  std::shared_ptr<const service::PendingInfoMap> pending_ = std::make_shared<service::PendingInfoMap>();
  bool need_cycle_ = true;
  bool need_full_pass_ = true;  // set by each tick
  // The order of the last full pass, for the event passes until the next;
  // and the config version it was made under.
  KeptOrder kept_order_;
  const config::Config* kept_order_for_ = nullptr;
  Timestamp next_retention_sweep_{};
  std::atomic<int64_t> ledger_discrepancies_{0};
  std::optional<Timestamp> last_store_error_;
  // Writes the store refused as unreachable (kUnavailable), in order, with
  // the actions that wait for them: committed before any later batch.
  Batch unwritten_;

  mutable std::mutex view_mu_;
  std::shared_ptr<const service::ClusterView> view_;
  std::atomic<bool> ready_{false};
  std::thread thread_;
};

}  // namespace unisched::daemon
