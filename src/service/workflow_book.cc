// The workflow book (service/workflow_book.h).

#include "unisched/service/workflow_book.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <future>

#include "unisched/config/config.h"

namespace unisched::service {

namespace {

using nlohmann::json;

// Jobs' and workflows' ids are written as decimal strings in the API.
std::optional<int64_t> ParseId(const std::string& text) {
  int64_t id = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || ptr != text.data() + text.size() || id <= 0) return std::nullopt;
  return id;
}

Error NoSuchWorkflow(const std::string& id) {
  return Error::NotFound("no workflow " + id + " that you may see; GET /v1/workflows lists yours");
}

// The per-workflow directory on shared storage, as jobs see it
// (docs/workflows.md): under the project's directory of storage.workflow_dirs
// (else of the first read-write shared file system), or "" when none.
std::string WorkflowDir(const config::Config& config, const std::string& project, int64_t id) {
  const config::SharedFileSystem* chosen = nullptr;
  for (const auto& fs : config.storage.shared) {
    if (config.storage.workflow_dirs.empty() ? !fs.read_only : fs.name == config.storage.workflow_dirs) {
      chosen = &fs;
      break;
    }
  }
  if (chosen == nullptr) return "";
  std::string dir = chosen->mount.empty() ? chosen->path : chosen->mount;
  if (chosen->project_dirs) dir += "/" + project;
  return dir + "/workflows/" + std::to_string(id);
}

double Power(double factor, int times) {
  return std::pow(factor, times);
}

}  // namespace

struct WorkflowBook::Workflow {
  store::WorkflowRecord record;
  model::WorkflowSpec spec;
  model::WorkflowStatus status;
  auth::Principal owner;
  std::string dir;  // UNISCHED_WORKFLOW_DIR, fixed when submitted
  std::chrono::steady_clock::time_point last_written{};
};

WorkflowBook::WorkflowBook(const config::LiveConfig& live, store::Store& store, JobService& jobs,
                           JobTemplateReader read_job, const Clock& clock)
    : live_(live), store_(store), jobs_(jobs), read_job_(std::move(read_job)), clock_(clock) {}

WorkflowBook::~WorkflowBook() {
  Stop();
}

void WorkflowBook::Start() {
  {
    // First of all: job ends the controller told before the book ran find
    // their workflows loaded.
    std::lock_guard lock(mu_);
    queue_.push_front([this] { Load(); });
  }
  thread_ = std::thread([this] { Run(); });
}

void WorkflowBook::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WorkflowBook::Post(std::function<void()> work) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(work));
  }
  wake_.notify_one();
}

void WorkflowBook::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    // Records held back (WriteDirty) are written within a second.
    wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty() && stopping_) break;
    // A burst: everything queued now, then one write per changed workflow.
    std::deque<std::function<void()>> burst;
    burst.swap(queue_);
    lock.unlock();
    for (auto& work : burst) {
      try {
        work();
      } catch (const std::exception& e) {
        spdlog::error("workflow book: {}", e.what());
      }
    }
    WriteDirty(false);
    lock.lock();
    if (stopping_ && queue_.empty()) break;
  }
  lock.unlock();
  WriteDirty(true);
}

json WorkflowBook::PrincipalToJson(const auth::Principal& who) {
  return {{"user", who.user},
          {"role", std::string(auth::ToString(who.role))},
          {"projects", who.projects},
          {"queues", who.queues},
          {"unix_user", who.unix_user}};
}

auth::Principal WorkflowBook::PrincipalFromJson(const json& doc) {
  auth::Principal who;
  who.user = doc.value("user", "");
  who.role = auth::ParseRole(doc.value("role", "user")).value_or(auth::Role::kUser);
  who.projects = doc.value("projects", std::vector<std::string>{});
  who.queues = doc.value("queues", std::vector<std::string>{});
  who.unix_user = doc.value("unix_user", "");
  return who;
}

