// Builders for tests (see builders.h).

#include "builders.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace unisched::testing {

// ---- nodes ----

NodeBuilder::NodeBuilder(std::string name) {
  spec_.name = std::move(name);
}
NodeBuilder& NodeBuilder::Pool(std::string pool) {
  spec_.pool = std::move(pool);
  return *this;
}
NodeBuilder& NodeBuilder::Cpus(int cpus) {
  spec_.cpus = cpus;
  return *this;
}
NodeBuilder& NodeBuilder::MemoryMb(int64_t memory_mb) {
  spec_.memory_mb = memory_mb;
  return *this;
}
NodeBuilder& NodeBuilder::Gpus(int count, std::string model, int memory_gb) {
  int next = spec_.gpus.empty() ? 0 : spec_.gpus.back().index + 1;
  for (int i = 0; i < count; ++i) spec_.gpus.push_back({next++, model, memory_gb});
  return *this;
}
NodeBuilder& NodeBuilder::Label(std::string key, std::string value) {
  spec_.labels[std::move(key)] = std::move(value);
  return *this;
}
NodeBuilder& NodeBuilder::State(model::NodeState state) {
  state_ = state;
  return *this;
}
NodeBuilder& NodeBuilder::Used(int cpus, int64_t memory_mb) {
  cpus_used_ = cpus;
  memory_used_mb_ = memory_mb;
  return *this;
}
NodeBuilder& NodeBuilder::BusyGpus(std::vector<int> indices) {
  busy_gpus_ = std::move(indices);
  return *this;
}

model::NodeUsage NodeBuilder::Usage() const {
  model::NodeUsage usage;
  usage.spec = spec_;
  usage.state = state_;
  usage.cpus_used = cpus_used_;
  usage.memory_used_mb = memory_used_mb_;
  usage.gpu_busy = model::BusySet(spec_.gpus.size());
  for (size_t i = 0; i < spec_.gpus.size(); ++i) {
    usage.gpu_busy.Set(i, std::find(busy_gpus_.begin(), busy_gpus_.end(), spec_.gpus[i].index) != busy_gpus_.end());
  }
  return usage;
}

NodeBuilder MakeNode(std::string name) {
  return NodeBuilder(std::move(name));
}

// ---- queues and rules ----

QueueBuilder::QueueBuilder(std::string name) {
  queue_.name = std::move(name);
}
QueueBuilder& QueueBuilder::Pool(std::string pool) {
  queue_.pool = std::move(pool);
  return *this;
}
QueueBuilder& QueueBuilder::Kinds(std::vector<model::WorkloadKind> kinds) {
  queue_.workload_kinds = std::move(kinds);
  return *this;
}
QueueBuilder& QueueBuilder::MaxWalltimeHours(double hours) {
  queue_.policy.max_walltime_hours = hours;
  return *this;
}
QueueBuilder& QueueBuilder::DefaultWalltimeHours(double hours) {
  queue_.policy.default_walltime_hours = hours;
  return *this;
}
QueueBuilder& QueueBuilder::DefaultMemoryMbPerCpu(int64_t memory_mb) {
  queue_.policy.default_memory_mb_per_cpu = memory_mb;
  return *this;
}
QueueBuilder& QueueBuilder::Tier(int tier) {
  queue_.priority_tier = tier;
  return *this;
}
QueueBuilder& QueueBuilder::PolicyType(std::string type) {
  queue_.policy.type = std::move(type);
  return *this;
}
QueueBuilder& QueueBuilder::Weights(model::PriorityWeights weights) {
  queue_.policy.priority_weights = weights;
  return *this;
}
QueueBuilder& QueueBuilder::ProjectQuota(model::ResourceLimits limits) {
  queue_.policy.project_quota = limits;
  return *this;
}
QueueBuilder& QueueBuilder::UserQuota(model::ResourceLimits limits) {
  queue_.policy.user_quota = limits;
  return *this;
}
QueueBuilder& QueueBuilder::GpuQuotaPerProject(int gpus) {
  queue_.policy.gpu_quota_per_project = gpus;
  queue_.policy.project_quota.gpus = gpus;
  return *this;
}
QueueBuilder& QueueBuilder::QuotaAction(model::QuotaAction action) {
  queue_.policy.quota_action = action;
  return *this;
}
QueueBuilder& QueueBuilder::MaxConcurrency(int n) {
  queue_.policy.max_concurrency = n;
  return *this;
}
QueueBuilder& QueueBuilder::Preemptible(bool preemptible) {
  queue_.policy.preemptible = preemptible;
  return *this;
}
QueueBuilder& QueueBuilder::CanPreempt(bool can_preempt) {
  queue_.policy.can_preempt = can_preempt;
  return *this;
}
QueueBuilder& QueueBuilder::PreemptAction(model::PreemptAction action) {
  queue_.policy.preempt_action = action;
  return *this;
}
QueueBuilder& QueueBuilder::PreemptGraceSeconds(int seconds) {
  queue_.policy.preempt_grace_seconds = seconds;
  return *this;
}
QueueBuilder MakeQueue(std::string name) {
  return QueueBuilder(std::move(name));
}

