// The SQLite implementation of Store: one writer thread that commits queued
// writes in groups, and a small pool of read-only connections for readers.
//
// Reads whose signature has no error channel (ListJobs, ListEvents, ...)
// throw StoreFailure when SQLite fails under them: on a healthy disk that
// does not happen, so it is exceptional, not an expected failure. Inside a
// Write() callback such a throw fails just that write.

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <variant>

#include "store/backup_internal.h"
#include "store/migrations.h"
#include "store/sqlite_db.h"
#include "unisched/codec/job_json.h"
#include "unisched/store/store.h"

namespace unisched::store {
namespace {

using nlohmann::json;

constexpr int kBusyTimeoutMs = 5000;
// The writer thread's nice value (see Start).
constexpr int kWriterNice = -10;
constexpr int kMaxReaders = 4;

// a / b rounded towards minus infinity (b > 0).
int64_t FloorDiv(int64_t a, int64_t b) {
  return a / b - (a % b != 0 && a < 0 ? 1 : 0);
}

class StoreFailure : public std::runtime_error {
 public:
  explicit StoreFailure(const Error& error) : std::runtime_error(error.message) {}
};

template <class T>
T OrThrow(Result<T> result) {
  if (!result.ok()) throw StoreFailure(result.error());
  return std::move(result).value();
}

std::string StatesSql(bool terminal) {
  std::string sql;
  for (auto state :
       {model::JobState::kPending, model::JobState::kHeld, model::JobState::kRunning, model::JobState::kCompleted,
        model::JobState::kFailed, model::JobState::kCancelled, model::JobState::kTimeout, model::JobState::kNodeFail}) {
    if (model::IsTerminal(state) != terminal) continue;
    if (!sql.empty()) sql += ",";
    // Appended piecewise: "'" + std::string(...) trips GCC 12's -Wrestrict (PR 105329).
    sql += '\'';
    sql += model::ToString(state);
    sql += '\'';
  }
  return sql;
}

std::string JobDocText(const model::Job& job) {
  // Replace rather than throw on invalid UTF-8: the API only lets valid text in.
  return codec::JobDocument(job);
}

std::string JsonList(const std::vector<std::string>& items) {
  return json(items).dump(-1, ' ', false, json::error_handler_t::replace);
}

// The visibility filter of jobs, usage and events: rows of these projects or
// these queues (columns `<table>project`, `<table>queue`); binds two JSON
// lists, appended to `params` (of strings, or of a variant holding them).
template <class Params>
std::string VisibleClause(const std::string& table, const std::vector<std::string>& projects,
                          const std::vector<std::string>& queues, Params& params) {
  params.emplace_back(JsonList(projects));
  params.emplace_back(JsonList(queues));
  return " AND (" + table + "project IN (SELECT value FROM json_each(?)) OR " + table +
         "queue IN (SELECT value FROM json_each(?)))";
}

std::vector<std::string> ParseJsonList(const std::string& text) {
  std::vector<std::string> out;
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_array()) return out;
  for (const auto& item : doc) {
    if (item.is_string()) out.push_back(item.get<std::string>());
  }
  return out;
}

// ---- queries shared by the writer (inside a batch) and the readers ----

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

Result<model::Job> QueryJob(Connection& c, model::JobId id) {
  auto stmt = c.Prepare("SELECT doc FROM jobs WHERE id = ?");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, int64_t{id});
  auto row = stmt->Step();
  if (!row.ok()) return row.error();
  if (!*row) return Error::NotFound("job " + std::to_string(id) + " not found");
  return DecodeJob(id, stmt->Text(0));
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

using Param = std::variant<int64_t, std::string>;

void BindAll(Statement& stmt, const std::vector<Param>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    const int index = static_cast<int>(i + 1);
    if (const auto* n = std::get_if<int64_t>(&params[i])) {
      stmt.Bind(index, *n);
    } else {
      stmt.Bind(index, std::get<std::string>(params[i]));
    }
  }
}

// Ends a read transaction however the read leaves; declare it before the
// statements so they are reset first.
class ReadSnapshot {
 public:
  explicit ReadSnapshot(Connection& c) : c_(c) { ok_ = c_.Run("BEGIN").ok(); }
  ~ReadSnapshot() {
    if (ok_) c_.Run("COMMIT");
  }
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;

 private:
  Connection& c_;
  bool ok_ = false;
};

