#pragma once
// Parsing and validating a job submission body (POST /v1/jobs). Every check
// names the field at fault and says how to fix it; nothing here has effects.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "unisched/common/status.h"
#include "unisched/model/job.h"

namespace unisched::api {

struct Submission {
  std::string name;
  std::optional<std::string> project;
  std::optional<std::string> queue;
  model::Workload workload;
  model::ResourceRequest resources;  // 0 where the queue's default applies
  model::Labels constraints;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  int priority = 0;
  std::optional<int> max_retries;  // overrides the queue's (docs/policy/retries.md)
};

// Wrong JSON types are 400 (invalid_type); values out of range are 422
// (invalid_value); unknown keys are 400 (unknown_field) so typos never pass
// silently.
Result<Submission> ParseSubmission(const nlohmann::json& body);

}  // namespace unisched::api