Result<std::unique_ptr<WorkflowBook::Workflow>> WorkflowBook::FromRecord(store::WorkflowRecord record) {
  auto doc = json::parse(record.document, nullptr, false);
  auto spec = codec::WorkflowSpecFromJson(doc.value("spec", json::object()));
  auto status = codec::WorkflowStatusFromJson(doc.value("status", json::object()));
  if (doc.is_discarded() || !spec.ok() || !status.ok()) {
    return Error::Internal("workflow " + std::to_string(record.id) + ": its stored document is unreadable");
  }
  auto w = std::make_unique<Workflow>();
  w->spec = std::move(spec).value();
  w->status = std::move(status).value();
  w->owner = PrincipalFromJson(doc.value("owner", json::object()));
  w->dir = doc.value("dir", "");
  w->record = std::move(record);
  w->record.document.clear();  // kept in memory as spec and status; written anew
  return w;
}

std::string WorkflowBook::DocumentOf(const Workflow& w) const {
  return json{{"spec", codec::WorkflowSpecToJson(w.spec)},
              {"status", codec::WorkflowStatusToJson(w.status)},
              {"owner", PrincipalToJson(w.owner)},
              {"dir", w.dir}}
      .dump();
}

json WorkflowBook::ViewOf(const Workflow& w) const {
  json counts = json::object();
  for (auto state : {model::InstanceState::kWaiting, model::InstanceState::kReleased, model::InstanceState::kSucceeded,
                     model::InstanceState::kFailed, model::InstanceState::kSkipped, model::InstanceState::kCancelled}) {
    counts[std::string(model::ToString(state))] = 0;
  }
  for (const auto& [state, n] : model::CountInstances(w.status)) counts[std::string(model::ToString(state))] = n;
  std::map<std::string, std::string> alternative_for;
  for (const auto& task : w.spec.tasks) {
    if (!task.on_failure.alternative.empty()) alternative_for[task.on_failure.alternative] = task.name;
  }
  json tasks = json::array();
  json edges = json::array();
  for (const auto& task : w.spec.tasks) {
    json t = codec::WorkflowTaskToJson(task);
    t["scatter_size"] = task.scatter.empty() ? 0 : task.scatter.size();
    t.erase("scatter");
    auto alt = alternative_for.find(task.name);
    t["alternative_for"] = alt == alternative_for.end() ? json(nullptr) : json(alt->second);
    json instances = json::array();
    if (auto found = w.status.instances.find(task.name); found != w.status.instances.end()) {
      for (size_t i = 0; i < found->second.size(); ++i) {
        const model::TaskInstance& instance = found->second[i];
        json jobs = json::array();
        for (auto id : instance.jobs) {
          if (id > 0) jobs.push_back(std::to_string(id));
        }
        instances.push_back({{"index", i},
                             {"item", task.scatter.empty() ? json(nullptr) : json(task.scatter[i])},
                             {"state", std::string(model::ToString(instance.state))},
                             {"tool", instance.tool.empty() ? json(nullptr) : json(instance.tool)},
                             {"tries", instance.tries},
                             {"jobs", std::move(jobs)},
                             {"reason", instance.reason}});
      }
    }
    t["instances"] = std::move(instances);
    tasks.push_back(std::move(t));
    for (const auto& up : task.after) edges.push_back({{"from", up}, {"to", task.name}});
  }
  json events = codec::WorkflowStatusToJson(model::WorkflowStatus{{}, {}, {}, w.status.events})["events"];
  auto when = [](const std::optional<Timestamp>& t) { return t ? json(FormatRfc3339(*t)) : json(nullptr); };
  return {{"id", std::to_string(w.record.id)},
          {"name", w.spec.name},
          {"project", w.record.project},
          {"user", w.record.user},
          {"state", std::string(model::ToString(w.status.state))},
          {"reason", w.status.reason},
          {"created_at", FormatRfc3339(w.record.created_at)},
          {"updated_at", FormatRfc3339(w.record.updated_at)},
          {"ended_at", when(w.record.ended_at)},
          {"workflow_dir", w.dir.empty() ? json(nullptr) : json(w.dir)},
          {"counts", std::move(counts)},
          {"tasks", std::move(tasks)},
          {"edges", std::move(edges)},
          {"events", std::move(events)}};
}