Result<JobPage> QueryJobs(Connection& c, const JobFilter& filter) {
  // Lists are bound as one JSON parameter, so the SQL text (and the cached
  // statement) does not depend on their lengths.
  std::string where = " WHERE 1";
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
  equals("user", filter.user);
  if (filter.visible_projects) where += VisibleClause("", *filter.visible_projects, filter.visible_queues, params);

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

Result<std::vector<model::Job>> QueryActiveJobs(Connection& c) {
  auto stmt = c.Prepare("SELECT id, doc FROM jobs WHERE state IN (" + StatesSql(false) + ") ORDER BY id ASC");
  if (!stmt.ok()) return stmt.error();
  return CollectJobs(*stmt);
}

UserRecord UserFromRow(const Statement& stmt) {
  UserRecord user;
  user.name = stmt.Text(0);
  user.role = stmt.Text(1);
  user.projects = ParseJsonList(stmt.Text(2));
  user.queues = ParseJsonList(stmt.Text(3));
  user.unix_user = stmt.Text(4);
  user.from_config = stmt.Int(5) != 0;
  return user;
}

// Per attempt: interim charging's reach, sums per (metric, detail, node),
// and entries that repeat another's (metric, detail, node, interval, final).
std::map<std::pair<model::JobId, int>, LedgerCharged> LedgerSums(Connection& c, const std::string& where,
                                                                 model::JobId job, int attempt) {
  std::map<std::pair<model::JobId, int>, LedgerCharged> out;
  auto stmt = OrThrow(c.Prepare(
      "SELECT job_id, attempt, metric, detail, node, SUM(quantity), COUNT(*), MAX(final), "
      "MAX(CASE WHEN final = 0 THEN interval_end END), COUNT(DISTINCT interval_start || ':' || interval_end || ':' || "
      "final) FROM ledger " +
      where + " GROUP BY job_id, attempt, metric, detail, node"));
  if (!where.empty()) stmt.Bind(1, int64_t{job}).Bind(2, int64_t{attempt});
  while (OrThrow(stmt.Step())) {
    LedgerCharged& a = out[{stmt.Int(0), static_cast<int>(stmt.Int(1))}];
    a.sums[{stmt.Text(2), stmt.Text(3), stmt.Text(4)}] += stmt.Double(5);
    a.duplicated_entries += stmt.Int(6) - stmt.Int(9);
    if (stmt.Int(7) != 0) a.closed = true;
    if (!stmt.IsNull(8)) {
      const Timestamp until = FromUnixMillis(stmt.Int(8));
      if (!a.until || until > *a.until) a.until = until;
    }
  }
  return out;
}

constexpr const char* kUserColumns = "SELECT name, role, projects, queues, unix_user, from_config FROM users";

// ---- the write side ----

class SqliteTransaction final : public Transaction {
 public:
  // next_id: the store's id counter (Store::ReserveJobId), so ids inserted
  // with and without a reservation never collide.
  SqliteTransaction(Connection& c, std::atomic<model::JobId>& next_id) : c_(c), next_id_(next_id) {}

  Result<model::JobId> InsertJob(const model::Job& job, const std::string& idempotency_key,
                                 const std::string& doc) override {
    if (!idempotency_key.empty()) {
      if (auto first = FindIdempotentJob(job.user, idempotency_key)) {
        return Error::Conflict("idempotency_key_used",
                               "idempotency key already used for job " + std::to_string(*first));
      }
    }
    const model::JobId id = job.id > 0 ? job.id : next_id_.fetch_add(1);
    auto insert = c_.Prepare(
        "INSERT INTO jobs(name, user, project, queue, pool, state, submitted_at, ended_at, doc, id) "
        "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (!insert.ok()) return insert.error();
    BindColumns(*insert, job);
    if (job.id > 0 && !doc.empty()) {
      insert->Bind(9, doc);
    } else {
      model::Job stored = job;
      stored.id = id;
      insert->Bind(9, JobDocText(stored));
    }
    insert->Bind(10, int64_t{id});
    if (Status s = insert->Run(); !s) return s.error();
    if (!idempotency_key.empty()) {
      auto key = c_.Prepare("INSERT INTO idempotency(user, key, job_id) VALUES(?, ?, ?)");
      if (!key.ok()) return key.error();
      key->Bind(1, job.user).Bind(2, idempotency_key).Bind(3, int64_t{id});
      if (Status s = key->Run(); !s) return s.error();
    }
    return id;
  }

  std::optional<model::JobId> FindIdempotentJob(const std::string& user, const std::string& key) override {
    auto stmt = OrThrow(c_.Prepare("SELECT job_id FROM idempotency WHERE user = ? AND key = ?"));
    stmt.Bind(1, user).Bind(2, key);
    if (!OrThrow(stmt.Step())) return std::nullopt;
    return stmt.Int(0);
  }

  Status UpdateJob(const model::Job& job) override {
    auto update = c_.Prepare(
        "UPDATE jobs SET name = ?, user = ?, project = ?, queue = ?, pool = ?, state = ?, submitted_at = ?, "
        "ended_at = ?, doc = ? WHERE id = ?");
    if (!update.ok()) return update.error();
    BindColumns(*update, job);
    update->Bind(9, JobDocText(job)).Bind(10, int64_t{job.id});
    if (Status s = update->Run(); !s) return s;
    if (sqlite3_changes(c_.db()) == 0) return Error::NotFound("job " + std::to_string(job.id) + " not found");
    return Status::Ok();
  }

  Result<model::Job> GetJob(model::JobId id) override { return QueryJob(c_, id); }

  Status AppendEvent(model::JobId id, const JobEvent& event) override {
    auto stmt = c_.Prepare("INSERT INTO job_events(job_id, time, kind, message) VALUES(?, ?, ?, ?)");
    if (!stmt.ok()) return stmt.error();
    stmt->Bind(1, int64_t{id}).Bind(2, ToUnixMillis(event.time)).Bind(3, event.kind).Bind(4, event.message);
    Status s = stmt->Run();
    if (!s && stmt->last_error() == SQLITE_CONSTRAINT_FOREIGNKEY) {
      return Error::NotFound("job " + std::to_string(id) + " not found");
    }
    return s;
  }

  Status AppendClusterEvent(const ClusterEvent& e) override {
    auto stmt = c_.Prepare("INSERT INTO events(time, kind, object, severity, message) VALUES(?, ?, ?, ?, ?)");
    if (!stmt.ok()) return stmt.error();
    stmt->Bind(1, ToUnixMillis(e.time)).Bind(2, e.kind).Bind(3, e.object).Bind(4, e.severity).Bind(5, e.message);
    return stmt->Run();
  }

  Status InsertAlert(const AlertRecord& a) override {
    auto stmt = c_.Prepare(
        "INSERT INTO alerts(name, kind, object, severity, message, fired_at, resolved_at) VALUES(?, ?, ?, ?, ?, ?, "
        "NULL)");
    if (!stmt.ok()) return stmt.error();
    stmt->Bind(1, a.name)
        .Bind(2, a.kind)
        .Bind(3, a.object)
        .Bind(4, a.severity)
        .Bind(5, a.message)
        .Bind(6, ToUnixMillis(a.fired_at));
    return stmt->Run();
  }

  Status ResolveAlert(const std::string& name, const std::string& object, Timestamp at) override {
    auto stmt = c_.Prepare("UPDATE alerts SET resolved_at = ? WHERE name = ? AND object = ? AND resolved_at IS NULL");
    if (!stmt.ok()) return stmt.error();
    stmt->Bind(1, ToUnixMillis(at)).Bind(2, name).Bind(3, object);
    return stmt->Run();
  }

  Status PutSandbox(const SandboxRow& b) override {
    auto stmt =
        c_.Prepare("INSERT OR REPLACE INTO sandboxes(id, state, record, created_at, ended_at) VALUES(?, ?, ?, ?, ?)");
    if (!stmt.ok()) return stmt.error();
    std::optional<int64_t> ended;
    if (b.ended_at) ended = ToUnixMillis(*b.ended_at);
    stmt->Bind(1, b.id).Bind(2, b.state).Bind(3, b.record).Bind(4, ToUnixMillis(b.created_at)).Bind(5, ended);
    return stmt->Run();
  }

  Status PutImageVersion(const ImageVersionRow& i) override {
    auto stmt =
        c_.Prepare("INSERT OR IGNORE INTO images(name, version, spec, created_at, created_by) VALUES(?, ?, ?, ?, ?)");
    if (!stmt.ok()) return stmt.error();
    stmt->Bind(1, i.name).Bind(2, i.version).Bind(3, i.spec).Bind(4, ToUnixMillis(i.created_at)).Bind(5, i.created_by);
    return stmt->Run();
  }

  Status PushImageCurrent(const std::string& name, const std::string& version, Timestamp at) override {
    auto stmt = c_.Prepare("INSERT INTO image_current(name, version, at) VALUES(?, ?, ?)");
    if (!stmt.ok()) return stmt.error();
    stmt->Bind(1, name).Bind(2, version).Bind(3, ToUnixMillis(at));
    return stmt->Run();
  }

  Status PopImageCurrent(const std::string& name) override {
    auto stmt = c_.Prepare("DELETE FROM image_current WHERE seq = (SELECT MAX(seq) FROM image_current WHERE name = ?)");
    if (!stmt.ok()) return stmt.error();
    stmt->Bind(1, name);
    return stmt->Run();
  }

  Status AppendAudit(const AuditRecord& record) override {
    auto stmt = c_.Prepare("INSERT INTO audit(time, actor, action, target, result) VALUES(?, ?, ?, ?, ?)");
    if (!stmt.ok()) return stmt.error();
    stmt->Bind(1, ToUnixMillis(record.time))
        .Bind(2, record.actor)
        .Bind(3, record.action)
        .Bind(4, record.target)
        .Bind(5, record.result);
    return stmt->Run();
  }

  Result<int64_t> PruneAudit(Timestamp cutoff, int64_t max_rows) override {
    // Rows are appended in time order (ids grow with time), so both bounds
    // cut the table at an id: the scan for the first recent row reads only
    // the rows about to go, and the size bound is arithmetic on the rowid.
    auto stmt = c_.Prepare(
        "DELETE FROM audit WHERE id < COALESCE((SELECT id FROM audit WHERE time >= ? ORDER BY id LIMIT 1), "
        "(SELECT MAX(id) + 1 FROM audit)) OR id <= (SELECT MAX(id) FROM audit) - ?");
    if (!stmt.ok()) return stmt.error();
    stmt->Bind(1, ToUnixMillis(cutoff)).Bind(2, max_rows);
    if (Status s = stmt->Run(); !s.ok()) return s.error();
    return static_cast<int64_t>(sqlite3_changes(c_.db()));
  }

  Status UpsertUser(const UserRecord& user) override {
    auto stmt = c_.Prepare(
        "INSERT INTO users(name, role, projects, queues, unix_user, from_config) VALUES(?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(name) DO UPDATE SET role = excluded.role, projects = excluded.projects, "
        "queues = excluded.queues, unix_user = excluded.unix_user, from_config = excluded.from_config");
    if (!stmt.ok()) return stmt.error();
    stmt->Bind(1, user.name)
        .Bind(2, user.role)
        .Bind(3, JsonList(user.projects))
        .Bind(4, JsonList(user.queues))
        .Bind(5, user.unix_user)
        .Bind(6, int64_t{user.from_config ? 1 : 0});
    return stmt->Run();
  }

  Status InsertToken(const TokenRecord& token) override {
    auto stmt = c_.Prepare("INSERT INTO tokens(hash, user, kind, pool, created_at) VALUES(?, ?, ?, ?, ?)");
    if (!stmt.ok()) return stmt.error();
    stmt->Bind(1, token.hash)
        .Bind(2, token.user)
        .Bind(3, token.kind)
        .Bind(4, token.pool)
        .Bind(5, ToUnixMillis(token.created_at));
    Status s = stmt->Run();
    if (!s && (stmt->last_error() & 0xff) == SQLITE_CONSTRAINT) {
      return Error::Conflict("token_exists", "a token with this hash already exists");
    }
    return s;
  }

  Status SetNodeState(const NodeStateRecord& node) override {
    auto stmt = c_.Prepare(
        "INSERT INTO node_states(name, state, reason) VALUES(?, ?, ?) "
        "ON CONFLICT(name) DO UPDATE SET state = excluded.state, reason = excluded.reason");
    if (!stmt.ok()) return stmt.error();
    stmt->Bind(1, node.name).Bind(2, model::ToString(node.state)).Bind(3, node.reason);
    return stmt->Run();
  }

  Status AppendLedger(const LedgerEntry& e) override {
    auto stmt = c_.Prepare(
        "INSERT INTO ledger(key, job_id, attempt, user, project, queue, pool, workload_kind, node, metric, detail, "
        "quantity, interval_start, interval_end, final, recorded_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "?, ?) "
        "ON CONFLICT(key) DO NOTHING");
    if (!stmt.ok()) return stmt.error();
    stmt->Bind(1, e.key)
        .Bind(2, int64_t{e.job})
        .Bind(3, int64_t{e.attempt})
        .Bind(4, e.user)
        .Bind(5, e.project)
        .Bind(6, e.queue)
        .Bind(7, e.pool)
        .Bind(8, e.workload_kind)
        .Bind(9, e.node)
        .Bind(10, e.metric)
        .Bind(11, e.detail)
        .BindReal(12, e.quantity)
        .Bind(13, ToUnixMillis(e.start))
        .Bind(14, ToUnixMillis(e.end))
        .Bind(15, int64_t{e.final ? 1 : 0})
        .Bind(16, ToUnixMillis(e.recorded_at));
    return stmt->Run();
  }

  Status SaveFairshareUsage(const FairshareUsage& usage) override {
    if (Status s = c_.Exec("DELETE FROM fairshare_usage"); !s) return s;
    for (const auto& e : usage.entries) {
      auto stmt = c_.Prepare("INSERT INTO fairshare_usage(project, user, usage, as_of) VALUES(?, ?, ?, ?)");
      if (!stmt.ok()) return stmt.error();
      stmt->Bind(1, e.project).Bind(2, e.user).BindReal(3, e.usage).Bind(4, ToUnixMillis(usage.as_of));
      if (Status s = stmt->Run(); !s) return s;
    }
    return Status::Ok();
  }

  Result<std::vector<model::JobId>> DeleteJobsEndedBefore(Timestamp cutoff) override {
    // Events and idempotency keys go by ON DELETE CASCADE.
    auto stmt = c_.Prepare("DELETE FROM jobs WHERE ended_at < ? AND state IN (" + StatesSql(true) + ") RETURNING id");
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

 private:
  // Binds parameters 1..8: the columns a job row keeps next to its document.
  static void BindColumns(Statement& stmt, const model::Job& job) {
    stmt.Bind(1, job.name)
        .Bind(2, job.user)
        .Bind(3, job.project)
        .Bind(4, job.queue)
        .Bind(5, job.pool)
        .Bind(6, model::ToString(job.state))
        .Bind(7, ToUnixMillis(job.submitted_at))
        .Bind(8, job.ended_at ? std::optional<int64_t>(ToUnixMillis(*job.ended_at)) : std::nullopt);
  }

  Connection& c_;
  std::atomic<model::JobId>& next_id_;
};

// ---- read connections ----

class ReaderPool {
 public:
  explicit ReaderPool(std::string path) : path_(std::move(path)) {}

  // A read connection held for one read; returned to the pool on destruction.
  class Lease {
   public:
    Lease(ReaderPool* pool, std::unique_ptr<Connection> conn) : pool_(pool), conn_(std::move(conn)) {}
    Lease(Lease&& other) noexcept : pool_(other.pool_), conn_(std::move(other.conn_)) {}
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (conn_) pool_->Release(std::move(conn_));
    }
    Connection& operator*() const { return *conn_; }

   private:
    ReaderPool* pool_;
    std::unique_ptr<Connection> conn_;
  };

  Result<Lease> Acquire() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !idle_.empty() || open_ < kMaxReaders; });
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(conn));
    }
    ++open_;
    lock.unlock();
    auto conn = Connection::Open(path_, Connection::Mode::kReadOnly, kBusyTimeoutMs);
    if (!conn.ok()) {
      lock.lock();
      --open_;
      cv_.notify_one();
      return conn.error();
    }
    return Lease(this, std::move(*conn));
  }

 private:
  void Release(std::unique_ptr<Connection> conn) {
    {
      std::lock_guard lock(mu_);
      idle_.push_back(std::move(conn));
    }
    cv_.notify_one();
  }

  const std::string path_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Connection>> idle_;
  int open_ = 0;
};

