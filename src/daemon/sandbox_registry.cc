// SandboxRegistry (sandbox_registry.h): the live sandboxes.
// Apart from the manager, which starts, calls and ends them.

#include "daemon/sandbox_registry.h"

#include "unisched/service/admission.h"

namespace unisched::daemon {

std::string SandboxName(int64_t id) {
  return "sb-" + std::to_string(id);
}

void SandboxRegistry::Activate(const std::shared_ptr<Sandbox>& s) {
  admitted_.erase(s);
  running_[s->id] = s;
}

service::SandboxHolds SandboxRegistry::Holds() const {
  service::SandboxHolds holds;
  auto add = [&holds](const Sandbox& s) { holds[{s.queue, s.project, s.user}] += service::SandboxAmount(s.limits); };
  for (const auto& [id, s] : running_) add(*s);
  for (const auto& s : admitted_) add(*s);
  return holds;
}

std::shared_ptr<Sandbox> SandboxRegistry::Find(int64_t id) const {
  auto it = running_.find(id);
  return it == running_.end() ? nullptr : it->second;
}

Result<std::shared_ptr<Sandbox>> SandboxRegistry::Acquire(int64_t id) {
  auto it = running_.find(id);
  if (it == running_.end() || it->second->ending) {
    return Error::Conflict("not_running", "sandbox " + SandboxName(id) + " is not running");
  }
  ++it->second->busy;
  return it->second;
}

std::shared_ptr<Sandbox> SandboxRegistry::TakeToEnd(int64_t id) {
  auto it = running_.find(id);
  if (it == running_.end() || it->second->ending) return nullptr;
  std::shared_ptr<Sandbox> s = it->second;
  s->ending = true;
  running_.erase(it);
  return s;
}

std::vector<std::shared_ptr<Sandbox>> SandboxRegistry::TakeAll() {
  std::vector<std::shared_ptr<Sandbox>> all;
  for (auto& [id, s] : running_) all.push_back(s);
  running_.clear();
  return all;
}

std::vector<std::shared_ptr<Sandbox>> SandboxRegistry::TakeIdle(std::chrono::steady_clock::time_point now) {
  std::vector<std::shared_ptr<Sandbox>> idle;
  for (auto it = running_.begin(); it != running_.end();) {
    Sandbox& s = *it->second;
    if (!s.ending && s.busy == 0 && now - s.last_active >= std::chrono::seconds(s.idle_timeout_seconds)) {
      s.ending = true;
      idle.push_back(it->second);
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
  return idle;
}

}  // namespace unisched::daemon
