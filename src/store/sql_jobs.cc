#include "store/sql_jobs.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "store/sql_common.h"
#include "unisched/codec/job_json.h"

namespace unisched::store::sql {
namespace {

using nlohmann::json;

std::string JobDocText(const model::Job& job) {
  // Replace rather than throw on invalid UTF-8: the API only lets valid text in.
  return codec::JobDocument(job);
}

Result<model::Job> DecodeJob(model::JobId id, const std::string& doc_text) {
  json doc = json::parse(doc_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Error::Internal("store: job " + std::to_string(id) + " has a corrupt document");
  auto job = codec::JobFromJson(doc);
  if (!job.ok()) {
    return Error::Internal("store: job " + std::to_string(id) + " has a bad document: " + job.error().message);
  }
  job->id = id;  // the row id is the truth
  return job;
}

// Runs a SELECT of (id, doc) rows into jobs.
Result<std::vector<model::Job>> CollectJobs(Statement& stmt) {
  std::vector<model::Job> jobs;
  for (;;) {
    auto row = stmt.Step();
    if (!row.ok()) return row.error();
    if (!*row) return jobs;
    auto job = DecodeJob(stmt.Int(0), stmt.Text(1));
    if (!job.ok()) return job.error();
    jobs.push_back(std::move(*job));
  }
}

// Binds parameters 1..8: the columns a job row keeps next to its document.
void BindColumns(Statement& stmt, const model::Job& job) {
  stmt.Bind(1, job.name)
      .Bind(2, job.user)
      .Bind(3, job.project)
      .Bind(4, job.queue)
      .Bind(5, job.pool)
      .Bind(6, model::ToString(job.state))
      .Bind(7, ToUnixMillis(job.submitted_at))
      .Bind(8, job.ended_at ? std::optional<int64_t>(ToUnixMillis(*job.ended_at)) : std::nullopt);
}

}  // namespace

Result<model::JobId> InsertJob(Connection& c, const model::Job& job, model::JobId id,
                               const std::string& idempotency_key, const std::string& doc) {
  if (!idempotency_key.empty()) {
    if (auto first = FindIdempotentJob(c, job.user, idempotency_key)) {
      return Error::Conflict("idempotency_key_used", "idempotency key already used for job " + std::to_string(*first));
    }
  }
  auto insert = c.Prepare(
      "INSERT INTO jobs(name, \"user\", project, queue, pool, state, submitted_at, ended_at, doc, id) "
      "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!insert.ok()) return insert.error();
  BindColumns(*insert, job);
  if (job.id == id && !doc.empty()) {
    insert->Bind(9, doc);
  } else {
    model::Job stored = job;
    stored.id = id;
    insert->Bind(9, JobDocText(stored));
  }
  insert->Bind(10, int64_t{id});
  if (Status s = insert->Run(); !s) {
    if (insert->violation() == Violation::kPrimaryKey) {
      return Error::Conflict("job_exists", "job " + std::to_string(id) + " exists already");
    }
    return s.error();
  }
  if (!idempotency_key.empty()) {
    auto key = c.Prepare("INSERT INTO idempotency(\"user\", key, job_id) VALUES(?, ?, ?)");
    if (!key.ok()) return key.error();
    key->Bind(1, job.user).Bind(2, idempotency_key).Bind(3, int64_t{id});
    if (Status s = key->Run(); !s) return s.error();
  }
  return id;
}

std::optional<model::JobId> FindIdempotentJob(Connection& c, const std::string& user, const std::string& key) {
  auto stmt = OrThrow(c.Prepare("SELECT job_id FROM idempotency WHERE \"user\" = ? AND key = ?"));
  stmt.Bind(1, user).Bind(2, key);
  if (!OrThrow(stmt.Step())) return std::nullopt;
  return stmt.Int(0);
}

Status UpdateJob(Connection& c, const model::Job& job) {
  auto update = c.Prepare(
      "UPDATE jobs SET name = ?, \"user\" = ?, project = ?, queue = ?, pool = ?, state = ?, submitted_at = ?, "
      "ended_at = ?, doc = ? WHERE id = ?");
  if (!update.ok()) return update.error();
  BindColumns(*update, job);
  update->Bind(9, JobDocText(job)).Bind(10, int64_t{job.id});
  if (Status s = update->Run(); !s) return s;
  if (c.ChangedRows() == 0) return Error::NotFound("job " + std::to_string(job.id) + " not found");
  return Status::Ok();
}

Result<model::Job> GetJob(Connection& c, model::JobId id) {
  auto stmt = c.Prepare("SELECT doc FROM jobs WHERE id = ?");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, int64_t{id});
  auto row = stmt->Step();
  if (!row.ok()) return row.error();
  if (!*row) return Error::NotFound("job " + std::to_string(id) + " not found");
  return DecodeJob(id, stmt->Text(0));
}

Status AppendEvent(Connection& c, model::JobId id, const JobEvent& event) {
  auto stmt = c.Prepare("INSERT INTO job_events(job_id, time, kind, message) VALUES(?, ?, ?, ?)");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, int64_t{id}).Bind(2, ToUnixMillis(event.time)).Bind(3, event.kind).Bind(4, event.message);
  Status s = stmt->Run();
  if (!s && stmt->violation() == Violation::kForeignKey) {
    return Error::NotFound("job " + std::to_string(id) + " not found");
  }
  return s;
}

Result<std::vector<model::JobId>> DeleteJobsEndedBefore(Connection& c, Timestamp cutoff) {
  // Events and idempotency keys go by ON DELETE CASCADE.
  auto stmt = c.Prepare("DELETE FROM jobs WHERE ended_at < ? AND state IN (" + StatesSql(true) + ") RETURNING id");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, ToUnixMillis(cutoff));
  std::vector<model::JobId> ids;
  for (;;) {
    auto row = stmt->Step();
    if (!row.ok()) return row.error();
    if (!*row) break;
    ids.push_back(stmt->Int(0));
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

Result<std::vector<WaitingJob>> ListWaitingJobs(Connection& c, const JobFilter& visibility) {
  std::vector<Param> params;
  std::string sql =
      "SELECT id, name, \"user\", project, queue, pool, state, submitted_at FROM jobs WHERE state IN ('PENDING', "
      "'HELD')";
  if (visibility.visible_projects) {
    sql += VisibleClause(c, "", *visibility.visible_projects, visibility.visible_queues, params);
  }
  sql += " ORDER BY submitted_at, id";
  auto select = c.Prepare(sql);
  if (!select.ok()) return select.error();
  BindAll(*select, params);
  std::vector<WaitingJob> out;
  for (;;) {
    auto row = select->Step();
    if (!row.ok()) return row.error();
    if (!*row) return out;
    WaitingJob& w = out.emplace_back();
    w.id = select->Int(0);
    w.name = select->Text(1);
    w.user = select->Text(2);
    w.project = select->Text(3);
    w.queue = select->Text(4);
    w.pool = select->Text(5);
    w.state = model::ParseJobState(select->Text(6)).value_or(model::JobState::kPending);
    w.submitted_at = FromUnixMillis(select->Int(7));
  }
}

Result<JobPage> ListJobs(Connection& c, const JobFilter& filter) {
  std::string where = " WHERE TRUE";
  std::vector<Param> params;
  auto equals = [&](const char* column, const std::optional<std::string>& value) {
    if (!value) return;
    where += std::string(" AND ") + column + " = ?";
    params.emplace_back(*value);
  };
  if (filter.state) {
    where += " AND state = ?";
    params.emplace_back(std::string(model::ToString(*filter.state)));
  }
  equals("queue", filter.queue);
  equals("pool", filter.pool);
  equals("project", filter.project);
  equals("\"user\"", filter.user);
  if (filter.visible_projects) where += VisibleClause(c, "", *filter.visible_projects, filter.visible_queues, params);
  if (filter.ids) {
    where += " AND id >= ? AND id < ?";
    params.emplace_back(int64_t{filter.ids->first});
    params.emplace_back(int64_t{filter.ids->second});
  }

  ReadSnapshot snapshot(c);
  JobPage page;
  {
    auto count = c.Prepare("SELECT COUNT(*) FROM jobs" + where);
    if (!count.ok()) return count.error();
    BindAll(*count, params);
    auto row = count->Step();
    if (!row.ok()) return row.error();
    page.total = *row ? count->Int(0) : 0;
  }
  const int limit = std::max(filter.limit, 0);
  if (limit == 0) return page;

  std::string sql = "SELECT id, doc FROM jobs" + where;
  if (filter.cursor) {
    sql += " AND id < ?";
    params.emplace_back(int64_t{*filter.cursor});
  }
  sql += " ORDER BY id DESC LIMIT ?";
  // One row more than asked tells whether another page follows.
  params.emplace_back(int64_t{limit} + 1);
  auto select = c.Prepare(sql);
  if (!select.ok()) return select.error();
  BindAll(*select, params);
  auto jobs = CollectJobs(*select);
  if (!jobs.ok()) return jobs.error();
  page.jobs = std::move(*jobs);
  if (page.jobs.size() > static_cast<size_t>(limit)) {
    page.jobs.resize(static_cast<size_t>(limit));
    page.next_cursor = page.jobs.back().id;
  }
  return page;
}

Result<std::vector<model::Job>> LoadActiveJobs(Connection& c) {
  auto stmt = c.Prepare("SELECT id, doc FROM jobs WHERE state IN (" + StatesSql(false) + ") ORDER BY id ASC");
  if (!stmt.ok()) return stmt.error();
  return CollectJobs(*stmt);
}

Status PutStep(Connection& c, const StepRecord& step) {
  auto found = c.Prepare("SELECT 1 FROM jobs WHERE id = ?");
  if (!found.ok()) return found.error();
  found->Bind(1, int64_t{step.job_id});
  auto row = found->Step();
  if (!row.ok()) return row.error();
  if (!*row) return Error::NotFound("job " + std::to_string(step.job_id) + " not found");
  auto stmt = c.Prepare(
      "INSERT INTO job_steps(job_id, step, doc) VALUES(?, ?, ?) "
      "ON CONFLICT(job_id, step) DO UPDATE SET doc = excluded.doc");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, int64_t{step.job_id}).Bind(2, int64_t{step.step}).Bind(3, step.doc);
  return stmt->Run();
}

Result<StepRecord> GetStep(Connection& c, model::JobId job, int step) {
  auto stmt = c.Prepare("SELECT doc FROM job_steps WHERE job_id = ? AND step = ?");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, int64_t{job}).Bind(2, int64_t{step});
  auto row = stmt->Step();
  if (!row.ok()) return row.error();
  if (!*row) return Error::NotFound("job " + std::to_string(job) + " has no step " + std::to_string(step));
  return StepRecord{job, step, stmt->Text(0)};
}

