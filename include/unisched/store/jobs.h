#pragma once
// The store's jobs concern: job records (a job's attempts live in its
// record), their events and the submissions' idempotency keys.
//
// Idempotency: every write below says what a second call with the same
// arguments does. A transaction's effects commit at most once (Store::Write),
// so these lines are about repeated calls, e.g. a retried request.

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/model/job.h"

namespace unisched::store {

struct JobEvent {
  Timestamp time{};
  std::string kind;  // submitted, started, completed, failed, cancel_requested, ...
  std::string message;
};

// A step of a job's attempt (`unisched step`, docs/execution.md "Steps"),
// numbered per job from 1: its view as the daemon answers it, as JSON
// (service/step_json.h). Goes with its job.
struct StepRecord {
  model::JobId job_id = 0;
  int step = 0;
  std::string doc;
  bool operator==(const StepRecord&) const = default;
};

struct JobFilter {
  std::optional<model::JobState> state;
  std::optional<std::string> queue, pool, project, user;
  // Visibility: when set, only jobs whose project is in `projects` or whose
  // queue is in `queues` match (an empty list matches nothing).
  std::optional<std::vector<std::string>> visible_projects;
  std::vector<std::string> visible_queues;
  // Only ids in [first, end): an array's tasks (docs/arrays.md).
  std::optional<std::pair<model::JobId, model::JobId>> ids;
  int limit = 100;                     // 0: count only
  std::optional<model::JobId> cursor;  // return jobs with id < cursor (newest first)
};

// A PENDING or HELD job as a report lists it: who, where, since when.
struct WaitingJob {
  model::JobId id = 0;
  std::string name, user, project, queue, pool;
  model::JobState state = model::JobState::kPending;
  Timestamp submitted_at{};
};

struct JobPage {
  std::vector<model::Job> jobs;  // newest first
  int64_t total = 0;             // all matches, ignoring limit and cursor
  std::optional<model::JobId> next_cursor;
};

class JobWrites {
 public:
  virtual ~JobWrites() = default;
  // Inserts a job and returns its id: job.id when it is set (from
  // Store::ReserveJobId), else a new one. `doc` is the job's JSON
  // (codec::JobToJson) when the caller already has it, else empty. If
  // idempotency_key is non-empty it is recorded for (job.user, key).
  // Not idempotent by itself: a second insert of the same id fails
  // (kConflict "job_exists") and a second use of (user, key) fails
  // (kConflict "idempotency_key_used"), each changing nothing; a retried
  // submission is recognised by its key (FindIdempotentJob).
  virtual Result<model::JobId> InsertJob(const model::Job& job, const std::string& idempotency_key,
                                         const std::string& doc = {}) = 0;
  // Reserves `count` consecutive job ids (an array's tasks, docs/arrays.md)
  // and returns the first; committed with the transaction, never reused.
  virtual Result<model::JobId> ReserveJobIds(int64_t count) = 0;
  // The job id a (user, key) pair was first used for, if any. Keys go with
  // their job (DeleteJobsEndedBefore).
  virtual std::optional<model::JobId> FindIdempotentJob(const std::string& user, const std::string& key) = 0;
  // Rewrites a job's mutable part (state, reasons, attempts, times, ...).
  // Idempotent: the row becomes `job`. kNotFound when there is no such job.
  virtual Status UpdateJob(const model::Job& job) = 0;
  // Sees this transaction's own uncommitted writes.
  virtual Result<model::Job> GetJob(model::JobId id) = 0;
  // Appends an event. Not idempotent: each call adds one. kNotFound when
  // there is no such job.
  virtual Status AppendEvent(model::JobId id, const JobEvent& event) = 0;
  // Deletes terminal jobs that ended before `cutoff`, with their events and
  // idempotency keys; returns their ids, ascending. Idempotent: a second
  // call finds nothing more to delete.
  virtual Result<std::vector<model::JobId>> DeleteJobsEndedBefore(Timestamp cutoff) = 0;
  // Stores a step as it is now. Idempotent: the row becomes `step` (its
  // start, then its end). kNotFound when there is no such job.
  virtual Status PutStep(const StepRecord& step) = 0;
};

class JobReads {
 public:
  virtual ~JobReads() = default;
  virtual Result<model::Job> GetJob(model::JobId id) const = 0;
  virtual JobPage ListJobs(const JobFilter& filter) const = 0;
  // PENDING and HELD jobs the filter's visibility lets through (its other
  // fields are ignored), longest waiting first (submitted_at, then id):
  // columns only, no job document, for GET /v1/reports/pending.
  virtual std::vector<WaitingJob> ListWaitingJobs(const JobFilter& visibility) const = 0;
  // PENDING, HELD and RUNNING jobs, oldest first: what the controller loads at start.
  virtual std::vector<model::Job> LoadActiveJobs() const = 0;
  // Ended jobs: each user's `per_key` latest and each (user, name)'s
  // `per_key` latest (by end time, then id), oldest end first. What the
  // controller's run-time predictor learns from at start (run_time_book.h):
  // replayed in this order they leave it as the whole history would.
  virtual std::vector<model::Job> LoadLatestEndedJobs(int per_key) const = 0;
  // Job counts by (state, queue, pool), for metrics at start-up.
  virtual std::map<std::tuple<model::JobState, std::string, std::string>, int64_t> CountJobs() const = 0;
  // One step of a job; kNotFound when there is none.
  virtual Result<StepRecord> GetStep(model::JobId job, int step) const = 0;
  // The steps of PENDING, HELD and RUNNING jobs, by job and number: what
  // the controller loads at start (numbering goes on where it stopped).
  virtual std::vector<StepRecord> LoadActiveSteps() const = 0;
  // A job's events, oldest first.
  virtual std::vector<JobEvent> ListEvents(model::JobId id) const = 0;
};

}  // namespace unisched::store
