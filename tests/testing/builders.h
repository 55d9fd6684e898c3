#pragma once
// Fluent builders for the core's plain data, so a test case reads as the
// situation it describes:
//   MakeNode("x86-c8m16-hpc-01").Pool("p").Cpus(8).MemoryMb(16384).Gpus(2, "h100").Label("k", "v")
//   MakeCluster().Pool("p").Node(...).Queue(MakeQueue("q").Pool("p")).Rule(...)
//   MakePending(7).Pool("p").Cpus(4).Priority(10)
//   MakeRunning(3).Queue("q").Cpus(4).StartedAfter(-600).WalltimeSeconds(3600).On("n1")

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "unisched/common/time.h"
#include "unisched/model/cluster.h"
#include "unisched/model/fit.h"
#include "unisched/model/job.h"
#include "unisched/model/resources.h"
#include "unisched/scheduler/scheduler.h"

namespace unisched::model {
// Readable failure messages for reasons (gtest finds it by ADL).
inline void PrintTo(const PendingReason& reason, std::ostream* os) {
  *os << "{" << reason.code << ": \"" << reason.message << "\"}";
}
}  // namespace unisched::model

namespace unisched::testing {

// A fixed instant, for tests that need "some time".
inline Timestamp TestEpoch() {
  return FromUnixMillis(1'700'000'000'000);
}

class NodeBuilder {
 public:
  explicit NodeBuilder(std::string name);
  NodeBuilder& Pool(std::string pool);
  NodeBuilder& Cpus(int cpus);
  NodeBuilder& MemoryMb(int64_t memory_mb);
  // Appends `count` devices of `model`; indices continue from the last one.
  NodeBuilder& Gpus(int count, std::string model = "h100", int memory_gb = 80);
  NodeBuilder& Label(std::string key, std::string value);
  NodeBuilder& State(model::NodeState state);
  // What running jobs already hold on the node (for Usage()).
  NodeBuilder& Used(int cpus, int64_t memory_mb);
  NodeBuilder& BusyGpus(std::vector<int> indices);

  model::NodeSpec Spec() const { return spec_; }
  model::NodeUsage Usage() const;
  operator model::NodeSpec() const { return Spec(); }    // NOLINT: builder
  operator model::NodeUsage() const { return Usage(); }  // NOLINT: builder

 private:
  model::NodeSpec spec_;
  model::NodeState state_ = model::NodeState::kUp;
  int cpus_used_ = 0;
  int64_t memory_used_mb_ = 0;
  std::vector<int> busy_gpus_;
};
NodeBuilder MakeNode(std::string name);

class QueueBuilder {
 public:
  explicit QueueBuilder(std::string name);
  QueueBuilder& Pool(std::string pool);
  QueueBuilder& Kinds(std::vector<model::WorkloadKind> kinds);
  QueueBuilder& MaxWalltimeHours(double hours);
  QueueBuilder& DefaultWalltimeHours(double hours);
  QueueBuilder& DefaultMemoryMbPerCpu(int64_t memory_mb);
  QueueBuilder& Tier(int tier);
  QueueBuilder& PolicyType(std::string type);
  // Policy engine keys (docs/policy/).
  QueueBuilder& Weights(model::PriorityWeights weights);
  QueueBuilder& ProjectQuota(model::ResourceLimits limits);
  QueueBuilder& UserQuota(model::ResourceLimits limits);
  // The seed's key: sets project_quota.gpus too, as the config loader does.
  QueueBuilder& GpuQuotaPerProject(int gpus);
  QueueBuilder& QuotaAction(model::QuotaAction action);
  QueueBuilder& MaxConcurrency(int n);
  QueueBuilder& Preemptible(bool preemptible);
  QueueBuilder& CanPreempt(bool can_preempt);
  QueueBuilder& PreemptAction(model::PreemptAction action);
  QueueBuilder& PreemptGraceSeconds(int seconds);

  model::QueueSpec Build() const { return queue_; }
  operator model::QueueSpec() const { return Build(); }  // NOLINT: builder

 private:
  model::QueueSpec queue_;
};
QueueBuilder MakeQueue(std::string name);

class RuleBuilder {
 public:
  explicit RuleBuilder(std::string name);
  RuleBuilder& Kind(model::WorkloadKind kind);
  RuleBuilder& Feature(std::string key, std::string value);
  RuleBuilder& MinGpus(int n);
  RuleBuilder& MaxGpus(int n);
  RuleBuilder& Queue(std::string queue);

  model::RoutingRule Build() const { return rule_; }
  operator model::RoutingRule() const { return Build(); }  // NOLINT: builder

 private:
  model::RoutingRule rule_;
};
RuleBuilder MakeRule(std::string name);

// Pools, nodes, queues and rules. A node joins its pool's node list (the pool
// is created as kCpu if it was not declared) and gets the pool's labels under
// its own, as the config loader does.
class ClusterBuilder {
 public:
  ClusterBuilder& Pool(std::string name, model::PoolKind kind = model::PoolKind::kCpu, model::Labels labels = {});
  ClusterBuilder& Node(const NodeBuilder& node);
  ClusterBuilder& Queue(const QueueBuilder& queue);
  ClusterBuilder& Rule(const RuleBuilder& rule);
  // The backfill mode of a pool (created as kCpu if not declared yet).
  ClusterBuilder& Backfill(const std::string& pool, model::BackfillMode mode, int reservation_depth = 0);
  ClusterBuilder& Project(model::ProjectPolicy project);

  model::ClusterSpec Build() const { return cluster_; }
  operator model::ClusterSpec() const { return Build(); }  // NOLINT: builder

