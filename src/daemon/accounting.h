#pragma once
// The controller's accounting part (docs/ledger.md, docs/policy): interim
// ledger charges of running attempts every accounting interval, the final
// entries of an attempt that ended (in the batch of its state change), the
// projects' budget use in the current period, and the decayed fairshare
// usage, saved now and then. Runs on the control thread only.

#include <map>
#include <string>
#include <utility>

#include "daemon/batch.h"
#include "unisched/common/time.h"
#include "unisched/config/config.h"
#include "unisched/config/live.h"
#include "unisched/ledger/ledger.h"
#include "unisched/metrics/metrics.h"
#include "unisched/model/job.h"
#include "unisched/policy/fairshare.h"
#include "unisched/policy/quota.h"
#include "unisched/store/accounting.h"

namespace unisched::daemon {

class Accounting {
 public:
  using ActiveJobs = std::map<model::JobId, model::Job>;

  Accounting(const config::LiveConfig& live, const store::AccountingReads& ledger, metrics::Metrics& metrics,
             const Clock& clock);

  // At start: the saved fairshare usage (the time the daemon was down is
  // not charged), and where interim charging of a running attempt got to.
  void RestoreFairshare(const store::FairshareUsage& saved, Timestamp now);
  void ResumeCharging(const model::Job& job, const model::Attempt& attempt, const store::LedgerCharged& charged,
                      Timestamp now);

  // An attempt started now: its interim charging begins.
  void BeginCharging(model::JobId job, int attempt, Timestamp now);
  // Interim charges of every running attempt, once per accounting interval.
  void ChargeRunningIfDue(const ActiveJobs& active, Batch& batch, Timestamp now);
  // Final entries: the attempt's whole usage minus its interim charges.
  void CloseCharging(Batch& batch, const model::Job& job, const model::Attempt& attempt);

  // Charges running jobs' use since the last accrual to fairshare usage, and
  // saves the usage every minute (`force`: now, as at a clean stop).
  void AccrueFairshare(const ActiveJobs& active, Batch& batch, Timestamp now, bool force = false);
  const policy::DecayedUsage& fairshare() const { return fairshare_usage_; }

  // Budget use per project with a budget, in its current period: loaded from
  // the ledger when a period begins, then kept up with each committed charge.
  void RefreshBudgets(Timestamp now);
  std::map<std::string, policy::BudgetUse> BudgetUse() const;

 private:
  void AppendCharge(Batch& batch, const model::Job& job, int attempt, const ledger::Charge& charge, Timestamp from,
                    Timestamp to, bool final);

  // The config in force; current_config() is its version now.
  const config::LiveConfig& live_;
  const config::Config& current_config() const { return live_.Current(); }
  const store::AccountingReads& ledger_;
  metrics::Metrics& metrics_;
  const Clock& clock_;

  // Per running attempt: how far it has been charged, and what.
  struct Charging {
    Timestamp until{};
    std::map<ledger::ChargeKey, double> sums;
  };
  std::map<std::pair<model::JobId, int>, Charging> charging_;
  Timestamp next_charge_{};
  struct BudgetTrack {
    Timestamp period_start{};
    policy::BudgetUse use;
  };
  std::map<std::string, BudgetTrack> budgets_;
  policy::DecayedUsage fairshare_usage_;
  Timestamp last_accrual_{};
  Timestamp next_usage_save_{};
};

}  // namespace unisched::daemon