RuleBuilder::RuleBuilder(std::string name) {
  rule_.name = std::move(name);
}
RuleBuilder& RuleBuilder::Kind(model::WorkloadKind kind) {
  rule_.kind = kind;
  return *this;
}
RuleBuilder& RuleBuilder::Feature(std::string key, std::string value) {
  rule_.features[std::move(key)] = std::move(value);
  return *this;
}
RuleBuilder& RuleBuilder::MinGpus(int n) {
  rule_.min_gpus = n;
  return *this;
}
RuleBuilder& RuleBuilder::MaxGpus(int n) {
  rule_.max_gpus = n;
  return *this;
}
RuleBuilder& RuleBuilder::Queue(std::string queue) {
  rule_.queue = std::move(queue);
  return *this;
}
RuleBuilder MakeRule(std::string name) {
  return RuleBuilder(std::move(name));
}

// ---- clusters ----

ClusterBuilder& ClusterBuilder::Pool(std::string name, model::PoolKind kind, model::Labels labels) {
  model::PoolSpec pool;
  pool.name = std::move(name);
  pool.kind = kind;
  pool.labels = std::move(labels);
  cluster_.pools.push_back(std::move(pool));
  return *this;
}

ClusterBuilder& ClusterBuilder::Node(const NodeBuilder& node) {
  model::NodeSpec spec = node.Spec();
  if (cluster_.FindPool(spec.pool) == nullptr) Pool(spec.pool);
  for (auto& pool : cluster_.pools) {
    if (pool.name != spec.pool) continue;
    pool.nodes.push_back(spec.name);
    for (const auto& [key, value] : pool.labels) spec.labels.emplace(key, value);  // the node's own win
  }
  cluster_.nodes.push_back(std::move(spec));
  return *this;
}

ClusterBuilder& ClusterBuilder::Queue(const QueueBuilder& queue) {
  cluster_.queues.push_back(queue.Build());
  return *this;
}

ClusterBuilder& ClusterBuilder::Rule(const RuleBuilder& rule) {
  cluster_.routing_rules.push_back(rule.Build());
  return *this;
}

ClusterBuilder& ClusterBuilder::Backfill(const std::string& pool, model::BackfillMode mode, int reservation_depth) {
  if (cluster_.FindPool(pool) == nullptr) Pool(pool);
  for (auto& p : cluster_.pools) {
    if (p.name != pool) continue;
    p.backfill = mode;
    p.reservation_depth = reservation_depth;
  }
  return *this;
}

ClusterBuilder& ClusterBuilder::Project(model::ProjectPolicy project) {
  cluster_.projects.push_back(std::move(project));
  return *this;
}

