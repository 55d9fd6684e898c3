#pragma once
// The workflow book (docs/workflows.md, ADR 0012): runs workflows by making
// each task instance's job when its turn comes. The decisions are
// model::WorkflowRun's; the book turns them into jobs through the job
// service (as the workflow's owner, with the idempotency key
// workflow/<id>/<task>/<instance>/<try>, so a release made again after a
// crash answers the job it made before), cancels jobs, and writes each
// workflow's record after the jobs it made are committed.
//
// Everything the book holds is touched on its own thread: API calls and job
// ends are posted to it. Records are written once per burst of work (a
// 10,000-instance scatter releases its instances and then writes its record
// once), so a record may lag its jobs by one burst; every decision depends
// only on stored job states, and the book rebuilt from the records at the
// next start (Start) takes the decisions it missed.

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "unisched/auth/auth.h"
#include "unisched/codec/workflow_json.h"
#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/config/live.h"
#include "unisched/model/job.h"
#include "unisched/model/workflow.h"
#include "unisched/service/job_service.h"
#include "unisched/store/store.h"

namespace unisched::service {

// The API's reader of a job body (api::ParseSubmission): a task's template
// is read exactly as POST /v1/jobs reads its body.
using JobTemplateReader = std::function<Result<JobRequest>(const nlohmann::json& body)>;

class WorkflowBook {
 public:
  WorkflowBook(const config::LiveConfig& live, store::Store& store, JobService& jobs, JobTemplateReader read_job,
               const Clock& clock);
  ~WorkflowBook();

  // Loads the workflows that are not over, finds how their jobs ended while
  // the daemon was down, and starts the book's thread.
  void Start();
  void Stop();

  // POST /v1/workflows: every task's template checked as a submission of
  // `who` would be (errors name tasks[i].job.<field>), then stored; `done`
  // gets the workflow's view (201) once its row is committed. Its roots are
  // released right after.
  void Submit(const auth::Principal& who, codec::WorkflowRequest request,
              std::function<void(Result<nlohmann::json>)> done);
  // DELETE /v1/workflows/{id}, POST .../resume, POST .../tasks: NotFound
  // when `who` may not see it, Forbidden when it may see but not control it
  // (its owner, platform-admins).
  void Cancel(const auth::Principal& who, const std::string& id, std::function<void(Result<nlohmann::json>)> done);
  void Resume(const auth::Principal& who, const std::string& id, std::function<void(Result<nlohmann::json>)> done);
  void AddTasks(const auth::Principal& who, const std::string& id, std::vector<model::WorkflowTask> tasks,
                std::function<void(Result<nlohmann::json>)> done);
  // GET /v1/workflows/{id}: the view as the book holds it now.
  void Get(const auth::Principal& who, const std::string& id, std::function<void(Result<nlohmann::json>)> done);

  // A job that carries model::kWorkflowIdVariable reached a terminal state (called
  // by the controller after the state is committed; any thread).
  void JobEnded(model::JobId job, model::JobState state, std::string reason);

 private:
  struct Workflow;
  void Post(std::function<void()> work);
  void Run();
  // The principal a workflow's jobs are made as: its owner when it was submitted.
  static nlohmann::json PrincipalToJson(const auth::Principal& who);
  static auth::Principal PrincipalFromJson(const nlohmann::json& doc);
  std::string DocumentOf(const Workflow& w) const;
  // A stored workflow as the book holds it (its document read into spec, status and owner).
  static Result<std::unique_ptr<Workflow>> FromRecord(store::WorkflowRecord record);
  nlohmann::json ViewOf(const Workflow& w) const;
  Result<Workflow*> Visible(const auth::Principal& who, const std::string& id, bool control);
  // Checks one task's template as `who` would submit it; the error names tasks[i].job.<field>.
  Status CheckTemplate(const auth::Principal& who, const std::string& project, const model::WorkflowTask& task,
                       const std::string& at) const;
  Result<JobRequest> RequestFor(const Workflow& w, const model::Release& release) const;
  void Apply(Workflow& w, const model::WorkflowActions& actions);
  void Released(int64_t workflow, const model::Release& release, Result<JobService::Submitted> submitted);
  void Ended(model::JobId job, model::JobState state, const std::string& reason);
  // Writes the records of changed workflows (`all`: even those written
  // less than a second ago).
  void WriteDirty(bool all);
  void Load();

  const config::LiveConfig& live_;
  store::Store& store_;
  JobService& jobs_;
  JobTemplateReader read_job_;
  const Clock& clock_;

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;

  // On the book's thread only.
  std::map<int64_t, std::unique_ptr<Workflow>> workflows_;  // loaded: active ones and those asked for
  struct InstanceRef {
    int64_t workflow = 0;
    std::string task;
    int64_t instance = 0;
  };
  std::map<model::JobId, InstanceRef> by_job_;
  // Ends of workflow jobs the book has not yet learnt the ids of (the job
  // service's answer may come after its job ended): matched when it does.
  // One the book never learns (an end it also took from the store at a
  // load) goes after kUnmatchedEndKept; the ids in end order find those.
  struct UnmatchedEnd {
    model::JobState state;
    std::string reason;
    Timestamp at;
  };
  static constexpr std::chrono::minutes kUnmatchedEndKept{10};
  std::map<model::JobId, UnmatchedEnd> unmatched_ends_;
  std::deque<std::pair<Timestamp, model::JobId>> unmatched_order_;
  std::set<int64_t> dirty_;
};

}  // namespace unisched::service