Result<std::vector<StepRecord>> LoadActiveSteps(Connection& c) {
  auto stmt =
      c.Prepare("SELECT s.job_id, s.step, s.doc FROM job_steps s JOIN jobs j ON j.id = s.job_id WHERE j.state IN (" +
                StatesSql(false) + ") ORDER BY s.job_id, s.step");
  if (!stmt.ok()) return stmt.error();
  std::vector<StepRecord> steps;
  for (;;) {
    auto row = stmt->Step();
    if (!row.ok()) return row.error();
    if (!*row) break;
    steps.push_back({stmt->Int(0), static_cast<int>(stmt->Int(1)), stmt->Text(2)});
  }
  return steps;
}

Result<std::vector<model::Job>> LoadLatestEndedJobs(Connection& c, int per_key) {
  // One pass over the ended jobs, ranked twice by a window (SQLite >= 3.25
  // and PostgreSQL both have them): within the user and within (user, name).
  auto stmt = c.Prepare(
      "SELECT id, doc FROM (SELECT id, doc, ended_at, "
      "ROW_NUMBER() OVER (PARTITION BY \"user\" ORDER BY ended_at DESC, id DESC) AS by_user, "
      "ROW_NUMBER() OVER (PARTITION BY \"user\", name ORDER BY ended_at DESC, id DESC) AS by_name "
      "FROM jobs WHERE ended_at IS NOT NULL) ranked WHERE by_user <= ? OR by_name <= ? ORDER BY ended_at, id");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, int64_t{per_key}).Bind(2, int64_t{per_key});
  return CollectJobs(*stmt);
}

std::map<std::tuple<model::JobState, std::string, std::string>, int64_t> CountJobs(Connection& c) {
  auto stmt = OrThrow(c.Prepare("SELECT state, queue, pool, COUNT(*) FROM jobs GROUP BY state, queue, pool"));
  std::map<std::tuple<model::JobState, std::string, std::string>, int64_t> counts;
  while (OrThrow(stmt.Step())) {
    if (auto state = model::ParseJobState(stmt.Text(0))) {
      counts[{*state, stmt.Text(1), stmt.Text(2)}] = stmt.Int(3);
    }
  }
  return counts;
}

std::vector<JobEvent> ListEvents(Connection& c, model::JobId id) {
  auto stmt = OrThrow(c.Prepare("SELECT time, kind, message FROM job_events WHERE job_id = ? ORDER BY id"));
  stmt.Bind(1, int64_t{id});
  std::vector<JobEvent> events;
  while (OrThrow(stmt.Step())) {
    events.push_back({FromUnixMillis(stmt.Int(0)), stmt.Text(1), stmt.Text(2)});
  }
  return events;
}

}  // namespace unisched::store::sql
