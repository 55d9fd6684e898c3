#include "unisched/api/reconcile.h"

#include <chrono>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

namespace unisched::api {

ledger::Reconciliation ReconcileLedger(const store::Store& store, const model::ClusterSpec& cluster) {
  // The job records first, the ledger after: an attempt that is finished in
  // the records read has its final entries committed already (they commit
  // with its terminal state), so the ledger read later holds all of them.
  // The other order would report a job that ended in between as missing.
  std::map<std::pair<model::JobId, int>, std::map<ledger::ChargeKey, double>> expected;
  std::map<std::pair<model::JobId, int>, bool> on_record;  // -> finished
  store::JobFilter filter;
  filter.limit = 1000;
  while (true) {
    store::JobPage page = store.ListJobs(filter);
    for (const auto& job : page.jobs) {
      for (const auto& attempt : job.attempts) {
        const bool finished = attempt.ended_at && attempt.state != model::JobState::kRunning;
        on_record[{job.id, attempt.number}] = finished;
        if (finished) expected[{job.id, attempt.number}] = ledger::AttemptUsage(cluster, job, attempt);
      }
    }
    if (!page.next_cursor) break;
    filter.cursor = page.next_cursor;
  }
  // Sandboxes (docs/sandboxes.md): each ended one is charged its life once,
  // as job 0 with attempt = its number; read before the ledger, as above.
  std::map<int64_t, std::map<ledger::ChargeKey, double>> sandbox_expected;
  for (const auto& row : store.ListSandboxes(/*active_only=*/false, std::numeric_limits<int>::max())) {
    if (!row.ended_at) continue;
    const nlohmann::json record = nlohmann::json::parse(row.record, nullptr, false);
    if (!record.is_object()) continue;
    const double seconds = std::chrono::duration<double>(*row.ended_at - row.created_at).count();
    sandbox_expected[row.id][{"instance_seconds", record.value("image", ""), record.value("node", "")}] = seconds;
  }
  auto recorded = store.LoadAllLedgerCharged();

  ledger::Reconciliation report;
  const store::LedgerCharged nothing;
  for (const auto& [attempt, usage] : expected) {
    auto it = recorded.find(attempt);
    const store::LedgerCharged& charged = it == recorded.end() ? nothing : it->second;
    std::map<ledger::ChargeKey, double> sums;
    for (const auto& [key, sum] : charged.sums) {
      if (!ledger::IsSampledMetric(std::get<0>(key))) sums.emplace(key, sum);
    }
    ledger::ReconcileAttempt(attempt.first, attempt.second, usage, sums, charged.duplicated_entries,
                             kReconcileTolerance, report);
  }
  for (const auto& [id, usage] : sandbox_expected) {
    auto it = recorded.find({0, static_cast<int>(id)});
    const store::LedgerCharged& charged = it == recorded.end() ? nothing : it->second;
    ledger::ReconcileAttempt(0, static_cast<int>(id), usage, charged.sums, charged.duplicated_entries,
                             kReconcileTolerance, report);
  }
  for (const auto& [attempt, charged] : recorded) {
    // Job 0 holds project storage samples and sandboxes, which belong to no job.
    if (attempt.first != 0 && !on_record.count(attempt)) ++report.unverifiable_attempts;
  }
  return report;
}

}  // namespace unisched::api
