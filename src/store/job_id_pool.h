#pragma once
// Job ids reserved from the database ahead of need (Store::ReserveJobId).
//
// The database keeps the first id no process has reserved (id_blocks); a
// process reserves a block by moving it up by the block's size in a
// committed write, and hands the block's ids out from memory. Ids are unique
// because blocks do not overlap; an id reserved and not used before a
// restart is a gap, never reused. A new block is asked for while half of
// the current one is left, so callers take ids without waiting for the
// writer except when ids are taken faster than one commit's time per half
// block. Not thread-safe: the store guards it.

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "unisched/model/job.h"

namespace unisched::store {

class JobIdPool {
 public:
  explicit JobIdPool(int64_t block_size) : block_size_(block_size < 1 ? 1 : block_size) {}

  int64_t block_size() const { return block_size_; }

  // The database granted [first, end).
  void Grant(model::JobId first, model::JobId end);
  // The next id, if a granted one is left.
  std::optional<model::JobId> TryTake();
  // True when a new block should be reserved now: less than half a block
  // left and no reservation in flight. Marks one in flight.
  bool StartReservation();
  // The reservation in flight ended (granted or failed).
  void EndReservation() { reserving_ = false; }
  bool reserving() const { return reserving_; }

 private:
  int64_t Left() const;

  const int64_t block_size_;
  std::deque<std::pair<model::JobId, model::JobId>> ranges_;  // [first, end), in grant order
  bool reserving_ = false;
};

}  // namespace unisched::store
