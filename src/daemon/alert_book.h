#pragma once
// The controller's alerts part: what fires now (loaded at start), the rules
// evaluated against the live state (alert_rules.h, pure), and what a change
// means: the alert and its event in the loop's batch, then the log line and
// the webhook after the commit, and the firing gauge. Control thread only.

#include <map>
#include <vector>

#include "daemon/alert_rules.h"
#include "daemon/batch.h"
#include "daemon/notifier.h"
#include "unisched/common/time.h"
#include "unisched/config/config.h"
#include "unisched/metrics/metrics.h"
#include "unisched/store/events.h"

namespace unisched::daemon {

class AlertBook {
 public:
  AlertBook(const config::Config& config, metrics::Metrics& metrics) : config_(config), metrics_(metrics) {}

  // Where alerts go besides the store, the log and metrics (may be null).
  void SetNotifier(WebhookNotifier* notifier) { notifier_ = notifier; }
  // At start: the alerts the store holds as firing.
  void Load(std::vector<store::AlertRecord> firing);
  void Evaluate(Batch& batch, const AlertInputs& inputs, Timestamp now);

 private:
  void Notify(const store::AlertRecord& alert, const char* state) const;

  const config::Config& config_;
  metrics::Metrics& metrics_;
  WebhookNotifier* notifier_ = nullptr;
  std::map<AlertKey, store::AlertRecord> firing_;  // by (rule name, object)
  bool published_ = false;                         // the gauge was set once
};

}  // namespace unisched::daemon