// ---- the store ----

struct WriteItem {
  std::function<Status(Transaction&)> work;
  std::function<void(Status)> done;
};

Status RunWork(const std::function<Status(Transaction&)>& work, Transaction& txn) {
  try {
    return work(txn);
  } catch (const std::exception& e) {
    return Error::Internal(std::string("store: write failed: ") + e.what());
  } catch (...) {
    return Error::Internal("store: write failed with an unknown exception");
  }
}

void CallDone(const std::function<void(Status)>& done, Status status) {
  if (!done) return;
  // A throwing callback must not take the writer thread (and every later write) down.
  try {
    done(std::move(status));
  } catch (...) {
  }
}

class SqliteStore final : public Store {
 public:
  static Result<std::unique_ptr<Store>> Open(const StoreOptions& options);

  ~SqliteStore() override { Close(); }

  void Write(std::function<Status(Transaction&)> work, std::function<void(Status)> done) override {
    {
      std::lock_guard lock(mu_);
      if (!closing_) {
        queue_.push_back({std::move(work), std::move(done)});
        cv_.notify_one();
        return;
      }
    }
    CallDone(done, Error::Unavailable("store: closed"));
  }

  Status WriteSync(std::function<Status(Transaction&)> work) override {
    if (std::this_thread::get_id() == writer_id_) {
      return Error::Internal("store: WriteSync from the writer thread would wait for itself");
    }
    std::promise<Status> promise;
    auto future = promise.get_future();
    Write(std::move(work), [&promise](Status s) { promise.set_value(std::move(s)); });
    return future.get();
  }

