// Backups around schema migrations (store/backup.h, docs/store.md).

#include "unisched/store/backup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "store/backup_internal.h"
#include "store/migrations.h"
#include "store/sqlite_db.h"
#include "unisched/posix/posix.h"

namespace unisched::store {
namespace {

namespace fs = std::filesystem;

constexpr int kBusyTimeoutMs = 5000;

// "<what> <path>: <the errno's text>", for a call that just failed.
std::string FailedCall(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + posix::ErrnoText(errno);
}

// fsync of a file or a directory by path.
Status SyncPath(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return Error::Unavailable(FailedCall("store: cannot open", path));
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) {
    errno = saved;
    return Error::Unavailable(FailedCall("store: cannot sync", path));
  }
  return Status::Ok();
}

// The schema version of the database at `path`, read without changing it;
// and whether SQLite's quick_check finds it sound (`check`).
Result<int> ReadSchemaVersion(const std::string& path, bool check) {
  auto c = SqliteConnection::Open(path, SqliteConnection::Mode::kReadOnly, kBusyTimeoutMs);
  if (!c.ok()) return c.error();
  if (check) {
    auto verdict = (*c)->QueryText("PRAGMA quick_check");
    if (!verdict.ok()) return verdict.error();
    if (*verdict != "ok") return Error::Internal("store: " + path + " is damaged (quick_check: " + *verdict + ")");
  }
  auto version = (*c)->QueryText("SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
  if (!version.ok()) return version.error();
  return std::stoi(*version);
}

// The schema version in a backup's file name, or 0 if it is not one of
// db_path's backups.
int BackupVersion(const fs::path& db_path, const fs::path& candidate) {
  const std::string prefix = db_path.filename().string() + ".schema-";
  const std::string suffix = ".backup";
  const std::string name = candidate.filename().string();
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return 0;
  }
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoi(digits);
}

}  // namespace

std::string SchemaBackupPath(const std::string& db_path, int version) {
  return db_path + ".schema-" + std::to_string(version) + ".backup";
}

Status BackupBeforeMigration(SqliteConnection& db, const std::string& db_path, int version) {
  // VACUUM INTO writes a consistent snapshot (the WAL's committed pages
  // included) to a new file; it must not exist, and it is not synced.
  const std::string target = SchemaBackupPath(db_path, version);
  const std::string partial = target + ".partial";
  std::error_code ignored;
  fs::remove(partial, ignored);
  {
    auto vacuum = db.Prepare("VACUUM INTO ?");
    if (!vacuum.ok()) return vacuum.error();
    if (Status s = vacuum->Bind(1, partial).Run(); !s) {
      return Error::Unavailable("store: cannot back up " + db_path + " before migrating it: " + s.error().message);
    }
  }
  if (::chmod(partial.c_str(), 0600) != 0) return Error::Unavailable(FailedCall("store: cannot chmod", partial));
  if (Status s = SyncPath(partial, false); !s) return s;
  if (::rename(partial.c_str(), target.c_str()) != 0) {
    return Error::Unavailable(FailedCall("store: cannot rename the backup to", target));
  }
  return SyncPath(fs::path(target).parent_path().string(), true);
}

Result<RestoreReport> RestoreBackup(const std::string& db_path, const std::string& from) {
  const fs::path db = fs::absolute(db_path);
  std::error_code error;
  if (!fs::exists(db, error)) {
    return Error::NotFound("no database at " + db.string() + ": nothing to restore over (is --state-dir right?)");
  }
  auto current = ReadSchemaVersion(db.string(), /*check=*/false);
  if (!current.ok()) return current.error();

  RestoreReport report;
  report.replaced_version = *current;
  if (!from.empty()) {
    report.backup = fs::absolute(from).string();
  } else {
    int best = 0;
    for (const auto& entry : fs::directory_iterator(db.parent_path(), error)) {
      const int version = BackupVersion(db, entry.path());
      if (version > best && version < *current) {
        best = version;
        report.backup = entry.path().string();
      }
    }
    if (report.backup.empty()) {
      return Error::NotFound("no backup of a schema older than " + std::to_string(*current) + " beside " + db.string() +
                             " (a newer unisched makes one, " +
                             fs::path(SchemaBackupPath(db.string(), *current - 1)).filename().string() +
                             ", before it migrates the database)");
    }
  }
  auto restored = ReadSchemaVersion(report.backup, /*check=*/true);
  if (!restored.ok()) return restored.error();
  report.restored_version = *restored;

  // The copy first, complete and synced under another name: a crash
  // anywhere below leaves the database or the backup whole.
  const std::string incoming = db.string() + ".restoring";
  fs::copy_file(report.backup, incoming, fs::copy_options::overwrite_existing, error);
  if (error) return Error::Unavailable("store: cannot copy " + report.backup + ": " + error.message());
  if (::chmod(incoming.c_str(), 0600) != 0) return Error::Unavailable(FailedCall("store: cannot chmod", incoming));
  if (Status s = SyncPath(incoming, false); !s) return s.error();

  // The replaced database gets its WAL written into it first (closing the
  // last connection then removes the WAL), so it is one whole file. What is
  // left of its WAL and shared memory moves with it, under the same new
  // name: it can be put back by hand.
  {
    auto writer = SqliteConnection::Open(db.string(), SqliteConnection::Mode::kReadWrite, kBusyTimeoutMs);
    if (!writer.ok()) return writer.error();
    auto checkpoint = (*writer)->QueryText("PRAGMA wal_checkpoint(TRUNCATE)");
    if (!checkpoint.ok()) return checkpoint.error();
  }
  report.replaced_kept_at =
      db.string() + ".replaced-schema-" + std::to_string(*current) + "-" + std::to_string(::time(nullptr));
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string old_name = db.string() + suffix;
    if (!fs::exists(old_name, error)) continue;
    if (::rename(old_name.c_str(), (report.replaced_kept_at + suffix).c_str()) != 0) {
      return Error::Unavailable(FailedCall("store: cannot move aside", old_name));
    }
  }
  if (::rename(incoming.c_str(), db.c_str()) != 0) {
    return Error::Unavailable(FailedCall("store: cannot put the backup in place at", db.string()));
  }
  if (Status s = SyncPath(db.parent_path().string(), true); !s) return s.error();
  return report;
}

}  // namespace unisched::store
