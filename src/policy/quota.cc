// Quota and concurrency accounting (quota.h, docs/policy/quotas.md).

#include "unisched/policy/quota.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string_view>

namespace unisched::policy {
namespace {

// The key of a (first, second) pair; "\x1f" never occurs in names.
class PairKey {
 public:
  PairKey(std::string_view a, std::string_view b) {
    if (a.size() + b.size() + 1 <= sizeof(inline_)) {
      std::copy(a.begin(), a.end(), inline_);
      inline_[a.size()] = '\x1f';
      std::copy(b.begin(), b.end(), inline_ + a.size() + 1);
      view_ = std::string_view(inline_, a.size() + b.size() + 1);
    } else {
      heap_ = std::string(a) + '\x1f' + std::string(b);
      view_ = heap_;
    }
  }
  PairKey(const PairKey&) = delete;
  PairKey& operator=(const PairKey&) = delete;
  std::string_view view() const { return view_; }

 private:
  char inline_[128];
  std::string heap_;
  std::string_view view_;
};

template <class Table, class Value>
Value Find(const Table& table, std::string_view key, Value none) {
  auto it = table.find(key);
  return it == table.end() ? none : it->second;
}

// Finds or inserts; a string is made only to insert.
template <class Table>
auto& Entry(Table& table, std::string_view key) {
  auto it = table.find(key);
  if (it == table.end()) it = table.emplace(std::string(key), typename Table::mapped_type{}).first;
  return it->second;
}

std::string Plural(int64_t n, std::string_view one, std::string_view many) {
  return std::string(n == 1 ? one : many);
}

struct Dimension {
  const char* one;
  const char* many;
  const std::optional<int64_t> model::ResourceLimits::*limit;
  int64_t Amount::*amount;
};
constexpr Dimension kDimensions[] = {
    {"GPU", "GPUs", &model::ResourceLimits::gpus, &Amount::gpus},
    {"CPU", "CPUs", &model::ResourceLimits::cpus, &Amount::cpus},
    {"MB of memory", "MB of memory", &model::ResourceLimits::memory_mb, &Amount::memory_mb},
    {"running job", "running jobs", &model::ResourceLimits::running_jobs, &Amount::jobs},
};

// The first dimension in which `used + need` exceeds `limits`, or null.
const Dimension* Exceeded(const model::ResourceLimits& limits, const Amount& used, const Amount& need) {
  for (const auto& d : kDimensions) {
    const auto& limit = limits.*(d.limit);
    if (limit && used.*(d.amount) + need.*(d.amount) > *limit) return &d;
  }
  return nullptr;
}

// "project genomics uses 32/32 GPUs in ai-training; this job needs 8 (project_quota)"
model::PendingReason QuotaReason(const Dimension& d, const model::ResourceLimits& limits, const Amount& used,
                                 const Amount& need, const std::string& who, const std::string& where,
                                 const char* key) {
  const int64_t limit = *(limits.*(d.limit));
  return {"QuotaExceeded", who + " uses " + std::to_string(used.*(d.amount)) + "/" + std::to_string(limit) + " " +
                               Plural(limit, d.one, d.many) + where + "; this job needs " +
                               std::to_string(need.*(d.amount)) + " (" + key + ")"};
}

}  // namespace

Amount& Amount::operator+=(const Amount& o) {
  cpus += o.cpus;
  memory_mb += o.memory_mb;
  gpus += o.gpus;
  jobs += o.jobs;
  return *this;
}

Amount& Amount::operator-=(const Amount& o) {
  cpus -= o.cpus;
  memory_mb -= o.memory_mb;
  gpus -= o.gpus;
  jobs -= o.jobs;
  return *this;
}

Amount AmountOf(const model::ResourceRequest& r) {
  return {int64_t{r.nodes} * r.cpus, int64_t{r.nodes} * r.memory_mb, int64_t{r.nodes} * r.gpus, 1};
}

void QuotaTally::Add(const JobScope& scope, const Amount& amount) {
  Entry(queue_project_, PairKey(scope.queue, scope.project).view()) += amount;
  Entry(queue_user_, PairKey(scope.queue, scope.user).view()) += amount;
  Entry(project_, scope.project) += amount;
  Entry(queue_jobs_, scope.queue) += amount.jobs;
}

void QuotaTally::Remove(const JobScope& scope, const Amount& amount) {
  Entry(queue_project_, PairKey(scope.queue, scope.project).view()) -= amount;
  Entry(queue_user_, PairKey(scope.queue, scope.user).view()) -= amount;
  Entry(project_, scope.project) -= amount;
  Entry(queue_jobs_, scope.queue) -= amount.jobs;
}

Amount QuotaTally::QueueProject(std::string_view queue, std::string_view project) const {
  return Find(queue_project_, PairKey(queue, project).view(), Amount{});
}
Amount QuotaTally::QueueUser(std::string_view queue, std::string_view user) const {
  return Find(queue_user_, PairKey(queue, user).view(), Amount{});
}
Amount QuotaTally::Project(std::string_view project) const {
  return Find(project_, project, Amount{});
}
int64_t QuotaTally::QueueJobs(std::string_view queue) const {
  return Find(queue_jobs_, queue, int64_t{0});
}

QuotaTally QuotaTally::Slice(const JobScope& scope) const {
  QuotaTally slice;
  Entry(slice.queue_project_, PairKey(scope.queue, scope.project).view()) = QueueProject(scope.queue, scope.project);
  Entry(slice.queue_user_, PairKey(scope.queue, scope.user).view()) = QueueUser(scope.queue, scope.user);
  Entry(slice.project_, scope.project) = Project(scope.project);
  Entry(slice.queue_jobs_, scope.queue) = QueueJobs(scope.queue);
  return slice;
}

std::optional<model::PendingReason> CheckLimits(const QuotaTally& tally, const JobScope& scope,
                                                const model::ResourceRequest& request,
                                                const model::QueuePolicy& queue_policy,
                                                const model::ProjectPolicy* project_policy) {
  // Called for every pending job of every cycle: lookups only for limits
  // that exist, and text only for a limit that is hit.
  if (queue_policy.max_concurrency && tally.QueueJobs(scope.queue) + 1 > *queue_policy.max_concurrency) {
    return model::PendingReason{
        "ConcurrencyLimit", std::string(scope.queue) + " runs " + std::to_string(tally.QueueJobs(scope.queue)) + "/" +
                                std::to_string(*queue_policy.max_concurrency) + " jobs (max_concurrency)"};
  }
  const bool project_limits = project_policy && !project_policy->quota.Empty();
  if (queue_policy.project_quota.Empty() && queue_policy.user_quota.Empty() && !project_limits) return std::nullopt;
  const Amount need = AmountOf(request);
  if (!queue_policy.project_quota.Empty()) {
    const Amount used = tally.QueueProject(scope.queue, scope.project);
    if (const Dimension* d = Exceeded(queue_policy.project_quota, used, need)) {
      return QuotaReason(*d, queue_policy.project_quota, used, need, "project " + std::string(scope.project),
                         " in " + std::string(scope.queue), "project_quota");
    }
  }
  if (!queue_policy.user_quota.Empty()) {
    const Amount used = tally.QueueUser(scope.queue, scope.user);
    if (const Dimension* d = Exceeded(queue_policy.user_quota, used, need)) {
      return QuotaReason(*d, queue_policy.user_quota, used, need, "user " + std::string(scope.user),
                         " in " + std::string(scope.queue), "user_quota");
    }
  }
  if (project_limits) {
    const Amount used = tally.Project(scope.project);
    if (const Dimension* d = Exceeded(project_policy->quota, used, need)) {
      return QuotaReason(*d, project_policy->quota, used, need, "project " + std::string(scope.project),
                         " over all queues", "projects quota");
    }
  }
  return std::nullopt;
}

std::optional<model::PendingReason> ExceedsLimitsAlone(const JobScope& scope, const model::ResourceRequest& request,
                                                       const model::QueuePolicy& queue_policy,
                                                       const model::ProjectPolicy* project_policy) {
  QuotaTally empty;
  model::QueuePolicy limits_only = queue_policy;
  limits_only.max_concurrency.reset();  // concurrency is about others, not this job
  return CheckLimits(empty, scope, request, limits_only, project_policy);
}

Timestamp PeriodStart(model::BudgetPeriod period, Timestamp now) {
  using namespace std::chrono;
  const sys_days today = floor<days>(sys_time<milliseconds>(now.time_since_epoch()));
  sys_days start = today;
  switch (period) {
    case model::BudgetPeriod::kDay:
      break;
    case model::BudgetPeriod::kWeek:
      start = today - (weekday(today) - Monday);  // weekday difference: days since Monday
      break;
    case model::BudgetPeriod::kMonth: {
      const year_month_day ymd(today);
      start = sys_days(ymd.year() / ymd.month() / 1);
      break;
    }
  }
  return time_point_cast<milliseconds>(start);
}

std::string_view PeriodName(model::BudgetPeriod period) {
  switch (period) {
    case model::BudgetPeriod::kDay:
      return "day";
    case model::BudgetPeriod::kWeek:
      return "week";
    case model::BudgetPeriod::kMonth:
      break;
  }
  return "month";
}

std::optional<model::PendingReason> CheckBudget(std::string_view project, const model::Budget& budget,
                                                const BudgetUse& use) {
  auto over = [&](const std::optional<double>& limit, double used,
                  const char* unit) -> std::optional<model::PendingReason> {
    if (!limit || used < *limit) return std::nullopt;
    char text[64];
    std::snprintf(text, sizeof text, "%.1f/%.1f", used, *limit);
    return model::PendingReason{"BudgetExhausted", "project " + std::string(project) + " used " + text + " " + unit +
                                                       " this " + std::string(PeriodName(budget.period)) +
                                                       "; new jobs wait until the next " +
                                                       std::string(PeriodName(budget.period))};
  };
  if (auto r = over(budget.gpu_hours, use.gpu_hours, "GPU-hours")) return r;
  return over(budget.cpu_hours, use.cpu_hours, "CPU-hours");
}

}  // namespace unisched::policy
