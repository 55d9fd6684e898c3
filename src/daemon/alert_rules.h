#pragma once
// The alert rules (docs/alerts.md) as pure functions: what the live state
// says now (EvaluateAlertRules), and what that changes against the alerts
// firing (DiffAlerts). The controller feeds them its state and turns their
// answer into store writes, events, log lines and webhook deliveries.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "unisched/common/time.h"
#include "unisched/config/config.h"
#include "unisched/model/fit.h"
#include "unisched/model/job.h"
#include "unisched/store/store.h"

namespace unisched::daemon {

// What the rules look at, borrowed from the controller for one evaluation.
struct AlertInputs {
  const std::vector<model::NodeUsage>* nodes = nullptr;
  const std::map<std::string, std::string>* node_reasons = nullptr;  // why a node is down or drained
  const std::map<model::JobId, model::Job>* jobs = nullptr;          // the active jobs
  int64_t ledger_discrepancies = 0;                                  // of the last reconciliation
  std::optional<Timestamp> last_store_error;                         // the last failed commit
};

// (rule name, object) -> the rule and what to say, for each alert whose
// condition holds now. Objects: node/NAME, queue/NAME, ledger, store.
using AlertKey = std::pair<std::string, std::string>;
using AlertConditions = std::map<AlertKey, std::pair<const config::AlertRule*, std::string>>;

// Each rule's condition over the inputs at `now`:
//  - node_down: each node that is down, with its reason;
//  - node_drained_automatically: each node drained or draining by the daemon
//    itself (health check, black hole, an agent reporting less), not by a person;
//  - pending_age: per queue (the rule's, or each), the jobs pending longer
//    than threshold_seconds, and the oldest;
//  - ledger_discrepancy: the last reconciliation found any;
//  - store_errors: a commit failed within the last five minutes.
AlertConditions EvaluateAlertRules(const std::vector<config::AlertRule>& rules, const AlertInputs& inputs,
                                   Timestamp now);

struct AlertChanges {
  std::vector<store::AlertRecord> fired;     // began to hold: fired_at = now
  std::vector<store::AlertRecord> resolved;  // held no more: resolved_at = now
};

// Updates `firing` to `holds`: an alert fires once when its condition begins
// to hold (a message that changes meanwhile does not fire it again) and
// resolves when it stops.
AlertChanges DiffAlerts(const AlertConditions& holds, std::map<AlertKey, store::AlertRecord>& firing, Timestamp now);

}  // namespace unisched::daemon
