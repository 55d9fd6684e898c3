#pragma once
// A workflow (docs/workflows.md, ADR 0012): named tasks, each a job template,
// the edges between them, and per task what to do when it fails. This is the
// pure part: the graph's checks and every decision (which instances to
// release, retry, switch to an alternative, skip, or cancel) as a function of
// the workflow's stored status and the job ends handed in. The daemon's book
// (service/workflow_book.h) turns a Decision into jobs and records.
//
// A task is one instance, or one per item of its `scatter` list. Instance i
// of a task waits for:
//   - the one instance of each task it is after that is not scattered;
//   - instance i of each scattered task it is after when it is scattered over
//     as many items (Slurm's aftercorr);
//   - every instance of any other task it is after (a gather).
// An instance is "done" for its dependants when it SUCCEEDED, or FAILED under
// `then: continue`; it "blocks" them when it FAILED otherwise, was SKIPPED or
// CANCELLED: they are then SKIPPED (they can never run).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"

namespace unisched::model {

using WorkflowId = int64_t;

// In the environment of every job a workflow makes: its workflow's id (the
// controller tells the workflow book of such jobs' ends).
inline constexpr const char* kWorkflowIdVariable = "UNISCHED_WORKFLOW_ID";
using WorkflowJobId = int64_t;  // a job's id (model::JobId)

// What a task's failure leads to once its retries and alternative are spent.
enum class FailureThen {
  kFail,      // the workflow fails: nothing more is released, its running jobs are cancelled
  kSkip,      // what depends on the task is skipped; other branches go on; the workflow ends FAILED
  kContinue,  // dependants run as if it had succeeded; the workflow may still succeed
};
std::string_view ToString(FailureThen then);
std::optional<FailureThen> FailureThenFromString(std::string_view text);

// How each retry changes the template: resource requests multiplied by the
// factor once per retry of the same tool (retry k of a task with
// memory_factor 2 asks 2^k times the memory).
struct RetryChange {
  double memory_factor = 1.0;
  double walltime_factor = 1.0;
  bool operator==(const RetryChange&) const = default;
};

struct OnFailure {
  int retries = 0;          // further tries of the same tool
  RetryChange change;       // applied on each retry
  std::string alternative;  // a task whose template takes the instance's place once the retries are spent
  FailureThen then = FailureThen::kFail;
  bool operator==(const OnFailure&) const = default;
};

struct WorkflowTask {
  std::string name;
  // The job template: a POST /v1/jobs body, as JSON text (the book parses
  // it with the API's own reader when it releases an instance).
  std::string job;
  std::vector<std::string> after;
  OnFailure on_failure;
  std::vector<std::string> scatter;  // one instance per item; empty: one instance
  size_t Instances() const { return scatter.empty() ? 1 : scatter.size(); }
  bool operator==(const WorkflowTask&) const = default;
};

struct WorkflowSpec {
  std::string name;
  std::vector<WorkflowTask> tasks;
  bool operator==(const WorkflowSpec&) const = default;
};

inline constexpr size_t kMaxWorkflowTasks = 1000;
inline constexpr size_t kMaxWorkflowInstances = 100000;
inline constexpr size_t kMaxWorkflowEvents = 1000;  // the newest are kept

enum class InstanceState { kWaiting, kReleased, kSucceeded, kFailed, kSkipped, kCancelled };
std::string_view ToString(InstanceState state);
std::optional<InstanceState> InstanceStateFromString(std::string_view text);

struct TaskInstance {
  InstanceState state = InstanceState::kWaiting;
  std::string tool;                 // the task whose template runs: "" the instance's own, else its alternative
  int tries = 0;                    // jobs made for it, of every tool (numbers the release's idempotency key)
  int tool_tries = 0;               // jobs made for it with the current tool
  std::vector<WorkflowJobId> jobs;  // every job made for it, oldest first
  std::string reason;               // why it ended as it did (or is skipped)
  bool failure_ignored = false;     // FAILED under then: continue
  bool operator==(const TaskInstance&) const = default;
};

enum class WorkflowState { kRunning, kSucceeded, kFailed, kCancelled };
std::string_view ToString(WorkflowState state);
std::optional<WorkflowState> WorkflowStateFromString(std::string_view text);
inline bool IsEnded(WorkflowState state) {
  return state != WorkflowState::kRunning;
}

struct WorkflowEvent {
  Timestamp at{};
  std::string kind;  // workflow_released, workflow_retry, workflow_alternative, workflow_skipped, ...
  std::string task;
  int64_t instance = 0;
  std::string message;
  bool operator==(const WorkflowEvent&) const = default;
};

struct WorkflowStatus {
  WorkflowState state = WorkflowState::kRunning;
  std::string reason;
  std::map<std::string, std::vector<TaskInstance>> instances;  // by task name (alternatives have none)
  std::vector<WorkflowEvent> events;                           // the newest kMaxWorkflowEvents
  bool operator==(const WorkflowStatus&) const = default;
};

// Make a job for instance `instance` of `task`, running `tool`'s template
// ("" its own), with the task's retry change applied `retry` times.
struct Release {
  std::string task;
  int64_t instance = 0;
  std::string tool;
  int try_number = 0;  // 1 for the instance's first job
  int retry = 0;       // tries of this tool before this one
  bool operator==(const Release&) const = default;
};

// What a decision asks of the book: jobs to make and jobs to cancel.
struct WorkflowActions {
  std::vector<Release> releases;
  std::vector<WorkflowJobId> cancel;
};

// Names (1-64 of [A-Za-z0-9_.-], unique), edges to known tasks, no cycle,
// alternatives (a known task that is nothing but an alternative: no edges to
// or from it, no scatter, no alternative of its own), scatter sizes and the
// limits above. Errors are 422 naming the field, e.g. tasks[2].after[0].
Status ValidateWorkflowGraph(const WorkflowSpec& spec);

// The task of `spec` called `name` (nullptr: none), and instance counts per state.
const WorkflowTask* FindTask(const WorkflowSpec& spec, const std::string& name);
std::map<InstanceState, int64_t> CountInstances(const WorkflowStatus& status);

// A workflow's decisions over its spec and status (both owned by the
// caller, who stores them after each call). Every call takes `now` for the
// events it writes.
class WorkflowRun {
 public:
  WorkflowRun(WorkflowSpec& spec, WorkflowStatus& status);

