// The sqlite3 connection wrapper of the store.

#include "store/sqlite_db.h"

#include <utility>

namespace unisched::store {

Error SqliteError(sqlite3* db, int rc, std::string_view what) {
  std::string message(what);
  message += ": ";
  message += (db != nullptr && sqlite3_errcode(db) == rc) ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_FULL:
      return Error::Unavailable("store: " + message);
    case SQLITE_CONSTRAINT:
      return Error::Conflict("store_constraint", "store: " + message);
    default:
      return Error::Internal("store: " + message);
  }
}

Result<bool> SqliteStatement::Step() {
  if (bind_error_ != SQLITE_OK) {
    last_error_ = bind_error_;
    return SqliteError(nullptr, bind_error_, std::string("binding ") + sqlite3_sql(stmt_));
  }
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  last_error_ = sqlite3_extended_errcode(db_);
  return SqliteError(db_, rc, sqlite3_sql(stmt_));
}

Violation SqliteStatement::violation() const {
  switch (last_error_) {
    case SQLITE_OK:
      return Violation::kNone;
    case SQLITE_CONSTRAINT_PRIMARYKEY:
      return Violation::kPrimaryKey;
    case SQLITE_CONSTRAINT_UNIQUE:
      return Violation::kUnique;
    case SQLITE_CONSTRAINT_FOREIGNKEY:
      return Violation::kForeignKey;
    default:
      return (last_error_ & 0xff) == SQLITE_CONSTRAINT ? Violation::kOther : Violation::kNone;
  }
}

std::string SqliteStatement::Text(int column) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  if (text == nullptr) return {};
  return std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

void SqliteStatement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_error_ = SQLITE_OK;
  last_error_ = SQLITE_OK;
}

Result<std::unique_ptr<SqliteConnection>> SqliteConnection::Open(const std::string& path, Mode mode,
                                                                 int busy_timeout_ms) {
  // No memory statistics: with them (SQLite's default) every allocation
  // SQLite makes takes one process-wide mutex, which the writer and the
  // readers then contend on; nothing here reads those statistics. Must come
  // before SQLite initializes itself, i.e. before the first open.
  static const int memstatus_off = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  (void)memstatus_off;
  // NOMUTEX: each connection is used by one thread at a time (the writer,
  // or whoever leased it from the read pool).
  int flags = SQLITE_OPEN_NOMUTEX;
  flags |= mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    Error error = SqliteError(db, rc, "opening " + path);
    sqlite3_close_v2(db);
    return error;
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, busy_timeout_ms);
  return std::unique_ptr<SqliteConnection>(new SqliteConnection(db));
}

SqliteConnection::~SqliteConnection() {
  cache_.clear();  // finalizes every statement before the connection closes
  sqlite3_close_v2(db_);
}

Status SqliteConnection::Exec(const std::string& sql) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string text = message != nullptr ? message : sqlite3_errstr(rc);
  sqlite3_free(message);
  return SqliteError(nullptr, rc, text);
}

Result<Statement> SqliteConnection::Prepare(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size() + 1), SQLITE_PREPARE_PERSISTENT,
                                      &stmt, nullptr);
    if (rc != SQLITE_OK) return SqliteError(db_, rc, "preparing " + sql);
    it = cache_.emplace(sql, std::make_unique<SqliteStatement>(db_, stmt)).first;
  }
  return Statement(it->second.get());
}

}  // namespace unisched::store
