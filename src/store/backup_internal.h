#pragma once
// The store's side of backups (store/backup.h): what Open calls.

#include <string>

#include "store/sqlite_db.h"
#include "unisched/common/status.h"

namespace unisched::store {

// Writes a consistent copy of the database that `db` has open at
// `db_path` to SchemaBackupPath(db_path, version): to a partial file, synced,
// then renamed, so a backup that exists is whole.
Status BackupBeforeMigration(SqliteConnection& db, const std::string& db_path, int version);

}  // namespace unisched::store
