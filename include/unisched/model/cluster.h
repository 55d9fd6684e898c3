#pragma once
// The static shape of the cluster: pools, nodes, queues and routing rules, as
// typed values. The config adapter builds a ClusterSpec from YAML; the router
// and the scheduler read it. Nothing here does I/O.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unisched/model/resources.h"

namespace unisched::model {

enum class WorkloadKind { kHpc, kAiTraining, kAiInference, kAgent };
std::string_view ToString(WorkloadKind kind);  // "hpc", "ai-training", "ai-inference", "agent"
std::optional<WorkloadKind> ParseWorkloadKind(std::string_view text);

enum class PoolKind { kCpu, kGpu, kElastic };
std::string_view ToString(PoolKind kind);  // "cpu", "gpu", "elastic"
std::optional<PoolKind> ParsePoolKind(std::string_view text);

enum class NodeState { kUp, kDraining, kDrained, kDown };
std::string_view ToString(NodeState state);  // "up", "draining", "drained", "down"
std::optional<NodeState> ParseNodeState(std::string_view text);

struct GpuDevice {
  int index = 0;      // device index handed to jobs in CUDA_VISIBLE_DEVICES
  std::string model;  // e.g. "h100"
  int memory_gb = 0;
  bool operator==(const GpuDevice&) const = default;
};

struct NodeSpec {
  std::string name;  // architecture-spec-purpose, e.g. x86-c64m256-hpc-01
  std::string pool;
  Labels labels;  // the pool's labels merged under the node's own
  int cpus = 0;
  int64_t memory_mb = 0;
  std::vector<GpuDevice> gpus;
  // Run by a node agent (`unisched agent`, docs/agents.md) instead of by the
  // daemon on this machine: down until its agent registers.
  bool agent = false;
  bool operator==(const NodeSpec&) const = default;
};

// A job constraint every node matches by its own name, so that a job can be
// pinned to one node (as Slurm's --nodelist; `unisched baseline` measures
// each node this way): `"constraints": {"unisched.node": "x86-c64m256-hpc-01"}`.
// Reserved: it is matched against the name even where a node has a label of
// that key.
inline constexpr const char* kNodeNameConstraint = "unisched.node";

// What a job constraint `key` finds on `node`: its name for
// kNodeNameConstraint, else its label of that key; nullptr when it has none.
const std::string* ConstraintValue(const NodeSpec& node, const std::string& key);

// How a pool lets jobs pass one that cannot start (docs/policy/backfill.md).
//   fcfs:         strict; nothing passes a blocked job.
//   easy:         the first blocked job gets a reservation; later jobs start
//                 only if they end (by wall time) before it or use other room.
//   conservative: every blocked job (up to reservation_depth) gets one.
enum class BackfillMode { kFcfs, kEasy, kConservative };
std::string_view ToString(BackfillMode mode);  // "fcfs", "easy", "conservative"
std::optional<BackfillMode> ParseBackfillMode(std::string_view text);

// A backfill mode and whether it plans with predicted run times instead of
// the wall-time requests ("easy-predicted", "conservative-predicted";
// docs/policy/backfill.md "Predicted run times"). FCFS never predicts: it
// plans nothing.
struct BackfillChoice {
  BackfillChoice() = default;
  BackfillChoice(BackfillMode m, bool p = false) : mode(m), predicted(p) {}  // NOLINT: a mode is a choice
  BackfillMode mode = BackfillMode::kEasy;
  bool predicted = false;
  bool operator==(const BackfillChoice&) const = default;
};
std::optional<BackfillChoice> ParseBackfillChoice(std::string_view text);
std::string BackfillChoiceName(BackfillChoice choice);  // "easy", "conservative-predicted", ...

// The backends every daemon has (docs/adr/0006-pool-backend-port.md): pools
// whose nodes the daemon runs itself, and pools whose nodes run node agents.
inline constexpr std::string_view kLocalBackend = "local";
inline constexpr std::string_view kAgentBackend = "agent";

struct PoolSpec {
  std::string name;
  PoolKind kind = PoolKind::kCpu;
  Labels labels;
  std::vector<std::string> nodes;  // names, in config order
  BackfillMode backfill = BackfillMode::kEasy;
  int reservation_depth = 0;  // conservative: most reservations per cycle; 0 = every blocked job
  // Reservations and holes are planned with each job's predicted run time
  // (scheduler::JobFacts::predicted_run_seconds) where it has one: with
  // `planned_share` of it (at least 1 s, at most the request), lengthened
  // when the job outlives that (policy::CorrectedPrediction). The share was
  // chosen on the KTH SP2 trace and checked on HPC2N-2002
  // (docs/policy/backfill.md, "Predicted run times").
  bool predict_run_times = false;
  double planned_share = 0.2;
  // Price per hour of a ledger metric on this pool (docs/ledger.md), e.g.
  // {"gpu_seconds": 2.5} = 2.5 per GPU card-hour. Unpriced metrics cost 0.
  std::map<std::string, double> prices{};
  // Capacity planning (S14): the share of the platform's nodes this pool
  // should have, in percent; the capacity report sets it beside the pool's
  // share of the nodes and of the busy nodes. 0: none set. Where pools set
  // one, they sum to 100.
  double target_share_percent = 0;
  // Run by the agents of this pool's nodes; a failure drains the node
  // (docs/agents.md). Empty command: no check.
  // Its jobs run isolated (LaunchSpec::isolate: no network but loopback, a
  // read-only root, private /tmp, no_new_privs); docs/execution.md.
  bool sandbox = false;
  std::vector<std::string> health_check_command{};
  int health_check_interval_seconds = 60;
  int health_check_timeout_seconds = 10;
  // Who runs the pool's jobs (pools[].backend): "local", "agent", or the
  // name of a backend that places jobs itself (another cluster's
  // scheduler) and so has no nodes here. Empty in the YAML: "agent" when
  // the pool's nodes are agent nodes, else "local" (set by the config
  // loader).
  std::string backend{kLocalBackend};
  // The backend chooses where each job runs (the daemon's scheduler only
  // admits it by order, quotas and budgets): any backend but the two built in.
  bool PlacedByBackend() const { return backend != kLocalBackend && backend != kAgentBackend; }
};

// Upper bounds on what one scope (a project, a user) may hold at once in
// running jobs. Totals over all nodes of a job. Unset: no limit.
struct ResourceLimits {
  std::optional<int64_t> cpus;
  std::optional<int64_t> memory_mb;
  std::optional<int64_t> gpus;
  std::optional<int64_t> running_jobs;
  bool Empty() const { return !cpus && !memory_mb && !gpus && !running_jobs; }
  bool operator==(const ResourceLimits&) const = default;
};

// Multifactor priority weights (docs/policy/priority.md). Each factor is in
// [0, 1]; its term is round(weight * factor). The job's own `priority` (the
// admin adjustment) is added as is.
struct PriorityWeights {
  double fairshare = 0;
  double age = 0;
  double tier = 0;
  double size = 0;
  double max_age_hours = 168;  // age factor reaches 1 after waiting this long
  bool operator==(const PriorityWeights&) const = default;
};

enum class QuotaAction { kWait, kReject };
enum class PreemptAction { kRequeue, kCancel };

// The seed's queue policy block. Fields the policy issue acts on (fairshare,
// quota, preemption, scale-in) are parsed and validated now so configs written
// today keep their meaning.
struct QueuePolicy {
  std::string type = "fifo";  // fifo | fairshare | priority-with-quota | elastic
  std::optional<double> max_walltime_hours;
  std::optional<double> default_walltime_hours;
  std::optional<int64_t> default_memory_mb_per_cpu;
  std::optional<int> gpu_quota_per_project;
  bool preemptible = true;
  std::optional<int> scale_in_idle_seconds;
  std::optional<int> max_concurrency;

