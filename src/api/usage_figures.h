#pragma once
// The figures a usage row and a job's `usage` derive from the ledger's
// metrics (docs/ledger.md): the cost at a pool's prices and the
// instance-minutes.

#include <cmath>
#include <map>
#include <string>

#include "unisched/auth/auth.h"
#include "unisched/ledger/ledger.h"
#include "unisched/model/cluster.h"
#include "unisched/store/accounting.h"

namespace unisched::api {

// Sum over the metrics of quantity / 3600 x the pool's price per hour of the
// metric; 0 without a pool or prices.
inline double CostAtPrices(const std::map<std::string, double>& metrics, const model::PoolSpec* pool) {
  double cost = 0;
  for (const auto& [metric, quantity] : metrics) {
    if (!pool) continue;
    auto price = pool->prices.find(metric);
    if (price != pool->prices.end()) cost += quantity / 3600.0 * price->second;
  }
  return cost;
}

// The columns made from others. Sandbox and elastic work is reported in
// instance-minutes as well: the instance-seconds / 60, rounded to the
// nearest hundredth of a minute (0.6 s; halves away from zero). Rounded
// once, from the exact total, so rounding never accumulates over entries.
// network_bytes (the contract's) is what staging moved both ways.
inline void AddDerivedMetrics(std::map<std::string, double>& metrics) {
  if (auto it = metrics.find(ledger::kInstanceSeconds); it != metrics.end()) {
    metrics["instance_minutes"] = std::round(it->second / 60.0 * 100.0) / 100.0;
  }
  const auto in = metrics.find(ledger::kNetworkBytesIn);
  const auto out = metrics.find(ledger::kNetworkBytesOut);
  if (in != metrics.end() || out != metrics.end()) {
    metrics["network_bytes"] = (in != metrics.end() ? in->second : 0) + (out != metrics.end() ? out->second : 0);
  }
}

// Limits `query` to the usage `who` may read: their projects' (and a
// queue-admin's queues'); everything for platform admins (usage.cc).
void ScopeUsageQuery(const auth::Principal& who, store::UsageQuery& query);

}  // namespace unisched::api
