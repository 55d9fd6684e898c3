// The reports (issue 22): GET /v1/reports/pending (docs/policy/pending-reasons.md,
// "Why jobs wait"): the seed's troubleshooting table for "job pending for a
// long time" turned into an answer: waiting jobs grouped by the first reason
// the last cycle gave them, each group's longest wait, and the longest waits.
// GET /v1/reports/cost (docs/ledger.md, "Cost report"): unit costs per
// workload kind and the top spenders. GET /v1/reports/capacity (docs/ledger.md,
// "Capacity report"): utilisation per pool and hour, headroom, idle nodes.

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/call.h"
#include "api/responses.h"
#include "api/usage_figures.h"
#include "unisched/api/api.h"
#include "unisched/ledger/ledger.h"

namespace unisched::api {

using nlohmann::json;

void Api::PendingReport(Call& call) {
  store::JobFilter visibility;
  const auth::Principal& who = *call.principal;
  if (!auth::IsPlatformAdmin(who)) {
    visibility.visible_projects = who.projects;
    if (who.role == auth::Role::kQueueAdmin) visibility.visible_queues = who.queues;
  }
  const auto limit = static_cast<size_t>(call.QueryInt("limit", 20));
  const std::vector<store::WaitingJob> waiting = ctx_.store->ListWaitingJobs(visibility);
  const auto view = ctx_.control->View();
  const Timestamp now = ctx_.clock->Now();

  struct Group {
    int count = 0;
    std::map<std::string, int> by_pool;
    const store::WaitingJob* oldest = nullptr;  // the list is longest waiting first
    std::string example;                        // the oldest one's message
  };
  std::map<std::string, Group> groups;
  json longest = json::array();
  for (const store::WaitingJob& job : waiting) {
    std::string code = "None", message = "not yet seen by a scheduling cycle";
    if (job.state == model::JobState::kHeld) {
      code = "Held";
      message = "held; release it to let it be scheduled";
    } else if (auto it = view->pending->find(job.id); it != view->pending->end()) {
      const auto reasons = it->second.Reasons();
      if (!reasons.empty()) {
        code = reasons.front().code;
        message = reasons.front().message;
      } else if (it->second.jobs_ahead > 0) {
        code = "Priority";
        message = std::to_string(it->second.jobs_ahead) + " jobs ahead in " + job.pool;
      }
    }
    Group& g = groups[code];
    ++g.count;
    ++g.by_pool[job.pool];
    if (!g.oldest) {
      g.oldest = &job;
      g.example = message;
    }
    const int64_t waited = std::chrono::duration_cast<std::chrono::seconds>(now - job.submitted_at).count();
    if (longest.size() < limit) {
      longest.push_back({{"id", std::to_string(job.id)},
                         {"name", job.name},
                         {"user", job.user},
                         {"project", job.project},
                         {"queue", job.queue},
                         {"pool", job.pool},
                         {"state", std::string(model::ToString(job.state))},
                         {"submitted_at", FormatRfc3339(job.submitted_at)},
                         {"waiting_seconds", std::max<int64_t>(waited, 0)},
                         {"reason", {{"code", code}, {"message", message}}}});
    }
  }
  json by_reason = json::array();
  for (const auto& [code, g] : groups) {
    const int64_t waited = std::chrono::duration_cast<std::chrono::seconds>(now - g.oldest->submitted_at).count();
    by_reason.push_back({{"code", code},
                         {"count", g.count},
                         {"pools", g.by_pool},
                         {"longest_wait_seconds", std::max<int64_t>(waited, 0)},
                         {"longest_waiting_job", std::to_string(g.oldest->id)},
                         {"example", g.example}});
  }
  // The largest groups first: what holds most work back.
  std::stable_sort(by_reason.begin(), by_reason.end(),
                   [](const json& a, const json& b) { return a["count"].get<int>() > b["count"].get<int>(); });
  call.reply(Json(200, {{"generated_at", FormatRfc3339(now)},
                        {"total", waiting.size()},
                        {"by_reason", std::move(by_reason)},
                        {"longest", std::move(longest)}}));
}

namespace {

// A usage row's total of `metric`; 0 where it has none.
double Metric(const store::UsageRow& row, const std::string& metric) {
  auto it = row.metrics.find(metric);
  return it == row.metrics.end() ? 0.0 : it->second;
}

}  // namespace

// GET /v1/reports/cost (docs/ledger.md, "Cost report"): what each kind of
// workload costs per unit, from the ledger and the pools' prices, over a
// window, and who spends most. Scoped as GET /v1/usage.
void Api::CostReport(Call& call) {
  store::UsageQuery query;
  query.from = call.QueryTime("from");
  query.to = call.QueryTime("to");
  ScopeUsageQuery(*call.principal, query);
  const auto top = static_cast<size_t>(call.QueryInt("top", 10));
  // Per job (one row each, priced at its pool): the kinds' totals and
  // their job counts.
  struct Kind {
    int64_t jobs = 0;
    double cost = 0, cpu_core_seconds = 0, gpu_seconds = 0, instance_seconds = 0;
  };
  std::map<std::string, Kind> kinds;
  query.group_by = {"workload_kind", "job"};
  double total = 0;
  for (const store::UsageRow& row : PricedUsage(query)) {
    Kind& k = kinds[row.group.at("workload_kind")];
    ++k.jobs;
    k.cost += Metric(row, "cost");
    k.cpu_core_seconds += Metric(row, ledger::kCpuCoreSeconds);
    k.gpu_seconds += Metric(row, ledger::kGpuSeconds);
    k.instance_seconds += Metric(row, ledger::kInstanceSeconds);
    total += Metric(row, "cost");
  }
  // cost / units, null where the kind used none of that unit.
  auto per = [](double cost, double units) { return units > 0 ? json(cost / units) : json(nullptr); };
  json by_kind = json::array();
  for (const auto& [name, k] : kinds) {
    by_kind.push_back({{"workload_kind", name},
                       {"jobs", k.jobs},
                       {"cost", k.cost},
                       {"cpu_hours", k.cpu_core_seconds / 3600.0},
                       {"gpu_hours", k.gpu_seconds / 3600.0},
                       {"instance_minutes", k.instance_seconds / 60.0},
                       {"cost_per_job", per(k.cost, static_cast<double>(k.jobs))},
                       {"cost_per_cpu_hour", per(k.cost, k.cpu_core_seconds / 3600.0)},
                       {"cost_per_gpu_hour", per(k.cost, k.gpu_seconds / 3600.0)},
                       {"cost_per_instance_minute", per(k.cost, k.instance_seconds / 60.0)}});
  }
  // The largest spenders first, with their share of the total.
  auto spenders = [&](const std::string& key) {
    query.group_by = {key};
    std::vector<store::UsageRow> rows = PricedUsage(query);
    std::stable_sort(rows.begin(), rows.end(), [&](const store::UsageRow& a, const store::UsageRow& b) {
      return Metric(a, "cost") > Metric(b, "cost");
    });
    json out = json::array();
    for (size_t i = 0; i < rows.size() && i < top; ++i) {
      const double cost = Metric(rows[i], "cost");
      out.push_back({{key, rows[i].group.at(key)}, {"cost", cost}, {"share", total > 0 ? cost / total : 0.0}});
    }
    return out;
  };
  json report = {{"generated_at", FormatRfc3339(ctx_.clock->Now())},
                 {"from", query.from ? json(FormatRfc3339(*query.from)) : json(nullptr)},
                 {"to", query.to ? json(FormatRfc3339(*query.to)) : json(nullptr)},
                 {"total_cost", total},
                 {"by_workload_kind", std::move(by_kind)}};
  report["top_projects"] = spenders("project");
  report["top_users"] = spenders("user");
  call.reply(Json(200, std::move(report)));
}

// GET /v1/reports/capacity (docs/ledger.md, "Capacity report"): each
// pool's utilisation per hour over a window, from the ledger's hourly sums
// against the pool's capacity in the config; its peak and average; the
// headroom the peak leaves against a target; and the nodes idle now, since
// when. Scoped as /v1/usage: a user's curves are their projects' share.
void Api::CapacityReport(Call& call) {
  const Timestamp now = ctx_.clock->Now();
  store::UsageQuery query;
  query.to = call.QueryTime("to").value_or(now);
  query.from = call.QueryTime("from").value_or(*query.to - std::chrono::hours(24 * 7));
  if (*query.from >= *query.to) {
    call.reply(FromError(Error::Unprocessable("invalid_value", "from must be before to", "from")));
    return;
  }
  const int64_t target = call.QueryInt("target_headroom_percent", 25);
  ScopeUsageQuery(*call.principal, query);
  query.group_by = {"pool", "hour"};
  // Allocated core- and GPU-seconds per (pool, hour start).
  std::map<std::string, std::map<std::string, std::pair<double, double>>> used;
  for (const store::UsageRow& row : PricedUsage(query)) {
    auto& cell = used[row.group.at("pool")][row.group.at("hour")];
    cell.first += Metric(row, ledger::kCpuCoreSeconds);
    cell.second += Metric(row, ledger::kGpuSeconds);
  }
  const double window_seconds = std::chrono::duration<double>(*query.to - *query.from).count();
  const config::Config& config = ctx_.config->Current();
  // The ratio between pools (S14), in nodes: each pool's share of the
  // platform's nodes, of its busy nodes (average utilisation x nodes: the
  // nodes its work kept busy over the window), and the configured target.
  double all_nodes = 0, all_busy = 0;
  std::map<std::string, double> busy_nodes;
  json pools = json::array();
  for (const model::PoolSpec& pool : config.cluster.pools) {
    int64_t cpus = 0, gpus = 0;
    for (const std::string& name : pool.nodes) {
      if (const model::NodeSpec* node = config.cluster.FindNode(name)) {
        cpus += node->cpus;
        gpus += static_cast<int64_t>(node->gpus.size());
      }
    }
    // Utilisation of an hour: what was allocated in it over what the pool
    // could have given (capacity x 3600 s). The binding resource is the
    // GPUs of a pool that has them, else the CPUs.
    const bool by_gpu = gpus > 0;
    json hours = json::array();
    double peak = 0, total_cpu = 0, total_gpu = 0;
    for (const auto& [hour, cell] : used[pool.name]) {
      const double cpu = cpus > 0 ? cell.first / (static_cast<double>(cpus) * 3600.0) : 0.0;
      const double gpu = gpus > 0 ? cell.second / (static_cast<double>(gpus) * 3600.0) : 0.0;
      total_cpu += cell.first;
      total_gpu += cell.second;
      peak = std::max(peak, by_gpu ? gpu : cpu);
      hours.push_back(
          {{"hour", hour}, {"cpu_utilisation", cpu}, {"gpu_utilisation", by_gpu ? json(gpu) : json(nullptr)}});
    }
    const double capacity = static_cast<double>(by_gpu ? gpus : cpus) * window_seconds;
    const double average = capacity > 0 ? (by_gpu ? total_gpu : total_cpu) / capacity : 0.0;
    const double headroom = 1.0 - peak;
    json idle = json::array();
    for (const auto& node : ctx_.control->View()->nodes) {
      if (node.usage.spec.pool != pool.name || !node.idle_since || node.usage.state != model::NodeState::kUp) continue;
      idle.push_back(
          {{"node", node.usage.spec.name},
           {"idle_since", FormatRfc3339(*node.idle_since)},
           {"idle_seconds",
            std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::seconds>(now - *node.idle_since).count())}});
    }
    busy_nodes[pool.name] = average * static_cast<double>(pool.nodes.size());
    all_nodes += static_cast<double>(pool.nodes.size());
    all_busy += busy_nodes[pool.name];
    pools.push_back({{"pool", pool.name},
                     {"nodes", pool.nodes.size()},
                     {"cpus", cpus},
                     {"gpus", gpus},
                     {"resource", by_gpu ? "gpu" : "cpu"},
                     {"peak_utilisation", peak},
                     {"average_utilisation", average},
                     {"headroom", headroom},
                     {"meets_target", headroom * 100.0 >= static_cast<double>(target)},
                     {"hours", std::move(hours)},
                     {"idle_nodes", std::move(idle)}});
  }
  for (json& p : pools) {
    const model::PoolSpec* pool = config.cluster.FindPool(p["pool"].get<std::string>());
    const double nodes = p["nodes"].get<double>();
    p["share_of_nodes_percent"] = all_nodes > 0 ? 100.0 * nodes / all_nodes : 0.0;
    p["share_of_busy_nodes_percent"] = all_busy > 0 ? 100.0 * busy_nodes[pool->name] / all_busy : 0.0;
    p["target_share_percent"] = pool->target_share_percent > 0 ? json(pool->target_share_percent) : json(nullptr);
  }
  call.reply(Json(200, {{"generated_at", FormatRfc3339(now)},
                        {"from", FormatRfc3339(*query.from)},
                        {"to", FormatRfc3339(*query.to)},
                        {"target_headroom_percent", target},
                        {"pools", std::move(pools)}}));
}

}  // namespace unisched::api
