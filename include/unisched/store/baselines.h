#pragma once
// Performance baseline runs in the store (docs/baseline.md): each run of
// `unisched baseline` as the API recorded it, numbered 1, 2, ... in order,
// so that capacity planning has a history and a run can be compared with
// the previous run of the same pools.
//
// Like config versions, these go through the store's lease connection, not
// the write queue: a run is committed when InsertBaseline returns.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"

namespace unisched::store {

struct BaselineRecord {
  int64_t id = 0;          // 1, 2, ... set by InsertBaseline
  std::string pools;       // the pools measured, sorted and comma-separated: what "the same pools" means
  std::string created_by;  // the user who recorded it
  Timestamp created_at{};
  std::string record;  // the run as JSON: figures, skipped items, machine facts, config version
};

class Baselines {
 public:
  virtual ~Baselines() = default;
  // Stores `baseline` (its id is ignored) as the next run; returns its id.
  virtual Result<int64_t> InsertBaseline(const BaselineRecord& baseline) = 0;
  // The run, or nullopt when there is none of that id.
  virtual Result<std::optional<BaselineRecord>> GetBaseline(int64_t id) = 0;
  // The newest `limit` runs, newest first; `pools` not empty: only runs of
  // exactly those pools (BaselineRecord::pools).
  virtual Result<std::vector<BaselineRecord>> ListBaselines(const std::string& pools, int limit) = 0;
};

}  // namespace unisched::store
