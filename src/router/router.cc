// The feature-aware router: explicit queue or routing rules (first match that
// can hold the job) or the kind's default queue; then the queue's defaults;
// then "could this ever run here", so nothing waits forever for a node that
// does not exist.

#include "unisched/router/router.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "unisched/model/fit.h"
#include "unisched/model/words.h"

namespace unisched::router {
namespace {

using model::ClusterSpec;
using model::Count;
using model::DevicesOfModel;
using model::GpuPhrase;
using model::JoinLabels;
using model::NodeSpec;
using model::QueueSpec;
using model::ResourceRequest;
using model::RoutingRule;
using model::WorkloadKind;

// When a queue sets no default: one hour of wall time, 1 GiB per cpu.
constexpr int64_t kFallbackWalltimeSeconds = 3600;
constexpr int64_t kFallbackMemoryMbPerCpu = 1024;

int64_t HoursToSeconds(double hours) {
  const double seconds = hours * 3600.0;
  if (!(seconds > 0)) return 0;  // also NaN
  if (seconds >= 9.0e18) return std::numeric_limits<int64_t>::max();
  return std::llround(seconds);
}

int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    return (a < 0) != (b < 0) ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  }
  return out;
}

// 72 -> "72", 0.5 -> "0.5": the shortest text that reads back the same.
std::string FormatNumber(double value) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  if (ec != std::errc()) return "?";
  return std::string(buf, end);
}

// "hpc", "hpc and agent", "hpc, ai-training and agent".
std::string JoinKinds(const std::vector<WorkloadKind>& kinds) {
  std::string text;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (i > 0) text += i + 1 == kinds.size() ? " and " : ", ";
    text += std::string(model::ToString(kinds[i]));
  }
  return text;
}

bool LabelsMatch(const NodeSpec& node, const model::Labels& constraints) {
  for (const auto& [key, value] : constraints) {
    const std::string* found = model::ConstraintValue(node, key);
    if (found == nullptr || *found != value) return false;
  }
  return true;
}

bool Serves(const QueueSpec& queue, WorkloadKind kind) {
  return queue.workload_kinds.empty() ||
         std::find(queue.workload_kinds.begin(), queue.workload_kinds.end(), kind) != queue.workload_kinds.end();
}

std::vector<const NodeSpec*> PoolNodes(const ClusterSpec& cluster, const std::string& pool_name) {
  const model::PoolSpec* pool = cluster.FindPool(pool_name);
  std::vector<const NodeSpec*> nodes;
  for (const auto& node : cluster.nodes) {
    const bool listed =
        pool != nullptr && std::find(pool->nodes.begin(), pool->nodes.end(), node.name) != pool->nodes.end();
    if (node.pool == pool_name || listed) nodes.push_back(&node);
  }
  return nodes;
}

Error Unsatisfiable(std::string message, std::string field) {
  return Error::Unprocessable("unsatisfiable", std::move(message), std::move(field));
}

