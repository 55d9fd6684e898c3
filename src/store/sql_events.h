#pragma once
// Cluster events, alerts and the audit trail in SQLite
// (unisched/store/events.h). Internal to src/store.

#include <optional>
#include <string>
#include <vector>

#include "store/sql.h"
#include "unisched/store/events.h"

namespace unisched::store::sql {

Status AppendAudit(Connection& c, const AuditRecord& record);
Result<int64_t> PruneAudit(Connection& c, Timestamp cutoff, int64_t max_rows);
Status AppendClusterEvent(Connection& c, const ClusterEvent& event);
Status InsertAlert(Connection& c, const AlertRecord& alert);
Status ResolveAlert(Connection& c, const std::string& name, const std::string& object, Timestamp at);

std::vector<ClusterEvent> ListClusterEvents(Connection& c, const EventFilter& filter);
std::vector<AlertRecord> ListAlerts(Connection& c, std::optional<bool> firing, int limit);
std::vector<AuditRecord> ListAudit(Connection& c, int limit);

}  // namespace unisched::store::sql
