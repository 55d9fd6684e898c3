#pragma once
// The config in force, replaced whole while the daemon runs (live config
// versions, docs/config-versions.md). Parts of the daemon that read
// sections which may change live (queues, routing, projects, users, the
// scheduler's weights, alert rules) hold a LiveConfig and take Current()
// once per unit of work (a scheduling cycle, a request), so each unit sees
// one whole version.
//
// A replaced version is kept, not freed: a reader may still hold a
// reference to it across the swap, and nothing has to count readers on the
// hot path (Current() is one atomic load). Versions change only by an
// admin's action and are a few kilobytes each, so what is kept is small.

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>

#include "unisched/config/config.h"

namespace unisched::config {

class LiveConfig {
 public:
  explicit LiveConfig(Config initial) { Replace(std::move(initial)); }
  LiveConfig(const LiveConfig&) = delete;
  LiveConfig& operator=(const LiveConfig&) = delete;

  // The version in force; the reference stays valid as long as this object.
  const Config& Current() const { return *current_.load(std::memory_order_acquire); }
  // Puts `next` in force for every later Current(); returns it.
  const Config& Replace(Config next) {
    std::lock_guard lock(mu_);
    kept_.push_back(std::make_unique<const Config>(std::move(next)));
    current_.store(kept_.back().get(), std::memory_order_release);
    return *kept_.back();
  }

 private:
  std::mutex mu_;
  std::deque<std::unique_ptr<const Config>> kept_;
  std::atomic<const Config*> current_{nullptr};
};

}  // namespace unisched::config
