#include "daemon/alert_book.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "unisched/model/words.h"

namespace unisched::daemon {

using model::Cat;

void AlertBook::Load(std::vector<store::AlertRecord> firing) {
  for (auto& alert : firing) firing_[{alert.name, alert.object}] = std::move(alert);
}

void AlertBook::Notify(const store::AlertRecord& a, const char* state) const {
  if (!notifier_) return;
  nlohmann::json payload = {
      {"alert", a.name},
      {"kind", a.kind},
      {"state", state},
      {"severity", a.severity},
      {"object", a.object},
      {"message", a.message},
      {"fired_at", FormatRfc3339(a.fired_at)},
      {"resolved_at", a.resolved_at ? nlohmann::json(FormatRfc3339(*a.resolved_at)) : nlohmann::json(nullptr)}};
  notifier_->Send(std::move(payload));
}

void AlertBook::Evaluate(Batch& batch, const AlertInputs& inputs, Timestamp now) {
  const AlertChanges changes = DiffAlerts(EvaluateAlertRules(current_config().alerts.rules, inputs, now), firing_, now);
  for (const store::AlertRecord& a : changes.fired) {
    batch.writes.push_back([a, event = store::ClusterEvent{now, "alert_firing", Cat("alert/", a.name, "/", a.object),
                                                           a.severity, a.message}](store::Transaction& t) -> Status {
      if (Status s = t.InsertAlert(a); !s) return s;
      return t.AppendClusterEvent(event);
    });
    batch.after_commit.push_back([this, a] {
      spdlog::warn("alert {} firing ({}): {}", a.name, a.severity, a.message);
      Notify(a, "firing");
    });
  }
  for (const store::AlertRecord& a : changes.resolved) {
    batch.writes.push_back(
        [a, event = store::ClusterEvent{now, "alert_resolved", Cat("alert/", a.name, "/", a.object), "info",
                                        "resolved: " + a.message}](store::Transaction& t) -> Status {
          if (Status s = t.ResolveAlert(a.name, a.object, *a.resolved_at); !s) return s;
          return t.AppendClusterEvent(event);
        });
    batch.after_commit.push_back([this, a] {
      spdlog::info("alert {} resolved: {}", a.name, a.message);
      Notify(a, "resolved");
    });
  }
  const bool changed = !changes.fired.empty() || !changes.resolved.empty();
  if (changed || !published_) {
    std::map<std::string, int> by_rule;
    for (const auto& rule : current_config().alerts.rules) by_rule[rule.name] = 0;
    for (const auto& [key, alert] : firing_) ++by_rule[key.first];
    for (const auto& [name, count] : by_rule) metrics_.SetAlertsFiring(name, count);
    published_ = true;
  }
}

}  // namespace unisched::daemon
