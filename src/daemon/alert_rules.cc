// The alert rules as pure functions (alert_rules.h, docs/alerts.md).

#include "daemon/alert_rules.h"

#include <chrono>

#include "unisched/model/words.h"

namespace unisched::daemon {
namespace {

using model::Cat;

const std::string& ReasonOf(const AlertInputs& in, const std::string& node) {
  static const std::string kNone;
  auto it = in.node_reasons->find(node);
  return it == in.node_reasons->end() ? kNone : it->second;
}

}  // namespace

AlertConditions EvaluateAlertRules(const std::vector<config::AlertRule>& rules, const AlertInputs& in, Timestamp now) {
  AlertConditions holds;
  for (const auto& rule : rules) {
    auto hold = [&](const std::string& object, std::string message) {
      holds[{rule.name, object}] = {&rule, std::move(message)};
    };
    if (rule.kind == "node_down") {
      for (const auto& n : *in.nodes) {
        if (n.state == model::NodeState::kDown) {
          hold("node/" + n.spec.name, Cat("node ", n.spec.name, " is down: ", ReasonOf(in, n.spec.name)));
        }
      }
    } else if (rule.kind == "node_drained_automatically") {
      for (const auto& n : *in.nodes) {
        const std::string& reason = ReasonOf(in, n.spec.name);
        const bool automatic = reason.rfind("health check failed", 0) == 0 || reason.rfind("black hole", 0) == 0 ||
                               reason.rfind("agent reports less", 0) == 0;
        if (automatic && (n.state == model::NodeState::kDrained || n.state == model::NodeState::kDraining)) {
          hold("node/" + n.spec.name, Cat("node ", n.spec.name, " was drained automatically: ", reason));
        }
      }
    } else if (rule.kind == "pending_age") {
      std::map<std::string, std::pair<int, const model::Job*>> too_old;  // queue -> (count, oldest)
      for (const auto& [id, job] : *in.jobs) {
        if (job.state != model::JobState::kPending || (!rule.queue.empty() && job.queue != rule.queue)) continue;
        if (now - job.submitted_at <= std::chrono::seconds(rule.threshold_seconds)) continue;
        auto& [count, oldest] = too_old[job.queue];
        ++count;
        if (!oldest || job.submitted_at < oldest->submitted_at) oldest = &job;
      }
      for (const auto& [queue, entry] : too_old) {
        const auto age = std::chrono::duration_cast<std::chrono::seconds>(now - entry.second->submitted_at).count();
        hold("queue/" + queue, Cat(std::to_string(entry.first), " jobs pending longer than ",
                                   std::to_string(rule.threshold_seconds), " s in queue ", queue, "; the oldest, job ",
                                   std::to_string(entry.second->id), ", for ", std::to_string(age), " s"));
      }
    } else if (rule.kind == "ledger_discrepancy") {
      if (in.ledger_discrepancies > 0) {
        hold("ledger", Cat("the last ledger reconciliation found ", std::to_string(in.ledger_discrepancies),
                           " discrepancies; GET /v1/usage/reconcile lists them"));
      }
    } else if (rule.kind == "store_errors") {
      // Fires on a failed commit; resolves after five minutes without one.
      if (in.last_store_error && now - *in.last_store_error < std::chrono::minutes(5)) {
        hold("store", Cat("a store commit failed at ", FormatRfc3339(*in.last_store_error),
                          "; the daemon acts on nothing it could not commit: check the disk and restart it"));
      }
    }
  }
  return holds;
}

AlertChanges DiffAlerts(const AlertConditions& holds, std::map<AlertKey, store::AlertRecord>& firing, Timestamp now) {
  AlertChanges changes;
  for (const auto& [key, what] : holds) {
    if (firing.count(key)) continue;
    store::AlertRecord a;
    a.name = key.first;
    a.kind = what.first->kind;
    a.object = key.second;
    a.severity = what.first->severity;
    a.message = what.second;
    a.fired_at = now;
    firing[key] = a;
    changes.fired.push_back(std::move(a));
  }
  for (auto it = firing.begin(); it != firing.end();) {
    if (holds.count(it->first)) {
      ++it;
      continue;
    }
    store::AlertRecord a = it->second;
    a.resolved_at = now;
    changes.resolved.push_back(std::move(a));
    it = firing.erase(it);
  }
  return changes;
}

}  // namespace unisched::daemon