  model::JobId ReserveJobId() override { return next_id_.fetch_add(1); }

  Result<model::Job> GetJob(model::JobId id) const override {
    auto lease = readers_.Acquire();
    if (!lease.ok()) return lease.error();
    return QueryJob(**lease, id);
  }

  JobPage ListJobs(const JobFilter& filter) const override {
    auto lease = OrThrow(readers_.Acquire());
    return OrThrow(QueryJobs(*lease, filter));
  }

  std::vector<model::Job> LoadActiveJobs() const override {
    auto lease = OrThrow(readers_.Acquire());
    return OrThrow(QueryActiveJobs(*lease));
  }

  std::map<std::tuple<model::JobState, std::string, std::string>, int64_t> CountJobs() const override {
    auto lease = OrThrow(readers_.Acquire());
    auto stmt = OrThrow((*lease).Prepare("SELECT state, queue, pool, COUNT(*) FROM jobs GROUP BY state, queue, pool"));
    std::map<std::tuple<model::JobState, std::string, std::string>, int64_t> counts;
    while (OrThrow(stmt.Step())) {
      if (auto state = model::ParseJobState(stmt.Text(0))) {
        counts[{*state, stmt.Text(1), stmt.Text(2)}] = stmt.Int(3);
      }
    }
    return counts;
  }

