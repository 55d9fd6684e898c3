#pragma once
// An agent's tasks' output, shipped to the daemon as it grows (docs/agents.md,
// "Logs"): every second for running tasks, and whole before a task's
// result is sent, so the log endpoint serves agent nodes' jobs as it does
// local ones. The daemon writes a chunk only at the end of its copy and
// answers its copy's size, so a repeat or a gap (an agent restarted, a
// lost answer) is mended by going on from that size.

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "unisched/executor/wire.h"

namespace unisched::agent {

class LogShipper {
 public:
  // Bytes per call: well under the daemon's request body limit (1 MiB).
  static constexpr size_t kChunkBytes = 256 * 1024;
  static constexpr int64_t kRefused = -1;
  // The file of a task's stream ("stdout", "stderr") on this node.
  using PathOf = std::function<std::string(const executor::AttemptRef&, const std::string& stream)>;
  // Sends `bytes` at `offset`: the daemon's copy's size after; nullopt when
  // it could not be reached (try again later); kRefused when it will not
  // take the task's output (a task it no longer knows: shipping it ends).
  using Send = std::function<std::optional<int64_t>(const executor::AttemptRef&, const std::string& stream,
                                                    int64_t offset, std::string_view bytes)>;

  explicit LogShipper(PathOf path_of) : path_of_(std::move(path_of)) {}
  // Everything the task's streams hold beyond what the daemon has. False
  // when a send failed (the rest waits for the next call).
  bool Ship(const executor::AttemptRef& task, const Send& send);
  // The task's result was accepted: nothing more to ship.
  void Forget(const executor::AttemptRef& task);

 private:
  const PathOf path_of_;
  std::mutex mu_;
  std::map<std::pair<executor::AttemptRef, std::string>, int64_t> shipped_;  // GUARDED_BY(mu_)
};

}  // namespace unisched::agent
