#pragma once
// Parsing and validating a job submission body (POST /v1/jobs). Every check
// names the field at fault and says how to fix it; nothing here has effects.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "unisched/common/status.h"
#include "unisched/model/job.h"
#include "unisched/service/admission.h"

namespace unisched::api {

using Submission = service::JobRequest;

// Wrong JSON types are 400 (invalid_type); values out of range are 422
// (invalid_value); unknown keys are 400 (unknown_field) so typos never pass
// silently.
Result<Submission> ParseSubmission(const nlohmann::json& body);

// PATCH /v1/jobs/{id}: {"queue", "priority", "resources": {"walltime_seconds"}},
// with the same types and bounds as a submission; any other key is 400
// unknown_field.
Result<service::JobUpdate> ParseJobUpdate(const nlohmann::json& body);

}  // namespace unisched::api