  std::vector<JobEvent> ListEvents(model::JobId id) const override {
    auto lease = OrThrow(readers_.Acquire());
    auto stmt = OrThrow((*lease).Prepare("SELECT time, kind, message FROM job_events WHERE job_id = ? ORDER BY id"));
    stmt.Bind(1, int64_t{id});
    std::vector<JobEvent> events;
    while (OrThrow(stmt.Step())) {
      events.push_back({FromUnixMillis(stmt.Int(0)), stmt.Text(1), stmt.Text(2)});
    }
    return events;
  }

  std::vector<ClusterEvent> ListClusterEvents(const EventFilter& f) const override {
    // Jobs' events (object "job/ID", severity info; warning for a ledger
    // discrepancy) and the cluster's, each side filtered, merged by time.
    std::vector<std::string> params;
    std::string job_where = "WHERE 1", cluster_where = "WHERE 1";
    if (f.since) {
      const std::string since = std::to_string(ToUnixMillis(*f.since));
      job_where += " AND e.time >= " + since;
      cluster_where += " AND time >= " + since;
    }
    std::vector<std::string> job_params, cluster_params;
    if (f.kind) {
      job_where += " AND e.kind = ?";
      job_params.push_back(*f.kind);
      cluster_where += " AND kind = ?";
      cluster_params.push_back(*f.kind);
    }
    if (f.object) {
      const bool prefix = !f.object->empty() && f.object->back() == '/';
      if (prefix) {
        cluster_where += " AND substr(object, 1, " + std::to_string(f.object->size()) + ") = ?";
        cluster_params.push_back(*f.object);
        if (*f.object != "job/") job_where += " AND 0";
      } else {
        cluster_where += " AND object = ?";
        cluster_params.push_back(*f.object);
        model::JobId id = 0;
        if (f.object->rfind("job/", 0) == 0) {
          try {
            id = std::stoll(f.object->substr(4));
          } catch (const std::exception&) {
            id = 0;
          }
        }
        job_where += " AND e.job_id = " + std::to_string(id);
      }
    }
    std::string job_from = "job_events e";
    if (f.visible_projects) {
      job_from += " JOIN jobs j ON j.id = e.job_id";
      job_where += VisibleClause("j.", *f.visible_projects, f.visible_queues, job_params);
    }
    params = job_params;
    params.insert(params.end(), cluster_params.begin(), cluster_params.end());
    const std::string sql =
        "SELECT time, kind, object, severity, message FROM ("
        "SELECT e.time AS time, e.id AS seq, 0 AS src, e.kind AS kind, 'job/' || e.job_id AS object, "
        "CASE WHEN e.kind = 'ledger_discrepancy' THEN 'warning' ELSE 'info' END AS severity, e.message AS message "
        "FROM " +
        job_from + " " + job_where + " UNION ALL SELECT time, id, 1, kind, object, severity, message FROM events " +
        cluster_where + ") ORDER BY time DESC, src DESC, seq DESC LIMIT " + std::to_string(std::max(f.limit, 0));
    auto lease = OrThrow(readers_.Acquire());
    auto stmt = OrThrow((*lease).Prepare(sql));
    for (size_t i = 0; i < params.size(); ++i) stmt.Bind(static_cast<int>(i + 1), params[i]);
    std::vector<ClusterEvent> events;
    while (OrThrow(stmt.Step())) {
      events.push_back({FromUnixMillis(stmt.Int(0)), stmt.Text(1), stmt.Text(2), stmt.Text(3), stmt.Text(4)});
    }
    std::reverse(events.begin(), events.end());
    return events;
  }

  std::vector<AlertRecord> ListAlerts(std::optional<bool> firing, int limit) const override {
    std::string where;
    if (firing) where = *firing ? " WHERE resolved_at IS NULL" : " WHERE resolved_at IS NOT NULL";
    auto lease = OrThrow(readers_.Acquire());
    auto stmt =
        OrThrow((*lease).Prepare("SELECT id, name, kind, object, severity, message, fired_at, resolved_at FROM alerts" +
                                 where + " ORDER BY id DESC LIMIT " + std::to_string(std::max(limit, 0))));
    std::vector<AlertRecord> alerts;
    while (OrThrow(stmt.Step())) {
      AlertRecord a;
      a.id = stmt.Int(0);
      a.name = stmt.Text(1);
      a.kind = stmt.Text(2);
      a.object = stmt.Text(3);
      a.severity = stmt.Text(4);
      a.message = stmt.Text(5);
      a.fired_at = FromUnixMillis(stmt.Int(6));
      if (!stmt.IsNull(7)) a.resolved_at = FromUnixMillis(stmt.Int(7));
      alerts.push_back(std::move(a));
    }
    return alerts;
  }

  static SandboxRow SandboxFrom(const Statement& stmt) {
    SandboxRow b;
    b.id = stmt.Int(0);
    b.state = stmt.Text(1);
    b.record = stmt.Text(2);
    b.created_at = FromUnixMillis(stmt.Int(3));
    if (!stmt.IsNull(4)) b.ended_at = FromUnixMillis(stmt.Int(4));
    return b;
  }

  std::optional<SandboxRow> GetSandbox(int64_t id) const override {
    auto lease = OrThrow(readers_.Acquire());
    auto stmt = OrThrow((*lease).Prepare("SELECT id, state, record, created_at, ended_at FROM sandboxes WHERE id = ?"));
    stmt.Bind(1, id);
    if (!OrThrow(stmt.Step())) return std::nullopt;
    return SandboxFrom(stmt);
  }

  std::vector<SandboxRow> ListSandboxes(bool active_only, int limit) const override {
    auto lease = OrThrow(readers_.Acquire());
    auto stmt = OrThrow((*lease).Prepare(std::string("SELECT id, state, record, created_at, ended_at FROM sandboxes") +
                                         (active_only ? " WHERE ended_at IS NULL" : "") + " ORDER BY id DESC LIMIT " +
                                         std::to_string(std::max(limit, 0))));
    std::vector<SandboxRow> out;
    while (OrThrow(stmt.Step())) out.push_back(SandboxFrom(stmt));
    return out;
  }