Status WorkflowBook::CheckTemplate(const auth::Principal& who, const std::string& project,
                                   const model::WorkflowTask& task, const std::string& at) const {
  auto prefixed = [&](Error e) {
    const std::string field = e.field.empty() ? at : at + "." + e.field;
    e.message = field + ": " + e.message;
    e.field = field;
    return e;
  };
  auto body = json::parse(task.job, nullptr, false);
  auto request = read_job_(body);
  if (!request.ok()) return prefixed(request.error());
  if (request->project && *request->project != project) {
    return Error::Unprocessable("invalid_value",
                                at + ".project: every task runs in the workflow's project (" + project +
                                    "); leave it out or submit the workflow to project " + *request->project,
                                at + ".project");
  }
  if (request->array) {
    return Error::Unprocessable("invalid_value", at + ".array: a task is not an array; use scatter instead",
                                at + ".array");
  }
  request->project = project;
  auto admitted = jobs_.Check(who, *request);
  if (!admitted.ok()) return prefixed(admitted.error());
  return Status::Ok();
}

void WorkflowBook::Submit(const auth::Principal& who, codec::WorkflowRequest request,
                          std::function<void(Result<json>)> done) {
  if (Status s = model::ValidateWorkflowGraph(request.spec); !s.ok()) return done(s.error());
  std::string project = request.project.value_or(who.projects.size() == 1 ? who.projects[0] : "default");
  if (!auth::CanSubmitTo(who, project)) {
    return done(Error::Forbidden("user " + who.user + " is not a member of project " + project, "forbidden"));
  }
  // The templates are checked here, on the caller's thread: the checks read
  // the store and the cluster's view, never the book's state.
  for (size_t i = 0; i < request.spec.tasks.size(); ++i) {
    if (Status s = CheckTemplate(who, project, request.spec.tasks[i], "tasks[" + std::to_string(i) + "].job");
        !s.ok()) {
      return done(s.error());
    }
  }
  Post([this, who, project = std::move(project), spec = std::move(request.spec), done = std::move(done)]() mutable {
    auto w = std::make_unique<Workflow>();
    w->spec = std::move(spec);
    w->owner = who;
    const Timestamp now = clock_.Now();
    model::WorkflowRun run(w->spec, w->status);
    // Decided before the insert, released after: the row holds the first
    // decisions; a crash before the releases is reconciled at the next start.
    const model::WorkflowActions actions = run.Start(now);
    w->record.project = project;
    w->record.user = who.user;
    w->record.name = w->spec.name;
    w->record.state = std::string(model::ToString(w->status.state));
    w->record.created_at = w->record.updated_at = now;
    w->record.document = DocumentOf(*w);
    auto id = store_.InsertWorkflow(w->record);
    if (!id.ok()) return done(id.error());
    w->record.id = *id;
    w->dir = WorkflowDir(live_.Current(), project, *id);
    Workflow& stored = *w;
    workflows_[*id] = std::move(w);
    dirty_.insert(*id);  // the directory and the releases' job ids
    done(ViewOf(stored));
    spdlog::info("workflow {} '{}' of {} submitted: {} tasks", *id, stored.spec.name, who.user,
                 stored.spec.tasks.size());
    Apply(stored, actions);
  });
}