ClusterBuilder MakeCluster() {
  return ClusterBuilder();
}

model::ClusterSpec DefaultLikeCluster() {
  using model::PoolKind;
  using model::WorkloadKind;
  ClusterBuilder b;
  b.Pool("cpu-hpc-pool", PoolKind::kCpu, {{"cpu.arch", "x86"}, {"interconnect", "ib"}, {"purpose", "hpc"}});
  b.Pool("gpu-train-pool", PoolKind::kGpu, {{"cpu.arch", "x86"}, {"interconnect", "ib"}, {"purpose", "train"}});
  b.Pool("inference-pool", PoolKind::kGpu,
         {{"cpu.arch", "x86"}, {"interconnect", "ethernet"}, {"purpose", "inference"}});
  b.Pool("elastic-light-pool", PoolKind::kElastic,
         {{"cpu.arch", "x86"}, {"interconnect", "ethernet"}, {"purpose", "agent"}});
  for (int i = 1; i <= 4; ++i) {
    b.Node(MakeNode("x86-c64m256-hpc-0" + std::to_string(i)).Pool("cpu-hpc-pool").Cpus(64).MemoryMb(262144));
  }
  for (int i = 1; i <= 2; ++i) {
    b.Node(MakeNode("x86-c32m512g8-train-0" + std::to_string(i))
               .Pool("gpu-train-pool")
               .Cpus(32)
               .MemoryMb(524288)
               .Gpus(8, "h100", 80));
  }
  b.Node(MakeNode("x86-c16m128g4-infer-01").Pool("inference-pool").Cpus(16).MemoryMb(131072).Gpus(4, "l40s", 48));
  for (int i = 1; i <= 2; ++i) {
    b.Node(
        MakeNode("x86-c256m1024-agent-0" + std::to_string(i)).Pool("elastic-light-pool").Cpus(256).MemoryMb(1048576));
  }
  b.Queue(MakeQueue("hpc-precision")
              .Pool("cpu-hpc-pool")
              .Kinds({WorkloadKind::kHpc})
              .PolicyType("fairshare")
              .MaxWalltimeHours(72)
              .DefaultWalltimeHours(1)
              .DefaultMemoryMbPerCpu(4096));
  b.Queue(MakeQueue("ai-training")
              .Pool("gpu-train-pool")
              .Kinds({WorkloadKind::kAiTraining})
              .PolicyType("priority-with-quota")
              .MaxWalltimeHours(168)
              .DefaultMemoryMbPerCpu(8192));
  b.Queue(MakeQueue("ai-inference").Pool("inference-pool").Kinds({WorkloadKind::kAiInference}).MaxWalltimeHours(24));
  b.Queue(MakeQueue("agent-sandbox")
              .Pool("elastic-light-pool")
              .Kinds({WorkloadKind::kAgent})
              .PolicyType("elastic")
              .MaxWalltimeHours(1)
              .DefaultWalltimeHours(0.25)
              .DefaultMemoryMbPerCpu(512));
  b.Rule(MakeRule("fp64-hpc").Kind(WorkloadKind::kHpc).Feature("precision", "fp64").Queue("hpc-precision"));
  b.Rule(MakeRule("hpc-default").Kind(WorkloadKind::kHpc).Queue("hpc-precision"));
  b.Rule(MakeRule("gpu-training").Kind(WorkloadKind::kAiTraining).MinGpus(1).Queue("ai-training"));
  b.Rule(MakeRule("inference").Kind(WorkloadKind::kAiInference).Queue("ai-inference"));
  return b.Build();
}

std::vector<model::NodeUsage> EmptyUsage(const model::ClusterSpec& cluster) {
  std::vector<model::NodeUsage> nodes;
  for (const auto& spec : cluster.nodes) {
    model::NodeUsage usage;
    usage.spec = spec;
    usage.gpu_busy = model::BusySet(spec.gpus.size());
    nodes.push_back(std::move(usage));
  }
  return nodes;
}