  int64_t MaxSandboxId() const override {
    auto lease = OrThrow(readers_.Acquire());
    auto stmt = OrThrow((*lease).Prepare("SELECT COALESCE(MAX(id), 0) FROM sandboxes"));
    return OrThrow(stmt.Step()) ? stmt.Int(0) : 0;
  }

  std::vector<ImageVersionRow> ListImageVersions() const override {
    auto lease = OrThrow(readers_.Acquire());
    auto stmt = OrThrow(
        (*lease).Prepare("SELECT name, version, spec, created_at, created_by FROM images ORDER BY name, created_at"));
    std::vector<ImageVersionRow> out;
    while (OrThrow(stmt.Step())) {
      ImageVersionRow i;
      i.name = stmt.Text(0);
      i.version = stmt.Text(1);
      i.spec = stmt.Text(2);
      i.created_at = FromUnixMillis(stmt.Int(3));
      i.created_by = stmt.Text(4);
      out.push_back(std::move(i));
    }
    return out;
  }

  std::map<std::string, std::vector<std::string>> ImageCurrentStacks() const override {
    auto lease = OrThrow(readers_.Acquire());
    auto stmt = OrThrow((*lease).Prepare("SELECT name, version FROM image_current ORDER BY seq"));
    std::map<std::string, std::vector<std::string>> out;
    while (OrThrow(stmt.Step())) out[stmt.Text(0)].push_back(stmt.Text(1));
    return out;
  }

  std::vector<AuditRecord> ListAudit(int limit) const override {
    auto lease = OrThrow(readers_.Acquire());
    auto stmt =
        OrThrow((*lease).Prepare("SELECT time, actor, action, target, result FROM audit ORDER BY id DESC LIMIT ?"));
    stmt.Bind(1, int64_t{std::max(limit, 0)});
    std::vector<AuditRecord> records;
    while (OrThrow(stmt.Step())) {
      records.push_back({FromUnixMillis(stmt.Int(0)), stmt.Text(1), stmt.Text(2), stmt.Text(3), stmt.Text(4)});
    }
    return records;
  }

  std::optional<TokenRecord> FindToken(const std::string& hash) const override {
    auto lease = OrThrow(readers_.Acquire());
    auto stmt = OrThrow((*lease).Prepare("SELECT hash, user, kind, pool, created_at FROM tokens WHERE hash = ?"));
    stmt.Bind(1, hash);
    if (!OrThrow(stmt.Step())) return std::nullopt;
    return TokenRecord{stmt.Text(0), stmt.Text(1), stmt.Text(2), stmt.Text(3), FromUnixMillis(stmt.Int(4))};
  }

  std::optional<UserRecord> GetUser(const std::string& name) const override {
    auto lease = OrThrow(readers_.Acquire());
    auto stmt = OrThrow((*lease).Prepare(std::string(kUserColumns) + " WHERE name = ?"));
    stmt.Bind(1, name);
    if (!OrThrow(stmt.Step())) return std::nullopt;
    return UserFromRow(stmt);
  }

  std::vector<UserRecord> ListUsers() const override {
    auto lease = OrThrow(readers_.Acquire());
    auto stmt = OrThrow((*lease).Prepare(std::string(kUserColumns) + " ORDER BY name"));
    std::vector<UserRecord> users;
    while (OrThrow(stmt.Step())) users.push_back(UserFromRow(stmt));
    return users;
  }

  std::vector<NodeStateRecord> LoadNodeStates() const override {
    auto lease = OrThrow(readers_.Acquire());
    auto stmt = OrThrow((*lease).Prepare("SELECT name, state, reason FROM node_states ORDER BY name"));
    std::vector<NodeStateRecord> nodes;
    while (OrThrow(stmt.Step())) {
      // A state this binary does not know is left out rather than guessed.
      if (auto state = model::ParseNodeState(stmt.Text(1))) nodes.push_back({stmt.Text(0), *state, stmt.Text(2)});
    }
    return nodes;
  }

  LedgerCharged LoadLedgerCharged(model::JobId job, int attempt) const override {
    auto lease = OrThrow(readers_.Acquire());
    auto all = LedgerSums(*lease, "WHERE job_id = ? AND attempt = ?", job, attempt);
    auto it = all.find({job, attempt});
    return it == all.end() ? LedgerCharged{} : it->second;
  }

  std::map<std::pair<model::JobId, int>, LedgerCharged> LoadAllLedgerCharged() const override {
    auto lease = OrThrow(readers_.Acquire());
    return LedgerSums(*lease, "", 0, 0);
  }

