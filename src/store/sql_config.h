#pragma once
// Config versions (unisched/store/config_versions.h) in SQL, for SQLite and
// PostgreSQL alike, on the connection given (the store's lease connection).
// Internal to src/store.

#include <optional>
#include <vector>

#include "store/sql.h"
#include "unisched/store/config_versions.h"

namespace unisched::store::sql {

Result<ConfigHead> ReadConfigHead(Connection& c);
Result<std::optional<ConfigVersionRecord>> ReadConfigVersion(Connection& c, int64_t version);
Result<std::vector<ConfigVersionRecord>> ListConfigVersions(Connection& c, int limit);
Result<ConfigHead> ChangeConfig(Connection& c, const ConfigChange& change);

}  // namespace unisched::store::sql
