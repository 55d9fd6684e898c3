#include "store/job_id_pool.h"

namespace unisched::store {

void JobIdPool::Grant(model::JobId first, model::JobId end) {
  if (end > first) ranges_.emplace_back(first, end);
}

std::optional<model::JobId> JobIdPool::TryTake() {
  while (!ranges_.empty() && ranges_.front().first >= ranges_.front().second) ranges_.pop_front();
  if (ranges_.empty()) return std::nullopt;
  return ranges_.front().first++;
}

int64_t JobIdPool::Left() const {
  int64_t left = 0;
  for (const auto& [first, end] : ranges_) left += end - first;
  return left;
}

bool JobIdPool::StartReservation() {
  if (reserving_ || Left() * 2 >= block_size_) return false;
  reserving_ = true;
  return true;
}

}  // namespace unisched::store