  std::vector<UsageRow> QueryUsage(const UsageQuery& q) const override {
    static const std::set<std::string> kGroupColumns = {"user", "project", "queue", "pool", "workload_kind"};
    std::string columns;
    for (const auto& g : q.group_by) {
      if (!kGroupColumns.count(g)) throw std::invalid_argument("unknown group_by column " + g);
      columns += g + ", ";
    }
    // The window (from, to] on interval_end, split into the whole hours it
    // covers, summed from the hourly rollup (migration 4), and the partial
    // hours at its edges, summed from the entries themselves. Hour h holds
    // the ends in [h*H, (h+1)*H); it lies inside the window when
    // h*H > from and (h+1)*H - 1 <= to, i.e. from the first hour
    // ceil((from+1)/H) up to, not including, floor((to+1)/H).
    constexpr int64_t kHour = 3'600'000;
    std::vector<int64_t> numbers;
    std::string rollup_where = "WHERE 1", raw_where;
    std::optional<int64_t> first_hour, end_hour;
    if (q.from) first_hour = FloorDiv(ToUnixMillis(*q.from) + kHour, kHour);  // ceil((from+1)/H)
    if (q.to) end_hour = FloorDiv(ToUnixMillis(*q.to) + 1, kHour);
    if (first_hour && end_hour && *first_hour >= *end_hour) {
      // No whole hour inside: every entry of the window from the table.
      rollup_where = "WHERE 0";
      raw_where = "interval_end > " + std::to_string(ToUnixMillis(*q.from)) +
                  " AND interval_end <= " + std::to_string(ToUnixMillis(*q.to));
    } else {
      std::vector<std::string> edges;
      if (first_hour) {
        rollup_where += " AND hour >= " + std::to_string(*first_hour);
        edges.push_back("(interval_end > " + std::to_string(ToUnixMillis(*q.from)) + " AND interval_end < " +
                        std::to_string(*first_hour * kHour) + ")");
      }
      if (end_hour) {
        rollup_where += " AND hour < " + std::to_string(*end_hour);
        edges.push_back("(interval_end >= " + std::to_string(*end_hour * kHour) +
                        " AND interval_end <= " + std::to_string(ToUnixMillis(*q.to)) + ")");
      }
      raw_where = edges.empty() ? "0" : edges.size() == 1 ? edges[0] : edges[0] + " OR " + edges[1];
    }
    std::string visible;
    std::vector<std::string> params;
    if (q.visible_projects) {
      visible = VisibleClause("", *q.visible_projects, q.visible_queues, params);
    }
    const std::vector<std::string> visible_params = params;
    params.insert(params.end(), visible_params.begin(), visible_params.end());  // once per branch
    const std::string group = columns + "metric";
    const std::string sql = "SELECT " + group + ", SUM(quantity) FROM (SELECT " + group +
                            ", quantity FROM ledger_hourly " + rollup_where + visible + " UNION ALL SELECT " + group +
                            ", quantity FROM ledger WHERE (" + raw_where + ")" + visible + ") GROUP BY " + group +
                            " ORDER BY " + group;
    auto lease = OrThrow(readers_.Acquire());
    auto stmt = OrThrow((*lease).Prepare(sql));
    for (size_t i = 0; i < params.size(); ++i) stmt.Bind(static_cast<int>(i + 1), params[i]);
    std::vector<UsageRow> rows;
    const int n = static_cast<int>(q.group_by.size());
    while (OrThrow(stmt.Step())) {
      std::map<std::string, std::string> key;
      for (int i = 0; i < n; ++i) key[q.group_by[i]] = stmt.Text(i);
      if (rows.empty() || rows.back().group != key) rows.push_back({key, {}});
      rows.back().metrics[stmt.Text(n)] += stmt.Double(n + 1);
    }
    return rows;
  }

  FairshareUsage LoadFairshareUsage() const override {
    auto lease = OrThrow(readers_.Acquire());
    auto stmt = OrThrow((*lease).Prepare("SELECT project, user, usage, as_of FROM fairshare_usage"));
    FairshareUsage usage;
    while (OrThrow(stmt.Step())) {
      usage.entries.push_back({stmt.Text(0), stmt.Text(1), stmt.Double(2)});
      usage.as_of = FromUnixMillis(stmt.Int(3));
    }
    return usage;
  }

  int SchemaVersion() const override { return schema_version_; }

  void Close() override {
    {
      std::lock_guard lock(mu_);
      closing_ = true;
    }
    cv_.notify_all();
    // From a `done` callback the writer cannot join itself; it stops after
    // this batch and the destructor joins it.
    if (std::this_thread::get_id() == writer_id_) return;
    std::lock_guard join_lock(join_mu_);
    if (writer_thread_.joinable()) writer_thread_.join();
  }

 private:
  SqliteStore(const StoreOptions& options, std::unique_ptr<Connection> writer, int schema_version, model::JobId next_id)
      : options_(options),
        writer_(std::move(writer)),
        schema_version_(schema_version),
        readers_(options.path),
        next_id_(next_id) {}

