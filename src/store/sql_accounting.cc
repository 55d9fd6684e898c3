#include "store/sql_accounting.h"

#include <set>
#include <stdexcept>

#include "store/sql_common.h"

namespace unisched::store::sql {

Status AppendLedger(Connection& c, const LedgerEntry& e) {
  auto stmt = c.Prepare(
      "INSERT INTO ledger(key, job_id, attempt, \"user\", project, queue, pool, workload_kind, node, metric, detail, "
      "quantity, interval_start, interval_end, final, recorded_at, tier) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
      "?, ?, ?, ?, ?) "
      "ON CONFLICT(key) DO NOTHING");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, e.key)
      .Bind(2, int64_t{e.job})
      .Bind(3, int64_t{e.attempt})
      .Bind(4, e.user)
      .Bind(5, e.project)
      .Bind(6, e.queue)
      .Bind(7, e.pool)
      .Bind(8, e.workload_kind)
      .Bind(9, e.node)
      .Bind(10, e.metric)
      .Bind(11, e.detail)
      .BindReal(12, e.quantity)
      .Bind(13, ToUnixMillis(e.start))
      .Bind(14, ToUnixMillis(e.end))
      .Bind(15, int64_t{e.final ? 1 : 0})
      .Bind(16, ToUnixMillis(e.recorded_at))
      .Bind(17, e.tier);
  return stmt->Run();
}

Status SaveFairshareUsage(Connection& c, const FairshareUsage& usage) {
  if (Status s = c.Run("DELETE FROM fairshare_usage"); !s) return s;
  for (const auto& e : usage.entries) {
    auto stmt = c.Prepare("INSERT INTO fairshare_usage(project, \"user\", usage, as_of) VALUES(?, ?, ?, ?)");
    if (!stmt.ok()) return stmt.error();
    stmt->Bind(1, e.project).Bind(2, e.user).BindReal(3, e.usage).Bind(4, ToUnixMillis(usage.as_of));
    if (Status s = stmt->Run(); !s) return s;
  }
  return Status::Ok();
}

// Per attempt: interim charging's reach, sums per (metric, detail, node),
// and entries that repeat another's (metric, detail, node, interval, final).
std::map<std::pair<model::JobId, int>, LedgerCharged> LedgerSums(Connection& c,
                                                                 std::optional<std::pair<model::JobId, int>> only) {
  std::map<std::pair<model::JobId, int>, LedgerCharged> out;
  auto stmt = OrThrow(c.Prepare(
      "SELECT job_id, attempt, metric, detail, node, SUM(quantity), COUNT(*), MAX(final), "
      "MAX(CASE WHEN final = 0 THEN interval_end END), COUNT(DISTINCT interval_start || ':' || interval_end || ':' || "
      "final) FROM ledger " +
      std::string(only ? "WHERE job_id = ? AND attempt = ?" : "") + " GROUP BY job_id, attempt, metric, detail, node"));
  if (only) stmt.Bind(1, int64_t{only->first}).Bind(2, int64_t{only->second});
  while (OrThrow(stmt.Step())) {
    LedgerCharged& a = out[{stmt.Int(0), static_cast<int>(stmt.Int(1))}];
    a.sums[{stmt.Text(2), stmt.Text(3), stmt.Text(4)}] += stmt.Double(5);
    a.duplicated_entries += stmt.Int(6) - stmt.Int(9);
    if (stmt.Int(7) != 0) a.closed = true;
    if (!stmt.IsNull(8)) {
      const Timestamp until = FromUnixMillis(stmt.Int(8));
      if (!a.until || until > *a.until) a.until = until;
    }
  }
  return out;
}

