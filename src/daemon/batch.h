#pragma once
// What one iteration of the controller's loop commits in ONE store
// transaction, and what it does only after that commit (launches, signals,
// replies, counters). The controller's parts add to it; the loop commits it.

#include <functional>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/store/store.h"

namespace unisched::daemon {

struct Batch {
  std::vector<std::function<Status(store::Transaction&)>> writes;
  std::vector<std::function<void()>> after_commit;
};

}  // namespace unisched::daemon
