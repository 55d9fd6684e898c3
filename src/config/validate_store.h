#pragma once
// The rules of where the daemon keeps its state: store (SQLite or
// PostgreSQL, never a password in the YAML) and server.replica (replicas
// on PostgreSQL, agent nodes only). Internal to src/config; part of
// ValidateConfig (validate.cc).

#include "config/errors.h"
#include "unisched/config/config.h"

namespace unisched::config::internal {

void ValidateStore(const StoreSettings& s, Errors& errors);
void ValidateReplica(const Config& config, Errors& errors);

}  // namespace unisched::config::internal
