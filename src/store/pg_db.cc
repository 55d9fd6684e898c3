// The libpq connection of the PostgreSQL store (store/pg_db.h).

#include "store/pg_db.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace unisched::store {
namespace {

// Libpq's messages end with a newline; ours do not.
std::string Trimmed(const char* text) {
  std::string s = text != nullptr ? text : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// SQLSTATE classes and codes a retry may get past: a connection lost or
// refused (08), the server shutting down or in recovery (57P01..57P03), a
// serialization failure or deadlock (40001, 40P01), resources (53), a
// standby that takes no writes (25006: a failover not yet followed), a
// cancelled statement (57014).
bool Retryable(const std::string& sqlstate) {
  const std::string cls = sqlstate.substr(0, 2);
  return cls == "08" || cls == "53" || sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03" ||
         sqlstate == "40001" || sqlstate == "40P01" || sqlstate == "25006" || sqlstate == "57014";
}

}  // namespace

std::string PostgresPlaceholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 16);
  int next = 0;  // the number of the last placeholder, as SQLite numbers a bare `?`
  char quote = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char ch = sql[i];
    if (quote != 0) {
      out += ch;
      if (ch == quote) quote = 0;  // a doubled quote reopens at once: same result
      continue;
    }
    if (ch == '\'' || ch == '"') {
      quote = ch;
      out += ch;
      continue;
    }
    if (ch != '?') {
      out += ch;
      continue;
    }
    size_t end = i + 1;
    while (end < sql.size() && sql[end] >= '0' && sql[end] <= '9') ++end;
    int number = 0;
    if (end > i + 1) {
      number = std::atoi(std::string(sql.substr(i + 1, end - i - 1)).c_str());
      i = end - 1;
    } else {
      number = next + 1;
    }
    if (number > next) next = number;
    out += '$';
    out += std::to_string(number);
  }
  return out;
}

// ---- statements ----

PgStatement::~PgStatement() {
  if (result_ != nullptr) Pq()->PQclear(result_);
}

void PgStatement::Set(int index, std::optional<std::string> value) {
  if (index < 1) return;
  if (params_.size() < static_cast<size_t>(index)) params_.resize(static_cast<size_t>(index));
  params_[static_cast<size_t>(index) - 1] = std::move(value);
}

void PgStatement::BindReal(int index, double value) {
  if (std::isnan(value)) return Set(index, "NaN");
  if (std::isinf(value)) return Set(index, value > 0 ? "Infinity" : "-Infinity");
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  Set(index, text);
}

void PgStatement::BindNull(int index) {
  Set(index, std::nullopt);
}

Result<bool> PgStatement::Execute() {
  // A connection idle since its last use may have been dropped by a server
  // that restarted or failed over meanwhile; libpq learns it only when a
  // statement fails. Outside a transaction the statement is then run once
  // more on a revived connection: nothing of it can have happened on the
  // dead one but, for an UPDATE outside a transaction (the lease's), its
  // own effect, which running it again repeats harmlessly (lease.h).
  const bool idle = !c_.InTransaction();
  auto first = ExecuteOnce();
  if (first.ok() || !idle || !c_.Lost() || !c_.Revive()) return first;
  violation_ = Violation::kNone;
  return ExecuteOnce();
}

Status PgStatement::Send() {
  PGconn* conn = c_.conn();
  if (prepared_in_ != c_.generation()) {
    std::string name = c_.NextStatementName();
    if (Pq()->PQsendPrepare(conn, name.c_str(), sql_.c_str(), 0, nullptr) != 1) {
      return c_.ResultError(nullptr, "preparing " + sql_, &violation_);
    }
    c_.Sent(&sql_, sql_.size());
    name_ = std::move(name);
    prepared_in_ = c_.generation();
  }
  std::vector<const char*> values;
  values.reserve(params_.size());
  for (const auto& p : params_) values.push_back(p ? p->c_str() : nullptr);
  if (Pq()->PQsendQueryPrepared(conn, name_.c_str(), static_cast<int>(values.size()), values.data(), nullptr, nullptr,
                                0) != 1) {
    return c_.ResultError(nullptr, sql_, &violation_);
  }
  size_t bytes = name_.size() + 32;
  for (const auto& p : params_) bytes += p ? p->size() + 4 : 4;
  c_.Sent(&sql_, bytes);
  return Status::Ok();
}