  // Policy engine keys (docs/policy/). gpu_quota_per_project (the seed's key)
  // is the same limit as project_quota.gpus; the config loader merges them.
  std::optional<PriorityWeights> priority_weights;  // unset: the defaults of `type`
  ResourceLimits project_quota;                     // per project, in this queue
  ResourceLimits user_quota;                        // per user, in this queue
  QuotaAction quota_action = QuotaAction::kWait;    // over quota: wait, or 403 at submit
  bool can_preempt = false;                         // its jobs may preempt preemptible jobs
  PreemptAction preempt_action = PreemptAction::kRequeue;
  int preempt_grace_seconds = 30;  // SIGTERM .. SIGKILL for its jobs when preempted

  // Retries (docs/policy/retries.md): a FAILED attempt is retried this many
  // times (a job's own max_retries overrides it), after a backoff that
  // doubles per retry; an attempt whose node failed is requeued at once, at
  // most max_node_fail_requeues times, when requeue_on_node_fail.
  int max_retries = 0;
  int retry_backoff_seconds = 10;
  bool requeue_on_node_fail = true;
  int max_node_fail_requeues = 3;

  // The weights this queue orders by: priority_weights, else those of `type`.
  PriorityWeights Weights() const;
  // A concurrency cap or a quota: a job over it waits without holding up
  // the jobs behind it (docs/policy/quotas.md).
  bool SetsLimits() const { return max_concurrency || !project_quota.Empty() || !user_quota.Empty(); }
};

struct QueueSpec {
  std::string name;
  std::string pool;
  QueuePolicy policy;
  std::vector<WorkloadKind> workload_kinds;  // kinds this queue serves; empty: any
  int priority_tier = 0;                     // higher tiers are ordered first
};

// One routing rule: when every present condition holds, the job goes to queue.
struct RoutingRule {
  std::string name;
  std::optional<WorkloadKind> kind;
  Labels features;  // workload feature key -> required value
  std::optional<int> min_gpus;
  std::optional<int> max_gpus;
  std::string queue;
};

// A project's budget per period (like Slurm's GrpTRESMins, per period):
// GPU-hours and CPU-hours charged to the ledger since the period began.
enum class BudgetPeriod { kDay, kWeek, kMonth };
struct Budget {
  std::optional<double> gpu_hours;             // allocated GPU card-hours
  std::optional<double> cpu_hours;             // allocated CPU core-hours
  BudgetPeriod period = BudgetPeriod::kMonth;  // calendar periods in UTC; weeks start on Monday
  QuotaAction action = QuotaAction::kWait;     // over budget: new jobs wait (BudgetExhausted) or get 403
  bool Empty() const { return !gpu_hours && !cpu_hours; }
};

// A project's policy: its fair share and its quota over all queues.
struct ProjectPolicy {
  std::string name;
  double shares = 1;                                                     // relative to the other projects
  std::map<std::string, double> user_shares;                             // users within the project; unlisted: 1
  ResourceLimits quota;                                                  // over every queue
  Budget budget{};                                                       // GPU-/CPU-hours per period
  bool SetsLimits() const { return !quota.Empty() || !budget.Empty(); }  // as QueuePolicy::SetsLimits
};

struct ClusterSpec {
  std::vector<PoolSpec> pools;
  std::vector<NodeSpec> nodes;
  std::vector<QueueSpec> queues;
  std::vector<RoutingRule> routing_rules;  // tried in order; first match wins
  std::vector<ProjectPolicy> projects;     // shares and quotas of projects
  double fairshare_half_life_hours = 168;  // usage loses half its weight in this time
  double fairshare_gpu_weight = 16;        // one GPU-second is charged as this many CPU-seconds
  // A pending job whose dependency can never hold (afterok on a job that
  // failed) is cancelled; false leaves it PENDING with reason
  // DependencyNeverSatisfied (Slurm's kill_invalid_depend, inverted default
  // there; docs/dependencies.md).
  bool kill_invalid_dependency = true;
  // A pass woken by an event (a submission, an end) between ticks looks at
  // the first this many jobs of each pool's queue, plus the jobs that
  // changed since the tick's full pass (Slurm's default_queue_depth); 0:
  // every pass ranks and explains the whole queue. Below this many pending
  // jobs every pass is full (docs/scheduling-cycle.md).
  int event_pass_depth = 1000;

  const PoolSpec* FindPool(std::string_view name) const;
  const QueueSpec* FindQueue(std::string_view name) const;
  const NodeSpec* FindNode(std::string_view name) const;
  const ProjectPolicy* FindProject(std::string_view name) const;
  // The default queue of a workload kind: the first queue that lists the kind
  // in workload_kinds, else nullptr.
  const QueueSpec* DefaultQueueFor(WorkloadKind kind) const;
};

}  // namespace unisched::model