// Why the pool could never hold the job, or nothing. Looks at capacity only,
// not at usage or node state: a drained node may be resumed. Sets *no_gpus
// when the job asks for GPUs and the pool has none, so the caller can say
// where GPUs are.
std::optional<Error> CheckFeasible(const ClusterSpec& cluster, const QueueSpec& queue, const ResourceRequest& res,
                                   const model::Labels& constraints, bool memory_defaulted, bool* no_gpus) {
  const std::string& pool = queue.pool;
  // Its backend places jobs on nodes it alone knows: it decides what fits.
  if (const model::PoolSpec* spec = cluster.FindPool(pool); spec && spec->PlacedByBackend()) return std::nullopt;
  const std::vector<const NodeSpec*> nodes = PoolNodes(cluster, pool);
  const int64_t need_nodes = std::max(res.nodes, 1);
  if (nodes.empty()) {
    return Unsatisfiable("queue " + queue.name + " (pool " + pool + ") has no nodes", "resources.nodes");
  }

  if (res.gpus > 0) {
    bool any_gpus = false;
    for (const NodeSpec* n : nodes) any_gpus = any_gpus || !n->gpus.empty();
    if (!any_gpus) {
      *no_gpus = true;
      return Unsatisfiable("queue " + queue.name + " (pool " + pool + ") has no GPUs", "resources.gpus");
    }
  }

  std::vector<const NodeSpec*> matching;
  for (const NodeSpec* n : nodes) {
    if (LabelsMatch(*n, constraints)) matching.push_back(n);
  }
  if (matching.empty()) {
    // Name the first label no node has: that is the one to change.
    for (const auto& [key, value] : constraints) {
      std::set<std::string> found;
      bool any = false;
      for (const NodeSpec* n : nodes) {
        const std::string* has = model::ConstraintValue(*n, key);
        if (has == nullptr) continue;
        any = any || *has == value;
        found.insert(key + "=" + *has);
      }
      if (any) continue;
      std::string text = "requires " + key + "=" + value + "; no node of " + pool;
      if (found.empty()) return Unsatisfiable(text + " has label " + key, "constraints");
      text += " has it (found";
      for (const auto& f : found) text += " " + f;
      return Unsatisfiable(text + ")", "constraints");
    }
    return Unsatisfiable("requires " + JoinLabels(constraints) + "; no node of " + pool + " has all of them",
                         "constraints");
  }
  const std::string of_pool = " of " + pool + (constraints.empty() ? "" : " with " + JoinLabels(constraints));
  if (static_cast<int64_t>(nodes.size()) < need_nodes) {
    return Unsatisfiable(
        "requires " + Count(need_nodes, "node", "nodes") + " but " + pool + " has only " + std::to_string(nodes.size()),
        "resources.nodes");
  }
  if (static_cast<int64_t>(matching.size()) < need_nodes) {
    return Unsatisfiable("requires " + Count(need_nodes, "node", "nodes") + " with " + JoinLabels(constraints) +
                             " but " + pool + " has only " + std::to_string(matching.size()),
                         "constraints");
  }

  if (res.gpus > 0 && !res.gpu_model.empty()) {
    std::set<std::string> models;
    for (const NodeSpec* n : matching) {
      for (const auto& d : n->gpus) models.insert(d.model);
    }
    bool any = false;
    for (const auto& m : models) any = any || model::GpuModelMatches(m, res.gpu_model);
    if (!any) {
      std::string list;
      for (const auto& m : models) list += (list.empty() ? "" : ", ") + m;
      return Unsatisfiable("no node" + of_pool + " has " + res.gpu_model + " GPUs" +
                               (list.empty() ? "" : " (models: " + list + "); ask for one of those or omit gpu_model"),
                           "resources.gpu_model");
    }
  }

  // Each resource alone, GPUs first (the scarcest), then cpus, then memory.
  struct Capacity {
    std::string field;
    std::string what;  // "16 GPUs (h100)"
    std::string unit;  // "" or " MB"
    int64_t need = 0;
    int64_t ok_count = 0;
    int64_t largest = 0;
  };
  std::vector<Capacity> capacities;
  auto measure = [&](std::string field, std::string what, std::string unit, int64_t need, auto capacity_of) {
    Capacity c{std::move(field), std::move(what), std::move(unit), need, 0, 0};
    for (const NodeSpec* n : matching) {
      const int64_t have = capacity_of(*n);
      c.largest = std::max(c.largest, have);
      if (have >= need) ++c.ok_count;
    }
    capacities.push_back(std::move(c));
  };
  if (res.gpus > 0) {
    measure("resources.gpus", GpuPhrase(res.gpus, res.gpu_model), "", res.gpus,
            [&](const NodeSpec& n) { return static_cast<int64_t>(DevicesOfModel(n, res.gpu_model)); });
  }
  measure("resources.cpus", Count(res.cpus, "cpu", "cpus"), "", res.cpus,
          [](const NodeSpec& n) { return static_cast<int64_t>(n.cpus); });
  measure("resources.memory_mb", std::to_string(res.memory_mb) + " MB memory", " MB", res.memory_mb,
          [](const NodeSpec& n) { return n.memory_mb; });
  const std::string memory_note =
      memory_defaulted
          ? " (memory_mb was not given; queue " + queue.name + " defaults it to cpus x " +
                std::to_string(queue.policy.default_memory_mb_per_cpu.value_or(kFallbackMemoryMbPerCpu)) + " MB)"
          : "";
  for (const auto& c : capacities) {
    if (c.ok_count > 0) continue;
    std::string text = "no node" + of_pool + " has " + c.what + " (largest: " + std::to_string(c.largest) + c.unit +
                       "); ask for at most " + std::to_string(c.largest) + " per node or use more nodes";
    if (c.field == "resources.memory_mb") text += memory_note;
    return Unsatisfiable(std::move(text), c.field);
  }
  for (const auto& c : capacities) {
    if (c.ok_count >= need_nodes) continue;
    return Unsatisfiable("requires " + Count(need_nodes, "node", "nodes") + " but " + pool + " has only " +
                             std::to_string(c.ok_count) + " with " + c.what +
                             (constraints.empty() ? "" : " and " + JoinLabels(constraints)),
                         "resources.nodes");
  }

  // All resources at once on the same node.
  model::NodeUsage usage;
  int64_t together = 0;
  for (const NodeSpec* n : matching) {
    usage.spec = *n;
    if (!model::CheckNode(usage, res, constraints, /*ignore_usage=*/true)) ++together;
  }
  if (together < need_nodes) {
    std::string all =
        Count(res.cpus, "cpu", "cpus") + (res.gpus > 0 ? ", " : " and ") + std::to_string(res.memory_mb) + " MB memory";
    if (res.gpus > 0) all += " and " + GpuPhrase(res.gpus, res.gpu_model);
    if (together == 0) {
      const auto tightest =
          std::min_element(capacities.begin(), capacities.end(),
                           [](const Capacity& a, const Capacity& b) { return a.ok_count < b.ok_count; });
      return Unsatisfiable(
          "no node" + of_pool + " has " + all + " together; ask for less per node or use more nodes" + memory_note,
          tightest->field);
    }
    return Unsatisfiable("requires " + Count(need_nodes, "node", "nodes") + " but " + pool + " has only " +
                             std::to_string(together) + " with " + all + " each",
                         "resources.nodes");
  }
  return std::nullopt;
}