Status PgStatement::Run() {
  if (!c_.pipelined()) return StatementImpl::Run();
  Status sent = Send();
  params_.clear();
  return sent;
}

Result<bool> PgStatement::ExecuteOnce() {
  PGconn* conn = c_.conn();
  if (c_.pipelined()) {
    // A statement that returns rows waits for everything sent before it.
    if (Status s = Send(); !s) return s.error();
    auto last = c_.ReadSent(/*keep_last=*/true);
    if (!last.ok()) return last.error();
    result_ = *last;
    return true;
  }
  if (prepared_in_ != c_.generation()) {
    std::string name = c_.NextStatementName();
    PGresult* prepared = Pq()->PQprepare(conn, name.c_str(), sql_.c_str(), 0, nullptr);
    const bool ok = Pq()->PQresultStatus(prepared) == PGRES_COMMAND_OK;
    if (!ok) {
      Error error = c_.ResultError(prepared, "preparing " + sql_, &violation_);
      Pq()->PQclear(prepared);
      return error;
    }
    Pq()->PQclear(prepared);
    name_ = std::move(name);
    prepared_in_ = c_.generation();
  }
  std::vector<const char*> values;
  values.reserve(params_.size());
  for (const auto& p : params_) values.push_back(p ? p->c_str() : nullptr);
  result_ =
      Pq()->PQexecPrepared(conn, name_.c_str(), static_cast<int>(values.size()), values.data(), nullptr, nullptr, 0);
  const ExecStatusType status = Pq()->PQresultStatus(result_);
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    Error error = c_.ResultError(result_, sql_, &violation_);
    Pq()->PQclear(result_);
    result_ = nullptr;
    return error;
  }
  const char* changed = Pq()->PQcmdTuples(result_);
  c_.set_changed_rows(changed != nullptr && *changed != '\0' ? std::atoll(changed) : 0);
  return true;
}

Result<bool> PgStatement::Step() {
  if (row_ < 0) {
    auto executed = Execute();
    if (!executed.ok()) return executed.error();
    row_ = 0;
  } else if (row_ < Pq()->PQntuples(result_)) {
    ++row_;
  }
  return row_ < Pq()->PQntuples(result_);
}

bool PgStatement::IsNull(int column) const {
  return Pq()->PQgetisnull(result_, row_, column) != 0;
}

int64_t PgStatement::Int(int column) const {
  const char* text = Pq()->PQgetvalue(result_, row_, column);
  if (text[0] == 't' && text[1] == '\0') return 1;  // a boolean
  if (text[0] == 'f' && text[1] == '\0') return 0;
  return std::strtoll(text, nullptr, 10);
}

double PgStatement::Double(int column) const {
  return std::strtod(Pq()->PQgetvalue(result_, row_, column), nullptr);
}

std::string PgStatement::Text(int column) const {
  return std::string(Pq()->PQgetvalue(result_, row_, column),
                     static_cast<size_t>(Pq()->PQgetlength(result_, row_, column)));
}

void PgStatement::Reset() {
  if (result_ != nullptr) Pq()->PQclear(result_);
  result_ = nullptr;
  row_ = -1;
  params_.clear();
  violation_ = Violation::kNone;
}

// ---- the connection ----