// ---- requests and pending jobs ----

RequestBuilder& RequestBuilder::Nodes(int n) {
  request_.nodes = n;
  return *this;
}
RequestBuilder& RequestBuilder::Cpus(int n) {
  request_.cpus = n;
  return *this;
}
RequestBuilder& RequestBuilder::MemoryMb(int64_t memory_mb) {
  request_.memory_mb = memory_mb;
  return *this;
}
RequestBuilder& RequestBuilder::Gpus(int n, std::string model) {
  request_.gpus = n;
  request_.gpu_model = std::move(model);
  return *this;
}
RequestBuilder& RequestBuilder::WalltimeSeconds(int64_t seconds) {
  request_.walltime_seconds = seconds;
  return *this;
}
RequestBuilder MakeRequest() {
  RequestBuilder b;
  b.MemoryMb(1024).WalltimeSeconds(3600);
  return b;
}

PendingBuilder::PendingBuilder(model::JobId id) {
  job_.id = id;
  job_.pool = "p";
  job_.queue = "q";
  job_.project = "default";
  job_.user = "alice";
  job_.submitted_at = TestEpoch() + std::chrono::seconds(id);
  job_.resources.memory_mb = 1024;
  job_.resources.walltime_seconds = 3600;
}
PendingBuilder& PendingBuilder::Pool(std::string pool) {
  job_.pool = std::move(pool);
  return *this;
}
PendingBuilder& PendingBuilder::Queue(std::string queue) {
  job_.queue = std::move(queue);
  return *this;
}
PendingBuilder& PendingBuilder::Project(std::string project) {
  job_.project = std::move(project);
  return *this;
}
PendingBuilder& PendingBuilder::User(std::string user) {
  job_.user = std::move(user);
  return *this;
}
PendingBuilder& PendingBuilder::Priority(int priority) {
  job_.adjustment = priority;
  return *this;
}
PendingBuilder& PendingBuilder::SubmittedAt(Timestamp t) {
  job_.submitted_at = t;
  return *this;
}
PendingBuilder& PendingBuilder::SubmittedAfter(int64_t seconds) {
  job_.submitted_at = TestEpoch() + std::chrono::seconds(seconds);
  return *this;
}
PendingBuilder& PendingBuilder::Nodes(int n) {
  job_.resources.nodes = n;
  return *this;
}
PendingBuilder& PendingBuilder::Cpus(int n) {
  job_.resources.cpus = n;
  return *this;
}
PendingBuilder& PendingBuilder::MemoryMb(int64_t memory_mb) {
  job_.resources.memory_mb = memory_mb;
  return *this;
}
PendingBuilder& PendingBuilder::Gpus(int n, std::string model) {
  job_.resources.gpus = n;
  job_.resources.gpu_model = std::move(model);
  return *this;
}
PendingBuilder& PendingBuilder::Constraint(std::string key, std::string value) {
  job_.constraints[std::move(key)] = std::move(value);
  return *this;
}
PendingBuilder& PendingBuilder::WalltimeSeconds(int64_t seconds) {
  job_.resources.walltime_seconds = seconds;
  return *this;
}
PendingBuilder& PendingBuilder::PredictedRunSeconds(int64_t seconds) {
  job_.predicted_run_seconds = seconds;
  return *this;
}
PendingBuilder& PendingBuilder::PreemptedBy(model::JobId preemptor) {
  job_.preempted_by.push_back(preemptor);
  return *this;
}
PendingBuilder MakePending(model::JobId id) {
  return PendingBuilder(id);
}

// ---- running jobs and snapshots ----

