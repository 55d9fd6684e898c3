// What happened, as the store recorded it: the cluster event log
// (GET /v1/events, filtered to what the caller may see) and the alerts.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "api/call.h"
#include "api/responses.h"
#include "unisched/api/api.h"

namespace unisched::api {

using nlohmann::json;

void Api::ListEvents(Call& call) {
  store::EventFilter filter;
  if (auto kind = call.Query("kind")) filter.kind = *kind;
  if (auto object = call.Query("object")) filter.object = *object;
  filter.since = call.QueryTime("since");
  filter.limit = static_cast<int>(call.QueryInt("limit", filter.limit));
  // Node and alert events are for everyone (like GET /v1/nodes); a job's
  // events for those who may read the job; a sandbox's for those who may use it.
  const auth::Principal& who = *call.principal;
  if (!auth::IsPlatformAdmin(who)) {
    filter.visible_projects = who.projects;
    if (who.role == auth::Role::kQueueAdmin) filter.visible_queues = who.queues;
  }
  json events = json::array();
  // A sandbox's events (its command lines) only for those who may use it.
  std::map<std::string, bool> sandbox_visible;
  auto may_see = [&](const std::string& object) {
    if (auth::IsPlatformAdmin(who) || object.rfind("sandbox/", 0) != 0) return true;
    auto [it, fresh] = sandbox_visible.emplace(object, false);
    if (fresh && ctx_.sandboxes) {
      const std::string id = object.substr(std::string("sandbox/sb-").size());
      auto sandbox = id.empty() || id.find_first_not_of("0123456789") != std::string::npos
                         ? Result<json>(Error::NotFound("no sandbox"))
                         : ctx_.sandboxes->Get(std::stoll(id));
      it->second = sandbox.ok() &&
                   (sandbox->value("user", "") == who.user || auth::AdministersQueue(who, sandbox->value("queue", "")));
    }
    return it->second;
  };
  for (const auto& e : ctx_.store->ListClusterEvents(filter)) {
    if (!may_see(e.object)) continue;
    events.push_back({{"time", FormatRfc3339(e.time)},
                      {"kind", e.kind},
                      {"object", e.object},
                      {"severity", e.severity},
                      {"message", e.message}});
  }
  call.reply(Json(200, {{"events", std::move(events)}}));
}

void Api::ListAlerts(Call& call) {
  std::optional<bool> firing;
  if (auto state = call.Query("state")) firing = *state == "firing";
  json alerts = json::array();
  for (const auto& a : ctx_.store->ListAlerts(firing, 1000)) {
    alerts.push_back({{"name", a.name},
                      {"kind", a.kind},
                      {"object", a.object},
                      {"severity", a.severity},
                      {"message", a.message},
                      {"state", a.resolved_at ? "resolved" : "firing"},
                      {"fired_at", FormatRfc3339(a.fired_at)},
                      {"resolved_at", a.resolved_at ? json(FormatRfc3339(*a.resolved_at)) : json(nullptr)}});
  }
  call.reply(Json(200, {{"alerts", std::move(alerts)}}));
}

}  // namespace unisched::api
