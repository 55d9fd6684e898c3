// Charges and reconciliation (ledger.h, docs/ledger.md).

#include "unisched/ledger/ledger.h"

#include <algorithm>
#include <cmath>

namespace unisched::ledger {

std::vector<Charge> AllocatedCharges(const model::ClusterSpec& cluster, const model::Job& job,
                                     const model::Attempt& attempt, Timestamp from, Timestamp to) {
  std::vector<Charge> out;
  if (to <= from) return out;
  const double seconds = std::chrono::duration<double>(to - from).count();
  const model::PoolSpec* pool = cluster.FindPool(job.pool);
  if (pool && pool->PlacedByBackend()) {
    // Placed by the pool's backend: no node shares here, so the request is
    // what the job holds (per node times nodes), charged to the backend.
    const double nodes = std::max(job.resources.nodes, 1);
    out.push_back({kCpuCoreSeconds, "", pool->backend, nodes * job.resources.cpus * seconds});
    out.push_back(
        {kMemoryMbSeconds, "", pool->backend, nodes * static_cast<double>(job.resources.memory_mb) * seconds});
    if (job.resources.gpus > 0) {
      const std::string model_name = job.resources.gpu_model.empty() ? "any" : job.resources.gpu_model;
      out.push_back({kGpuSeconds, model_name, pool->backend, nodes * job.resources.gpus * seconds});
    }
    return out;
  }
  for (const auto& share : attempt.allocation) {
    out.push_back({kCpuCoreSeconds, "", share.node, share.cpus * seconds});
    out.push_back({kMemoryMbSeconds, "", share.node, static_cast<double>(share.memory_mb) * seconds});
    // GPU card-seconds per model: as the fit chose each device; for an
    // attempt stored before that was kept, the model of its index on the node.
    std::map<std::string, int> cards;
    const bool models_kept = share.gpu_models.size() == share.gpu_indices.size();
    const model::NodeSpec* node = models_kept ? nullptr : cluster.FindNode(share.node);
    for (size_t k = 0; k < share.gpu_indices.size(); ++k) {
      std::string model_name = models_kept ? share.gpu_models[k] : "unknown";
      if (node) {
        for (const auto& gpu : node->gpus) {
          if (gpu.index == share.gpu_indices[k]) model_name = gpu.model;
        }
      }
      ++cards[model_name];
    }
    for (const auto& [model_name, count] : cards) out.push_back({kGpuSeconds, model_name, share.node, count * seconds});
  }
  if (pool && pool->kind == model::PoolKind::kElastic && !attempt.allocation.empty()) {
    out.push_back({kInstanceSeconds, "", attempt.allocation.front().node, seconds});
  }
  return out;
}

std::map<ChargeKey, double> AttemptUsage(const model::ClusterSpec& cluster, const model::Job& job,
                                         const model::Attempt& attempt) {
  std::map<ChargeKey, double> out;
  const std::optional<Timestamp> start = attempt.RunStart();
  if (!start || !attempt.ended_at) return out;
  for (const auto& c : AllocatedCharges(cluster, job, attempt, *start, *attempt.ended_at)) {
    out[{c.metric, c.detail, c.node}] += c.quantity;
  }
  const model::PoolSpec* pool = cluster.FindPool(job.pool);
  const std::string where = !attempt.allocation.empty()       ? attempt.allocation.front().node
                            : pool && pool->PlacedByBackend() ? pool->backend
                                                              : std::string();
  if (attempt.usage && !where.empty()) {
    out[{kCpuSecondsUsed, "", where}] += attempt.usage->user_cpu_seconds + attempt.usage->system_cpu_seconds;
  }
  // Bytes staged: charged once, with the attempt's end (docs/data.md).
  if (attempt.usage && !where.empty()) {
    if (attempt.usage->network_bytes_in > 0) {
      out[{kNetworkBytesIn, "", where}] += static_cast<double>(attempt.usage->network_bytes_in);
    }
    if (attempt.usage->network_bytes_out > 0) {
      out[{kNetworkBytesOut, "", where}] += static_cast<double>(attempt.usage->network_bytes_out);
    }
  }
  return out;
}

void ReconcileAttempt(model::JobId job, int attempt, const std::map<ChargeKey, double>& expected,
                      const std::map<ChargeKey, double>& recorded, int64_t duplicated_entries, double tolerance,
                      Reconciliation& out) {
  ++out.attempts_checked;
  if (duplicated_entries > 0) {
    out.duplicated += duplicated_entries;
    out.details.push_back({"duplicated", job, attempt, "", "", "", 0, static_cast<double>(duplicated_entries)});
  }
  auto off = [tolerance](double want, double got) {
    return std::abs(want - got) > std::max(1e-6, tolerance * std::abs(want));
  };
  for (const auto& [key, want] : expected) {
    const auto& [metric, detail, node] = key;
    auto it = recorded.find(key);
    if (it == recorded.end()) {
      if (want == 0) continue;  // nothing to charge, nothing missing
      ++out.missing;
      out.details.push_back({"missing", job, attempt, metric, detail, node, want, 0});
    } else if (off(want, it->second)) {
      ++out.mismatched;
      out.details.push_back({"mismatched", job, attempt, metric, detail, node, want, it->second});
    }
  }
  for (const auto& [key, got] : recorded) {
    if (expected.count(key) || std::abs(got) <= 1e-6) continue;
    const auto& [metric, detail, node] = key;
    ++out.mismatched;  // charged for something the job record does not explain
    out.details.push_back({"mismatched", job, attempt, metric, detail, node, 0, got});
  }
}

Subject JobSubject(const model::Job& job, int attempt) {
  return {std::to_string(job.id) + "/" + std::to_string(attempt),
          job.id,
          attempt,
          job.user,
          job.project,
          job.queue,
          job.pool,
          std::string(model::ToString(job.workload.kind))};
}

Entry MakeEntry(const Subject& subject, const Charge& charge, Timestamp from, Timestamp to, bool final,
                Timestamp recorded_at) {
  Entry e;
  e.key = subject.id + "/" + charge.metric + "/" + charge.detail + "/" + charge.node + "/" +
          (final ? std::string("final") : std::to_string(ToUnixMillis(from)));
  e.job = subject.job;
  e.attempt = subject.attempt;
  e.user = subject.user;
  e.project = subject.project;
  e.queue = subject.queue;
  e.pool = subject.pool;
  e.workload_kind = subject.workload_kind;
  e.node = charge.node;
  e.metric = charge.metric;
  e.detail = charge.detail;
  e.quantity = charge.quantity;
  e.start = from;
  e.end = to;
  e.final = final;
  e.recorded_at = recorded_at;
  return e;
}

}  // namespace unisched::ledger