Result<WorkflowBook::Workflow*> WorkflowBook::Visible(const auth::Principal& who, const std::string& id_text,
                                                      bool control) {
  auto id = ParseId(id_text);
  if (!id) return NoSuchWorkflow(id_text);
  auto it = workflows_.find(*id);
  if (it == workflows_.end()) {
    // An ended workflow: read from the store (and kept while asked for).
    auto record = store_.GetWorkflow(*id);
    if (!record.ok()) return record.error();
    if (!record->has_value()) return NoSuchWorkflow(id_text);
    auto w = FromRecord(std::move(**record));
    if (!w.ok()) return w.error();
    it = workflows_.emplace(*id, std::move(w).value()).first;
  }
  Workflow& w = *it->second;
  const bool may_read = who.job_id == 0 && (auth::IsPlatformAdmin(who) || auth::BelongsTo(who, w.record.project) ||
                                            w.record.user == who.user);
  if (!may_read) return NoSuchWorkflow(id_text);
  if (control && !(auth::IsPlatformAdmin(who) || w.record.user == who.user)) {
    return Error::Forbidden(
        "only workflow " + id_text + "'s owner (" + w.record.user + ") and platform-admins may change it", "forbidden");
  }
  return &w;
}

void WorkflowBook::Get(const auth::Principal& who, const std::string& id, std::function<void(Result<json>)> done) {
  Post([this, who, id, done = std::move(done)] {
    auto w = Visible(who, id, false);
    if (!w.ok()) return done(w.error());
    done(ViewOf(**w));
  });
}

void WorkflowBook::Cancel(const auth::Principal& who, const std::string& id, std::function<void(Result<json>)> done) {
  Post([this, who, id, done = std::move(done)] {
    auto w = Visible(who, id, true);
    if (!w.ok()) return done(w.error());
    Workflow& workflow = **w;
    if (workflow.status.state == model::WorkflowState::kSucceeded ||
        workflow.status.state == model::WorkflowState::kCancelled) {
      return done(Error::Conflict("workflow_ended", "workflow " + id + " has already ended " +
                                                        std::string(model::ToString(workflow.status.state))));
    }
    model::WorkflowRun run(workflow.spec, workflow.status);
    const auto actions = run.Cancel(who.user, clock_.Now());
    dirty_.insert(workflow.record.id);
    Apply(workflow, actions);
    done(ViewOf(workflow));
  });
}

void WorkflowBook::Resume(const auth::Principal& who, const std::string& id, std::function<void(Result<json>)> done) {
  Post([this, who, id, done = std::move(done)] {
    auto w = Visible(who, id, true);
    if (!w.ok()) return done(w.error());
    Workflow& workflow = **w;
    if (workflow.status.state == model::WorkflowState::kRunning ||
        workflow.status.state == model::WorkflowState::kSucceeded) {
      return done(Error::Conflict("workflow_not_resumable", "workflow " + id + " is " +
                                                                std::string(model::ToString(workflow.status.state)) +
                                                                ": only a FAILED or CANCELLED workflow resumes"));
    }
    model::WorkflowRun run(workflow.spec, workflow.status);
    const auto actions = run.Resume(who.user, clock_.Now());
    workflow.record.ended_at.reset();
    dirty_.insert(workflow.record.id);
    Apply(workflow, actions);
    done(ViewOf(workflow));
  });
}

void WorkflowBook::AddTasks(const auth::Principal& who, const std::string& id, std::vector<model::WorkflowTask> tasks,
                            std::function<void(Result<json>)> done) {
  Post([this, who, id, tasks = std::move(tasks), done = std::move(done)]() mutable {
    auto w = Visible(who, id, true);
    if (!w.ok()) return done(w.error());
    Workflow& workflow = **w;
    if (workflow.status.state == model::WorkflowState::kCancelled) {
      return done(Error::Conflict("workflow_ended", "workflow " + id + " was cancelled: resume it first"));
    }
    model::WorkflowSpec whole = workflow.spec;
    whole.tasks.insert(whole.tasks.end(), tasks.begin(), tasks.end());
    if (Status s = model::ValidateWorkflowGraph(whole); !s.ok()) return done(s.error());
    // The new tasks may name only tasks of the workflow (old or new): the
    // graph check above holds that; their templates as at submit. (Checked
    // on the book's thread: an addition is rare and small.)
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (Status s = CheckTemplate(who, workflow.record.project, tasks[i], "tasks[" + std::to_string(i) + "].job");
          !s.ok()) {
        return done(s.error());
      }
    }
    model::WorkflowRun run(workflow.spec, workflow.status);
    const auto actions = run.AddTasks(std::move(tasks), clock_.Now());
    workflow.record.ended_at.reset();
    dirty_.insert(workflow.record.id);
    Apply(workflow, actions);
    done(ViewOf(workflow));
  });
}

