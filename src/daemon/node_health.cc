// Black-hole detection (node_health.h).

#include "daemon/node_health.h"

namespace unisched::daemon {

std::optional<std::string> BlackHoleDetector::RecordFailure(const std::string& node, Timestamp now) {
  if (failures_ <= 0) return std::nullopt;
  auto& times = recent_[node];
  times.push_back(now);
  while (!times.empty() && now - times.front() > window_) times.pop_front();
  if (static_cast<int>(times.size()) < failures_) return std::nullopt;
  return "black hole: " + std::to_string(times.size()) + " jobs failed on it within " +
         std::to_string(window_.count()) + " s";
}

}  // namespace unisched::daemon
