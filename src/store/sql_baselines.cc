// Baseline runs in SQL (sql_baselines.h): the table baselines (migration 14).

#include "store/sql_baselines.h"

#include <algorithm>

namespace unisched::store::sql {

namespace {

constexpr const char* kColumns = "SELECT id, pools, created_by, created_at, record FROM baselines";

BaselineRecord RecordFrom(const Statement& read) {
  return {read.Int(0), read.Text(1), read.Text(2), FromUnixMillis(read.Int(3)), read.Text(4)};
}

}  // namespace

Result<int64_t> InsertBaseline(Connection& c, const BaselineRecord& b) {
  auto insert =
      c.Prepare("INSERT INTO baselines(pools, created_by, created_at, record) VALUES(?1, ?2, ?3, ?4) RETURNING id");
  if (!insert.ok()) return insert.error();
  insert->Bind(1, b.pools).Bind(2, b.created_by).Bind(3, ToUnixMillis(b.created_at)).Bind(4, b.record);
  auto row = insert->Step();
  if (!row.ok()) return row.error();
  if (!*row) return Error::Internal("store: inserting a baseline returned no id");
  const int64_t id = insert->Int(0);
  if (auto done = insert->Step(); !done.ok()) return done.error();
  return id;
}

Result<std::optional<BaselineRecord>> GetBaseline(Connection& c, int64_t id) {
  auto read = c.Prepare(std::string(kColumns) + " WHERE id = ?1");
  if (!read.ok()) return read.error();
  read->Bind(1, id);
  auto row = read->Step();
  if (!row.ok()) return row.error();
  if (!*row) return std::optional<BaselineRecord>();
  return std::optional<BaselineRecord>(RecordFrom(*read));
}

Result<std::vector<BaselineRecord>> ListBaselines(Connection& c, const std::string& pools, int limit) {
  auto read =
      c.Prepare(std::string(kColumns) + (pools.empty() ? "" : " WHERE pools = ?2") + " ORDER BY id DESC LIMIT ?1");
  if (!read.ok()) return read.error();
  read->Bind(1, int64_t{std::max(limit, 0)});
  if (!pools.empty()) read->Bind(2, pools);
  std::vector<BaselineRecord> runs;
  while (true) {
    auto row = read->Step();
    if (!row.ok()) return row.error();
    if (!*row) break;
    runs.push_back(RecordFrom(*read));
  }
  return runs;
}

}  // namespace unisched::store::sql
