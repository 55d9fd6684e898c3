#pragma once
// Black-hole detection (docs/agents.md): a node where too many jobs fail in
// a short time (a broken library, a full disk) would otherwise eat the
// queue, so it is drained for a person to look at. Pure: time comes in as
// an argument; the controller drains the node.

#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "unisched/common/time.h"

namespace unisched::daemon {

class BlackHoleDetector {
 public:
  // health.black_hole_failures (0: off) within health.black_hole_window_seconds.
  BlackHoleDetector(int failures, std::chrono::seconds window) : failures_(failures), window_(window) {}

  // Counts a job that failed on `node` at `now`. When the node has now seen
  // `failures` of them within the window: why it should be drained
  // ("black hole: 5 jobs failed on it within 300 s"); else nullopt. Off
  // (failures 0): counts nothing, never says so.
  std::optional<std::string> RecordFailure(const std::string& node, Timestamp now);
  // Starts the node's count afresh (it was drained).
  void Forget(const std::string& node) { recent_.erase(node); }

 private:
  int failures_;
  std::chrono::seconds window_;
  std::map<std::string, std::deque<Timestamp>> recent_;  // by node, within the window
};

}  // namespace unisched::daemon
