#pragma once
// Api::Call, shared by the endpoint files of the API.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "api/text.h"
#include "unisched/api/api.h"

namespace unisched::api {

// One request while its endpoint runs. `reply` may be copied into callbacks
// that answer later (after a commit); it records metrics and the audit trail
// exactly once, and owns nothing of the Call.
struct Api::Call {
  struct Reply {
    std::atomic<bool> answered{false};
    Respond respond;
    std::chrono::steady_clock::time_point started;
    std::string method, route, path, actor = "anonymous";
    // Mutating calls of an authenticated caller are audited one record each;
    // refused credentials only in AuditTrail's tallies.
    bool authenticated = false;
    bool audited = false;  // the endpoint wrote the audit record in its own transaction
  };
  HttpRequest request;
  std::map<std::string, std::string> params;  // path captures
  std::optional<auth::Principal> principal;
  std::shared_ptr<Reply> state;
  std::function<void(HttpResponse)> reply;

  const std::string& Param(const std::string& name) const { return params.at(name); }

  // A query parameter after Handle checked it against the route's
  // declaration (nullopt: absent or empty), read as its kind.
  std::optional<std::string> Query(const std::string& name) const {
    auto it = request.query.find(name);
    if (it == request.query.end() || it->second.empty()) return std::nullopt;
    return it->second;
  }
  int64_t QueryInt(const std::string& name, int64_t fallback) const {
    auto text = Query(name);
    return text ? ParseInt64(*text).value_or(fallback) : fallback;
  }
  std::optional<Timestamp> QueryTime(const std::string& name) const {
    auto text = Query(name);
    return text ? ParseRfc3339(*text) : std::nullopt;
  }
  void MarkAudited() { state->audited = true; }
};

}  // namespace unisched::api
