#pragma once
// Admission: whether a job or an API sandbox may enter, and where it goes.
// One path for both, so a sandbox and an agent job of one project meet the
// same router, quotas and budgets (docs/architecture.md, "Admission").
// Pure: the config, the controller's published view and the caller come in
// as arguments; nothing here has effects.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "unisched/auth/auth.h"
#include "unisched/common/status.h"
#include "unisched/config/config.h"
#include "unisched/model/job.h"
#include "unisched/policy/quota.h"
#include "unisched/router/router.h"
#include "unisched/service/planes.h"

namespace unisched::service {

// A job as its submitter asked for it (the API parses it from JSON, the CLI
// from flags): resources are 0 where the queue's default applies.
struct JobRequest {
  std::string name;
  std::optional<std::string> project;  // absent: the caller's only project, else "default"
  std::optional<std::string> queue;    // absent: routed by its workload
  model::Workload workload;
  model::ResourceRequest resources;
  model::Labels constraints;
  model::LaunchMode launch = model::LaunchMode::kBatch;
  std::vector<std::string> command;  // a script's name and arguments with `script`
  std::string script;                // a batch script (model::Job::script); "": none
  // No workload was given (a script's submission): the kind its named
  // queue serves, else hpc's (AdmitJob decides).
  bool workload_from_queue = false;
  std::map<std::string, std::string> env;
  std::vector<model::SecretUse> secrets;  // docs/secrets.md: must exist in the job's project
  model::DataStaging data;                // docs/data.md: stores, buckets and prefixes the project may use
  std::string workdir;                    // Slurm's -D (model::Job::workdir): absolute, or "" for the work directory
  std::string
      output_file;  // Slurm's -o and -e patterns (model::Job); relative: under workdir, else executor.output_dir
  std::string error_file;
  int priority = 0;
  std::optional<int> max_retries;        // overrides the queue's (docs/policy/retries.md)
  bool hold = false;                     // submitted HELD (Slurm's -H): waits for a release
  std::optional<Timestamp> begin_at;     // not started before it (Slurm's --begin)
  model::Dependency dependency;          // docs/dependencies.md
  std::optional<model::JobArray> array;  // an array's indices and cap (docs/arrays.md); none: one job
};

// Where an admitted job goes, with the queue's defaults applied.
struct JobAdmission {
  std::string project;
  model::WorkloadKind kind = model::WorkloadKind::kHpc;  // the request's, or its queue's (workload_from_queue)
  router::RouteDecision route;
  std::string output_file;  // the request's, made absolute
  std::string error_file;
};

// Checks, in this order, each failure naming its field: the project exists
// (422 unknown_project) and the caller is a member (403 forbidden); the
// router finds a queue that can ever run it (422, router.h); no quota or
// budget refuses it (403 quota_exceeded, see QuotaRefusal); a priority
// above 0 comes from an admin of the queue (403 forbidden).
// `sandboxes` gives what API sandboxes hold now (SandboxPlane::Holds), asked
// only where a quota may refuse at once.
using SandboxHoldsSource = std::function<SandboxHolds()>;
Result<JobAdmission> AdmitJob(const config::Config& config, const ClusterView& view,
                              const SandboxHoldsSource& sandboxes, const auth::Principal& who,
                              const JobRequest& request);

// Why a job's data staging is refused (422 naming the field, e.g.
// data.stage_in[0].from), or nullopt (docs/data.md): each URL names an
// object store of `storage`, and a bucket and key prefix one of its access
// rules gives `project` (stage-out: a rule that is not read_only); each
// path in the work directory is relative, without "..". A stage-out's `to`
// is checked as written, {job_id} and all: a rule's prefix must cover it
// for every job.
std::optional<Error> StagingRefusal(const config::StorageSettings& storage, const std::string& project,
                                    const model::DataStaging& data);

// Why a job's dependency is refused at submission, or nullopt
// (docs/dependencies.md): every job it names must exist and be one `who`
// may read (else 422 naming it, one answer for both, so a dependency cannot
// probe other projects' job ids); a singleton needs a job name; and it must
// still be able to hold (afterok on a job that already FAILED is refused, not
// accepted to be cancelled). `find_job` reads a job from the store.
std::optional<Error> DependencyRefusal(const auth::Principal& who, const JobRequest& request,
                                       const std::function<Result<model::Job>(model::JobId)>& find_job);

// PATCH /v1/jobs/{id}: what may change of a waiting job (absent: unchanged).
struct JobUpdate {
  std::optional<std::string> queue;
  std::optional<int64_t> walltime_seconds;
  std::optional<int> priority;
};

// The change `update` makes to `job`, or why not (docs/slurm.md, "Updating
// a waiting job"): only a PENDING or HELD job (409 otherwise); the job is
// routed again to its (new) queue, so a wall time above the queue's maximum
// or a queue that cannot run it is 422 naming the field; raising the time
// limit or a priority above 0 needs an admin of the queue or a
// platform-admin (403: users may lower their time limit and priority, as in
// Slurm); a new queue's quotas refuse as at submission.
Result<ControlPlane::JobChange> PlanJobUpdate(const config::Config& config, const ClusterView& view,
                                              const SandboxHoldsSource& sandboxes, const auth::Principal& who,
                                              const model::Job& job, const JobUpdate& update);

// An API sandbox as its creator asked for it; absent values take the
// sandbox defaults of its queue (SandboxDefaults).
struct SandboxRequest {
  std::optional<std::string> project, queue;
  std::optional<int64_t> cpus, memory_mb, timeout_seconds;
  std::string image;                            // empty: sandboxes.default_image (the manager resolves it)
  std::optional<int64_t> idle_timeout_seconds;  // checked by the manager against the queue's
};

struct SandboxAdmission {
  std::string project, queue, pool;
  SandboxLimits limits;
};

// The same checks as AdmitJob for a job of workload kind agent whose
// resources are the sandbox's limits (timeout_seconds as its wall time), and
// the queue must be on a sandbox pool. The router's fields are given in the
// sandbox's terms (limits.cpus, limits.memory_mb, limits.timeout_seconds).
// Over a quota with what runs now is refused here only where the queue's
// quota_action is reject; the manager checks the slot again, exactly, when
// it starts the instance (SandboxSlotLimit).
Result<SandboxAdmission> AdmitSandbox(const config::Config& config, const ClusterView& view,
                                      const SandboxHoldsSource& sandboxes, const auth::Principal& who,
                                      const SandboxRequest& request);

// The limits of a sandbox in `queue` that names none: `cpus` (by default
// sandboxes.default_cpus) and the queue's memory per CPU (512 MB without
// one) for each; the queue's default wall time, else
// sandboxes.default_timeout_seconds, never above its maximum.
SandboxLimits SandboxDefaults(const config::Config& config, const model::QueueSpec& queue,
                              std::optional<int64_t> cpus = std::nullopt);

// Why a job or sandbox of `resources` in `scope` is refused at admission, or
// nullopt: one that alone exceeds a limit could never run (refused whatever
// quota_action says, never left waiting forever); a project whose budget is
// spent and whose budget.action is reject; over a quota with what `held`
// gives (asked only then), where the queue's quota_action is reject
// (elsewhere a job waits with QuotaExceeded). max_concurrency makes work
// wait, never refuses it.
std::optional<Error> QuotaRefusal(const model::ClusterSpec& cluster, const ClusterView& view,
                                  const std::function<policy::QuotaTally()>& held, const policy::JobScope& scope,
                                  const model::ResourceRequest& resources);

// What running jobs and API sandboxes hold, as a check of `scope` reads it:
// the jobs from the controller's view, the sandboxes from `sandboxes` (the
// sandbox manager's own count, exact and current; the view learns of a
// sandbox a moment after its 201).
policy::QuotaTally HeldFor(const ClusterView& view, const SandboxHolds& sandboxes, const policy::JobScope& scope);

// The first limit (max_concurrency, a quota) one more sandbox of `limits` in
// `scope` would exceed with what `held` holds (running jobs and every other
// sandbox), as a pending reason; nullopt when it may start now.
std::optional<model::PendingReason> SandboxSlotLimit(const model::ClusterSpec& cluster, const policy::QuotaTally& held,
                                                     const policy::JobScope& scope, const SandboxLimits& limits);

// A sandbox's limits as the resources of a one-node job, and what it holds
// of its quotas (one job's slot, its CPUs and memory).
model::ResourceRequest SandboxResources(const SandboxLimits& limits);
policy::Amount SandboxAmount(const SandboxLimits& limits);

// The queue of a sandbox that names none: sandboxes.queue, else where the
// router sends an agent job (its rules, then the first queue listing agent);
// empty when no queue serves agent work. Warm instances are started for it.
std::string DefaultSandboxQueue(const config::Config& config);

}  // namespace unisched::service
