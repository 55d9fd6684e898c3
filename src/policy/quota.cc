// Quota and concurrency accounting (quota.h, docs/policy/quotas.md).

#include "unisched/policy/quota.h"

#include <string_view>

namespace unisched::policy {
namespace {

Amount Lookup(const std::map<std::pair<std::string, std::string>, Amount>& m, const std::string& a,
              const std::string& b) {
  auto it = m.find({a, b});
  return it == m.end() ? Amount{} : it->second;
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

// "project genomics uses 32/32 GPUs in ai-training; this job needs 8"
std::optional<model::PendingReason> Check(const model::ResourceLimits& limits, const Amount& used, const Amount& need,
                                          const std::string& who, const std::string& where, const char* key) {
  for (const auto& d : kDimensions) {
    const auto& limit = limits.*(d.limit);
    if (!limit) continue;
    const int64_t have = used.*(d.amount);
    const int64_t want = need.*(d.amount);
    if (have + want > *limit) {
      std::string message = who + " uses " + std::to_string(have) + "/" + std::to_string(*limit) + " " +
                            Plural(*limit, d.one, d.many) + where + "; this job needs " + std::to_string(want) + " (" +
                            key + ")";
      return model::PendingReason{"QuotaExceeded", std::move(message)};
    }
  }
  return std::nullopt;
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
  queue_project_[{scope.queue, scope.project}] += amount;
  queue_user_[{scope.queue, scope.user}] += amount;
  project_[scope.project] += amount;
  queue_jobs_[scope.queue] += amount.jobs;
}

void QuotaTally::Remove(const JobScope& scope, const Amount& amount) {
  queue_project_[{scope.queue, scope.project}] -= amount;
  queue_user_[{scope.queue, scope.user}] -= amount;
  project_[scope.project] -= amount;
  queue_jobs_[scope.queue] -= amount.jobs;
}

Amount QuotaTally::QueueProject(const std::string& queue, const std::string& project) const {
  return Lookup(queue_project_, queue, project);
}
Amount QuotaTally::QueueUser(const std::string& queue, const std::string& user) const {
  return Lookup(queue_user_, queue, user);
}
Amount QuotaTally::Project(const std::string& project) const {
  auto it = project_.find(project);
  return it == project_.end() ? Amount{} : it->second;
}
int64_t QuotaTally::QueueJobs(const std::string& queue) const {
  auto it = queue_jobs_.find(queue);
  return it == queue_jobs_.end() ? 0 : it->second;
}

std::optional<model::PendingReason> CheckLimits(const QuotaTally& tally, const JobScope& scope,
                                                const model::ResourceRequest& request,
                                                const model::QueuePolicy& queue_policy,
                                                const model::ProjectPolicy* project_policy) {
  const Amount need = AmountOf(request);
  if (queue_policy.max_concurrency && tally.QueueJobs(scope.queue) + 1 > *queue_policy.max_concurrency) {
    return model::PendingReason{"ConcurrencyLimit", scope.queue + " runs " + std::to_string(tally.QueueJobs(scope.queue)) +
                                                        "/" + std::to_string(*queue_policy.max_concurrency) +
                                                        " jobs (max_concurrency)"};
  }
  if (auto r = Check(queue_policy.project_quota, tally.QueueProject(scope.queue, scope.project), need,
                     "project " + scope.project, " in " + scope.queue, "project_quota")) {
    return r;
  }
  if (auto r = Check(queue_policy.user_quota, tally.QueueUser(scope.queue, scope.user), need, "user " + scope.user,
                     " in " + scope.queue, "user_quota")) {
    return r;
  }
  if (project_policy) {
    if (auto r = Check(project_policy->quota, tally.Project(scope.project), need, "project " + scope.project,
                       " over all queues", "projects quota")) {
      return r;
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

}  // namespace unisched::policy
