// A create's slot (docs/sandboxes.md, Concurrency): the wait within max_concurrency and quotas, the refusal.
// Apart from the verbs; SandboxManager members, as the wait runs on the manager's lock and condition.

#include <algorithm>

#include "daemon/sandbox_manager.h"
#include "unisched/service/admission.h"

namespace unisched::daemon {
namespace {

// What a create gets when its slot did not free: 429 for a full queue or a
// wait that ran out, 403 for a quota of a queue that refuses work over it.
Error SlotRefused(const model::PendingReason& limit, bool may_wait, const std::string& queue) {
  if (limit.code == "ConcurrencyLimit") {
    return Error{ErrorKind::kRateLimited,
                 "max_concurrency",
                 limit.message + " (sandboxes and agent jobs, max_concurrency); retry later",
                 {}};
  }
  if (may_wait) {
    return Error{ErrorKind::kRateLimited,
                 "quota_exceeded",
                 limit.message + "; no slot freed within sandboxes.create_wait_seconds: retry later",
                 {}};
  }
  return Error::Forbidden(
      limit.message + "; queue " + queue + " refuses work over quota (quota_action: reject): retry later",
      "quota_exceeded");
}

}  // namespace

service::SandboxHolds SandboxManager::Holds() const {
  std::lock_guard lock(mu_);
  return sandboxes_.Holds();
}

Status SandboxManager::AwaitSlot(const std::shared_ptr<Sandbox>& s, bool may_wait,
                                 std::chrono::steady_clock::time_point since) {
  // Running jobs, running sandboxes and creates under way together stay
  // within max_concurrency and every quota of the queue and the project. A
  // queue whose quota_action is wait holds the create up to
  // sandboxes.create_wait_seconds (a sandbox cannot be left pending).
  std::unique_lock lock(mu_);
  const auto deadline = since + std::chrono::seconds(may_wait ? current_config().sandboxes.create_wait_seconds : 0);
  while (true) {
    if (stopping_) return Error::Unavailable("the daemon is stopping");
    const policy::JobScope scope{s->queue, s->project, s->user};
    auto limit = service::SandboxSlotLimit(
        current_config().cluster, service::HeldFor(*control_.View(), sandboxes_.Holds(), scope), scope, s->limits);
    if (!limit) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return SlotRefused(*limit, may_wait, s->queue);
    // Sandboxes that end wake this at once; running jobs that end are seen
    // at the next look.
    slots_cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(250)));
  }
  sandboxes_.Admit(s);
  return Status::Ok();
}

}  // namespace unisched::daemon
