// Calls into a running sandbox (exec, files): the busy mark, the init's answers as results, a broken instance.
// Apart from the create/delete verbs; SandboxManager members, as calls may end the sandbox.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "daemon/sandbox_manager.h"
#include "unisched/isolation/protocol.h"

namespace unisched::daemon {
namespace {

using nlohmann::json;

// What the init answered, as an API error: its codes map to statuses.
Error InitError(const json& answer) {
  const std::string code = answer.value("code", "io");
  const std::string message = answer.value("error", "the sandbox failed");
  if (code == "not_found") return Error::NotFound(message);
  if (code == "too_large") return Error{ErrorKind::kTooLarge, "too_large", message, {}};
  if (code == "bad_path" || code == "bad_request") return Error::Unprocessable("invalid_value", message, "path");
  return Error::Unprocessable("sandbox_error", message);
}

}  // namespace

void SandboxManager::Exec(int64_t id, ExecRequest request, std::string actor, std::function<void(Result<json>)> done) {
  auto acquired = Acquire(id);
  if (!acquired.ok()) {
    done(acquired.error());
    return;
  }
  std::shared_ptr<Sandbox> s = std::move(acquired).value();
  int64_t timeout = s->limits.timeout_seconds;
  if (request.timeout_seconds) timeout = std::min(timeout, *request.timeout_seconds);
  Spawn([this, s, timeout, request = std::move(request), actor = std::move(actor), done = std::move(done)] {
    json env = json::object();
    for (const auto& [k, v] : request.env) env[k] = v;
    const json call = {{"op", "exec"},
                       {"argv", request.argv},
                       {"env", env},
                       {"stdin", isolation::Bytes(request.stdin_data)},
                       {"timeout_ms", timeout * 1000},
                       {"output_cap", current_config().sandboxes.output_cap_bytes}};
    auto answer = CallInstance(s, call, static_cast<int>(timeout * 1000 + 10'000), /*exec=*/true);
    if (!answer.ok()) {
      done(answer.error());
      return;
    }
    json result = {{"exit_code", answer->value("exit_code", -1)},
                   {"stdout", isolation::BytesOf((*answer)["stdout"])},
                   {"stderr", isolation::BytesOf((*answer)["stderr"])},
                   {"duration_ms", answer->value("duration_ms", 0.0)},
                   {"timed_out", answer->value("timed_out", false)},
                   {"stdout_truncated", answer->value("stdout_truncated", false)},
                   {"stderr_truncated", answer->value("stderr_truncated", false)}};
    metrics_.CountSandboxExec(s->queue);
    const Timestamp now = clock_.Now();
    std::string command = request.argv[0];
    for (size_t i = 1; i < request.argv.size() && command.size() < 200; ++i) command += " " + request.argv[i];
    if (command.size() > 200) command = command.substr(0, 200) + "...";
    const store::ClusterEvent event{now, "sandbox_exec", "sandbox/" + SandboxName(s->id), "info",
                                    command + " -> exit " + std::to_string(result["exit_code"].get<int>()) +
                                        (result["timed_out"].get<bool>() ? " (timed out)" : "") + " in " +
                                        std::to_string(std::llround(result["duration_ms"].get<double>())) + " ms"};
    const store::AuditRecord audit{now, actor, "POST /v1/sandboxes/{id}/exec", "sandbox/" + SandboxName(s->id), "200"};
    store_.Write(
        [event, audit](store::Transaction& t) -> Status {
          if (Status st = t.AppendClusterEvent(event); !st) return st;
          return t.AppendAudit(audit);
        },
        [result = std::move(result), done](Status st) {
          if (!st.ok()) spdlog::warn("sandbox exec event not recorded: {}", st.error().message);
          done(result);
        });
  });
}

void SandboxManager::PutFile(int64_t id, std::string path, std::string data, std::string actor,
                             std::function<void(Result<json>)> done) {
  if (static_cast<int64_t>(data.size()) > current_config().sandboxes.max_file_bytes) {
    done(Error{ErrorKind::kTooLarge, "too_large",
               "the file holds " + std::to_string(data.size()) + " bytes; sandboxes.max_file_bytes is " +
                   std::to_string(current_config().sandboxes.max_file_bytes),
               "body"});
    return;
  }
  auto acquired = Acquire(id);
  if (!acquired.ok()) {
    done(acquired.error());
    return;
  }
  std::shared_ptr<Sandbox> s = std::move(acquired).value();
  Spawn([this, s, path = std::move(path), data = std::move(data), actor = std::move(actor), done = std::move(done)] {
    auto answer = CallInstance(s, {{"op", "put"}, {"path", path}, {"data", isolation::Bytes(data)}}, 30'000, false);
    if (!answer.ok()) {
      done(answer.error());
      return;
    }
    const store::AuditRecord audit{clock_.Now(), actor, "PUT /v1/sandboxes/{id}/files/{path}",
                                   "sandbox/" + SandboxName(s->id) + "/" + path, "200"};
    json result = {{"path", path}, {"size", answer->value("size", int64_t{0})}};
    store_.Write([audit](store::Transaction& t) { return t.AppendAudit(audit); },
                 [result, done](Status) { done(result); });
  });
}

void SandboxManager::GetFile(int64_t id, std::string path, std::function<void(Result<std::string>)> done) {
  auto acquired = Acquire(id);
  if (!acquired.ok()) {
    done(acquired.error());
    return;
  }
  std::shared_ptr<Sandbox> s = std::move(acquired).value();
  Spawn([this, s, path = std::move(path), done = std::move(done)] {
    auto answer = CallInstance(s, {{"op", "get"}, {"path", path}, {"max", current_config().sandboxes.max_file_bytes}},
                               30'000, false);
    if (!answer.ok()) {
      done(answer.error());
      return;
    }
    done(isolation::BytesOf((*answer)["data"]));
  });
}

Result<std::shared_ptr<Sandbox>> SandboxManager::Acquire(int64_t id) {
  std::lock_guard lock(mu_);
  return sandboxes_.Acquire(id);
}

Result<json> SandboxManager::CallInstance(const std::shared_ptr<Sandbox>& s, const json& request, int timeout_ms,
                                          bool exec) {
  auto answer = s->instance->Call(request, timeout_ms);
  {
    std::lock_guard lock(mu_);
    --s->busy;
    if (exec) ++s->execs;
    s->last_active = std::chrono::steady_clock::now();
  }
  if (!answer.ok()) {
    EndBroken(s, answer.error().message);
    return answer.error();
  }
  if (answer->contains("error")) return InitError(*answer);
  return answer;
}

void SandboxManager::EndBroken(const std::shared_ptr<Sandbox>& s, const std::string& reason) {
  // The instance is gone (killed from outside, or it stopped answering); a
  // DELETE that killed it ends the sandbox itself.
  {
    std::lock_guard lock(mu_);
    if (!sandboxes_.TakeToEnd(s->id)) return;
  }
  EndSandbox(s, "failed", reason, "system", nullptr);
}

}  // namespace unisched::daemon