Result<JobRequest> WorkflowBook::RequestFor(const Workflow& w, const model::Release& release) const {
  const model::WorkflowTask* task = model::FindTask(w.spec, release.task);
  const model::WorkflowTask* tool = release.tool.empty() ? task : model::FindTask(w.spec, release.tool);
  if (task == nullptr || tool == nullptr) return Error::Internal("workflow task " + release.task + " is gone");
  auto request = read_job_(json::parse(tool->job, nullptr, false));
  if (!request.ok()) return request.error();
  request->project = w.record.project;
  if (request->name.empty()) {
    request->name = release.task + (task->scatter.empty() ? "" : "[" + std::to_string(release.instance) + "]");
  }
  auto& env = request->env;
  env[model::kWorkflowIdVariable] = std::to_string(w.record.id);
  env["UNISCHED_WORKFLOW_NAME"] = w.spec.name;
  env["UNISCHED_WORKFLOW_TASK"] = release.task;
  env["UNISCHED_WORKFLOW_TRY"] = std::to_string(release.try_number);
  if (!release.tool.empty()) env["UNISCHED_WORKFLOW_TOOL"] = release.tool;
  if (!w.dir.empty()) env["UNISCHED_WORKFLOW_DIR"] = w.dir;
  if (!task->scatter.empty()) {
    env["UNISCHED_SCATTER_INDEX"] = std::to_string(release.instance);
    env["UNISCHED_SCATTER_ITEM"] = task->scatter[static_cast<size_t>(release.instance)];
    env["UNISCHED_SCATTER_COUNT"] = std::to_string(task->scatter.size());
  }
  // A retry's change multiplies what the job would be given (the queue's
  // defaults included), so the request is admitted once to learn it.
  const model::RetryChange& change = tool->on_failure.change;
  if (release.retry > 0 && (change.memory_factor != 1.0 || change.walltime_factor != 1.0)) {
    auto admitted = jobs_.Check(w.owner, *request);
    if (!admitted.ok()) return admitted.error();
    const model::ResourceRequest& given = admitted->route.resources;
    request->resources.memory_mb = static_cast<int64_t>(
        std::ceil(static_cast<double>(given.memory_mb) * Power(change.memory_factor, release.retry)));
    request->resources.walltime_seconds = static_cast<int64_t>(
        std::ceil(static_cast<double>(given.walltime_seconds) * Power(change.walltime_factor, release.retry)));
  }
  return request;
}

void WorkflowBook::Apply(Workflow& w, const model::WorkflowActions& actions) {
  dirty_.insert(w.record.id);
  for (const model::Release& release : actions.releases) {
    auto request = RequestFor(w, release);
    const int64_t id = w.record.id;
    if (!request.ok()) {
      Released(id, release, request.error());
      continue;
    }
    const std::string key = "workflow/" + std::to_string(id) + "/" + release.task + "/" +
                            std::to_string(release.instance) + "/" + std::to_string(release.try_number);
    jobs_.Submit(w.owner, std::move(request).value(), key, "POST /v1/workflows/" + std::to_string(id) + " (release)",
                 [this, id, release](Result<JobService::Submitted> submitted) {
                   Post([this, id, release, submitted = std::move(submitted)]() mutable {
                     Released(id, release, std::move(submitted));
                   });
                 });
  }
  for (model::JobId job : actions.cancel) {
    jobs_.Control(w.owner, std::to_string(job), ControlPlane::JobAction::kCancel, [job](Result<model::Job> result) {
      // A job that ended meanwhile is 409: its end reaches the book anyway.
      if (!result.ok() && result.error().kind != ErrorKind::kConflict) {
        spdlog::warn("workflow: cannot cancel job {}: {}", job, result.error().message);
      }
    });
  }
}