RunningBuilder::RunningBuilder(model::JobId id) {
  job_.id = id;
  job_.pool = "p";
  job_.queue = "q";
  job_.project = "default";
  job_.user = "alice";
  job_.submitted_at = TestEpoch() + std::chrono::seconds(id);
  job_.started_at = TestEpoch();
  job_.resources.memory_mb = 1024;
  job_.resources.walltime_seconds = 3600;
}
RunningBuilder& RunningBuilder::Pool(std::string pool) {
  job_.pool = std::move(pool);
  return *this;
}
RunningBuilder& RunningBuilder::Queue(std::string queue) {
  job_.queue = std::move(queue);
  return *this;
}
RunningBuilder& RunningBuilder::Project(std::string project) {
  job_.project = std::move(project);
  return *this;
}
RunningBuilder& RunningBuilder::User(std::string user) {
  job_.user = std::move(user);
  return *this;
}
RunningBuilder& RunningBuilder::Priority(int priority) {
  job_.adjustment = priority;
  return *this;
}
RunningBuilder& RunningBuilder::SubmittedAt(Timestamp t) {
  job_.submitted_at = t;
  return *this;
}
RunningBuilder& RunningBuilder::Cpus(int n) {
  job_.resources.cpus = n;
  return *this;
}
RunningBuilder& RunningBuilder::MemoryMb(int64_t memory_mb) {
  job_.resources.memory_mb = memory_mb;
  return *this;
}
RunningBuilder& RunningBuilder::Gpus(int n, std::string model) {
  job_.resources.gpus = n;
  job_.resources.gpu_model = std::move(model);
  return *this;
}
RunningBuilder& RunningBuilder::WalltimeSeconds(int64_t seconds) {
  job_.resources.walltime_seconds = seconds;
  return *this;
}
RunningBuilder& RunningBuilder::PredictedRunSeconds(int64_t seconds) {
  job_.predicted_run_seconds = seconds;
  return *this;
}
RunningBuilder& RunningBuilder::StartedAt(Timestamp t) {
  job_.started_at = t;
  return *this;
}
RunningBuilder& RunningBuilder::StartedAfter(int64_t seconds) {
  job_.started_at = TestEpoch() + std::chrono::seconds(seconds);
  return *this;
}
RunningBuilder& RunningBuilder::ExpectedEnd(Timestamp t) {
  expected_end_ = t;
  return *this;
}
RunningBuilder& RunningBuilder::PreemptingFor(model::JobId preemptor) {
  job_.preempting_for = preemptor;
  return *this;
}
RunningBuilder& RunningBuilder::On(std::string node, std::vector<int> gpu_indices) {
  if (gpu_indices.empty()) {
    for (int i = 0; i < job_.resources.gpus; ++i) gpu_indices.push_back(i);
  }
  job_.allocation.push_back({std::move(node), job_.resources.cpus, job_.resources.memory_mb, std::move(gpu_indices)});
  return *this;
}
scheduler::RunningJob RunningBuilder::Build() const {
  scheduler::RunningJob job = job_;
  job.resources.nodes = std::max(1, static_cast<int>(job.allocation.size()));
  if (expected_end_) {
    job.expected_end = *expected_end_;
  } else if (job.resources.walltime_seconds > 0) {
    job.expected_end = job.started_at + std::chrono::seconds(job.resources.walltime_seconds);
  } else {
    job.expected_end = Timestamp::max();
  }
  return job;
}
RunningBuilder MakeRunning(model::JobId id) {
  return RunningBuilder(id);
}

scheduler::Snapshot MakeSnapshot(std::vector<model::NodeUsage> nodes, std::vector<scheduler::PendingJob> pending,
                                 std::vector<scheduler::RunningJob> running) {
  for (const auto& job : running) {
    for (const auto& share : job.allocation) {
      for (auto& node : nodes) {
        if (node.spec.name == share.node) node.Apply(share, +1);
      }
    }
  }
  scheduler::Snapshot snapshot;
  snapshot.nodes = std::move(nodes);
  snapshot.pending = std::move(pending);
  snapshot.running = std::move(running);
  return snapshot;
}

}  // namespace unisched::testing