std::vector<UsageRow> QueryUsage(Connection& c, const UsageQuery& q) {
  static const std::set<std::string> kGroupColumns = {"user",          "project", "queue", "pool",
                                                      "workload_kind", "tier",    "job",   "hour"};
  // `columns` for the rollup, `raw_columns` for the entries: the same but
  // for the hour, which an entry has as its interval_end's (integer
  // division in SQLite and PostgreSQL alike: both operands are integers).
  std::string columns, raw_columns;
  bool by_job = false;
  for (const auto& g : q.group_by) {
    if (!kGroupColumns.count(g)) throw std::invalid_argument("unknown group_by column " + g);
    by_job = by_job || g == "job";
    const std::string column =
        g == "job" ? std::string("job_id") : "\"" + g + "\"";  // quoted: user is a keyword of PostgreSQL
    columns += column + ", ";
    raw_columns += (g == "hour" ? std::string("interval_end / 3600000 AS hour") : column) + ", ";
  }
  // The window (from, to] on interval_end, split into the whole hours it
  // covers, summed from the hourly rollup (migration 4), and the partial
  // hours at its edges, summed from the entries themselves. Hour h holds
  // the ends in [h*H, (h+1)*H); it lies inside the window when
  // h*H > from and (h+1)*H - 1 <= to, i.e. from the first hour
  // ceil((from+1)/H) up to, not including, floor((to+1)/H).
  constexpr int64_t kHour = 3'600'000;
  std::string rollup_where = "WHERE TRUE", raw_where;
  std::optional<int64_t> first_hour, end_hour;
  if (q.from) first_hour = FloorDiv(ToUnixMillis(*q.from) + kHour, kHour);  // ceil((from+1)/H)
  if (q.to) end_hour = FloorDiv(ToUnixMillis(*q.to) + 1, kHour);
  if (first_hour && end_hour && *first_hour >= *end_hour) {
    // No whole hour inside: every entry of the window from the table.
    rollup_where = "WHERE FALSE";
    raw_where = "interval_end > " + std::to_string(ToUnixMillis(*q.from)) +
                " AND interval_end <= " + std::to_string(ToUnixMillis(*q.to));
  } else {
    std::vector<std::string> edges;
    if (first_hour) {
      rollup_where += " AND hour >= " + std::to_string(*first_hour);
      edges.push_back("(interval_end > " + std::to_string(ToUnixMillis(*q.from)) + " AND interval_end < " +
                      std::to_string(*first_hour * kHour) + ")");
    }
    if (end_hour) {
      rollup_where += " AND hour < " + std::to_string(*end_hour);
      edges.push_back("(interval_end >= " + std::to_string(*end_hour * kHour) +
                      " AND interval_end <= " + std::to_string(ToUnixMillis(*q.to)) + ")");
    }
    raw_where = edges.empty() ? "FALSE" : edges.size() == 1 ? edges[0] : edges[0] + " OR " + edges[1];
  }
  std::string visible;
  std::vector<std::string> params;
  if (q.visible_projects) {
    visible = VisibleClause(c, "", *q.visible_projects, q.visible_queues, params);
  }
  const std::vector<std::string> visible_params = params;
  params.insert(params.end(), visible_params.begin(), visible_params.end());  // once per branch
  const std::string group = columns + "metric";
  if (by_job) {
    // The hourly rollup has no job: per job, every entry of the window from
    // the ledger itself (whose entries are kept for good).
    std::string where = "TRUE";
    if (q.from) where += " AND interval_end > " + std::to_string(ToUnixMillis(*q.from));
    if (q.to) where += " AND interval_end <= " + std::to_string(ToUnixMillis(*q.to));
    const std::string sql = "SELECT " + raw_columns + "metric, SUM(quantity) FROM ledger WHERE " + where + visible +
                            " GROUP BY " + group + " ORDER BY " + group;
    auto stmt = OrThrow(c.Prepare(sql));
    for (size_t i = 0; i < visible_params.size(); ++i) stmt.Bind(static_cast<int>(i + 1), visible_params[i]);
    std::vector<UsageRow> rows;
    const int n = static_cast<int>(q.group_by.size());
    while (OrThrow(stmt.Step())) {
      std::map<std::string, std::string> key;
      for (int i = 0; i < n; ++i)
        key[q.group_by[i]] =
            q.group_by[i] == "job" || q.group_by[i] == "hour" ? std::to_string(stmt.Int(i)) : stmt.Text(i);
      if (rows.empty() || rows.back().group != key) rows.push_back({key, {}});
      rows.back().metrics[stmt.Text(n)] += stmt.Double(n + 1);
    }
    return rows;
  }
  const std::string sql = "SELECT " + group + ", SUM(quantity) FROM (SELECT " + group +
                          ", quantity FROM ledger_hourly " + rollup_where + visible + " UNION ALL SELECT " +
                          raw_columns + "metric, quantity FROM ledger WHERE (" + raw_where + ")" + visible +
                          ") AS window_rows GROUP BY " + group + " ORDER BY " + group;
  auto stmt = OrThrow(c.Prepare(sql));
  for (size_t i = 0; i < params.size(); ++i) stmt.Bind(static_cast<int>(i + 1), params[i]);
  std::vector<UsageRow> rows;
  const int n = static_cast<int>(q.group_by.size());
  while (OrThrow(stmt.Step())) {
    std::map<std::string, std::string> key;
    for (int i = 0; i < n; ++i)
      key[q.group_by[i]] = q.group_by[i] == "hour" ? std::to_string(stmt.Int(i)) : stmt.Text(i);
    if (rows.empty() || rows.back().group != key) rows.push_back({key, {}});
    rows.back().metrics[stmt.Text(n)] += stmt.Double(n + 1);
  }
  return rows;
}

FairshareUsage LoadFairshareUsage(Connection& c) {
  auto stmt = OrThrow(c.Prepare("SELECT project, \"user\", usage, as_of FROM fairshare_usage"));
  FairshareUsage usage;
  while (OrThrow(stmt.Step())) {
    usage.entries.push_back({stmt.Text(0), stmt.Text(1), stmt.Double(2)});
    usage.as_of = FromUnixMillis(stmt.Int(3));
  }
  return usage;
}

}  // namespace unisched::store::sql
