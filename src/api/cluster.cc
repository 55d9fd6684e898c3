// The cluster endpoints: pools, queues and nodes as configured and as the
// last published view has them, and draining and resuming nodes.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "api/body.h"
#include "api/call.h"
#include "api/responses.h"
#include "unisched/api/api.h"

namespace unisched::api {

using nlohmann::json;

namespace {

json LabelsJson(const model::Labels& labels) {
  json out = json::object();
  for (const auto& [k, v] : labels) out[k] = v;
  return out;
}

json NodeJson(const ClusterView::Node& node) {
  const auto& u = node.usage;
  json gpus = json::array();
  json busy = json::array();
  for (size_t i = 0; i < u.spec.gpus.size(); ++i) {
    const auto& g = u.spec.gpus[i];
    gpus.push_back({{"index", g.index}, {"model", g.model}, {"memory_gb", g.memory_gb}});
    if (u.gpu_busy.Busy(i)) busy.push_back(g.index);
  }
  return {{"name", u.spec.name},
          {"pool", u.spec.pool},
          {"labels", LabelsJson(u.spec.labels)},
          {"state", std::string(model::ToString(u.state))},
          {"reason", node.reason},
          {"resources", {{"cpus", u.spec.cpus}, {"memory_mb", u.spec.memory_mb}, {"gpus", gpus}}},
          {"allocated", {{"cpus", u.cpus_used}, {"memory_mb", u.memory_used_mb}, {"gpus", busy}}},
          {"last_heartbeat", node.last_heartbeat ? json(FormatRfc3339(*node.last_heartbeat)) : json(nullptr)},
          {"agent", u.spec.agent}};
}

}  // namespace

void Api::ListPools(Call& call) {
  auto view = ctx_.control->View();
  json pools = json::array();
  for (const auto& pool : ctx_.config->Current().cluster.pools) {
    int cpus = 0, gpus = 0, cpus_used = 0, gpus_used = 0;
    int64_t memory = 0, memory_used = 0;
    for (const auto& node : view->nodes) {
      const auto& u = node.usage;
      if (u.spec.pool != pool.name) continue;
      cpus += u.spec.cpus;
      memory += u.spec.memory_mb;
      gpus += static_cast<int>(u.spec.gpus.size());
      cpus_used += u.cpus_used;
      memory_used += u.memory_used_mb;
      gpus_used += u.gpu_busy.CountBelow(u.spec.gpus.size());  // the spec's devices, as FreeGpus counts
    }
    pools.push_back({{"name", pool.name},
                     {"kind", std::string(model::ToString(pool.kind))},
                     {"labels", LabelsJson(pool.labels)},
                     {"sandbox", pool.sandbox},
                     {"nodes", pool.nodes},
                     {"capacity", {{"cpus", cpus}, {"memory_mb", memory}, {"gpus", gpus}}},
                     {"allocated", {{"cpus", cpus_used}, {"memory_mb", memory_used}, {"gpus", gpus_used}}}});
  }
  call.reply(Json(200, {{"pools", std::move(pools)}}));
}

void Api::ListQueues(Call& call) {
  auto view = ctx_.control->View();
  json queues = json::array();
  for (const auto& q : ctx_.config->Current().cluster.queues) {
    json policy = {{"type", q.policy.type}, {"preemptible", q.policy.preemptible}};
    auto opt = [&policy](const char* key, const auto& value) {
      if (value) policy[key] = *value;
    };
    opt("max_walltime_hours", q.policy.max_walltime_hours);
    opt("default_walltime_hours", q.policy.default_walltime_hours);
    opt("default_memory_mb_per_cpu", q.policy.default_memory_mb_per_cpu);
    opt("gpu_quota_per_project", q.policy.gpu_quota_per_project);
    opt("scale_in_idle_seconds", q.policy.scale_in_idle_seconds);
    opt("max_concurrency", q.policy.max_concurrency);
    json kinds = json::array();
    for (auto k : q.workload_kinds) kinds.push_back(std::string(model::ToString(k)));
    auto count = [](const std::map<std::string, int>& m, const std::string& k) {
      auto it = m.find(k);
      return it == m.end() ? 0 : it->second;
    };
    queues.push_back({{"name", q.name},
                      {"pool", q.pool},
                      {"policy", std::move(policy)},
                      {"workload_kinds", std::move(kinds)},
                      {"priority_tier", q.priority_tier},
                      {"pending", count(view->pending_by_queue, q.name)},
                      {"running", count(view->running_by_queue, q.name)}});
  }
  call.reply(Json(200, {{"queues", std::move(queues)}}));
}

void Api::ListNodes(Call& call) {
  auto view = ctx_.control->View();
  json nodes = json::array();
  for (const auto& node : view->nodes) nodes.push_back(NodeJson(node));
  call.reply(Json(200, {{"nodes", std::move(nodes)}}));
}

void Api::DrainNode(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may drain nodes"));
    return;
  }
  auto body = body::ParseObject(call.request.body, R"({"reason": "disk replacement"})", /*empty_ok=*/true);
  std::string reason;
  std::optional<Error> invalid = body.ok() ? body::CheckKeys(*body, "", {"reason"}) : body.error();
  if (!invalid) invalid = body::ReadString(*body, "reason", "reason", 1024, reason);
  if (invalid) {
    call.reply(FromError(*invalid));
    return;
  }
  auto reply = call.reply;
  ctx_.control->SetNodeState(call.Param("name"), true, reason, call.principal->user,
                             [reply](Result<ClusterView::Node> node) {
                               reply(node.ok() ? Json(200, NodeJson(*node)) : FromError(node.error()));
                             });
}

void Api::ResumeNode(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may resume nodes"));
    return;
  }
  auto reply = call.reply;
  ctx_.control->SetNodeState(call.Param("name"), false, "", call.principal->user,
                             [reply](Result<ClusterView::Node> node) {
                               reply(node.ok() ? Json(200, NodeJson(*node)) : FromError(node.error()));
                             });
}

}  // namespace unisched::api