Result<std::unique_ptr<PgConnection>> PgConnection::Open(const std::string& conninfo, const std::string& password) {
  // Defaults first: what the connection string says overrides them (libpq
  // processes the expanded dbname in its place, and later keywords
  // override earlier ones). A server that does not answer within 5 s is
  // tried no longer (the next host, or an error); keepalives notice a
  // machine that died without closing its connections in about 10 s.
  std::vector<const char*> keys = {
      "connect_timeout", "keepalives_idle", "keepalives_interval", "keepalives_count", "application_name",
      "client_encoding", "dbname"};
  std::vector<const char*> values = {"5", "5", "2", "3", "unisched", "UTF8", conninfo.c_str()};
  if (!password.empty()) {
    keys.push_back("password");
    values.push_back(password.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  if (!Pq().ok()) return Pq().error();
  PGconn* conn = Pq()->PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1);
  if (conn == nullptr) return Error::Unavailable("store: cannot allocate a PostgreSQL connection");
  if (Pq()->PQstatus(conn) != CONNECTION_OK) {
    Error error = Error::Unavailable("store: cannot connect to PostgreSQL: " + Trimmed(Pq()->PQerrorMessage(conn)));
    Pq()->PQfinish(conn);
    return error;
  }
  // The server's notices ("relation already exists, skipping") are not
  // errors; libpq would print each on stderr.
  Pq()->PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  std::unique_ptr<PgConnection> connection(new PgConnection(conn, conninfo, password));
  if (Status s = connection->ApplySessionSettings(); !s) return s.error();
  return connection;
}

// The server ends a session left idle inside a transaction for 5 s: the
// writer of a daemon replica paused mid-batch (SIGSTOP, a frozen VM) holds
// the lease's row, which a takeover must change (lease.h), so the takeover
// waits at most that long; and no statement waits longer than that for a
// lock. No transaction of the store is idle that long in use. Set after
// connecting, not through the `options` keyword, which a conninfo of its
// own (a search_path, say) would replace; again after each reconnection.
Status PgConnection::ApplySessionSettings() {
  return ExecOnce("SET idle_in_transaction_session_timeout = '5s'; SET lock_timeout = '5s'");
}

PgConnection::~PgConnection() {
  cache_.clear();
  Pq()->PQfinish(conn_);
}

Error PgConnection::ResultError(const PGresult* result, std::string_view what, Violation* violation) const {
  const char* code = result != nullptr ? Pq()->PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const std::string sqlstate = code != nullptr ? code : "";
  std::string message = Trimmed(result != nullptr ? Pq()->PQresultErrorMessage(result) : nullptr);
  if (message.empty()) message = Trimmed(Pq()->PQerrorMessage(conn_));
  message = "store: " + std::string(what) + ": " + message;
  if (sqlstate.rfind("23", 0) == 0) {
    if (violation != nullptr) {
      const char* constraint = Pq()->PQresultErrorField(result, PG_DIAG_CONSTRAINT_NAME);
      const std::string name = constraint != nullptr ? constraint : "";
      if (sqlstate == "23505") {
        const bool primary = name.size() >= 5 && name.compare(name.size() - 5, 5, "_pkey") == 0;
        *violation = primary ? Violation::kPrimaryKey : Violation::kUnique;
      } else {
        *violation = sqlstate == "23503" ? Violation::kForeignKey : Violation::kOther;
      }
    }
    return Error::Conflict("store_constraint", message);
  }
  if (Retryable(sqlstate) || Lost()) return Error::Unavailable(message);
  return Error::Internal(message);
}

Status PgConnection::Exec(const std::string& sql) {
  // As PgStatement::Execute: a dead idle connection is revived and the
  // text sent once more.
  const bool idle = !InTransaction();
  Status first = ExecOnce(sql);
  if (first || !idle || !Lost() || !Revive()) return first;
  return ExecOnce(sql);
}

Status PgConnection::ExecOnce(const std::string& sql) {
  PGresult* result = Pq()->PQexec(conn_, sql.c_str());
  const ExecStatusType status = Pq()->PQresultStatus(result);
  Status out = Status::Ok();
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    out = ResultError(result, sql.size() > 80 ? sql.substr(0, 80) + "..." : sql, nullptr);
  } else {
    const char* changed = Pq()->PQcmdTuples(result);
    changed_rows_ = changed != nullptr && *changed != '\0' ? std::atoll(changed) : 0;
  }
  Pq()->PQclear(result);
  return out;
}

Result<Statement> PgConnection::Prepare(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    it = cache_.emplace(sql, std::make_unique<PgStatement>(*this, PostgresPlaceholders(sql))).first;
  }
  return Statement(it->second.get());
}

int64_t PgConnection::ChangedRows() const {
  if (!sent_.empty()) (void)ReadSent(/*keep_last=*/false);
  return changed_rows_;
}

void PgConnection::Sent(const std::string* sql, size_t bytes) {
  sent_.push_back(sql);
  unsynced_bytes_ += bytes;
  if (unsynced_bytes_ >= kSyncEveryBytes) SyncSent();
}

void PgConnection::SyncSent() const {
  unsynced_bytes_ = 0;
  if (Pq()->PQpipelineSync(conn_) != 1) {
    if (!pipeline_error_) {
      pipeline_error_ = Error::Unavailable("store: cannot send to PostgreSQL: " + Trimmed(Pq()->PQerrorMessage(conn_)));
    }
    return;
  }
  sent_.push_back(nullptr);
}

