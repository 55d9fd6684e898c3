#include "daemon/notifier.h"

#include <spdlog/spdlog.h>

#include "unisched/client/http_client.h"

namespace unisched::daemon {

Result<WebhookTarget> ParseWebhookUrl(const std::string& url) {
  const bool https = url.rfind("https://", 0) == 0;
  if (!https && url.rfind("http://", 0) != 0) {
    return Error::BadRequest("bad_url", "webhook URL must start with http:// or https://: " + url);
  }
  const size_t slash = url.find('/', https ? 8 : 7);
  auto base = client::ParseUrl(url.substr(0, slash));
  if (!base.ok()) return base.error();
  WebhookTarget t;
  t.host = base->host;
  t.port = base->port;
  t.tls = base->tls;
  t.path = slash == std::string::npos ? "/" : url.substr(slash);
  return t;
}

WebhookNotifier::WebhookNotifier(config::WebhookSettings settings) : settings_(std::move(settings)) {}

WebhookNotifier::~WebhookNotifier() {
  Stop();
}

void WebhookNotifier::Start() {
  if (settings_.url.empty()) return;
  thread_ = std::thread([this] { Loop(); });
}

void WebhookNotifier::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WebhookNotifier::Send(nlohmann::json payload) {
  if (settings_.url.empty()) return;
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(payload));
  }
  cv_.notify_all();
}

void WebhookNotifier::Loop() {
  auto target = ParseWebhookUrl(settings_.url);
  if (!target.ok()) {
    spdlog::error("alerts: webhook disabled: {}", target.error().message);
    return;
  }
  client::HttpClient http(target->host, target->port, {target->tls, settings_.ca_file, "", ""});
  http.SetTimeout(std::chrono::seconds(settings_.timeout_seconds));
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const nlohmann::json payload = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    const std::string body = payload.dump();
    bool delivered = false;
    std::string last_error;
    for (int attempt = 0; attempt <= settings_.retries && !delivered; ++attempt) {
      if (attempt > 0) {
        // 1 s, 2 s, 4 s, ... between tries; a stop ends the wait.
        std::unique_lock wait_lock(mu_);
        if (cv_.wait_for(wait_lock, std::chrono::seconds(1 << std::min(attempt - 1, 6)),
                         [this] { return stopping_; })) {
          return;
        }
      }
      auto response = http.Request("POST", target->path, body);
      if (response.ok() && response->status >= 200 && response->status < 300) {
        delivered = true;
      } else {
        last_error = response.ok() ? std::string("HTTP ") + std::to_string(response->status) : response.error().message;
      }
    }
    if (!delivered) {
      spdlog::error("alerts: webhook {} failed {} times ({}); dropped: {}", settings_.url, settings_.retries + 1,
                    last_error, body);
    }
    lock.lock();
  }
}

}  // namespace unisched::daemon
