// Admission of jobs and API sandboxes (service/admission.h).

#include "unisched/service/admission.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "unisched/policy/dependency.h"

namespace unisched::service {
namespace {

// The project a request is charged to: the one it names, else the caller's
// only project, else "default"; it must exist and the caller be a member.
Result<std::string> ResolveProject(const config::Config& config, const auth::Principal& who,
                                   const std::optional<std::string>& named) {
  std::string project = named.value_or(who.projects.size() == 1 ? who.projects.front() : "default");
  if (!config.cluster.FindProject(project)) {
    return Error::Unprocessable("unknown_project", "project '" + project + "' does not exist", "project");
  }
  if (!auth::CanSubmitTo(who, project)) {
    return Error{ErrorKind::kForbidden, "forbidden", "user " + who.user + " is not a member of project " + project,
                 "project"};
  }
  return project;
}

int64_t HoursToSeconds(double hours) {
  return static_cast<int64_t>(std::llround(hours * 3600));
}

// What the router is asked for a sandbox: an agent job of these resources.
router::RouteRequest AgentRoute(model::ResourceRequest resources, std::optional<std::string> queue) {
  router::RouteRequest request;
  request.workload.kind = model::WorkloadKind::kAgent;
  request.resources = resources;
  request.queue = std::move(queue);
  return request;
}

// The router speaks of a job's resources; a sandbox's creator wrote limits.
Error InSandboxTerms(Error error) {
  static const std::map<std::string, std::string> kFields = {{"resources.cpus", "limits.cpus"},
                                                             {"resources.memory_mb", "limits.memory_mb"},
                                                             {"resources.walltime_seconds", "limits.timeout_seconds"}};
  if (auto it = kFields.find(error.field); it != kFields.end()) {
    error.field = it->second;
    std::string::size_type at = error.message.find("walltime_seconds");
    if (at != std::string::npos) error.message.replace(at, 16, "limits.timeout_seconds");
  }
  return error;
}

}  // namespace

std::optional<Error> QuotaRefusal(const model::ClusterSpec& cluster, const ClusterView& view,
                                  const std::function<policy::QuotaTally()>& held, const policy::JobScope& scope,
                                  const model::ResourceRequest& resources) {
  const model::QueueSpec* spec = cluster.FindQueue(scope.queue);
  if (!spec) return std::nullopt;
  const std::string project(scope.project);
  const model::ProjectPolicy* project_policy = cluster.FindProject(project);
  auto refused = [](std::string message) { return Error::Forbidden(std::move(message), "quota_exceeded"); };
  if (auto alone = policy::ExceedsLimitsAlone(scope, resources, spec->policy, project_policy)) {
    return refused(alone->message + "; it can never run within this limit: ask for less");
  }
  if (project_policy && project_policy->budget.action == model::QuotaAction::kReject) {
    auto use = view.budget_use.find(project);
    if (auto over = policy::CheckBudget(project, project_policy->budget,
                                        use == view.budget_use.end() ? policy::BudgetUse{} : use->second)) {
      return refused(over->message + "; project " + project + " refuses work over budget (budget.action: reject)");
    }
  }
  if (spec->policy.quota_action != model::QuotaAction::kReject) return std::nullopt;
  model::QueuePolicy quotas_only = spec->policy;
  quotas_only.max_concurrency.reset();  // concurrency makes work wait, never refuses it
  if (auto over = policy::CheckLimits(held(), scope, resources, quotas_only, project_policy)) {
    return refused(over->message + "; queue " + spec->name +
                   " refuses work over quota (quota_action: reject): retry later");
  }
  return std::nullopt;
}

// An output file pattern as stored: absolute as given; relative under the
// job's workdir (Slurm's rule: relative to the working directory), else
// under the shared output directory, else under the directory sbatch ran
// in (SLURM_SUBMIT_DIR, Slurm's working directory by default); refused
// (naming `field`) when relative without any of them.
Result<std::string> PlaceOutputFile(const config::Config& config, const std::string& pattern, const char* field,
                                    const std::string& workdir, const std::string& submit_dir) {
  if (pattern.empty() || pattern.front() == '/') return pattern;
  if (!workdir.empty()) return workdir + (workdir.back() == '/' ? "" : "/") + pattern;
  if (!config.executor.output_dir.empty()) return config.executor.output_dir + "/" + pattern;
  if (!submit_dir.empty() && submit_dir.front() == '/') {
    return submit_dir + (submit_dir.back() == '/' ? "" : "/") + pattern;
  }
  return Error::Unprocessable("invalid_value",
                              std::string(field) + " '" + pattern +
                                  "' is relative, and this cluster has no shared output directory "
                                  "(executor.output_dir); give an absolute path on storage every node mounts, "
                                  "or a workdir",
                              field);
}

Result<JobAdmission> AdmitJob(const config::Config& config, const ClusterView& view,
                              const SandboxHoldsSource& sandboxes, const auth::Principal& who,
                              const JobRequest& request) {
  auto project = ResolveProject(config, who, request.project);
  if (!project.ok()) return project.error();
  // A batch script names a queue as Slurm names a partition, with no
  // workload kind: it is the kind the queue serves (its first).
  model::Workload workload = request.workload;
  if (request.workload_from_queue && request.queue) {
    const model::QueueSpec* queue = config.cluster.FindQueue(*request.queue);
    if (queue != nullptr && !queue->workload_kinds.empty() &&
        std::find(queue->workload_kinds.begin(), queue->workload_kinds.end(), workload.kind) ==
            queue->workload_kinds.end()) {
      workload.kind = queue->workload_kinds.front();
    }
  }
  auto route = router::Route(config.cluster, {workload, request.resources, request.constraints, request.queue});
  if (!route.ok()) return route.error();
  const policy::JobScope scope{route->queue, *project, who.user};
  if (auto refused = QuotaRefusal(
          config.cluster, view, [&] { return HeldFor(view, sandboxes(), scope); }, scope, route->resources)) {
    return *refused;
  }
  if (request.priority > 0 && !auth::CanRaisePriority(who, route->queue)) {
    return Error{ErrorKind::kForbidden, "forbidden",
                 "only platform-admins and admins of queue " + route->queue + " may submit with a priority above 0",
                 "priority"};
  }
  const auto submit_dir = request.env.find("SLURM_SUBMIT_DIR");
  const std::string submitted_from = submit_dir == request.env.end() ? std::string() : submit_dir->second;
  auto output_file = PlaceOutputFile(config, request.output_file, "output_file", request.workdir, submitted_from);
  if (!output_file.ok()) return output_file.error();
  auto error_file = PlaceOutputFile(config, request.error_file, "error_file", request.workdir, submitted_from);
  if (!error_file.ok()) return error_file.error();
  if (auto refused = StagingRefusal(config.storage, *project, request.data)) return *refused;
  return JobAdmission{std::move(project).value(), workload.kind, std::move(route).value(),
                      std::move(output_file).value(), std::move(error_file).value()};
}

SandboxLimits SandboxDefaults(const config::Config& config, const model::QueueSpec& queue,
                              std::optional<int64_t> cpus) {
  SandboxLimits limits;
  limits.cpus = cpus.value_or(config.sandboxes.default_cpus);
  limits.memory_mb = queue.policy.default_memory_mb_per_cpu.value_or(512) * limits.cpus;
  limits.timeout_seconds = queue.policy.default_walltime_hours ? HoursToSeconds(*queue.policy.default_walltime_hours)
                                                               : config.sandboxes.default_timeout_seconds;
  if (queue.policy.max_walltime_hours) {
    limits.timeout_seconds = std::min(limits.timeout_seconds, HoursToSeconds(*queue.policy.max_walltime_hours));
  }
  return limits;
}

model::ResourceRequest SandboxResources(const SandboxLimits& limits) {
  model::ResourceRequest resources;
  resources.nodes = 1;
  resources.cpus = static_cast<int>(limits.cpus);
  resources.memory_mb = limits.memory_mb;
  resources.walltime_seconds = limits.timeout_seconds;
  return resources;
}

policy::Amount SandboxAmount(const SandboxLimits& limits) {
  return policy::AmountOf(SandboxResources(limits));
}

std::string DefaultSandboxQueue(const config::Config& config) {
  if (!config.sandboxes.queue.empty()) return config.sandboxes.queue;
  auto routed = router::Route(config.cluster, AgentRoute(model::ResourceRequest{}, std::nullopt));
  if (routed.ok()) return routed->queue;
  const model::QueueSpec* fallback = config.cluster.DefaultQueueFor(model::WorkloadKind::kAgent);
  return fallback ? fallback->name : std::string();
}

Result<SandboxAdmission> AdmitSandbox(const config::Config& config, const ClusterView& view,
                                      const SandboxHoldsSource& sandboxes, const auth::Principal& who,
                                      const SandboxRequest& request) {
  auto project = ResolveProject(config, who, request.project);
  if (!project.ok()) return project.error();
  const std::string queue_name = request.queue ? *request.queue : DefaultSandboxQueue(config);
  if (queue_name.empty()) {
    return Error::Unprocessable(
        "no_route", "no queue serves agent work: name a queue, or set sandboxes.queue in the config", "queue");
  }
  SandboxLimits limits;  // an unknown queue is refused by the router below
  if (const model::QueueSpec* queue = config.cluster.FindQueue(queue_name)) {
    limits = SandboxDefaults(config, *queue, request.cpus);
    if (request.memory_mb) limits.memory_mb = *request.memory_mb;
    if (request.timeout_seconds) limits.timeout_seconds = *request.timeout_seconds;
  }
  // Named or not, the queue is checked as a job's: it serves agent work, the
  // limits fit its maximum and a node of its pool.
  auto route = router::Route(config.cluster, AgentRoute(SandboxResources(limits), queue_name));
  if (!route.ok()) return InSandboxTerms(route.error());
  const model::PoolSpec* pool = config.cluster.FindPool(route->pool);
  if (!pool || !pool->sandbox) {
    return Error::Unprocessable("invalid_value",
                                "queue '" + route->queue + "' is on pool '" + route->pool +
                                    "', which is not a sandbox pool (pools[].sandbox: true)",
                                "queue");
  }
  const policy::JobScope scope{route->queue, *project, who.user};
  if (auto refused = QuotaRefusal(
          config.cluster, view, [&] { return HeldFor(view, sandboxes(), scope); }, scope, route->resources)) {
    return *refused;
  }
  return SandboxAdmission{std::move(project).value(), route->queue, route->pool, limits};
}

policy::QuotaTally HeldFor(const ClusterView& view, const SandboxHolds& sandboxes, const policy::JobScope& scope) {
  policy::QuotaTally held = view.running_usage.Slice(scope);
  // Only holds that share an entry with the scope change what its check reads.
  auto touches = [&scope](const SandboxHolds::key_type& key) {
    return std::get<0>(key) == scope.queue || std::get<1>(key) == scope.project;
  };
  for (const auto& [key, amount] : *view.sandbox_holds) {
    if (touches(key)) held.Remove({std::get<0>(key), std::get<1>(key), std::get<2>(key)}, amount);
  }
  for (const auto& [key, amount] : sandboxes) {
    if (touches(key)) held.Add({std::get<0>(key), std::get<1>(key), std::get<2>(key)}, amount);
  }
  return held;
}

std::optional<model::PendingReason> SandboxSlotLimit(const model::ClusterSpec& cluster, const policy::QuotaTally& held,
                                                     const policy::JobScope& scope, const SandboxLimits& limits) {
  const model::QueueSpec* queue = cluster.FindQueue(scope.queue);
  if (!queue) return std::nullopt;
  return policy::CheckLimits(held, scope, SandboxResources(limits), queue->policy,
                             cluster.FindProject(std::string(scope.project)));
}

std::optional<Error> DependencyRefusal(const auth::Principal& who, const JobRequest& request,
                                       const std::function<Result<model::Job>(model::JobId)>& find_job) {
  const model::Dependency& dependency = request.dependency;
  if (dependency.empty()) return std::nullopt;
  if (dependency.HasSingleton() && request.name.empty()) {
    return Error::Unprocessable("invalid_value",
                                "dependency singleton waits for earlier jobs of the same user and name: give the job "
                                "a name",
                                "name");
  }
  if (dependency.HasAfterCorr() && !request.array) {
    return Error::Unprocessable("invalid_value",
                                "aftercorr starts each task of an array after the task of the same index of the named "
                                "arrays: give this job an array, or use afterok",
                                "dependency");
  }
  std::set<model::JobId> corresponding;
  for (const auto& term : dependency.terms) {
    if (term.type == model::DependencyType::kAfterCorr) corresponding.insert(term.jobs.begin(), term.jobs.end());
  }
  std::map<model::JobId, model::JobState> states;
  for (model::JobId id : dependency.NamedJobs()) {
    auto job = find_job(id);
    if (!job.ok() || !auth::CanReadJob(who, *job)) {
      return Error::Unprocessable("unknown_job",
                                  "dependency names job " + std::to_string(id) +
                                      ", which does not exist or is not visible to you; name your own jobs or your "
                                      "projects' jobs",
                                  "dependency");
    }
    if (corresponding.count(id) && !job->array) {
      return Error::Unprocessable("invalid_value",
                                  "aftercorr names job " + std::to_string(id) +
                                      ", which is no array; aftercorr pairs tasks of arrays (afterok waits for a job)",
                                  "dependency");
    }
    states.emplace(id, job->state);
  }
  const policy::DependencyCheck check = policy::CheckDependency(dependency, [&](model::JobId id) {
    auto it = states.find(id);
    return it == states.end() ? std::nullopt : std::optional<model::JobState>(it->second);
  });
  if (check.status == policy::DependencyStatus::kNever) {
    return Error::Unprocessable("dependency_never_satisfied",
                                "dependency '" + model::ToString(dependency) + "' can never hold: " + check.why +
                                    "; submit without it or name other jobs",
                                "dependency");
  }
  return std::nullopt;
}

Result<ControlPlane::JobChange> PlanJobUpdate(const config::Config& config, const ClusterView& view,
                                              const SandboxHoldsSource& sandboxes, const auth::Principal& who,
                                              const model::Job& job, const JobUpdate& update) {
  const std::string id = std::to_string(job.id);
  if (model::IsTerminal(job.state)) {
    return Error::Conflict("job_finished", "job " + id + " already ended " + std::string(model::ToString(job.state)) +
                                               "; a finished job cannot be updated");
  }
  if (job.state != model::JobState::kPending && job.state != model::JobState::kHeld) {
    return Error::Conflict("invalid_state", "only PENDING or HELD jobs can be updated; job " + id + " is " +
                                                std::string(model::ToString(job.state)) +
                                                " (requeue it first to change how it runs next)");
  }
  if (!update.queue && !update.walltime_seconds && !update.priority) {
    return Error::Unprocessable("invalid_value",
                                "nothing to change: give queue, priority or resources.walltime_seconds");
  }
  model::ResourceRequest resources = job.resources;
  if (update.walltime_seconds) resources.walltime_seconds = *update.walltime_seconds;
  auto route =
      router::Route(config.cluster, {job.workload, resources, job.constraints, update.queue.value_or(job.queue)});
  if (!route.ok()) return route.error();
  const bool admin = auth::CanRaisePriority(who, job.queue) && auth::CanRaisePriority(who, route->queue);
  const int64_t before = job.resources.walltime_seconds;
  const int64_t after = route->resources.walltime_seconds;
  if (after > before && before > 0 && !admin) {
    return Error{ErrorKind::kForbidden, "forbidden",
                 "only platform-admins and admins of queue " + job.queue + " may raise a time limit (" +
                     std::to_string(before) + " s); you may lower it",
                 "resources.walltime_seconds"};
  }
  const int priority = update.priority.value_or(job.priority);
  if (priority > 0 && priority != job.priority && !auth::CanRaisePriority(who, route->queue)) {
    return Error{ErrorKind::kForbidden, "forbidden",
                 "only platform-admins and admins of queue " + route->queue +
                     " may set a priority above 0; you may set 0 or lower",
                 "priority"};
  }
  const bool moves = route->queue != job.queue;
  if (moves) {
    const policy::JobScope scope{route->queue, job.project, job.user};
    if (auto refused = QuotaRefusal(
            config.cluster, view, [&] { return HeldFor(view, sandboxes(), scope); }, scope, route->resources)) {
      return *refused;
    }
  }
  ControlPlane::JobChange change;
  change.queue = route->queue;
  change.pool = route->pool;
  change.routing_reason = moves ? "moved to queue " + route->queue + " by an update" : job.routing.reason;
  change.config_version = moves ? config.VersionFor(route->queue) : job.config_version;
  change.walltime_seconds = after;
  change.priority = priority;
  auto note = [&](const std::string& what) { change.summary += (change.summary.empty() ? "" : "; ") + what; };
  if (after != before) note("time limit " + std::to_string(before) + " -> " + std::to_string(after) + " s");
  if (priority != job.priority) note("priority " + std::to_string(job.priority) + " -> " + std::to_string(priority));
  if (moves) note("queue " + job.queue + " -> " + route->queue + " (pool " + route->pool + ")");
  if (change.summary.empty()) change.summary = "no change";
  return change;
}

}  // namespace unisched::service