struct QueueOutcome {
  Result<RouteDecision> result;
  bool no_gpus = false;  // failed because the pool has no GPUs at all
};

// Applies the queue's defaults and checks the job against its limits and its
// pool. `reason` becomes the decision's reason.
QueueOutcome EvaluateQueue(const ClusterSpec& cluster, const QueueSpec& queue, const RouteRequest& request,
                           std::string reason) {
  ResourceRequest res = request.resources;
  const model::QueuePolicy& policy = queue.policy;
  if (res.walltime_seconds == 0) {
    if (policy.default_walltime_hours) {
      res.walltime_seconds = HoursToSeconds(*policy.default_walltime_hours);
    } else if (policy.max_walltime_hours) {
      res.walltime_seconds = HoursToSeconds(*policy.max_walltime_hours);
    } else {
      res.walltime_seconds = kFallbackWalltimeSeconds;
    }
  }
  const bool memory_defaulted = res.memory_mb == 0;
  if (memory_defaulted) {
    res.memory_mb = SaturatingMul(res.cpus, policy.default_memory_mb_per_cpu.value_or(kFallbackMemoryMbPerCpu));
  }
  if (policy.max_walltime_hours) {
    const int64_t max_seconds = HoursToSeconds(*policy.max_walltime_hours);
    if (res.walltime_seconds > max_seconds) {
      return {Error::Unprocessable(
          "walltime_exceeds_max",
          "walltime_seconds " + std::to_string(res.walltime_seconds) + " exceeds the maximum of queue " + queue.name +
              " (" + std::to_string(max_seconds) + " s = " + FormatNumber(*policy.max_walltime_hours) + " h)",
          "resources.walltime_seconds")};
    }
  }
  bool no_gpus = false;
  if (auto error = CheckFeasible(cluster, queue, res, request.constraints, memory_defaulted, &no_gpus)) {
    return {std::move(*error), no_gpus};
  }
  return {RouteDecision{queue.name, queue.pool, std::move(reason), res}};
}

bool RuleMatches(const RoutingRule& rule, const RouteRequest& request) {
  if (rule.kind && *rule.kind != request.workload.kind) return false;
  for (const auto& [key, value] : rule.features) {
    auto it = request.workload.features.find(key);
    if (it == request.workload.features.end() || it->second != value) return false;
  }
  if (rule.min_gpus && request.resources.gpus < *rule.min_gpus) return false;
  if (rule.max_gpus && request.resources.gpus > *rule.max_gpus) return false;
  return true;
}

// "rule fp64-hpc: kind=hpc, precision=fp64 -> hpc-precision (cpu-hpc-pool)".
std::string RuleReason(const RoutingRule& rule, const QueueSpec& queue) {
  std::vector<std::string> terms;
  if (rule.kind) terms.push_back("kind=" + std::string(model::ToString(*rule.kind)));
  for (const auto& [key, value] : rule.features) terms.push_back(key + "=" + value);
  if (rule.min_gpus && rule.max_gpus) {
    terms.push_back(*rule.min_gpus == *rule.max_gpus
                        ? "gpus=" + std::to_string(*rule.min_gpus)
                        : "gpus in [" + std::to_string(*rule.min_gpus) + ", " + std::to_string(*rule.max_gpus) + "]");
  } else if (rule.min_gpus) {
    terms.push_back("gpus>=" + std::to_string(*rule.min_gpus));
  } else if (rule.max_gpus) {
    terms.push_back("gpus<=" + std::to_string(*rule.max_gpus));
  }
  std::string text = "rule " + rule.name + ": ";
  if (terms.empty()) {
    text += "any job";
  } else {
    for (size_t i = 0; i < terms.size(); ++i) text += (i ? ", " : "") + terms[i];
  }
  return text + " -> " + queue.name + " (" + queue.pool + ")";
}

