#pragma once
// The store's record of what happened: cluster events, alerts and the audit
// trail of API requests.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"

namespace unisched::store {

// An event of the cluster (GET /v1/events): a job's events appear there
// with object "job/ID"; nodes' and alerts' events are stored as these.
struct ClusterEvent {
  Timestamp time{};
  std::string kind;               // drain, resume, down, up, registered, alert_firing, alert_resolved, ...
  std::string object;             // node/NAME, alert/NAME/OBJECT, job/ID
  std::string severity = "info";  // info | warning | critical
  std::string message;
};

// One alert (docs/alerts.md): fired when its rule's condition began to hold
// for its object, resolved when it stopped.
struct AlertRecord {
  int64_t id = 0;
  std::string name;    // the rule's name
  std::string kind;    // the rule's kind
  std::string object;  // node/NAME, queue/NAME, ledger, store
  std::string severity;
  std::string message;
  Timestamp fired_at{};
  std::optional<Timestamp> resolved_at{};
};

struct EventFilter {
  std::optional<std::string> kind;
  std::optional<std::string> object;  // exact, or a prefix when it ends with '/' ("node/")
  std::optional<Timestamp> since;     // events at or after
  int limit = 1000;                   // the newest this many
  // Visibility of jobs' events: unset sees all; else jobs of these projects or queues.
  std::optional<std::vector<std::string>> visible_projects;
  std::vector<std::string> visible_queues;
};

struct AuditRecord {
  Timestamp time{};
  std::string actor;   // user name, or "system"
  std::string action;  // e.g. "POST /v1/jobs"
  std::string target;  // e.g. "job/42"
  std::string result;  // e.g. "201" or "403 forbidden"
};

class EventWrites {
 public:
  virtual ~EventWrites() = default;
  // Not idempotent: each call appends one record.
  virtual Status AppendAudit(const AuditRecord& record) = 0;
  // Deletes audit records older than `cutoff` and, beyond those, the oldest
  // past the newest `max_rows`; returns how many went. Idempotent.
  virtual Result<int64_t> PruneAudit(Timestamp cutoff, int64_t max_rows) = 0;
  // Not idempotent: each call appends one event.
  virtual Status AppendClusterEvent(const ClusterEvent& event) = 0;
  // Records a firing alert (its id assigned by the store). Not idempotent:
  // the controller inserts an alert only when its condition begins to hold.
  virtual Status InsertAlert(const AlertRecord& alert) = 0;
  // Resolves the firing alert of this name and object. Idempotent: with
  // none firing it changes nothing and succeeds.
  virtual Status ResolveAlert(const std::string& name, const std::string& object, Timestamp at) = 0;
};

class EventReads {
 public:
  virtual ~EventReads() = default;
  // Cluster and job events, oldest first (the newest filter.limit of them).
  virtual std::vector<ClusterEvent> ListClusterEvents(const EventFilter& filter) const = 0;
  // Alerts, newest first; `firing`: only unresolved (true) or resolved (false).
  virtual std::vector<AlertRecord> ListAlerts(std::optional<bool> firing, int limit) const = 0;
  // Newest first.
  virtual std::vector<AuditRecord> ListAudit(int limit) const = 0;
};

}  // namespace unisched::store
