#include "daemon/accounting.h"

#include <chrono>
#include <cmath>

namespace unisched::daemon {
namespace {

// Fairshare usage is kept in memory and saved this often (and at stop): a
// crash loses at most this much charged usage.
constexpr std::chrono::seconds kUsageSaveEvery{60};

}  // namespace

Accounting::Accounting(const config::LiveConfig& live, const store::AccountingReads& ledger, metrics::Metrics& metrics,
                       const Clock& clock)
    : live_(live),
      ledger_(ledger),
      metrics_(metrics),
      clock_(clock),
      fairshare_usage_(live.Current().cluster.fairshare_half_life_hours * 3600.0) {}

void Accounting::RestoreFairshare(const store::FairshareUsage& saved, Timestamp now) {
  std::vector<policy::DecayedUsage::Entry> entries;
  for (const auto& e : saved.entries) entries.push_back({e.project, e.user, e.usage});
  fairshare_usage_.Restore(entries, saved.as_of);
  last_accrual_ = now;
  next_usage_save_ = now + kUsageSaveEvery;
}

void Accounting::ResumeCharging(const model::Job& job, const model::Attempt& attempt,
                                const store::LedgerCharged& charged, Timestamp now) {
  // Interim charging resumes where the ledger says it got to: nothing
  // charged twice, nothing lost.
  Charging& c = charging_[{job.id, attempt.number}];
  c.until = charged.until.value_or(job.started_at.value_or(now));
  c.sums = charged.sums;
}

void Accounting::BeginCharging(model::JobId job, int attempt, Timestamp now) {
  charging_[{job, attempt}] = Charging{now, {}};
}

void Accounting::AppendCharge(Batch& batch, const model::Job& job, int attempt, const ledger::Charge& charge,
                              Timestamp from, Timestamp to, bool final) {
  store::LedgerEntry e = ledger::MakeEntry(ledger::JobSubject(job, attempt), charge, from, to, final, clock_.Now());
  // Counted once the entry is committed (a replayed key adds nothing to the
  // ledger, but the daemon never replays its own keys).
  batch.after_commit.push_back(
      [this, final, metric = e.metric, quantity = e.quantity, project = e.project, end = e.end] {
        metrics_.CountLedgerEntry(final ? "final" : "interim", metric, quantity);
        auto budget = budgets_.find(project);
        if (budget == budgets_.end() || end <= budget->second.period_start) return;
        if (metric == ledger::kGpuSeconds) budget->second.use.gpu_hours += quantity / 3600.0;
        if (metric == ledger::kCpuCoreSeconds) budget->second.use.cpu_hours += quantity / 3600.0;
      });
  batch.writes.push_back([e = std::move(e)](store::Transaction& t) { return t.AppendLedger(e); });
}

void Accounting::RefreshBudgets(Timestamp now) {
  for (const auto& project : current_config().cluster.projects) {
    if (project.budget.Empty()) continue;
    const Timestamp start = policy::PeriodStart(project.budget.period, now);
    BudgetTrack& track = budgets_[project.name];
    if (track.period_start == start) continue;
    // A new period (or the first look): what the ledger holds since it began.
    store::UsageQuery query;
    query.from = start;
    query.group_by = {"project"};
    query.visible_projects = std::vector<std::string>{project.name};
    track = BudgetTrack{start, {}};
    for (const auto& row : ledger_.QueryUsage(query)) {
      auto metric = [&row](const char* name) {
        auto it = row.metrics.find(name);
        return it == row.metrics.end() ? 0.0 : it->second;
      };
      track.use.gpu_hours += metric(ledger::kGpuSeconds) / 3600.0;
      track.use.cpu_hours += metric(ledger::kCpuCoreSeconds) / 3600.0;
    }
  }
}

std::map<std::string, policy::BudgetUse> Accounting::BudgetUse() const {
  std::map<std::string, policy::BudgetUse> use;
  for (const auto& [project, track] : budgets_) use[project] = track.use;
  return use;
}

void Accounting::ChargeRunningIfDue(const ActiveJobs& active, Batch& batch, Timestamp now) {
  if (now < next_charge_) return;
  next_charge_ = now + std::chrono::seconds(current_config().store.accounting_interval_seconds);
  for (const auto& [id, job] : active) {
    if (job.state != model::JobState::kRunning) continue;
    const model::Attempt* attempt = job.CurrentAttempt();
    if (!attempt) continue;
    auto it = charging_.find({id, attempt->number});
    if (it == charging_.end()) it = charging_.emplace(std::make_pair(id, attempt->number), Charging{now, {}}).first;
    Charging& c = it->second;
    if (now <= c.until) continue;
    for (const auto& charge : ledger::AllocatedCharges(current_config().cluster, job, *attempt, c.until, now)) {
      AppendCharge(batch, job, attempt->number, charge, c.until, now, /*final=*/false);
      c.sums[{charge.metric, charge.detail, charge.node}] += charge.quantity;
    }
    c.until = now;
  }
}

void Accounting::CloseCharging(Batch& batch, const model::Job& job, const model::Attempt& attempt) {
  // Final entries: the attempt's whole usage (its allocation from start to
  // end as its supervisor recorded them, and the CPU time it used) minus
  // what interim charging already recorded. Interim charges ran on the
  // daemon's clock, so a final entry may be negative: a correction.
  auto it = charging_.find({job.id, attempt.number});
  const std::map<ledger::ChargeKey, double> charged =
      it == charging_.end() ? std::map<ledger::ChargeKey, double>{} : it->second.sums;
  std::map<ledger::ChargeKey, double> final_quantities = ledger::AttemptUsage(current_config().cluster, job, attempt);
  for (const auto& [key, quantity] : charged) final_quantities[key] -= quantity;
  const Timestamp start = attempt.RunStart().value_or(job.started_at.value_or(clock_.Now()));
  const Timestamp end = attempt.ended_at.value_or(clock_.Now());
  for (const auto& [key, quantity] : final_quantities) {
    if (std::abs(quantity) < 1e-9) continue;
    const auto& [metric, detail, node] = key;
    AppendCharge(batch, job, attempt.number, {metric, detail, node, quantity}, start, end, /*final=*/true);
  }
  if (it != charging_.end()) charging_.erase(it);
}

void Accounting::AccrueFairshare(const ActiveJobs& active, Batch& batch, Timestamp now, bool force) {
  const double seconds = std::chrono::duration<double>(now - last_accrual_).count();
  if (seconds > 0) {
    // Each running job is charged for the time since the last accrual, at
    // its rate in CPU-second equivalents (policy::ChargeRate).
    for (const auto& [id, job] : active) {
      if (job.state != model::JobState::kRunning) continue;
      fairshare_usage_.Charge(
          job.project, job.user,
          policy::ChargeRate(job.resources, current_config().cluster.fairshare_gpu_weight) * seconds, now);
    }
    fairshare_usage_.DecayTo(now);
    last_accrual_ = now;
  }
  if (force || now >= next_usage_save_) {
    next_usage_save_ = now + kUsageSaveEvery;
    store::FairshareUsage saved;
    saved.as_of = fairshare_usage_.AsOf();
    for (const auto& e : fairshare_usage_.Entries()) saved.entries.push_back({e.project, e.user, e.usage});
    batch.writes.push_back(
        [saved = std::move(saved)](store::Transaction& t) -> Status { return t.SaveFairshareUsage(saved); });
  }
}

}  // namespace unisched::daemon
