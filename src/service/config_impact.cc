// The impact of a config change on the work in the cluster
// (unisched/service/config_impact.h).

#include "unisched/service/config_impact.h"

#include <map>
#include <optional>
#include <set>
#include <utility>

#include "unisched/policy/quota.h"
#include "unisched/router/router.h"

namespace unisched::service {

namespace {

using model::Job;

// A pending job's queue was named by its submitter when the router said so
// (router.cc: "queue NAME named by the submitter").
bool NamedItsQueue(const Job& job) {
  return job.routing.reason.rfind("queue ", 0) == 0 &&
         job.routing.reason.find("named by the submitter") != std::string::npos;
}

bool IsLimit(const std::string& path) {
  for (const char* key : {".policy", "quota", "budget", "shares", "max_concurrency", "walltime"}) {
    if (path.find(key) != std::string::npos) return true;
  }
  return false;
}

// What a scope's running jobs hold (totals over their nodes), and which they are.
struct Held {
  policy::Amount amount;
  std::vector<model::JobId> ids;
  void Add(const Job& job) {
    amount += policy::AmountOf(job.resources);
    ids.push_back(job.id);
  }
};

// Each field of `after` that `held` exceeds, unless `before` already did.
void CheckLimits(const std::string& path, const std::string& scope, const Held& held,
                 const model::ResourceLimits* before, const model::ResourceLimits& after,
                 std::vector<ConfigImpact::OverLimit>& out) {
  auto check = [&](const char* key, int64_t value, const std::optional<int64_t>& was,
                   const std::optional<int64_t>& now) {
    if (!now || value <= *now) return;
    if (was && value > *was) return;
    out.push_back({path + "." + key, scope, value, *now, held.ids});
  };
  const model::ResourceLimits none;
  const model::ResourceLimits& b = before ? *before : none;
  check("cpus", held.amount.cpus, b.cpus, after.cpus);
  check("memory_mb", held.amount.memory_mb, b.memory_mb, after.memory_mb);
  check("gpus", held.amount.gpus, b.gpus, after.gpus);
  check("running_jobs", held.amount.jobs, b.running_jobs, after.running_jobs);
}

void AssessRunning(const config::Config& before, const config::Config& after, const std::vector<Job>& active,
                   std::vector<ConfigImpact::OverLimit>& out) {
  std::map<std::string, Held> by_queue;
  std::map<std::pair<std::string, std::string>, Held> by_queue_project, by_queue_user;
  std::map<std::string, Held> by_project;
  for (const Job& job : active) {
    if (job.state != model::JobState::kRunning) continue;
    by_queue[job.queue].Add(job);
    by_queue_project[{job.queue, job.project}].Add(job);
    by_queue_user[{job.queue, job.user}].Add(job);
    by_project[job.project].Add(job);
    const model::QueueSpec* now = after.cluster.FindQueue(job.queue);
    const model::QueueSpec* was = before.cluster.FindQueue(job.queue);
    if (now && now->policy.max_walltime_hours) {
      const auto max_seconds = static_cast<int64_t>(*now->policy.max_walltime_hours * 3600);
      const bool was_over = was && was->policy.max_walltime_hours &&
                            job.resources.walltime_seconds > *was->policy.max_walltime_hours * 3600;
      if (job.resources.walltime_seconds > max_seconds && !was_over) {
        out.push_back({"queues[" + job.queue + "].policy.max_walltime_hours",
                       "job " + std::to_string(job.id),
                       job.resources.walltime_seconds,
                       max_seconds,
                       {job.id}});
      }
    }
  }
  for (const auto& [queue, held] : by_queue) {
    const model::QueueSpec* now = after.cluster.FindQueue(queue);
    const model::QueueSpec* was = before.cluster.FindQueue(queue);
    if (!now || !now->policy.max_concurrency || held.amount.jobs <= *now->policy.max_concurrency) continue;
    if (was && was->policy.max_concurrency && held.amount.jobs > *was->policy.max_concurrency) continue;
    out.push_back({"queues[" + queue + "].policy.max_concurrency", "queue " + queue, held.amount.jobs,
                   *now->policy.max_concurrency, held.ids});
  }
  // The per-queue quotas: of each project, and of each user, in the queue.
  using QueueScopes = std::map<std::pair<std::string, std::string>, Held>;
  auto check_queue_quota = [&](const QueueScopes& scopes, const char* key, const char* who,
                               model::ResourceLimits model::QueuePolicy::*limits) {
    for (const auto& [scope, held] : scopes) {
      const model::QueueSpec* now = after.cluster.FindQueue(scope.first);
      const model::QueueSpec* was = before.cluster.FindQueue(scope.first);
      if (!now) continue;
      CheckLimits("queues[" + scope.first + "].policy." + key,
                  std::string(who) + " " + scope.second + " in " + scope.first, held,
                  was ? &(was->policy.*limits) : nullptr, now->policy.*limits, out);
    }
  };
  check_queue_quota(by_queue_project, "project_quota", "project", &model::QueuePolicy::project_quota);
  check_queue_quota(by_queue_user, "user_quota", "user", &model::QueuePolicy::user_quota);
  for (const auto& [project, held] : by_project) {
    const model::ProjectPolicy* now = after.cluster.FindProject(project);
    const model::ProjectPolicy* was = before.cluster.FindProject(project);
    if (!now) continue;
    CheckLimits("projects[" + project + "].quota", "project " + project, held, was ? &was->quota : nullptr, now->quota,
                out);
  }
}

}  // namespace

ConfigImpact AssessConfigChange(const config::Config& before, const config::Config& after,
                                const std::vector<config::ConfigDifference>& differences,
                                const std::vector<model::Job>& active) {
  ConfigImpact impact;
  for (const auto& d : differences) {
    if (config::ClassifyDifference(d).scope == config::ChangeScope::kLive && IsLimit(d.path)) {
      impact.limits.push_back(d);
    }
  }
  for (const Job& job : active) {
    if (job.state != model::JobState::kPending) continue;
    router::RouteRequest request{job.workload, job.resources, job.constraints, std::nullopt};
    if (NamedItsQueue(job)) request.queue = job.queue;
    auto route = router::Route(after.cluster, request);
    if (!route.ok()) {
      impact.rerouted.push_back({job.id, job.queue, "", route.error().message});
    } else if (route->queue != job.queue) {
      impact.rerouted.push_back({job.id, job.queue, route->queue, ""});
    }
  }
  AssessRunning(before, after, active, impact.over_limit);
  return impact;
}

nlohmann::json ToJson(const ConfigImpact& impact) {
  nlohmann::json rerouted = nlohmann::json::array();
  for (const auto& r : impact.rerouted) {
    nlohmann::json item = {{"job", r.job}, {"from_queue", r.from_queue}};
    if (r.to_queue.empty()) {
      item["refused"] = r.refusal;
    } else {
      item["to_queue"] = r.to_queue;
    }
    rerouted.push_back(std::move(item));
  }
  nlohmann::json limits = nlohmann::json::array();
  for (const auto& d : impact.limits) limits.push_back({{"path", d.path}, {"before", d.before}, {"after", d.after}});
  nlohmann::json over = nlohmann::json::array();
  for (const auto& o : impact.over_limit) {
    over.push_back(
        {{"limit", o.limit}, {"scope", o.scope}, {"held", o.held}, {"new_limit", o.new_limit}, {"jobs", o.jobs}});
  }
  return {{"pending_rerouted", rerouted}, {"limits_changed", limits}, {"running_over_limit", over}};
}

}  // namespace unisched::service
