#pragma once
// A thin layer over one sqlite3 connection: opening with the store's pragmas,
// a cache of prepared statements, and statements that reset themselves.
// Private to the store: the only place besides src/store/*.cc that sees sqlite3.h.

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "unisched/common/status.h"

namespace unisched::store {

// An Error for a failed SQLite call: busy/locked and full disks are
// kUnavailable (worth retrying), constraint failures kConflict, the rest kInternal.
Error SqliteError(sqlite3* db, int rc, std::string_view what);

// A statement borrowed from a Connection's cache. Binding is by 1-based
// index; the destructor resets it and clears its bindings so the cached
// statement is ready for the next user (also when a write throws).
class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, std::string_view value);
  Statement& Bind(int index, const char* value) { return Bind(index, std::string_view(value)); }
  Statement& Bind(int index, const std::string& value) { return Bind(index, std::string_view(value)); }
  Statement& BindNull(int index);
  // Not an overload of Bind: Bind(i, 3) would be ambiguous between int64_t and double.
  Statement& BindReal(int index, double value);
  Statement& Bind(int index, std::optional<int64_t> value) { return value ? Bind(index, *value) : BindNull(index); }

  // One step: true with a row, false when done.
  Result<bool> Step();
  // Steps to the end, for statements that return no rows.
  Status Run();
  // The extended result code of the last failed step (e.g. SQLITE_CONSTRAINT_FOREIGNKEY).
  int last_error() const { return last_error_; }

  bool IsNull(int column) const;
  int64_t Int(int column) const;
  double Double(int column) const;
  std::string Text(int column) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  int bind_error_ = SQLITE_OK;
  int last_error_ = SQLITE_OK;
};

class Connection {
 public:
  enum class Mode { kReadWrite, kReadOnly };

  // Opens `path` (which must exist for kReadOnly) with extended result codes
  // and a busy timeout.
  static Result<std::unique_ptr<Connection>> Open(const std::string& path, Mode mode, int busy_timeout_ms);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  sqlite3* db() const { return db_; }
  // Runs SQL text that may hold several statements (scripts, pragmas).
  Status Exec(const std::string& sql);
  // A cached prepared statement for `sql` (one statement).
  Result<Statement> Prepare(const std::string& sql);
  // Runs one cached statement that returns no rows.
  Status Run(const std::string& sql);
  // The first column of the first row of `sql`, as text (for pragmas).
  Result<std::string> QueryText(const std::string& sql);

 private:
  explicit Connection(sqlite3* db) : db_(db) {}

  sqlite3* db_;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
};

}  // namespace unisched::store