  // A new workflow: one waiting instance per task instance; releases the roots.
  WorkflowActions Start(Timestamp now);
  // The job of the latest try of (task, instance) ended: `succeeded` when
  // COMPLETED; `cancelled` when someone cancelled it (no retry then).
  // A job that is not the instance's latest is ignored (nothing to do).
  WorkflowActions JobEnded(const std::string& task, int64_t instance, WorkflowJobId job, bool succeeded, bool cancelled,
                           const std::string& reason, Timestamp now);
  // After a restart: releases every waiting instance that is ready (or
  // skips what can never run) and ends the workflow when nothing is open:
  // what a crash between a decision and its record left undone.
  WorkflowActions Reconcile(Timestamp now);
  // Cancels the workflow: nothing more is released, the jobs of released
  // instances are to be cancelled, waiting instances are CANCELLED.
  WorkflowActions Cancel(const std::string& actor, Timestamp now);
  // Failed, cancelled and skipped instances wait again (their own tool, no
  // tries counted against their retries), the workflow runs again and what
  // is ready is released. Succeeded instances are kept.
  WorkflowActions Resume(const std::string& actor, Timestamp now);
  // Adds tasks (validated with the whole graph by the caller) and releases
  // what of them is ready; an ended workflow that is not cancelled runs again.
  WorkflowActions AddTasks(std::vector<WorkflowTask> tasks, Timestamp now);

  // The task called `name` (nullptr: none).
  const WorkflowTask* Task(const std::string& name) const;

 private:
  void Index();
  void Event(Timestamp now, std::string kind, const std::string& task, int64_t instance, std::string message);
  // Whether instance i of `task` may run now, can never run, or must wait.
  enum class Readiness { kReady, kBlocked, kWait };
  Readiness ReadinessOf(const WorkflowTask& task, int64_t i, std::string* blocker) const;
  // Evaluates the waiting instances queued in `check` (and what a skip
  // reaches), releasing or skipping them.
  void Settle(std::vector<std::pair<std::string, int64_t>> check, WorkflowActions& actions, Timestamp now);
  // The instances of tasks after `task` to look at now that its instance `i`
  // ended (or changed how it counts).
  void Dependants(const std::string& task, int64_t i, bool gather_changed,
                  std::vector<std::pair<std::string, int64_t>>& out) const;
  void ReleaseInstance(const WorkflowTask& task, int64_t i, WorkflowActions& actions, Timestamp now);
  // Moves an instance to `to`, keeping the per-task tallies.
  void SetState(const std::string& task, int64_t i, InstanceState to);
  void FinishIfDone(Timestamp now);
  bool Corresponding(const WorkflowTask& task, const WorkflowTask& upstream) const;

  WorkflowSpec& spec_;
  WorkflowStatus& status_;
  std::map<std::string, size_t> task_index_;
  std::map<std::string, std::vector<std::string>> dependants_;  // task -> the tasks after it
  struct Tally {
    int64_t done = 0;     // succeeded, or failed under continue
    int64_t blocked = 0;  // failed otherwise, skipped, cancelled
    int64_t open = 0;     // waiting or released
  };
  std::map<std::string, Tally> tallies_;
};

}  // namespace unisched::model
