// The accounting reads (docs/ledger.md): GET /v1/usage, usage grouped and
// priced as JSON or CSV, and GET /v1/usage/reconcile, the ledger checked
// against the job records.

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/call.h"
#include "api/responses.h"
#include "api/usage_figures.h"
#include "unisched/api/api.h"
#include "unisched/api/reconcile.h"
#include "unisched/ledger/ledger.h"

namespace unisched::api {

using nlohmann::json;

std::vector<store::UsageRow> Api::PricedUsage(const store::UsageQuery& query) const {
  std::vector<store::UsageRow> rows;
  const config::Config& config = ctx_.config->Current();
  const auto& pools = config.cluster.pools;
  const bool pool_priced =
      std::any_of(pools.begin(), pools.end(), [](const model::PoolSpec& p) { return !p.prices.empty(); });
  const bool tier_priced = std::any_of(config.storage.tiers.begin(), config.storage.tiers.end(),
                                       [](const config::StorageTier& t) { return t.price_per_gb_hour > 0; });
  if (!pool_priced && !tier_priced) {
    rows = ctx_.store->QueryUsage(query);
  } else {
    // Cost = sum over pools of quantity / 3600 x the pool's price per hour of
    // the metric, plus storage_gb_hours x its tier's price per GB-hour:
    // query per pool (and tier), price, then fold into the requested groups.
    store::UsageQuery priced = query;
    auto group_also = [&priced](const char* key) {
      if (std::find(priced.group_by.begin(), priced.group_by.end(), key) == priced.group_by.end()) {
        priced.group_by.push_back(key);
      }
    };
    if (pool_priced) group_also("pool");
    if (tier_priced) group_also("tier");
    std::map<std::map<std::string, std::string>, store::UsageRow> folded;
    for (const auto& row : ctx_.store->QueryUsage(priced)) {
      double cost = pool_priced ? CostAtPrices(row.metrics, config.cluster.FindPool(row.group.at("pool"))) : 0;
      if (auto gb_hours = row.metrics.find(ledger::kStorageGbHours); tier_priced && gb_hours != row.metrics.end()) {
        cost += gb_hours->second * config.storage.TierPrice(row.group.at("tier"));
      }
      std::map<std::string, std::string> key;
      for (const auto& g : query.group_by) key[g] = row.group.at(g);
      store::UsageRow& out = folded[key];
      out.group = key;
      for (const auto& [metric, quantity] : row.metrics) out.metrics[metric] += quantity;
      out.metrics["cost"] += cost;
    }
    for (auto& [key, row] : folded) rows.push_back(std::move(row));
  }
  for (auto& row : rows) {
    AddDerivedMetrics(row.metrics);
    // The store's hour number (Unix ms / 3,600,000) as the hour's start.
    if (auto hour = row.group.find("hour"); hour != row.group.end()) {
      hour->second = FormatRfc3339(FromUnixMillis(std::stoll(hour->second) * 3'600'000));
    }
  }
  return rows;
}

// Usage seen as `who` may: their projects' (and a queue-admin's queues'); all for platform admins.
void ScopeUsageQuery(const auth::Principal& who, store::UsageQuery& query) {
  if (!auth::IsPlatformAdmin(who)) {
    query.visible_projects = who.projects;
    if (who.role == auth::Role::kQueueAdmin) query.visible_queues = who.queues;
  }
}

void Api::Usage(Call& call) {
  store::UsageQuery query;
  query.from = call.QueryTime("from");
  query.to = call.QueryTime("to");
  if (auto groups = call.Query("group_by")) {
    std::string rest = *groups;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string name = rest.substr(0, comma);
      rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
      if (std::find(query.group_by.begin(), query.group_by.end(), name) == query.group_by.end()) {
        query.group_by.push_back(name);
      }
    }
  }
  const std::string format = call.Query("format").value_or("json");
  ScopeUsageQuery(*call.principal, query);
  const std::vector<store::UsageRow> rows = PricedUsage(query);
  if (format == "csv") {
    // Columns: the groups, then every metric any row has (absent: empty).
    std::set<std::string> metric_names;
    for (const auto& row : rows) {
      for (const auto& [metric, value] : row.metrics) metric_names.insert(metric);
    }
    std::string text;
    auto add_cell = [&text](bool first, const std::string& cell) { text += (first ? "" : ",") + cell; };
    bool first = true;
    for (const auto& g : query.group_by) add_cell(std::exchange(first, false), g);
    for (const auto& m : metric_names) add_cell(std::exchange(first, false), m);
    text += "\n";
    for (const auto& row : rows) {
      first = true;
      for (const auto& g : query.group_by) add_cell(std::exchange(first, false), row.group.at(g));
      for (const auto& m : metric_names) {
        auto it = row.metrics.find(m);
        add_cell(std::exchange(first, false), it == row.metrics.end() ? "" : json(it->second).dump());
      }
      text += "\n";
    }
    HttpResponse r;
    r.content_type = "text/csv; charset=utf-8";
    r.body = std::move(text);
    call.reply(std::move(r));
    return;
  }
  json out = json::array();
  for (const auto& row : rows) {
    json o = json::object();
    for (const auto& g : query.group_by) o[g] = row.group.at(g);
    for (const auto& [metric, value] : row.metrics) o[metric] = value;
    out.push_back(std::move(o));
  }
  call.reply(Json(200, {{"rows", std::move(out)}}));
}

void Api::Reconcile(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "reconciliation is for platform-admins"));
    return;
  }
  const ledger::Reconciliation report = ReconcileLedger(*ctx_.store, ctx_.config->Current().cluster);
  // What it found is the latest word on the ledger, for the gauges too.
  ctx_.metrics->SetLedgerReconciliation(report.missing, report.duplicated, report.mismatched,
                                        report.unverifiable_attempts,
                                        static_cast<double>(ToUnixMillis(ctx_.clock->Now())) / 1000.0);
  json details = json::array();
  for (const auto& d : report.details) {
    details.push_back({{"kind", d.kind},
                       {"job", std::to_string(d.job)},
                       {"attempt", d.attempt},
                       {"metric", d.metric},
                       {"detail", d.detail},
                       {"node", d.node},
                       {"expected", d.expected},
                       {"recorded", d.recorded}});
  }
  call.reply(Json(200, {{"missing", report.missing},
                        {"duplicated", report.duplicated},
                        {"mismatched", report.mismatched},
                        {"attempts_checked", report.attempts_checked},
                        {"unverifiable_attempts", report.unverifiable_attempts},
                        {"details", std::move(details)}}));
}

}  // namespace unisched::api

namespace unisched::api {

void Api::RunLifecycle(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "the storage lifecycle is run by platform-admins"));
    return;
  }
  if (!ctx_.run_lifecycle) {
    call.reply(ErrorResponse(503, "unavailable", "this daemon does not run the storage lifecycle"));
    return;
  }
  const bool dry_run = call.Query("dry_run") == "true";
  auto done = ctx_.run_lifecycle(dry_run, call.principal->user);
  call.reply(done.ok() ? Json(200, *done) : FromError(done.error()));
}

}  // namespace unisched::api
