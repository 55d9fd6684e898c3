#pragma once
// The SQLite side of the store's SQL layer (store/sql.h): one sqlite3
// connection with its cache of prepared statements. Private to the store:
// the only place besides src/store/sqlite_*.cc, migrations.cc and backup.cc
// that sees sqlite3.h.

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "store/sql.h"
#include "unisched/common/status.h"

namespace unisched::store {

// An Error for a failed SQLite call: busy/locked and full disks are
// kUnavailable (worth retrying), constraint failures kConflict, the rest kInternal.
Error SqliteError(sqlite3* db, int rc, std::string_view what);

class SqliteStatement final : public StatementImpl {
 public:
  SqliteStatement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~SqliteStatement() override { sqlite3_finalize(stmt_); }

  void Bind(int index, int64_t value) override { Check(sqlite3_bind_int64(stmt_, index, value)); }
  void Bind(int index, std::string_view value) override {
    Check(sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  }
  void BindReal(int index, double value) override { Check(sqlite3_bind_double(stmt_, index, value)); }
  void BindNull(int index) override { Check(sqlite3_bind_null(stmt_, index)); }
  Result<bool> Step() override;
  Violation violation() const override;
  bool IsNull(int column) const override { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  int64_t Int(int column) const override { return sqlite3_column_int64(stmt_, column); }
  double Double(int column) const override { return sqlite3_column_double(stmt_, column); }
  std::string Text(int column) const override;
  void Reset() override;

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK && bind_error_ == SQLITE_OK) bind_error_ = rc;
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  int bind_error_ = SQLITE_OK;
  int last_error_ = SQLITE_OK;  // the extended result code of the last failed step
};

class SqliteConnection final : public Connection {
 public:
  enum class Mode { kReadWrite, kReadOnly };

  // Opens `path` (which must exist for kReadOnly) with extended result codes
  // and a busy timeout.
  static Result<std::unique_ptr<SqliteConnection>> Open(const std::string& path, Mode mode, int busy_timeout_ms);
  ~SqliteConnection() override;
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  sqlite3* db() const { return db_; }

  Status Exec(const std::string& sql) override;
  Result<Statement> Prepare(const std::string& sql) override;
  bool InTransaction() const override { return sqlite3_get_autocommit(db_) == 0; }
  int64_t ChangedRows() const override { return sqlite3_changes64(db_); }
  Status BeginWrite() override { return Run("BEGIN IMMEDIATE"); }
  Status BeginRead() override { return Run("BEGIN"); }
  std::string JsonListRows() const override { return "SELECT value FROM json_each(?)"; }
  // julianday counts days from noon, 24 November 4714 BC; the Unix epoch is day 2440587.5.
  std::string NowMillis() const override { return "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"; }

 private:
  explicit SqliteConnection(sqlite3* db) : db_(db) {}

  sqlite3* db_;
  std::unordered_map<std::string, std::unique_ptr<SqliteStatement>> cache_;
};

}  // namespace unisched::store