Result<PGresult*> PgConnection::ReadSent(bool keep_last) const {
  if (sent_.empty()) return static_cast<PGresult*>(nullptr);
  if (sent_.back() != nullptr) SyncSent();
  // With keep_last, the last command's result is kept (its rows are wanted).
  size_t commands_left = 0;
  for (const std::string* sql : sent_) commands_left += sql != nullptr ? 1 : 0;
  PGresult* kept = nullptr;
  while (!sent_.empty()) {
    const std::string* sql = sent_.front();
    sent_.pop_front();
    if (sql == nullptr) {
      // A sync point: its own result, not followed by a null.
      PGresult* sync = Pq()->PQgetResult(conn_);
      if (sync == nullptr || Pq()->PQresultStatus(sync) != PGRES_PIPELINE_SYNC) {
        if (!pipeline_error_) pipeline_error_ = ResultError(sync, "a pipeline's sync point", nullptr);
        if (sync != nullptr) Pq()->PQclear(sync);
        sent_.clear();
        break;
      }
      Pq()->PQclear(sync);
      continue;
    }
    PGresult* result = Pq()->PQgetResult(conn_);
    if (result == nullptr) {
      // The connection broke: nothing more will come.
      if (!pipeline_error_) pipeline_error_ = ResultError(nullptr, *sql, nullptr);
      sent_.clear();
      break;
    }
    const ExecStatusType status = Pq()->PQresultStatus(result);
    const bool ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
    if (!ok && !pipeline_error_) {
      pipeline_error_ = status == PGRES_PIPELINE_ABORTED
                            ? Error::Internal("store: " + *sql + ": not run, after an earlier failure")
                            : ResultError(result, *sql, nullptr);
    }
    if (ok) {
      const char* changed = Pq()->PQcmdTuples(result);
      changed_rows_ = changed != nullptr && *changed != '\0' ? std::atoll(changed) : 0;
    }
    --commands_left;
    if (keep_last && commands_left == 0 && ok) {
      kept = result;
    } else {
      Pq()->PQclear(result);
    }
    // Each command's results end with a null.
    while (PGresult* more = Pq()->PQgetResult(conn_)) Pq()->PQclear(more);
  }
  if (pipeline_error_) {
    if (kept != nullptr) Pq()->PQclear(kept);
    return *pipeline_error_;
  }
  return kept;
}

Status PgConnection::BeginPipeline() {
  if (Pq()->PQenterPipelineMode(conn_) != 1) {
    return Error::Unavailable("store: cannot pipeline: " + Trimmed(Pq()->PQerrorMessage(conn_)));
  }
  pipelined_ = true;
  pipeline_error_.reset();
  return Status::Ok();
}

Status PgConnection::EndPipeline() {
  if (!pipelined_) return Status::Ok();
  // Every command sent ends with a sync point (SyncSent); reading up to it
  // leaves the connection idle.
  if (!sent_.empty() && sent_.back() != nullptr) SyncSent();
  const bool synced = !pipeline_error_;
  (void)ReadSent(/*keep_last=*/false);
  const bool exited = Pq()->PQexitPipelineMode(conn_) == 1;
  pipelined_ = false;
  std::optional<Error> error = std::move(pipeline_error_);
  pipeline_error_.reset();
  if (error) return *error;
  if (!synced || !exited) return Error::Unavailable("store: pipeline: " + Trimmed(Pq()->PQerrorMessage(conn_)));
  return Status::Ok();
}

bool PgConnection::InTransaction() const {
  const PGTransactionStatusType status = Pq()->PQtransactionStatus(conn_);
  return status == PQTRANS_INTRANS || status == PQTRANS_INERROR || status == PQTRANS_ACTIVE;
}

Status PgConnection::Revive() {
  if (Pq()->PQstatus(conn_) == CONNECTION_OK) return Status::Ok();
  Pq()->PQreset(conn_);
  if (Pq()->PQstatus(conn_) != CONNECTION_OK) {
    return Error::Unavailable("store: cannot reconnect to PostgreSQL: " + Trimmed(Pq()->PQerrorMessage(conn_)));
  }
  ++generation_;  // the server forgot the prepared statements
  return ApplySessionSettings();
}

Status PgConnection::BeginWrite() {
  return Exec("BEGIN");
}

Status PgConnection::BeginRead() {
  return Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
}

}  // namespace unisched::store
