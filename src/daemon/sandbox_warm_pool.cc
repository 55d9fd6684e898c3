// WarmPool (sandbox_warm_pool.h): idle started instances per image.
// Apart from the manager, which starts them and hands them to creates.

#include "daemon/sandbox_warm_pool.h"

#include <algorithm>

namespace unisched::daemon {

void WarmPool::RaiseTarget(const std::string& image, int target) {
  targets_[image] = std::max(targets_[image], target);
}

void WarmPool::SetTarget(const std::string& image, int target) {
  targets_[image] = target;
}

int WarmPool::Target(const std::string& image) const {
  auto it = targets_.find(image);
  return it == targets_.end() ? 0 : it->second;
}

int WarmPool::Ready(const std::string& image) const {
  int ready = 0;
  if (auto it = idle_.find(image); it != idle_.end()) {
    for (const auto& [version, pool] : it->second) ready += static_cast<int>(pool.size());
  }
  return ready;
}

std::optional<StartedInstance> WarmPool::Take(const ImageVersion& image, const std::string& queue) {
  auto& pool = idle_[image.name][image.version];
  for (auto it = pool.begin(); it != pool.end(); ++it) {
    if (it->queue == queue) {
      StartedInstance taken = std::move(*it);
      pool.erase(it);
      return taken;
    }
  }
  return std::nullopt;
}

std::vector<StartedInstance> WarmPool::TakeAll() {
  std::vector<StartedInstance> all;
  for (auto& [name, versions] : idle_) {
    for (auto& [version, pool] : versions) {
      for (auto& w : pool) all.push_back(std::move(w));
    }
  }
  idle_.clear();
  return all;
}

WarmPool::Refill WarmPool::PlanRefill(const ImageCatalog& images) {
  Refill refill;
  for (auto& [name, versions] : idle_) {
    const std::optional<std::string> current = images.Current(name);
    for (auto& [version, pool] : versions) {
      // Instances of a version that is no longer current are let go.
      const int target = current == version ? Target(name) : 0;
      while (static_cast<int>(pool.size()) > target) {
        refill.stale.push_back(std::move(pool.back()));
        pool.pop_back();
      }
    }
  }
  for (const auto& [name, target] : targets_) {
    if (target <= 0) continue;
    auto resolved = images.Resolve(name);
    if (!resolved.ok()) continue;
    int& starting = starting_[name][resolved->version];
    const int missing = target - static_cast<int>(idle_[name][resolved->version].size()) - starting;
    // A few per pass: a large pool fills over a few seconds without holding
    // up the reaper.
    for (int i = 0; i < std::min(missing, 16); ++i) refill.to_start.push_back(*resolved);
    starting += std::min(std::max(missing, 0), 16);
  }
  return refill;
}

void WarmPool::StartEnded(const ImageVersion& image) {
  --starting_[image.name][image.version];
}

void WarmPool::Add(const ImageVersion& image, StartedInstance instance) {
  idle_[image.name][image.version].push_back(std::move(instance));
}

}  // namespace unisched::daemon
