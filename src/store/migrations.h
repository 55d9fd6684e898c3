#pragma once
// Numbered schema migrations. The schema_migrations table records which
// versions a database has; opening applies the missing ones in order, each
// in its own transaction.

#include <string_view>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"

struct sqlite3;

namespace unisched::store {

// The schema scripts: element i is version i + 1. Append only: a released
// migration never changes, a schema change is a new entry.
const std::vector<std::string_view>& Migrations();

// The highest applied version (0 for a new database). Creates the
// schema_migrations table if it is missing.
Result<int> SchemaVersionOf(sqlite3* db);

// Applies the scripts of `migrations` above the database's version, in order,
// each with its schema_migrations row in one transaction; returns the
// resulting version. A database newer than `migrations` is an error: this
// binary does not know its schema.
Result<int> ApplyMigrations(sqlite3* db, const std::vector<std::string_view>& migrations, Timestamp now);

}  // namespace unisched::store
