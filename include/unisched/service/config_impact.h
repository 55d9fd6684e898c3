#pragma once
// What a new config version would do to the work in the cluster, shown
// before it is applied (POST /v1/config?dry_run=true, docs/config-versions.md):
// pending jobs the router would now send elsewhere (or refuse), the limits
// that change, and running jobs a new limit would find over it. Pure: the
// versions and the active jobs come in as arguments.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "unisched/config/change.h"
#include "unisched/config/config.h"
#include "unisched/model/job.h"

namespace unisched::service {

struct ConfigImpact {
  // A pending job routed again as it was submitted (its explicit queue, if
  // it named one) under the new version: to another queue, or refused.
  // Pending jobs stay where they are; new submissions like them go there.
  struct Rerouted {
    model::JobId job = 0;
    std::string from_queue;
    std::string to_queue;  // empty when refused
    std::string refusal;   // the router's error, when refused
  };
  // A limit of the new version that running work exceeds (and did not
  // under the old one): it stays running; nothing more starts in that
  // scope until it is back under the limit (a wall time over the new
  // maximum: the job keeps the wall time it was admitted with).
  struct OverLimit {
    std::string limit;  // the key path, e.g. queues[ai-training].policy.project_quota.gpus
    std::string scope;  // "project genomics in ai-training", "job 42", "queue ai-training"
    int64_t held = 0;   // what the scope holds now
    int64_t new_limit = 0;
    std::vector<model::JobId> jobs;  // the running jobs of the scope
  };
  std::vector<Rerouted> rerouted;
  std::vector<config::ConfigDifference> limits;  // the differences that are limits (policy, quotas, budgets, shares)
  std::vector<OverLimit> over_limit;
};

// `before` and `after` are whole configs as they would be in force (a
// canary merged in); `differences` are the texts' (DiffConfigTexts);
// `active` the pending and running jobs.
ConfigImpact AssessConfigChange(const config::Config& before, const config::Config& after,
                                const std::vector<config::ConfigDifference>& differences,
                                const std::vector<model::Job>& active);

nlohmann::json ToJson(const ConfigImpact& impact);

}  // namespace unisched::service
