#pragma once
// The job service: the application layer that the HTTP handlers (and every
// other entry point) call to change work: submit, cancel, hold, release, and
// create an API sandbox. Each verb authorizes the caller, admits the work
// (service/admission.h), commits it durably and hands it to the daemon's
// live parts; callers only parse and render.

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "unisched/auth/auth.h"
#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/config/config.h"
#include "unisched/config/live.h"
#include "unisched/metrics/metrics.h"
#include "unisched/model/job.h"
#include "unisched/service/admission.h"
#include "unisched/service/planes.h"
#include "unisched/store/store.h"

namespace unisched::service {

class JobService {
 public:
  // `sandboxes` may be null: CreateSandbox then answers 503.
  JobService(const config::LiveConfig& live, store::Store& store, ControlPlane& control, SandboxPlane* sandboxes,
             metrics::Metrics& metrics, const Clock& clock);

  struct Submitted {
    model::JobId id = 0;
    // A new job's JSON (codec::JobDocument), made once on the caller's
    // thread: what was stored is the 201 body. Null when replayed.
    std::shared_ptr<const std::string> document;
    // The Idempotency-Key was used before: nothing new was stored, and this
    // is that job as stored now.
    std::optional<model::Job> replayed;
  };
  // Admits the job, then commits it with its "submitted" event and the audit
  // record (`audit_action`, e.g. "POST /v1/jobs") in one transaction; `done`
  // runs after the commit (the job is the controller's by then) or with the
  // error. A non-empty idempotency_key (at most 255 bytes) already used by
  // the same user answers that job again and stores nothing. Idempotent per
  // (user, key); without a key every call is a new job.
  void Submit(const auth::Principal& who, JobRequest request, std::string idempotency_key, std::string audit_action,
              std::function<void(Result<Submitted>)> done);

  // Every check Submit makes before it stores anything (admission with the
  // config now, dependencies, secrets), without storing: where the job
  // would go (its route's resources with the queue's defaults applied).
  Result<JobAdmission> Check(const auth::Principal& who, const JobRequest& request) const;
  // Turns the array tasks a dependency names as ID_INDEX into their own
  // ids (started or not); 422 unknown_job for one the caller may not see
  // or that does not exist.
  Status ResolveDependencyTasks(const auth::Principal& who, model::Dependency& dependency) const;

  // Cancel, hold or release the job `job_id` (the path's text): NotFound when
  // it does not exist or the caller may not see it, Forbidden when the caller
  // may see but not control it; Conflict from the controller for a state the
  // action does not apply to (a job that has ended is one).
  void Control(const auth::Principal& who, const std::string& job_id, ControlPlane::JobAction action,
               std::function<void(Result<model::Job>)> done);

  // The job `job_id` if the caller may see it; NotFound both when it does
  // not exist and when it is hidden (no one learns of others' jobs).
  // PATCH /v1/jobs/{id}: who may control the job (its owner, admins of its
  // queue, platform-admins) changes it as PlanJobUpdate allows.
  void Update(const auth::Principal& who, const std::string& job_id, const JobUpdate& update,
              std::function<void(Result<model::Job>)> done);
  // A job `who` may read (else 404) and control (else 403 saying it may
  // not `verb` it): its owner, admins of its queue, platform-admins.
  Result<model::Job> ControllableJob(const auth::Principal& who, const std::string& job_id,
                                     const std::string& verb) const;
  // `job_id` is an id, or an array's task as Slurm names it, "123_7"
  // (VisibleArrayTask).
  Result<model::Job> VisibleJob(const auth::Principal& who, const std::string& job_id) const;
  // Task `index` of the array `parent_id`: its own job once started, else
  // as it waits in its array (PENDING, or HELD with it), or CANCELLED when it
  // was cancelled before it started (docs/arrays.md).
  Result<model::Job> VisibleArrayTask(const auth::Principal& who, model::JobId parent_id, int64_t index) const;

  // Admits an API sandbox (the job path's router, quotas and budgets), then
  // has the sandbox plane start it (waiting for a slot as its queue's
  // quota_action says). `done` gets the sandbox's view (201) or the error.
  void CreateSandbox(const auth::Principal& who, SandboxRequest request,
                     std::function<void(Result<nlohmann::json>)> done);

  // The controller's latest view (for rendering).
  std::shared_ptr<const ClusterView> View() const { return control_.View(); }

 private:
  SandboxHolds SandboxHoldsNow() const;
  Result<JobAdmission> Admit(const config::Config& config, const auth::Principal& who, const JobRequest& request) const;

  // The config in force; current_config() is its version now.
  const config::LiveConfig& live_;
  const config::Config& current_config() const { return live_.Current(); }
  store::Store& store_;
  ControlPlane& control_;
  SandboxPlane* sandboxes_;
  metrics::Metrics& metrics_;
  const Clock& clock_;
  // Arrays this daemon accepted: their first task's id -> the array's id,
  // so that a task's own id finds it from its 201 on (VisibleJob).
  mutable std::mutex arrays_mu_;
  std::map<model::JobId, model::JobId> arrays_;
};

}  // namespace unisched::service
