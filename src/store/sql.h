#pragma once
// The SQL the store's concerns are written against, whatever the engine:
// a connection that prepares statements (cached per connection), statements
// bound by 1-based index that reset themselves, and the few places where
// SQLite and PostgreSQL differ (how a transaction starts, a JSON list as
// rows, what a failed constraint was). SQLite implements it in
// sqlite_db.cc, PostgreSQL (libpq) in pg_db.cc; the concerns' SQL
// (sql_jobs.cc, ...) is the dialect both accept: `?` placeholders ("?N"
// for a repeated one), TRUE/FALSE, ON CONFLICT, RETURNING, "user" quoted.
// Private to src/store.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "unisched/common/status.h"

namespace unisched::store {

// What a failed statement violated, for the callers that turn it into a
// precise error (a job id taken, a foreign key to a job that is gone).
enum class Violation { kNone, kPrimaryKey, kUnique, kForeignKey, kOther };

// One prepared statement of a connection, owned by the connection's cache.
class StatementImpl {
 public:
  virtual ~StatementImpl() = default;
  virtual void Bind(int index, int64_t value) = 0;
  virtual void Bind(int index, std::string_view value) = 0;
  virtual void BindReal(int index, double value) = 0;
  virtual void BindNull(int index) = 0;
  virtual Result<bool> Step() = 0;
  // Runs a statement that returns no rows: steps to the end, unless the
  // connection pipelines (Connection::BeginPipeline).
  virtual Status Run() {
    for (;;) {
      auto row = Step();
      if (!row.ok()) return row.error();
      if (!*row) return Status::Ok();
    }
  }
  virtual Violation violation() const = 0;
  virtual bool IsNull(int column) const = 0;
  virtual int64_t Int(int column) const = 0;
  virtual double Double(int column) const = 0;
  virtual std::string Text(int column) const = 0;
  // Back to unexecuted with no bindings, ready for the next user.
  virtual void Reset() = 0;
};

// A statement borrowed from a Connection's cache. The destructor resets it
// (also when a write throws).
class Statement {
 public:
  explicit Statement(StatementImpl* impl) : impl_(impl) {}
  Statement(Statement&& other) noexcept : impl_(other.impl_) { other.impl_ = nullptr; }
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() {
    if (impl_ != nullptr) impl_->Reset();
  }

  Statement& Bind(int index, int64_t value) {
    impl_->Bind(index, value);
    return *this;
  }
  Statement& Bind(int index, std::string_view value) {
    impl_->Bind(index, value);
    return *this;
  }
  Statement& Bind(int index, const char* value) { return Bind(index, std::string_view(value)); }
  Statement& Bind(int index, const std::string& value) { return Bind(index, std::string_view(value)); }
  Statement& BindNull(int index) {
    impl_->BindNull(index);
    return *this;
  }
  // Not an overload of Bind: Bind(i, 3) would be ambiguous between int64_t and double.
  Statement& BindReal(int index, double value) {
    impl_->BindReal(index, value);
    return *this;
  }
  Statement& Bind(int index, std::optional<int64_t> value) { return value ? Bind(index, *value) : BindNull(index); }

  // One step: true with a row, false when done.
  Result<bool> Step() { return impl_->Step(); }
  // Steps to the end, for statements that return no rows. While the
  // connection pipelines, only sends it (Connection::BeginPipeline).
  Status Run() { return impl_->Run(); }
  // What the last failed step violated.
  Violation violation() const { return impl_->violation(); }

  bool IsNull(int column) const { return impl_->IsNull(column); }
  int64_t Int(int column) const { return impl_->Int(column); }
  double Double(int column) const { return impl_->Double(column); }
  std::string Text(int column) const { return impl_->Text(column); }

 private:
  StatementImpl* impl_;
};

class Connection {
 public:
  virtual ~Connection() = default;

  // Runs SQL text that may hold several statements (scripts, settings).
  virtual Status Exec(const std::string& sql) = 0;
  // A cached prepared statement for `sql` (one statement).
  virtual Result<Statement> Prepare(const std::string& sql) = 0;
  // Whether a transaction is open (also one a failed statement aborted).
  virtual bool InTransaction() const = 0;
  // Whether the connection to the database is gone (a server's can be,
  // SQLite's cannot): the outcome of a COMMIT that failed then is unknown.
  virtual bool Lost() const { return false; }
  // Rows the last INSERT, UPDATE or DELETE changed.
  virtual int64_t ChangedRows() const = 0;
  // Starts the transaction of a group of writes: on SQLite it takes the
  // write lock at once (IMMEDIATE), so it never fails half-way on a lock.
  virtual Status BeginWrite() = 0;
  // Starts a read-only transaction that sees one snapshot throughout.
  virtual Status BeginRead() = 0;
  // An SQL expression for the rows of the strings of a JSON array bound as
  // one parameter, each in a column named `value`.
  virtual std::string JsonListRows() const = 0;
  // An SQL expression for the database's clock, in Unix milliseconds.
  virtual std::string NowMillis() const = 0;
  // What a SELECT inside a write transaction appends to keep the rows it
  // read from changing until the commit (SQLite's write transaction holds
  // the whole database already).
  virtual std::string LockReadRows() const { return ""; }
  // Pipelining, where the database is a server (PostgreSQL): between
  // BeginPipeline and EndPipeline, a statement's Run() sends it without
  // waiting for its outcome, so the statements of a transaction travel
  // together instead of one round trip each. A failure surfaces later: at
  // the next statement that returns rows (Step), at ChangedRows(), or at
  // EndPipeline, which waits for every outcome and returns the first
  // failure; the transaction is then failed. Only for work that redoes the
  // whole transaction on any failure (the writer's batch at once,
  // sql_store.cc), and Exec() is not used meanwhile. SQLite runs each
  // statement at once (nothing to wait for) and these do nothing.
  virtual Status BeginPipeline() { return Status::Ok(); }
  virtual Status EndPipeline() { return Status::Ok(); }

  // Where the database is a server, SQL expressions for this connection's
  // session (text that names it uniquely while the server runs) and for
  // "the session named in `column` has ended": the leader lease records its
  // holder's session, so a holder that died is replaced at once
  // (sql_store.cc). SQLite has no sessions: '' and false.
  virtual std::string ThisSessionSql() const { return "''"; }
  virtual std::string SessionEndedSql(const std::string& column) const {
    (void)column;
    return "0 = 1";
  }

  // Runs one cached statement that returns no rows.
  Status Run(const std::string& sql) {
    auto stmt = Prepare(sql);
    if (!stmt.ok()) return stmt.error();
    return stmt->Run();
  }
  // The first column of the first row of `sql`, as text ("" for no row).
  Result<std::string> QueryText(const std::string& sql) {
    auto stmt = Prepare(sql);
    if (!stmt.ok()) return stmt.error();
    auto row = stmt->Step();
    if (!row.ok()) return row.error();
    if (!*row) return std::string();
    return stmt->Text(0);
  }
};

}  // namespace unisched::store
