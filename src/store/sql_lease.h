#pragma once
// The leader lease of daemon replicas (unisched/store/lease.h) in SQL, for
// SQLite and PostgreSQL alike: its row, the replicas' directory and the
// cluster-wide secrets. Each runs on the connection it is given (the
// store's lease connection, outside the write queue). Internal to src/store.

#include <chrono>
#include <string>

#include "store/sql.h"
#include "unisched/store/lease.h"

namespace unisched::store::sql {

Result<LeaseState> AcquireOrRenewLease(Connection& conn, const std::string& replica, std::chrono::milliseconds ttl);
Status ReleaseLease(Connection& c, const std::string& replica);
Status AnnounceReplica(Connection& c, const std::string& replica, const std::string& url);
Result<std::string> ReplicaUrl(Connection& c, const std::string& replica);
Result<std::string> ClusterSecret(Connection& c, const std::string& name, const std::string& proposed);

}  // namespace unisched::store::sql
