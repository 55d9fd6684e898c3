#pragma once
// The rules of the storage section (storage.shared) and of the pools'
// target shares for capacity planning. Internal to src/config; part of
// ValidateConfig (validate.cc).

#include "config/errors.h"
#include "unisched/config/config.h"

namespace unisched::config::internal {

void ValidateStorage(const Config& config, Errors& errors);
void ValidateTargetShares(const model::ClusterSpec& cluster, Errors& errors);

}  // namespace unisched::config::internal