  void Start() {
    writer_thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "us-store");
      // The writer is the daemon's one serial stage: every submission and
      // every job state change waits for its commit. Under CFS each runnable
      // thread gets an equal share, so with the HTTP threads, the control
      // thread and any jobs on the host runnable, the writer got less CPU
      // than its work needed and commits queued. A higher priority (nice
      // -10 weighs about nine times nice 0) lets it run whenever it has
      // work; it spends most of its time waiting for work or for fsync.
      // Only root may raise a priority; otherwise the writer keeps the
      // daemon's.
      if (::geteuid() == 0) ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kWriterNice);
      WriterLoop();
    });
    writer_id_ = writer_thread_.get_id();
  }

  void WriterLoop() {
    const size_t max_batch = static_cast<size_t>(std::max(options_.max_batch, 1));
    std::vector<WriteItem> batch;
    for (;;) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return closing_ || !queue_.empty(); });
        if (queue_.empty()) return;  // closing, and everything queued is written
        const size_t n = std::min(queue_.size(), max_batch);
        batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.begin() + n));
        queue_.erase(queue_.begin(), queue_.begin() + n);
      }
      RunBatch(batch);
      batch.clear();
    }
  }

  void RunBatch(std::vector<WriteItem>& batch) {
    if (!RunBatchAtOnce(batch)) RunBatchWithSavepoints(batch);
  }

  // The common case: every write succeeds, and the batch is one transaction
  // without savepoints. A savepoint makes SQLite copy each page a write
  // changes first into a sub-journal (~11 pages, 44 KiB, for a submission:
  // the job row, its six indexes, the event and the audit row), which was
  // the writer's largest single cost after SQL itself. Returns false, with
  // the transaction rolled back and no callback called, when a write
  // failed or the commit did not happen; the caller then runs the batch
  // again with savepoints, so each write gets its own outcome.
  bool RunBatchAtOnce(std::vector<WriteItem>& batch) {
    Connection& c = *writer_;
    if (!c.Run("BEGIN IMMEDIATE")) return false;
    SqliteTransaction txn(c, next_id_);
    for (auto& item : batch) {
      if (!RunWork(item.work, txn) || sqlite3_get_autocommit(c.db()) != 0) {
        if (sqlite3_get_autocommit(c.db()) == 0) c.Run("ROLLBACK");
        return false;
      }
    }
    if (!c.Run("COMMIT")) {
      if (sqlite3_get_autocommit(c.db()) == 0) c.Run("ROLLBACK");
      return false;
    }
    for (auto& item : batch) CallDone(item.done, Status::Ok());
    return true;
  }

  // One transaction for the whole batch, one savepoint per write.
  void RunBatchWithSavepoints(std::vector<WriteItem>& batch) {
    Connection& c = *writer_;
    std::vector<Status> results(batch.size());
    Status whole = c.Run("BEGIN IMMEDIATE");
    if (whole) {
      SqliteTransaction txn(c, next_id_);
      for (size_t i = 0; i < batch.size() && whole; ++i) {
        if (Status s = c.Run("SAVEPOINT w"); !s) {
          whole = s;
          break;
        }
        results[i] = RunWork(batch[i].work, txn);
        if (!results[i]) {
          if (Status s = c.Run("ROLLBACK TO w"); !s) whole = s;
        }
        if (Status s = c.Run("RELEASE w"); !s && whole) whole = s;
        // Some errors (a full disk, I/O) make SQLite roll the whole
        // transaction back on its own; then nothing of the batch is left.
        if (whole && sqlite3_get_autocommit(c.db()) != 0) {
          whole = Error::Unavailable("store: the transaction was rolled back by SQLite after: " +
                                     (results[i] ? std::string("a write") : results[i].error().message));
        }
      }
      if (whole) whole = c.Run("COMMIT");
      if (!whole && sqlite3_get_autocommit(c.db()) == 0) c.Run("ROLLBACK");
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      // A write that failed on its own reports its own error; the others
      // share the fate of the commit.
      CallDone(batch[i].done, results[i] ? whole : results[i]);
    }
  }

  const StoreOptions options_;
  std::unique_ptr<Connection> writer_;  // used only by the writer thread once started
  const int schema_version_;
  mutable ReaderPool readers_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<WriteItem> queue_;
  bool closing_ = false;
  std::mutex join_mu_;
  std::thread writer_thread_;
  std::thread::id writer_id_;          // set before the store is handed out, constant after
  std::atomic<model::JobId> next_id_;  // the next job id to hand out (ReserveJobId, InsertJob)
};

Status CreateFileWithMode(const std::string& path) {
  // The file holds token hashes and job environments: owner only. SQLite
  // gives its -wal and -shm files the mode of the database file.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Error::Unavailable("store: cannot open " + path + ": " + std::strerror(errno));
  }
  const int rc = ::fchmod(fd, 0600);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) return Error::Unavailable("store: cannot chmod 0600 " + path + ": " + std::strerror(saved));
  return Status::Ok();
}

Result<std::unique_ptr<Store>> SqliteStore::Open(const StoreOptions& options) {
  if (options.path.empty()) return Error::BadRequest("invalid_store_path", "store: no database path", "path");
  std::string synchronous = options.synchronous;
  std::transform(synchronous.begin(), synchronous.end(), synchronous.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (synchronous != "full" && synchronous != "normal" && synchronous != "off") {
    return Error::BadRequest("invalid_store_synchronous",
                             "store: synchronous must be full, normal or off, not \"" + options.synchronous + "\"",
                             "synchronous");
  }
  if (Status s = CreateFileWithMode(options.path); !s) return s.error();

  auto writer = Connection::Open(options.path, Connection::Mode::kReadWrite, kBusyTimeoutMs);
  if (!writer.ok()) return writer.error();
  Connection& c = **writer;
  auto mode = c.QueryText("PRAGMA journal_mode=WAL");
  if (!mode.ok()) return mode.error();
  if (*mode != "wal") {
    return Error::Internal("store: " + options.path + " cannot use WAL mode (journal_mode is " + *mode + ")");
  }
  // A 64 MiB page cache for the one writer (SQLite's default is 2 MiB): the
  // ledger's indexes and rollup stay in memory, where with the default
  // cache every batch re-reads their pages from the OS.
  // Temporary files in memory: every write of a group commit runs in its own
  // savepoint, and SQLite keeps a savepoint's undo pages in a sub-journal.
  // On disk (the default) that was a file created, unlinked and written
  // page by page in /var/tmp for each batch: 85% of the writer's pwrite
  // calls under a submission load. The sub-journal only lives until its
  // batch commits, so memory holds at most one batch's changed pages.
  if (Status s = c.Exec("PRAGMA synchronous=" + synchronous +
                        "; PRAGMA foreign_keys=ON; PRAGMA cache_size=-65536; PRAGMA temp_store=MEMORY;");
      !s) {
    return s.error();
  }
  auto fk = c.QueryText("PRAGMA foreign_keys");
  if (!fk.ok()) return fk.error();
  if (*fk != "1") return Error::Internal("store: this SQLite cannot enforce foreign keys");

  // An existing database about to be migrated is copied first, at its old
  // schema: `unisched store restore` can put it back for the previous
  // unisched, which refuses a schema newer than it knows (docs/store.md).
  auto before = SchemaVersionOf(c.db());
  if (!before.ok()) return before.error();
  if (*before > 0 && *before < static_cast<int>(Migrations().size())) {
    if (Status s = BackupBeforeMigration(c, options.path, *before); !s) return s.error();
  }
  auto version = ApplyMigrations(c.db(), Migrations(), SystemClock().Now());
  if (!version.ok()) return version.error();

  // Ids continue after the highest ever used (sqlite_sequence keeps it even
  // when the job was deleted by retention), so an id is never reused.
  auto highest = c.QueryText(
      "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0), "
      "coalesce((SELECT max(id) FROM jobs), 0))");
  if (!highest.ok()) return highest.error();
  const model::JobId next_id = std::stoll(*highest) + 1;
  std::unique_ptr<SqliteStore> store(new SqliteStore(options, std::move(*writer), *version, next_id));
  store->Start();
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace

Result<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  return SqliteStore::Open(options);
}

}  // namespace unisched::store