void WorkflowBook::Released(int64_t workflow, const model::Release& release, Result<JobService::Submitted> submitted) {
  auto it = workflows_.find(workflow);
  if (it == workflows_.end()) return;
  Workflow& w = *it->second;
  auto found = w.status.instances.find(release.task);
  if (found == w.status.instances.end()) return;
  model::TaskInstance& instance = found->second[static_cast<size_t>(release.instance)];
  if (instance.tries != release.try_number || instance.jobs.size() >= static_cast<size_t>(release.try_number)) {
    return;  // a release made again after a restart answered twice
  }
  dirty_.insert(workflow);
  if (!submitted.ok()) {
    // Refused (a quota that rejects, a queue gone): the try fails as its job would.
    instance.jobs.push_back(0);
    spdlog::warn("workflow {}: task {}[{}] could not be released: {}", workflow, release.task, release.instance,
                 submitted.error().message);
    model::WorkflowRun run(w.spec, w.status);
    Apply(w, run.JobEnded(release.task, release.instance, 0, false, false, "not released: " + submitted.error().message,
                          clock_.Now()));
    return;
  }
  const model::JobId job = submitted->id;
  instance.jobs.push_back(job);
  by_job_[job] = {workflow, release.task, release.instance};
  // Cancelled or failed meanwhile: this job has no place to run.
  if (w.status.state != model::WorkflowState::kRunning) {
    Apply(w, {{}, {job}});
  }
  if (auto end = unmatched_ends_.find(job); end != unmatched_ends_.end()) {
    UnmatchedEnd ended = std::move(end->second);
    unmatched_ends_.erase(end);
    Ended(job, ended.state, ended.reason);
  } else if (submitted->replayed && model::IsTerminal(submitted->replayed->state)) {
    // Made before a restart, and ended already.
    Ended(job, submitted->replayed->state, submitted->replayed->state_reason);
  }
}

void WorkflowBook::JobEnded(model::JobId job, model::JobState state, std::string reason) {
  Post([this, job, state, reason = std::move(reason)] { Ended(job, state, reason); });
}

void WorkflowBook::Ended(model::JobId job, model::JobState state, const std::string& reason) {
  auto ref = by_job_.find(job);
  if (ref == by_job_.end()) {
    const Timestamp now = clock_.Now();
    // Forget what waited past its time (matched ones are gone from the map already).
    while (!unmatched_order_.empty() && now - unmatched_order_.front().first > kUnmatchedEndKept) {
      if (auto old = unmatched_ends_.find(unmatched_order_.front().second);
          old != unmatched_ends_.end() && old->second.at == unmatched_order_.front().first) {
        unmatched_ends_.erase(old);
      }
      unmatched_order_.pop_front();
    }
    unmatched_ends_[job] = {state, reason, now};
    unmatched_order_.emplace_back(now, job);
    return;
  }
  const InstanceRef where = ref->second;
  by_job_.erase(ref);
  auto it = workflows_.find(where.workflow);
  if (it == workflows_.end()) return;
  Workflow& w = *it->second;
  model::WorkflowRun run(w.spec, w.status);
  const bool succeeded = state == model::JobState::kCompleted;
  const bool cancelled = state == model::JobState::kCancelled;
  std::string why =
      reason.empty() ? std::string(model::ToString(state)) : std::string(model::ToString(state)) + ": " + reason;
  Apply(w, run.JobEnded(where.task, where.instance, job, succeeded, cancelled, why, clock_.Now()));
}

