#pragma once
// Delivers alerts to a webhook (docs/alerts.md): an HTTP POST of one JSON
// object per firing or resolution, on a thread of its own, each with a
// timeout and retried with doubling waits; what cannot be delivered is
// logged and dropped (the alert itself stays in GET /v1/alerts).

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "unisched/common/status.h"
#include "unisched/config/config.h"

namespace unisched::daemon {

struct WebhookTarget {
  std::string host;
  uint16_t port = 80;
  std::string path = "/";
  bool tls = false;  // https://
};
// "http://host:port/path" or "https://..." -> its parts.
Result<WebhookTarget> ParseWebhookUrl(const std::string& url);

class WebhookNotifier {
 public:
  explicit WebhookNotifier(config::WebhookSettings settings);
  ~WebhookNotifier();
  WebhookNotifier(const WebhookNotifier&) = delete;
  WebhookNotifier& operator=(const WebhookNotifier&) = delete;

  void Start();
  void Stop();  // drops what is still queued
  void Send(nlohmann::json payload);

 private:
  void Loop();

  const config::WebhookSettings settings_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<nlohmann::json> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace unisched::daemon
