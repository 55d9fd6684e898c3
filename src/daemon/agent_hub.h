#pragma once
// The daemon's side of the node agents (docs/agents.md). Agents long-poll
// with heartbeats; the hub holds each node's outgoing commands (launches,
// cancels) and answers a parked heartbeat as soon as there is something for
// its node. To the controller it is the executor of agent nodes; the
// controller is told of every heartbeat (node state, stale attempts) and of
// every result, and stays the only authority on jobs and nodes.
// Pools of agent nodes reach it through a backend::ExecutorBackend.

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "unisched/api/api.h"
#include "unisched/config/config.h"
#include "unisched/executor/executor.h"
#include "unisched/executor/wire.h"

namespace unisched::daemon {

// What the controller says back to a heartbeat.
struct HeartbeatAnswer {
  std::string node_state;
  std::vector<executor::CancelCommand> stale;  // attempts the agent runs that are not current
};

// The controller, as the hub needs it.
class AgentSink {
 public:
  virtual ~AgentSink() = default;
  virtual void OnAgentHeartbeat(executor::Heartbeat heartbeat, std::function<void(HeartbeatAnswer)> done) = 0;
  virtual void OnRunResult(executor::RunResult result) = 0;
};

class AgentHub final : public api::AgentPlane, public executor::Executor {
 public:
  AgentHub(const config::Config& config, const Clock& clock);
  ~AgentHub() override;
  void SetSink(AgentSink* sink) { sink_ = sink; }
  // Where results go instead of the sink's OnRunResult (a gang book, which
  // makes one result of a gang's tasks); set before Start.
  void SetResultSink(executor::Executor::ResultSink results) { results_ = std::move(results); }
  void Start();
  void Stop();

  // api::AgentPlane
  void Heartbeat(const std::string& token_pool, executor::Heartbeat heartbeat,
                 std::function<void(Result<executor::Commands>)> done) override;
  Result<std::vector<IgnoredResult>> Results(const std::string& token_pool, const std::string& node,
                                             std::vector<executor::RunResult> results) override;

  Result<int64_t> AppendLog(const std::string& token_pool, const std::string& node, const executor::AttemptRef& task,
                            const std::string& stream, int64_t offset, std::string_view bytes) override;
  // Where agents' output is kept (<dir>/<job>/<attempt>[.<task>]/<stream>,
  // as the local executor keeps its own); set before Start.
  void SetLogsDir(std::string dir) { logs_dir_ = std::move(dir); }

  // executor::Executor, for attempts on agent nodes.
  Status Launch(const executor::LaunchSpec& spec) override;
  void Cancel(model::JobId job_id, int attempt, bool preempt = false) override;
  void CancelTasks(model::JobId job_id, int attempt, const std::vector<int>& tasks) override;
  void Recover(const executor::LaunchSpec& spec) override;
  std::string LogPath(model::JobId job_id, int attempt, int task, std::string_view stream) const override;
  void Forget(model::JobId job_id, int attempt) override;
  void Shutdown() override;
  // What the agents' last heartbeats said they stage.
  std::vector<executor::StagingProgress> Staging() const override;

 private:
  struct Parked {
    std::function<void(Result<executor::Commands>)> done;
    std::chrono::steady_clock::time_point deadline;
  };
  struct NodeQueue {
    std::vector<executor::LaunchSpec> launch;
    std::vector<executor::CancelCommand> cancel;
    std::string node_state = "down";
    std::unique_ptr<Parked> parked;
    // Launched (handed to the agent) or recovered after a daemon restart,
    // and not yet named by a heartbeat nor ended with a result; `true`: a
    // cancel was asked for it meanwhile.
    std::map<executor::AttemptRef, bool> unconfirmed;
  };
  // Checks that `node` is an agent node of `token_pool`.
  Status CheckNode(const std::string& token_pool, const std::string& node) const;
  // REQUIRES: mu_ held. Takes what is queued for the node.
  executor::Commands TakeCommands(NodeQueue& q, const std::string& node);
  // REQUIRES: mu_ held. Answers a parked heartbeat of the node, if any.
  void Wake(const std::string& node);
  void ExpireLoop();
  // REQUIRES: mu_ held. The specs of the attempt's tasks the hub holds.
  std::vector<const executor::LaunchSpec*> TasksOf(model::JobId job_id, int attempt) const;
  // REQUIRES: mu_ held. Cancel of these tasks (all the attempt's when `only` is null).
  void CancelLocked(model::JobId job_id, int attempt, bool preempt, const std::set<int>* only);

  const config::Config& config_;
  const Clock& clock_;
  AgentSink* sink_ = nullptr;
  std::string logs_dir_;
  std::string TaskLogDir(model::JobId job, int attempt, int task) const;
  executor::Executor::ResultSink results_;
  void DeliverResult(executor::RunResult result);
  // Agent nodes of the config and their pools (never null: the config is validated).
  std::map<std::string, const model::PoolSpec*> agent_pools_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, NodeQueue> queues_;                                // by node
  std::map<std::string, std::vector<executor::StagingProgress>> staging_;  // by node, from its last heartbeat
  // Launched or recovered, by task: (job, attempt, task).
  std::map<executor::AttemptRef, executor::LaunchSpec> attempts_;
  std::vector<std::function<void()>> to_answer_;  // answers to send outside the lock
  std::thread expirer_;
};

}  // namespace unisched::daemon
