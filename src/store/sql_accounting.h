#pragma once
// The ledger, its usage queries and fairshare usage in SQLite
// (unisched/store/accounting.h). Internal to src/store.

#include <map>
#include <utility>
#include <vector>

#include "store/sql.h"
#include "unisched/store/accounting.h"

namespace unisched::store::sql {

Status AppendLedger(Connection& c, const LedgerEntry& entry);
Status SaveFairshareUsage(Connection& c, const FairshareUsage& usage);

// Every attempt's sums; `only`: just this (job, attempt).
std::map<std::pair<model::JobId, int>, LedgerCharged> LedgerSums(Connection& c,
                                                                 std::optional<std::pair<model::JobId, int>> only);
std::vector<UsageRow> QueryUsage(Connection& c, const UsageQuery& query);
FairshareUsage LoadFairshareUsage(Connection& c);

}  // namespace unisched::store::sql
