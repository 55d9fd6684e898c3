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
#include "unisched/config/live.h"
#include "unisched/metrics/metrics.h"
#include "unisched/store/events.h"

namespace unisched::daemon {

class AlertBook {
 public:
  AlertBook(const config::LiveConfig& live, metrics::Metrics& metrics) : live_(live), metrics_(metrics) {}

  // Where alerts go besides the store, the log and metrics (may be null).
  void SetNotifier(WebhookNotifier* notifier) { notifier_ = notifier; }
  // At start: the alerts the store holds as firing.
  void Load(std::vector<store::AlertRecord> firing);
  void Evaluate(Batch& batch, const AlertInputs& inputs, Timestamp now);

 private:
  void Notify(const store::AlertRecord& alert, const char* state) const;

  // The config in force; current_config() is its version now.
  const config::LiveConfig& live_;
  const config::Config& current_config() const { return live_.Current(); }
  metrics::Metrics& metrics_;
  WebhookNotifier* notifier_ = nullptr;
  std::map<AlertKey, store::AlertRecord> firing_;  // by (rule name, object)
  bool published_ = false;                         // the gauge was set once
};

}  // namespace unisched::daemon
