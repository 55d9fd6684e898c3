// Opening the SQLite store: one file in WAL mode under the state directory,
// owner-only, its pragmas, a backup before a migration, the migrations.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "store/backup_internal.h"
#include "store/migrations.h"
#include "store/sql_store.h"
#include "store/sqlite_db.h"

namespace unisched::store {
namespace {

constexpr int kBusyTimeoutMs = 5000;

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

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const StoreOptions& options) {
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

  auto writer = SqliteConnection::Open(options.path, SqliteConnection::Mode::kReadWrite, kBusyTimeoutMs);
  if (!writer.ok()) return writer.error();
  SqliteConnection& c = **writer;
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

  // The first block of job ids, before any caller asks (job_id_pool.h).
  auto first_id = ReserveIdBlock(c, std::max(options.job_id_block, 1));
  if (!first_id.ok()) return first_id.error();
  ConnectionFactory readers = [path = options.path]() -> Result<std::unique_ptr<Connection>> {
    auto reader = SqliteConnection::Open(path, SqliteConnection::Mode::kReadOnly, kBusyTimeoutMs);
    if (!reader.ok()) return reader.error();
    return std::unique_ptr<Connection>(std::move(*reader));
  };
  ConnectionFactory lease = [path = options.path]() -> Result<std::unique_ptr<Connection>> {
    auto conn = SqliteConnection::Open(path, SqliteConnection::Mode::kReadWrite, kBusyTimeoutMs);
    if (!conn.ok()) return conn.error();
    return std::unique_ptr<Connection>(std::move(*conn));
  };
  return MakeSqlStore(options, std::move(*writer), std::move(readers), std::move(lease), *version, *first_id);
}

}  // namespace unisched::store
