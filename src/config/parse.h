#pragma once
// Internal to src/config: YAML tree -> Config. This step reports the shape of
// the document (unknown keys, missing keys, wrong types, unknown enum names);
// the value rules live in ValidateConfig, which runs on the typed result.

#include <yaml-cpp/yaml.h>

#include "config/errors.h"
#include "unisched/config/config.h"

namespace unisched::config::internal {

// Reads every section it can, recording each problem in errors, and fills in
// the derived node fields (pool, labels merged with the pool's).
Config ParseConfig(const YAML::Node& root, Errors& errors);

// The `storage` section (parse_storage.cc): shared file systems, object
// stores, lifecycle rules and storage tiers.
void ParseStorage(const YAML::Node& node, Errors& errors, StorageSettings& out);

// Sets NodeSpec.pool from the first pool that lists the node and merges that
// pool's labels under the node's own (the node's value wins).
void DeriveNodePools(model::ClusterSpec& cluster);

// Fills in what a valid config derives from its policy keys: in each queue,
// gpu_quota_per_project and project_quota.gpus (one limit under two names)
// from whichever is written; cluster.projects from config.projects. Runs
// after validation, which rejects the two names with different values.
void DerivePolicies(Config& config);

}  // namespace unisched::config::internal
