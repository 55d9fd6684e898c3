#pragma once
// Api::Call, shared by the endpoint files of the API.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

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
    bool audited = false;  // the endpoint wrote the audit record in its own transaction
  };
  HttpRequest request;
  std::map<std::string, std::string> params;  // path captures
  std::optional<auth::Principal> principal;
  std::shared_ptr<Reply> state;
  std::function<void(HttpResponse)> reply;

  const std::string& Param(const std::string& name) const { return params.at(name); }
  void MarkAudited() { state->audited = true; }
};

}  // namespace unisched::api
