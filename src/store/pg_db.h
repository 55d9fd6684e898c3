#pragma once
// The PostgreSQL side of the store's SQL layer (store/sql.h), over libpq:
// one connection with its server-side prepared statements. The store's `?`
// placeholders become `$N`; values go and come as text, and the server
// infers each parameter's type from where it stands. A connection that the
// server dropped (a restart, a failover) is found dead by the next command
// sent on it; outside a transaction it is then opened again with the same
// connection string (a multi-host string with target_session_attrs=
// read-write finds the new primary) and the command runs once more. Inside
// a transaction the command fails: the transaction is gone. Private to the store: with libpq.h, the only place besides
// pg_*.cc that sees libpq-fe.h.

#include <libpq-fe.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/libpq.h"
#include "store/sql.h"
#include "unisched/common/status.h"

namespace unisched::store {

// `sql` with SQLite's placeholders (`?` numbered in order, `?N`) as
// PostgreSQL's `$N`; text in quotes is left alone.
std::string PostgresPlaceholders(std::string_view sql);

class PgConnection;

class PgStatement final : public StatementImpl {
 public:
  PgStatement(PgConnection& connection, std::string sql) : c_(connection), sql_(std::move(sql)) {}
  ~PgStatement() override;

  void Bind(int index, int64_t value) override { Set(index, std::to_string(value)); }
  void Bind(int index, std::string_view value) override { Set(index, std::string(value)); }
  void BindReal(int index, double value) override;
  void BindNull(int index) override;
  Result<bool> Step() override;
  Status Run() override;
  Violation violation() const override { return violation_; }
  bool IsNull(int column) const override;
  int64_t Int(int column) const override;
  double Double(int column) const override;
  std::string Text(int column) const override;
  void Reset() override;

 private:
  void Set(int index, std::optional<std::string> value);
  Result<bool> Execute();
  Result<bool> ExecuteOnce();
  // Pipelining: sends the statement (and its preparation, if needed).
  Status Send();

  PgConnection& c_;
  const std::string sql_;     // in PostgreSQL's placeholders
  std::string name_;          // of the server's prepared statement; empty until prepared
  uint64_t prepared_in_ = 0;  // the connection's generation it was prepared in
  std::vector<std::optional<std::string>> params_;
  PGresult* result_ = nullptr;
  int row_ = -1;  // the current row of result_; -1 before the first Step
  Violation violation_ = Violation::kNone;
};

class PgConnection final : public Connection {
 public:
  // Connects with `conninfo` (a libpq connection string or URI) and, if not
  // empty, `password`.
  static Result<std::unique_ptr<PgConnection>> Open(const std::string& conninfo, const std::string& password);
  ~PgConnection() override;
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  Status Exec(const std::string& sql) override;
  Result<Statement> Prepare(const std::string& sql) override;
  bool InTransaction() const override;
  bool Lost() const override { return Pq()->PQstatus(conn_) != CONNECTION_OK; }
  // A backend's process id and start time (a pid alone can be reused), the
  // time as seconds since the epoch so that no session's time zone or date
  // style changes the text.
  std::string ThisSessionSql() const override {
    return "(SELECT " + std::string(kSessionName) + " FROM pg_stat_activity WHERE pid = pg_backend_pid())";
  }
  std::string SessionEndedSql(const std::string& column) const override {
    return "(" + column + " <> '' AND NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE " + kSessionName + " = " +
           column + "))";
  }
  static constexpr const char* kSessionName = "pid || '@' || extract(epoch FROM backend_start)";
  int64_t ChangedRows() const override;
  Status BeginPipeline() override;
  Status EndPipeline() override;
  Status BeginWrite() override;
  Status BeginRead() override;
  std::string JsonListRows() const override { return "SELECT jsonb_array_elements_text(CAST(? AS jsonb))"; }
  // clock_timestamp(), not now(): now() is the start of the transaction.
  std::string NowMillis() const override { return "CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)"; }
  std::string LockReadRows() const override { return " FOR SHARE"; }

  // For the statements of this connection.
  PGconn* conn() const { return conn_; }
  // Increases each time the connection is opened again: statements
  // prepared in an earlier generation are gone from the server.
  uint64_t generation() const { return generation_; }
  std::string NextStatementName() { return "s" + std::to_string(++statements_named_); }
  void set_changed_rows(int64_t n) { changed_rows_ = n; }
  bool pipelined() const { return pipelined_; }
  // A command sent in the pipeline whose result is still to be read, and
  // about how many bytes it took.
  void Sent(const std::string* sql, size_t bytes);
  // Ends the commands sent so far with a sync point (PQpipelineSync, which
  // also sends them). The server answers every command it is sent and then
  // waits for the client; without a sync point it waits "active", which no
  // timeout ends, and a client paused then (SIGSTOP, a frozen VM) would
  // keep its transaction's locks for as long as it is paused. After a sync
  // point it waits "idle in transaction", which
  // idle_in_transaction_session_timeout ends (Open). So everything sent is
  // followed by one: before each read of results, and at least every
  // kSyncEveryBytes (libpq sends its buffer by itself from 64 KiB).
  void SyncSent() const;
  static constexpr size_t kSyncEveryBytes = 32 * 1024;
  // Reads the results of the commands sent, keeping the first failure and
  // the last command's changed rows; with `keep_last`, the last command's
  // result is returned instead of read (a statement that returns rows).
  Result<PGresult*> ReadSent(bool keep_last) const;
  // The error of a failed libpq result (or of the connection, when there is
  // no result), with what the statement violated.
  Error ResultError(const PGresult* result, std::string_view what, Violation* violation) const;

 private:
  PgConnection(PGconn* conn, std::string conninfo, std::string password)
      : conn_(conn), conninfo_(std::move(conninfo)), password_(std::move(password)) {}
  friend class PgStatement;  // Revive
  // Opens the connection again if the server dropped it.
  Status Revive();
  Status ExecOnce(const std::string& sql);
  Status ApplySessionSettings();
  PGconn* conn_;
  const std::string conninfo_;
  const std::string password_;
  uint64_t generation_ = 1;
  uint64_t statements_named_ = 0;
  mutable int64_t changed_rows_ = 0;
  // Pipelining (BeginPipeline): the commands sent whose results are not
  // read yet, in order, and the first failure among those read.
  bool pipelined_ = false;
  // nullptr: a sync point.
  mutable std::deque<const std::string*> sent_;
  mutable size_t unsynced_bytes_ = 0;
  mutable std::optional<Error> pipeline_error_;
  std::unordered_map<std::string, std::unique_ptr<PgStatement>> cache_;
};

}  // namespace unisched::store
