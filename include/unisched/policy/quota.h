#pragma once
// Quotas and concurrency limits (docs/policy/quotas.md): what each scope
// holds in running jobs, and whether one more job would exceed a limit.
// Scopes: (queue, project), (queue, user), project over all queues, and a
// queue's running instances (max_concurrency).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "unisched/common/time.h"
#include "unisched/model/cluster.h"
#include "unisched/model/job.h"

namespace unisched::policy {

// Totals over all nodes of a job (or of many).
struct Amount {
  int64_t cpus = 0;
  int64_t memory_mb = 0;
  int64_t gpus = 0;
  int64_t jobs = 0;
  Amount& operator+=(const Amount& o);
  Amount& operator-=(const Amount& o);
};
Amount AmountOf(const model::ResourceRequest& request);

// Who a job is charged to. Views: the scope is checked for every pending job
// of every cycle, and copying three strings each time would dominate.
struct JobScope {
  std::string_view queue;
  std::string_view project;
  std::string_view user;
};

class QuotaTally {
 public:
  void Add(const JobScope& scope, const Amount& amount);
  void Remove(const JobScope& scope, const Amount& amount);

  Amount QueueProject(std::string_view queue, std::string_view project) const;
  Amount QueueUser(std::string_view queue, std::string_view user) const;
  Amount Project(std::string_view project) const;
  int64_t QueueJobs(std::string_view queue) const;
  // Only the entries a check of `scope` reads (CheckLimits), copied: a small
  // tally to adjust for that check without copying every scope's.
  QuotaTally Slice(const JobScope& scope) const;

 private:
  // Keyed by "a\x1fb" (names never hold control characters); looked up
  // with views, so a check builds no string.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Table = std::unordered_map<std::string, Amount, Hash, std::equal_to<>>;
  Table queue_project_, queue_user_, project_;
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> queue_jobs_;
};

// The first limit that one more job of `request` in `scope` would exceed, as a
// pending reason: QuotaExceeded "project genomics uses 32/32 GPUs in
// ai-training; this job needs 8" or ConcurrencyLimit "agent-sandbox runs
// 500/500 jobs (max_concurrency)". nullopt when it is within every limit.
std::optional<model::PendingReason> CheckLimits(const QuotaTally& tally, const JobScope& scope,
                                                const model::ResourceRequest& request,
                                                const model::QueuePolicy& queue_policy,
                                                const model::ProjectPolicy* project_policy);

// Whether the request alone exceeds a limit (it could never run): the reason,
// or nullopt.
std::optional<model::PendingReason> ExceedsLimitsAlone(const JobScope& scope, const model::ResourceRequest& request,
                                                       const model::QueuePolicy& queue_policy,
                                                       const model::ProjectPolicy* project_policy);

// A project's use of its budget in the current period.
struct BudgetUse {
  double gpu_hours = 0;
  double cpu_hours = 0;
};

// The start (UTC) of the budget period containing `now`: midnight, Monday
// midnight, or the first of the month.
Timestamp PeriodStart(model::BudgetPeriod period, Timestamp now);
std::string_view PeriodName(model::BudgetPeriod period);  // "day", "week", "month"

// BudgetExhausted "project genomics used 100.4/100 GPU-hours this month"
// when the project has used up a budget, else nullopt.
std::optional<model::PendingReason> CheckBudget(std::string_view project, const model::Budget& budget,
                                                const BudgetUse& use);

}  // namespace unisched::policy
