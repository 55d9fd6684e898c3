#pragma once
// Baseline runs (unisched/store/baselines.h) in SQL, for SQLite and
// PostgreSQL alike, on the connection given (the store's lease connection).
// Internal to src/store.

#include <optional>
#include <string>
#include <vector>

#include "store/sql.h"
#include "unisched/store/baselines.h"

namespace unisched::store::sql {

Result<int64_t> InsertBaseline(Connection& c, const BaselineRecord& baseline);
Result<std::optional<BaselineRecord>> GetBaseline(Connection& c, int64_t id);
Result<std::vector<BaselineRecord>> ListBaselines(Connection& c, const std::string& pools, int limit);

}  // namespace unisched::store::sql
