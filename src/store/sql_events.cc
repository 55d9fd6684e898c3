#include "store/sql_events.h"

#include <algorithm>

#include "store/sql_common.h"

namespace unisched::store::sql {

Status AppendAudit(Connection& c, const AuditRecord& record) {
  auto stmt = c.Prepare("INSERT INTO audit(time, actor, action, target, result) VALUES(?, ?, ?, ?, ?)");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, ToUnixMillis(record.time))
      .Bind(2, record.actor)
      .Bind(3, record.action)
      .Bind(4, record.target)
      .Bind(5, record.result);
  return stmt->Run();
}

Result<int64_t> PruneAudit(Connection& c, Timestamp cutoff, int64_t max_rows) {
  // Rows are appended in time order (ids grow with time), so both bounds
  // cut the table at an id: the scan for the first recent row reads only
  // the rows about to go, and the size bound is arithmetic on the rowid.
  auto stmt = c.Prepare(
      "DELETE FROM audit WHERE id < COALESCE((SELECT id FROM audit WHERE time >= ? ORDER BY id LIMIT 1), "
      "(SELECT MAX(id) + 1 FROM audit)) OR id <= (SELECT MAX(id) FROM audit) - ?");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, ToUnixMillis(cutoff)).Bind(2, max_rows);
  if (Status s = stmt->Run(); !s.ok()) return s.error();
  return c.ChangedRows();
}

Status AppendClusterEvent(Connection& c, const ClusterEvent& e) {
  auto stmt = c.Prepare("INSERT INTO events(time, kind, object, severity, message) VALUES(?, ?, ?, ?, ?)");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, ToUnixMillis(e.time)).Bind(2, e.kind).Bind(3, e.object).Bind(4, e.severity).Bind(5, e.message);
  return stmt->Run();
}

Status InsertAlert(Connection& c, const AlertRecord& a) {
  auto stmt = c.Prepare(
      "INSERT INTO alerts(name, kind, object, severity, message, fired_at, resolved_at) VALUES(?, ?, ?, ?, ?, ?, "
      "NULL)");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, a.name)
      .Bind(2, a.kind)
      .Bind(3, a.object)
      .Bind(4, a.severity)
      .Bind(5, a.message)
      .Bind(6, ToUnixMillis(a.fired_at));
  return stmt->Run();
}

Status ResolveAlert(Connection& c, const std::string& name, const std::string& object, Timestamp at) {
  auto stmt = c.Prepare("UPDATE alerts SET resolved_at = ? WHERE name = ? AND object = ? AND resolved_at IS NULL");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, ToUnixMillis(at)).Bind(2, name).Bind(3, object);
  return stmt->Run();
}

std::vector<ClusterEvent> ListClusterEvents(Connection& c, const EventFilter& f) {
  // Jobs' events (object "job/ID", severity info; warning for a ledger
  // discrepancy) and the cluster's, each side filtered, merged by time.
  std::string job_where = "WHERE TRUE", cluster_where = "WHERE TRUE";
  if (f.since) {
    const std::string since = std::to_string(ToUnixMillis(*f.since));
    job_where += " AND e.time >= " + since;
    cluster_where += " AND time >= " + since;
  }
  std::vector<std::string> job_params, cluster_params;
  if (f.kind) {
    job_where += " AND e.kind = ?";
    job_params.push_back(*f.kind);
    cluster_where += " AND kind = ?";
    cluster_params.push_back(*f.kind);
  }
  if (f.object) {
    const bool prefix = !f.object->empty() && f.object->back() == '/';
    if (prefix) {
      cluster_where += " AND substr(object, 1, " + std::to_string(f.object->size()) + ") = ?";
      cluster_params.push_back(*f.object);
      if (*f.object != "job/") job_where += " AND FALSE";
    } else {
      cluster_where += " AND object = ?";
      cluster_params.push_back(*f.object);
      model::JobId id = 0;
      if (f.object->rfind("job/", 0) == 0) {
        try {
          id = std::stoll(f.object->substr(4));
        } catch (const std::exception&) {
          id = 0;
        }
      }
      job_where += " AND e.job_id = " + std::to_string(id);
    }
  }
  std::string job_from = "job_events e";
  if (f.visible_projects) {
    job_from += " JOIN jobs j ON j.id = e.job_id";
    job_where += VisibleClause(c, "j.", *f.visible_projects, f.visible_queues, job_params);
  }
  std::vector<std::string> params = job_params;
  params.insert(params.end(), cluster_params.begin(), cluster_params.end());
  const std::string sql =
      "SELECT time, kind, object, severity, message FROM ("
      "SELECT e.time AS time, e.id AS seq, 0 AS src, e.kind AS kind, 'job/' || e.job_id AS object, "
      "CASE WHEN e.kind = 'ledger_discrepancy' THEN 'warning' ELSE 'info' END AS severity, e.message AS message "
      "FROM " +
      job_from + " " + job_where + " UNION ALL SELECT time, id, 1, kind, object, severity, message FROM events " +
      cluster_where + ") AS merged ORDER BY time DESC, src DESC, seq DESC LIMIT " +
      std::to_string(std::max(f.limit, 0));
  auto stmt = OrThrow(c.Prepare(sql));
  for (size_t i = 0; i < params.size(); ++i) stmt.Bind(static_cast<int>(i + 1), params[i]);
  std::vector<ClusterEvent> events;
  while (OrThrow(stmt.Step())) {
    events.push_back({FromUnixMillis(stmt.Int(0)), stmt.Text(1), stmt.Text(2), stmt.Text(3), stmt.Text(4)});
  }
  std::reverse(events.begin(), events.end());
  return events;
}

std::vector<AlertRecord> ListAlerts(Connection& c, std::optional<bool> firing, int limit) {
  std::string where;
  if (firing) where = *firing ? " WHERE resolved_at IS NULL" : " WHERE resolved_at IS NOT NULL";
  auto stmt = OrThrow(c.Prepare("SELECT id, name, kind, object, severity, message, fired_at, resolved_at FROM alerts" +
                                where + " ORDER BY id DESC LIMIT " + std::to_string(std::max(limit, 0))));
  std::vector<AlertRecord> alerts;
  while (OrThrow(stmt.Step())) {
    AlertRecord a;
    a.id = stmt.Int(0);
    a.name = stmt.Text(1);
    a.kind = stmt.Text(2);
    a.object = stmt.Text(3);
    a.severity = stmt.Text(4);
    a.message = stmt.Text(5);
    a.fired_at = FromUnixMillis(stmt.Int(6));
    if (!stmt.IsNull(7)) a.resolved_at = FromUnixMillis(stmt.Int(7));
    alerts.push_back(std::move(a));
  }
  return alerts;
}

std::vector<AuditRecord> ListAudit(Connection& c, int limit) {
  auto stmt = OrThrow(c.Prepare("SELECT time, actor, action, target, result FROM audit ORDER BY id DESC LIMIT ?"));
  stmt.Bind(1, int64_t{std::max(limit, 0)});
  std::vector<AuditRecord> records;
  while (OrThrow(stmt.Step())) {
    records.push_back({FromUnixMillis(stmt.Int(0)), stmt.Text(1), stmt.Text(2), stmt.Text(3), stmt.Text(4)});
  }
  return records;
}

}  // namespace unisched::store::sql