 private:
  model::ClusterSpec cluster_;
};
ClusterBuilder MakeCluster();

// The shape of the default configuration (config/unisched.yaml, as the
// contract describes it), built in code so core tests do not read YAML:
//   cpu-hpc-pool       4 x (64 cpus, 256 GiB), interconnect=ib       <- hpc-precision (hpc, max 72 h)
//   gpu-train-pool     2 x (32 cpus, 512 GiB, 8 x h100), ib          <- ai-training (ai-training)
//   inference-pool     1 x (16 cpus, 128 GiB, 4 x l40s), ethernet    <- ai-inference (ai-inference)
//   elastic-light-pool 2 x (256 cpus, 1 TiB), ethernet               <- agent-sandbox (agent, max 1 h)
// Rules: fp64-hpc (hpc + precision=fp64), hpc-default (hpc), gpu-training
// (ai-training with gpus >= 1), inference (ai-inference); agent has no rule
// and takes its default queue.
model::ClusterSpec DefaultLikeCluster();

// A node usage for every node of the cluster: all up, nothing allocated.
std::vector<model::NodeUsage> EmptyUsage(const model::ClusterSpec& cluster);

class RequestBuilder {
 public:
  RequestBuilder& Nodes(int n);
  RequestBuilder& Cpus(int n);
  RequestBuilder& MemoryMb(int64_t memory_mb);
  RequestBuilder& Gpus(int n, std::string model = {});
  RequestBuilder& WalltimeSeconds(int64_t seconds);

  model::ResourceRequest Build() const { return request_; }
  operator model::ResourceRequest() const { return Build(); }  // NOLINT: builder

 private:
  model::ResourceRequest request_;
};
// nodes 1, cpus 1, memory_mb 1024, no GPUs, walltime 3600 s.
RequestBuilder MakeRequest();

class PendingBuilder {
 public:
  explicit PendingBuilder(model::JobId id);
  PendingBuilder& Pool(std::string pool);
  PendingBuilder& Queue(std::string queue);
  PendingBuilder& Project(std::string project);
  PendingBuilder& User(std::string user);
  // The job's own `priority` (the admin adjustment of its priority).
  PendingBuilder& Priority(int priority);
  PendingBuilder& SubmittedAt(Timestamp t);
  // Submitted this many seconds after TestEpoch().
  PendingBuilder& SubmittedAfter(int64_t seconds);
  PendingBuilder& Nodes(int n);
  PendingBuilder& Cpus(int n);
  PendingBuilder& MemoryMb(int64_t memory_mb);
  PendingBuilder& Gpus(int n, std::string model = {});
  PendingBuilder& Constraint(std::string key, std::string value);
  PendingBuilder& WalltimeSeconds(int64_t seconds);  // 0: no limit
  PendingBuilder& PredictedRunSeconds(int64_t seconds);
  PendingBuilder& PreemptedBy(model::JobId preemptor);

  scheduler::PendingJob Build() const { return job_; }
  operator scheduler::PendingJob() const { return Build(); }  // NOLINT: builder

 private:
  scheduler::PendingJob job_;
};
// Pool "p", queue "q", project "default", user "alice", 1 node x 1 cpu x
// 1024 MB, wall time 3600 s, submitted at TestEpoch() + id seconds.
PendingBuilder MakePending(model::JobId id);

// A running job. Its allocation is given node by node with On(), each share
// the per-node request; its expected end is start + wall time (forever
// without a wall time) unless ExpectedEnd() says otherwise.
class RunningBuilder {
 public:
  explicit RunningBuilder(model::JobId id);
  RunningBuilder& Pool(std::string pool);
  RunningBuilder& Queue(std::string queue);
  RunningBuilder& Project(std::string project);
  RunningBuilder& User(std::string user);
  RunningBuilder& Priority(int priority);
  RunningBuilder& SubmittedAt(Timestamp t);
  RunningBuilder& Cpus(int n);
  RunningBuilder& MemoryMb(int64_t memory_mb);
  RunningBuilder& Gpus(int n, std::string model = {});
  RunningBuilder& WalltimeSeconds(int64_t seconds);
  RunningBuilder& PredictedRunSeconds(int64_t seconds);
  RunningBuilder& StartedAt(Timestamp t);
  // Started this many seconds after TestEpoch() (negative: before).
  RunningBuilder& StartedAfter(int64_t seconds);
  RunningBuilder& ExpectedEnd(Timestamp t);
  RunningBuilder& PreemptingFor(model::JobId preemptor);
  // One node's share: the per-node cpus and memory, and these GPU indices
  // (as many as the request's gpus; empty: 0, 1, ... up to that count).
  RunningBuilder& On(std::string node, std::vector<int> gpu_indices = {});

  scheduler::RunningJob Build() const;
  operator scheduler::RunningJob() const { return Build(); }  // NOLINT: builder

 private:
  scheduler::RunningJob job_;
  std::optional<Timestamp> expected_end_;
};
// Pool "p", queue "q", project "default", user "alice", 1 cpu x 1024 MB,
// wall time 3600 s, submitted at TestEpoch() + id seconds, started at TestEpoch().
RunningBuilder MakeRunning(model::JobId id);

// A snapshot whose node usage is what the running jobs hold: `nodes` as
// given (usually free), plus every running job's allocation applied.
scheduler::Snapshot MakeSnapshot(std::vector<model::NodeUsage> nodes, std::vector<scheduler::PendingJob> pending,
                                 std::vector<scheduler::RunningJob> running = {});

}  // namespace unisched::testing
