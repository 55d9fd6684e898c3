#pragma once
// Backups of the database around schema migrations (docs/store.md). Before
// Store::Open applies a migration to an existing database it keeps a copy of
// it at its old schema beside it; RestoreBackup puts such a copy back, so a
// previous unisched (which refuses a schema newer than it knows) starts
// again on the data as it was before the upgrade.

#include <string>

#include "unisched/common/status.h"

namespace unisched::store {

// Where Open keeps the copy of `db_path` at schema `version`:
// "<db_path>.schema-<version>.backup".
std::string SchemaBackupPath(const std::string& db_path, int version);

struct RestoreReport {
  std::string backup;            // the copy put back
  int restored_version = 0;      // its schema version
  int replaced_version = 0;      // the schema version of the database it replaced
  std::string replaced_kept_at;  // the replaced database (and its -wal, -shm), renamed, never deleted
};

// Puts back `from`, or else the newest backup beside `db_path` whose schema
// is older than the database's. The backup is checked first (SQLite's
// quick_check, its schema version); the database it replaces is renamed
// with its WAL, not deleted; the copy is written and synced under another
// name, then renamed into place. The backup file itself stays.
// REQUIRES: no process uses the database (the caller holds the daemon lock
// of its state directory).
Result<RestoreReport> RestoreBackup(const std::string& db_path, const std::string& from = {});

}  // namespace unisched::store
