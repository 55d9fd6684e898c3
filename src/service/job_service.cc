// The job service (service/job_service.h).

#include "unisched/service/job_service.h"

#include <spdlog/spdlog.h>

#include "unisched/codec/job_json.h"

namespace unisched::service {

namespace {

Error NotStored() {
  return {
      ErrorKind::kUnavailable, "store_unavailable", "the job was not stored; retry with the same Idempotency-Key", {}};
}

}  // namespace

JobService::JobService(const config::LiveConfig& live, store::Store& store, ControlPlane& control,
                       SandboxPlane* sandboxes, metrics::Metrics& metrics, const Clock& clock)
    : live_(live), store_(store), control_(control), sandboxes_(sandboxes), metrics_(metrics), clock_(clock) {}

Result<JobAdmission> JobService::Admit(const config::Config& config, const auth::Principal& who,
                                       const JobRequest& request) const {
  auto admitted = AdmitJob(
      config, *control_.View(), [this] { return SandboxHoldsNow(); }, who, request);
  if (!admitted.ok()) return admitted.error();
  // A waiting task has no row yet: found through its array as GET finds it.
  if (auto refused = DependencyRefusal(who, request,
                                       [this, &who](model::JobId id) { return VisibleJob(who, std::to_string(id)); })) {
    return *refused;
  }
  // A secret must exist in the job's project when the job is accepted: a
  // typo fails now, not at launch. (One deleted later fails the launch.)
  for (size_t i = 0; i < request.secrets.size(); ++i) {
    auto found = store_.GetSecret(admitted->project, request.secrets[i].name);
    if (!found.ok()) return found.error();
    if (!found->has_value()) {
      return Error::Unprocessable("unknown_secret",
                                  "project " + admitted->project + " has no secret named '" + request.secrets[i].name +
                                      "'; POST /v1/secrets makes one, GET /v1/secrets?project=" + admitted->project +
                                      " lists them",
                                  "secrets[" + std::to_string(i) + "]");
    }
  }
  return admitted;
}

Result<JobAdmission> JobService::Check(const auth::Principal& who, const JobRequest& request) const {
  if (std::any_of(request.dependency.terms.begin(), request.dependency.terms.end(),
                  [](const model::DependencyTerm& t) { return !t.tasks.empty(); })) {
    JobRequest resolved = request;
    if (Status s = ResolveDependencyTasks(who, resolved.dependency); !s.ok()) return s.error();
    return Admit(current_config(), who, resolved);
  }
  return Admit(current_config(), who, request);
}

Status JobService::ResolveDependencyTasks(const auth::Principal& who, model::Dependency& dependency) const {
  for (auto& term : dependency.terms) {
    for (const auto& [array_id, index] : term.tasks) {
      const std::string name = model::ArrayTaskName(array_id, index);
      auto parent = store_.GetJob(array_id);
      std::optional<model::JobId> id;
      if (parent.ok() && auth::CanReadJob(who, *parent) && parent->array)
        id = model::ArrayTaskId(*parent->array, index);
      if (!id) {
        return Error::Unprocessable("unknown_job",
                                    "dependency names task " + name +
                                        ", which does not exist or is not visible to you; name tasks of your own "
                                        "arrays or your projects' (ID_INDEX, an index the array has)",
                                    "dependency");
      }
      term.jobs.push_back(*id);
    }
    term.tasks.clear();
  }
  return Status::Ok();
}

void JobService::Submit(const auth::Principal& who, JobRequest request, std::string idempotency_key,
                        std::string audit_action, std::function<void(Result<Submitted>)> done) {
  // One version of the config for the whole admission.
  const config::Config& config = current_config();
  if (Status s = ResolveDependencyTasks(who, request.dependency); !s.ok()) {
    done(s.error());
    return;
  }
  auto admitted = Admit(config, who, request);
  if (!admitted.ok()) {
    done(admitted.error());
    return;
  }
  if (idempotency_key.size() > 255) {
    done(Error::Unprocessable("invalid_value", "Idempotency-Key must be at most 255 characters", "Idempotency-Key"));
    return;
  }
  const router::RouteDecision& route = admitted->route;
  model::Job job;
  job.name = std::move(request.name);
  job.user = who.user;
  job.project = admitted->project;
  job.queue = route.queue;
  job.pool = route.pool;
  job.state = request.hold ? model::JobState::kHeld : model::JobState::kPending;
  if (request.hold) job.state_reason = "held by " + who.user + " at submission";
  if (request.begin_at && *request.begin_at > clock_.Now()) {
    // Slurm's --begin: held back until then (reason BeginTime).
    job.eligible_at = request.begin_at;
    if (!request.hold) job.state_reason = "BeginTime";
  }
  job.workload = std::move(request.workload);
  job.workload.kind = admitted->kind;
  job.resources = route.resources;
  job.constraints = std::move(request.constraints);
  job.launch = request.launch;
  job.command = std::move(request.command);
  job.script = model::ScriptText(std::move(request.script));
  job.env = std::move(request.env);
  job.secrets = std::move(request.secrets);
  job.data = std::move(request.data);
  job.workdir = std::move(request.workdir);
  job.output_file = std::move(admitted->output_file);
  job.error_file = std::move(admitted->error_file);
  job.priority = request.priority;
  job.max_retries = request.max_retries;
  job.dependency = std::move(request.dependency);
  job.array = std::move(request.array);
  job.routing = {route.pool, route.queue, route.reason};
  job.submitted_at = clock_.Now();
  job.config_version = config.VersionFor(job.queue);
  // The id and the JSON are made here, on the caller's (HTTP) thread: the
  // single store writer then only writes, and the 201 body is the stored
  // document itself (a new job has no pending reasons yet).
  auto id = store_.ReserveJobId();
  if (!id.ok()) {
    spdlog::error("no job id: {}", id.error().message);
    done(NotStored());
    return;
  }
  job.id = *id;
  // An array's document names its first task's id, reserved in the write.
  auto document = std::make_shared<std::string>(job.array ? std::string() : codec::JobDocument(job));

  struct Outcome {
    model::JobId id = 0;
    bool replayed = false;
  };
  auto outcome = std::make_shared<Outcome>();
  store::AuditRecord audit{job.submitted_at, who.user, std::move(audit_action), "", "201"};
  // Shared by the write and its `done`, not moved into either: the two
  // closures are built in an unspecified order, so a move into one could
  // leave the other a moved-from job. `done` runs once, after the last run
  // of the write, so it may move the job on to the controller.
  auto committed = std::make_shared<model::Job>(std::move(job));
  store_.Write(
      // The writer may run this twice (store.h): it only reads what it
      // captured and overwrites its outcome.
      [committed, document, idempotency_key = std::move(idempotency_key), audit,
       outcome](store::Transaction& t) mutable -> Status {
        const model::Job& job = *committed;
        outcome->replayed = false;
        if (!idempotency_key.empty()) {
          if (auto existing = t.FindIdempotentJob(job.user, idempotency_key)) {
            outcome->id = *existing;
            outcome->replayed = true;
            return Status::Ok();
          }
        }
        if (job.array) {
          // One id per task, consecutive, so the tasks' ids follow their
          // indices (docs/arrays.md); no task has a row until it starts.
          auto first = t.ReserveJobIds(job.array->indices.Count());
          if (!first.ok()) return first.error();
          committed->array->first_task_id = *first;
          *document = codec::JobDocument(job);
        }
        auto id = t.InsertJob(job, idempotency_key, *document);
        if (!id.ok()) return id.error();
        outcome->id = *id;
        audit.target = "job/" + std::to_string(*id);
        if (auto s = t.AppendEvent(*id, {job.submitted_at, "submitted", job.routing.reason}); !s.ok()) return s;
        return t.AppendAudit(audit);
      },
      [this, committed, document, outcome, done = std::move(done)](Status status) mutable {
        if (!status.ok()) {
          spdlog::error("submission not committed: {}", status.error().message);
          done(NotStored());
          return;
        }
        if (outcome->replayed) {
          auto existing = store_.GetJob(outcome->id);
          if (!existing.ok()) {
            done(existing.error());
            return;
          }
          done(Submitted{outcome->id, nullptr, std::move(existing).value()});
          return;
        }
        const model::JobId id = committed->id;
        metrics_.CountSubmission(committed->queue);
        if (committed->array) {
          // Known before the 201, so a GET of a task's id after it finds it
          // even before the controller has published the array.
          std::lock_guard lock(arrays_mu_);
          arrays_[committed->array->first_task_id] = id;
        }
        control_.JobCommitted(std::move(*committed));
        done(Submitted{id, std::move(document), std::nullopt});
      });
}

SandboxHolds JobService::SandboxHoldsNow() const {
  return sandboxes_ ? sandboxes_->Holds() : SandboxHolds{};
}

namespace {

// "123_7": an array's id and a task's index (Slurm's name for a task).
std::optional<std::pair<model::JobId, int64_t>> ParseTaskName(const std::string& text) {
  const size_t underscore = text.find('_');
  if (underscore == std::string::npos) return std::nullopt;
  try {
    size_t used = 0;
    const model::JobId parent = std::stoll(text.substr(0, underscore), &used);
    if (used != underscore || parent <= 0) return std::nullopt;
    const std::string index_text = text.substr(underscore + 1);
    const int64_t index = std::stoll(index_text, &used);
    if (used != index_text.size() || index < 0) return std::nullopt;
    return std::make_pair(parent, index);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

Result<model::Job> JobService::VisibleJob(const auth::Principal& who, const std::string& job_id) const {
  if (auto task = ParseTaskName(job_id)) return VisibleArrayTask(who, task->first, task->second);
  model::JobId id = 0;
  try {
    size_t used = 0;
    id = std::stoll(job_id, &used);
    if (used != job_id.size() || id <= 0) throw std::invalid_argument("id");
  } catch (const std::exception&) {
    return Error::NotFound("no job " + job_id + ": job ids are positive integers");
  }
  auto job = store_.GetJob(id);
  if (!job.ok()) {
    // A task that has not started has no row: found through its array
    // (ids follow the indices from the first task's), one this daemon
    // accepted or, after a restart, an active one (the controller's view).
    // (first task id, array id) at or before `id` in `parents`.
    auto covering = [id](const std::map<model::JobId, model::JobId>& parents) {
      auto entry = parents.upper_bound(id);
      return entry == parents.begin() ? std::optional<std::pair<model::JobId, model::JobId>>()
                                      : std::optional<std::pair<model::JobId, model::JobId>>(*std::prev(entry));
    };
    std::optional<std::pair<model::JobId, model::JobId>> candidates[2];
    {
      std::lock_guard lock(arrays_mu_);
      candidates[0] = covering(arrays_);
    }
    candidates[1] = covering(*control_.View()->array_parents);
    for (const auto& candidate : candidates) {
      if (!candidate) continue;
      const auto [first, parent_id] = *candidate;
      auto parent = store_.GetJob(parent_id);
      if (parent.ok() && parent->array && id - first < parent->array->indices.Count()) {
        return VisibleArrayTask(who, parent->id, parent->array->indices.At(id - first));
      }
    }
  }
  if (!job.ok() || !auth::CanReadJob(who, *job)) return Error::NotFound("no job " + job_id);
  return job;
}

Result<model::Job> JobService::VisibleArrayTask(const auth::Principal& who, model::JobId parent_id,
                                                int64_t index) const {
  const std::string name = model::ArrayTaskName(parent_id, index);
  auto parent = store_.GetJob(parent_id);
  if (!parent.ok() || !auth::CanReadJob(who, *parent)) return Error::NotFound("no job " + name);
  if (!parent->array) {
    return Error::NotFound("no job " + name + ": job " + std::to_string(parent_id) + " is not an array");
  }
  const model::JobArray& array = *parent->array;
  auto task_id = model::ArrayTaskId(array, index);
  if (!task_id) {
    return Error::NotFound("no job " + name + ": array " + std::to_string(parent_id) + " has the indices " +
                           array.indices.ToString());
  }
  // Started: a job of its own; waiting: as it will start; neither: it
  // never started and never will (cancelled while waiting).
  if (auto stored = store_.GetJob(*task_id); stored.ok()) return stored;
  model::Job task = model::ArrayTaskOf(*parent, index);
  if (!array.waiting.Contains(index)) {
    // Why: the parent's event for it (JobLifecycle::CancelWaitingArrayTask).
    task.state = model::JobState::kCancelled;
    task.state_reason = "cancelled before it started";
    const std::string prefix = "task " + name + ": ";
    for (const auto& event : store_.ListEvents(parent_id)) {
      if (event.kind == "task_cancelled" && event.message.rfind(prefix, 0) == 0) {
        task.state_reason = event.message.substr(prefix.size());
        task.ended_at = event.time;
      }
    }
  } else if (parent->state == model::JobState::kHeld) {
    task.state = model::JobState::kHeld;
    task.state_reason = parent->state_reason;
  }
  return task;
}

Result<model::Job> JobService::ControllableJob(const auth::Principal& who, const std::string& job_id,
                                               const std::string& verb) const {
  auto job = VisibleJob(who, job_id);
  if (!job.ok()) return job.error();
  if (!auth::CanControlJob(who, *job)) {
    return Error::Forbidden("user " + who.user + " may not " + verb + " job " + std::to_string(job->id) + " of user " +
                            job->user);
  }
  return job;
}

void JobService::Control(const auth::Principal& who, const std::string& job_id, ControlPlane::JobAction action,
                         std::function<void(Result<model::Job>)> done) {
  auto job = ControllableJob(who, job_id, "control");
  if (!job.ok()) {
    done(job.error());
    return;
  }
  // Ended, here already: a task cancelled before it started has no job
  // for the controller to find.
  if (model::IsTerminal(job->state)) {
    std::string message = "job " + job_id + " already ended " + std::string(model::ToString(job->state));
    if (action == ControlPlane::JobAction::kRequeue) {
      message += "; a finished job stays finished: submit it again to run it again";
    }
    done(Error::Conflict("job_finished", message));
    return;
  }
  control_.ControlJob(job->id, action, who.user, std::move(done));
}

void JobService::Update(const auth::Principal& who, const std::string& job_id, const JobUpdate& update,
                        std::function<void(Result<model::Job>)> done) {
  auto job = ControllableJob(who, job_id, "update");
  if (!job.ok()) {
    done(job.error());
    return;
  }
  // A waiting task is its array's until it starts: it has nothing of its own to change.
  if (job->array_task && !model::IsTerminal(job->state) && !store_.GetJob(job->id).ok()) {
    done(Error::Conflict("invalid_state", "task " + job_id + " has not started: update its array " +
                                              std::to_string(job->array_task->array_job_id) +
                                              " (a waiting task has no settings of its own)"));
    return;
  }
  auto change = PlanJobUpdate(
      current_config(), *control_.View(), [this] { return SandboxHoldsNow(); }, who, *job, update);
  if (!change.ok()) {
    done(change.error());
    return;
  }
  control_.UpdateJob(job->id, std::move(change).value(), who.user, std::move(done));
}

void JobService::CreateSandbox(const auth::Principal& who, SandboxRequest request,
                               std::function<void(Result<nlohmann::json>)> done) {
  if (!sandboxes_) {
    done(Error::Unavailable("sandboxes are not served by this daemon"));
    return;
  }
  auto admitted = AdmitSandbox(
      current_config(), *control_.View(), [this] { return SandboxHoldsNow(); }, who, request);
  if (!admitted.ok()) {
    done(admitted.error());
    return;
  }
  SandboxPlane::CreateRequest create;
  create.user = who.user;
  create.project = std::move(admitted->project);
  create.queue = std::move(admitted->queue);
  create.pool = std::move(admitted->pool);
  create.image = std::move(request.image);
  create.limits = admitted->limits;
  create.idle_timeout_seconds = request.idle_timeout_seconds;
  sandboxes_->Create(std::move(create), who.user, std::move(done));
}

}  // namespace unisched::service