void WorkflowBook::WriteDirty(bool all) {
  const Timestamp now = clock_.Now();
  const auto steady = std::chrono::steady_clock::now();
  std::set<int64_t> held;
  for (int64_t id : dirty_) {
    auto it = workflows_.find(id);
    if (it == workflows_.end()) continue;
    Workflow& w = *it->second;
    // A large workflow's record is rewritten whole: while its state stays,
    // at most once a second (what it lags by is re-derived at a restart).
    const bool state_changed = w.record.state != model::ToString(w.status.state);
    if (!all && !state_changed && steady - w.last_written < std::chrono::seconds(1)) {
      held.insert(id);
      continue;
    }
    w.last_written = steady;
    w.record.state = std::string(model::ToString(w.status.state));
    w.record.name = w.spec.name;
    w.record.updated_at = now;
    bool open = false;
    for (const auto& [task, instances] : w.status.instances) {
      for (const auto& instance : instances) open = open || instance.state == model::InstanceState::kReleased;
    }
    // Over once it has ended and none of its jobs is still to be heard of:
    // only then is it left out of the next start's load.
    if (model::IsEnded(w.status.state) && !open) {
      if (!w.record.ended_at) w.record.ended_at = now;
    } else {
      w.record.ended_at.reset();
    }
    w.record.document = DocumentOf(w);
    if (Status s = store_.UpdateWorkflow(w.record); !s.ok()) {
      spdlog::error("workflow {}: cannot store its record: {} (kept in memory, tried again within a second)", id,
                    s.error().message);
      held.insert(id);
      continue;
    }
    w.record.document.clear();
  }
  dirty_ = std::move(held);
  // Ended workflows are read from the store when asked for again.
  for (auto it = workflows_.begin(); it != workflows_.end();) {
    it = it->second->record.ended_at && !dirty_.count(it->first) ? workflows_.erase(it) : std::next(it);
  }
}

void WorkflowBook::Load() {
  store::WorkflowFilter not_over;
  not_over.active_only = true;
  not_over.with_documents = true;
  not_over.limit = 1'000'000;
  auto records = store_.ListWorkflows(not_over);
  if (!records.ok()) {
    spdlog::error("workflows: cannot load them: {}", records.error().message);
    return;
  }
  const Timestamp now = clock_.Now();
  for (auto& record : *records) {
    auto w = FromRecord(std::move(record));
    if (!w.ok()) {
      spdlog::error("{}; left as it is", w.error().message);
      continue;
    }
    Workflow& loaded = **w;
    const int64_t id = loaded.record.id;
    workflows_[id] = std::move(w).value();
    model::WorkflowActions again;
    std::vector<std::pair<model::JobId, model::Job>> ended;
    for (const auto& [task, instances] : loaded.status.instances) {
      for (size_t i = 0; i < instances.size(); ++i) {
        const model::TaskInstance& instance = instances[i];
        if (instance.state != model::InstanceState::kReleased) continue;
        if (instance.jobs.size() < static_cast<size_t>(instance.tries)) {
          // Decided, its job perhaps made, its record not written: released
          // again with the same key (the job service answers the job it has).
          again.releases.push_back(
              {task, static_cast<int64_t>(i), instance.tool, instance.tries, instance.tool_tries - 1});
          continue;
        }
        const model::JobId job = instance.jobs.back();
        by_job_[job] = {id, task, static_cast<int64_t>(i)};
        auto stored = store_.GetJob(job);
        if (stored.ok() && model::IsTerminal(stored->state)) ended.emplace_back(job, *stored);
      }
    }
    Apply(loaded, again);
    for (const auto& [job, stored] : ended) Ended(job, stored.state, stored.state_reason);
    model::WorkflowRun run(loaded.spec, loaded.status);
    Apply(loaded, run.Reconcile(now));
  }
  spdlog::info("workflows: {} loaded", workflows_.size());
}

}  // namespace unisched::service
