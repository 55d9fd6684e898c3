// The sandbox reaper thread: every 250 ms idle reclaim, interim charges (when due) and the warm pool's refill.
// Apart from the verbs: the manager's periodic work; SandboxManager members, on its lock.

#include <spdlog/spdlog.h>

#include <chrono>

#include "daemon/sandbox_manager.h"
#include "daemon/sandbox_metering.h"
#include "unisched/service/admission.h"

namespace unisched::daemon {

void SandboxManager::ReaperLoop() {
  std::unique_lock lock(mu_);
  auto last_charge = std::chrono::steady_clock::now();
  while (!stopping_) {
    stop_cv_.wait_for(lock, std::chrono::milliseconds(250));
    if (stopping_) break;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_charge >= std::chrono::seconds(current_config().store.accounting_interval_seconds)) {
      last_charge = now;
      lock.unlock();
      ChargeRunning();
      lock.lock();
    }
    std::vector<std::shared_ptr<Sandbox>> idle = sandboxes_.TakeIdle(now);
    lock.unlock();
    for (auto& s : idle) {
      EndSandbox(s, "reclaimed", "idle for " + std::to_string(s->idle_timeout_seconds) + " s (scale_in_idle_seconds)",
                 "system", nullptr);
    }
    RefillWarm();
    lock.lock();
  }
}

void SandboxManager::ChargeRunning() {
  // Interim entries of every running sandbox up to now.
  const Timestamp now = clock_.Now();
  std::vector<store::LedgerEntry> entries;
  {
    std::lock_guard lock(mu_);
    entries = InterimCharges(sandboxes_.running(), now);
  }
  RecordInterimCharges(store_, metrics_, std::move(entries));
}

void SandboxManager::RefillWarm() {
  if (!instances_.available()) return;
  // Warm instances serve the default create: the default queue's defaults.
  const model::QueueSpec* queue = current_config().cluster.FindQueue(service::DefaultSandboxQueue(current_config()));
  if (!queue) return;
  const service::SandboxLimits limits = service::SandboxDefaults(current_config(), *queue);
  WarmPool::Refill refill;
  {
    std::lock_guard lock(mu_);
    refill = warm_.PlanRefill(images_);
  }
  for (auto& w : refill.stale) w.instance->Destroy();
  for (const ImageVersion& image : refill.to_start) {
    auto started = instances_.Start(image, queue->name, limits);
    std::lock_guard lock(mu_);
    warm_.StartEnded(image);
    if (!started.ok()) {
      spdlog::warn("warm sandbox of {} failed to start: {}", ImageKey(image.name, image.version),
                   started.error().message);
      continue;
    }
    warm_.Add(image, std::move(started).value());
    // With each instance, not after the loop: GET /v1/images counts it
    // now, and /metrics must not lag behind it.
    PublishMetrics();
  }
  std::lock_guard lock(mu_);
  PublishMetrics();  // the stale ones destroyed, and when nothing started
}

}  // namespace unisched::daemon