// Routing without an explicit queue: the rules in order, then the default.
QueueOutcome RouteAutomatically(const ClusterSpec& cluster, const RouteRequest& request) {
  std::optional<QueueOutcome> first_failure;
  std::vector<std::string> skipped;
  for (const RoutingRule& rule : cluster.routing_rules) {
    if (!RuleMatches(rule, request)) continue;
    const QueueSpec* queue = cluster.FindQueue(rule.queue);
    QueueOutcome outcome =
        queue != nullptr
            ? EvaluateQueue(cluster, *queue, request, RuleReason(rule, *queue))
            : QueueOutcome{Error::Unprocessable(
                  "no_route", "rule " + rule.name + " names queue " + rule.queue + ", which does not exist", "queue")};
    if (outcome.result.ok()) {
      // Say why an earlier, more specific rule was passed over.
      for (const auto& s : skipped) outcome.result->reason += "; skipped " + s;
      return outcome;
    }
    skipped.push_back("rule " + rule.name + ": " + outcome.result.error().message);
    if (!first_failure) first_failure = std::move(outcome);
  }
  if (first_failure) return std::move(*first_failure);

  const WorkloadKind kind = request.workload.kind;
  const QueueSpec* queue = cluster.DefaultQueueFor(kind);
  if (queue == nullptr) {
    return {Error::Unprocessable(
        "no_route",
        "no routing rule matches and no queue serves kind " + std::string(model::ToString(kind)) + "; name a queue",
        "workload.kind")};
  }
  return EvaluateQueue(cluster, *queue, request, "default queue for kind " + std::string(model::ToString(kind)));
}

// A queue serving the job's kind that could hold it, other than `exclude`:
// what automatic routing picks, else the first such queue in config order.
std::string SuggestQueue(const ClusterSpec& cluster, const RouteRequest& request, const std::string& exclude,
                         bool try_automatic) {
  RouteRequest automatic = request;
  automatic.queue.reset();
  if (try_automatic) {
    QueueOutcome outcome = RouteAutomatically(cluster, automatic);
    if (outcome.result.ok() && outcome.result->queue != exclude) return outcome.result->queue;
  }
  for (const QueueSpec& queue : cluster.queues) {
    if (queue.name == exclude || !Serves(queue, request.workload.kind)) continue;
    if (EvaluateQueue(cluster, queue, automatic, {}).result.ok()) return queue.name;
  }
  return {};
}

}  // namespace

Result<RouteDecision> Route(const model::ClusterSpec& cluster, const RouteRequest& request) {
  if (!request.queue) {
    QueueOutcome outcome = RouteAutomatically(cluster, request);
    if (!outcome.result.ok() && outcome.no_gpus) {
      Error error = outcome.result.error();
      const std::string suggestion = SuggestQueue(cluster, request, {}, /*try_automatic=*/false);
      error.message +=
          suggestion.empty() ? "; ask for 0 GPUs or name a queue with GPUs" : "; ask for 0 GPUs or use " + suggestion;
      return error;
    }
    return std::move(outcome.result);
  }

  const std::string& name = *request.queue;
  const QueueSpec* queue = cluster.FindQueue(name);
  if (queue == nullptr) {
    std::string known;
    for (const auto& q : cluster.queues) known += (known.empty() ? "" : ", ") + q.name;
    return Error::Unprocessable("unknown_queue",
                                "queue " + name + " does not exist; omit queue to route automatically" +
                                    (known.empty() ? "" : " or use one of: " + known),
                                "queue");
  }
  const WorkloadKind kind = request.workload.kind;
  if (!Serves(*queue, kind)) {
    std::string suggestion = SuggestQueue(cluster, request, name, /*try_automatic=*/true);
    if (suggestion.empty()) {
      if (const QueueSpec* fallback = cluster.DefaultQueueFor(kind)) suggestion = fallback->name;
    }
    return Error::Unprocessable("queue_mismatch",
                                "queue " + name + " serves " + JoinKinds(queue->workload_kinds) + " jobs, not " +
                                    std::string(model::ToString(kind)) + "; omit queue to route automatically" +
                                    (suggestion.empty() ? "" : " or use " + suggestion),
                                "queue");
  }
  QueueOutcome outcome = EvaluateQueue(cluster, *queue, request, "queue " + name + " named by the submitter");
  if (!outcome.result.ok() && outcome.no_gpus) {
    Error error = outcome.result.error();
    const std::string suggestion = SuggestQueue(cluster, request, name, /*try_automatic=*/true);
    const QueueSpec* suggested = cluster.FindQueue(suggestion);
    if (suggested == nullptr) {
      error.message += "; omit queue or ask for 0 GPUs";
    } else if (Serves(*suggested, kind)) {
      error.message += "; omit queue or use " + suggestion;
    } else {
      // A rule may route there although naming it would be a mismatch.
      error.message += "; omit queue to route to " + suggestion;
    }
    return error;
  }
  return std::move(outcome.result);
}

}  // namespace unisched::router
