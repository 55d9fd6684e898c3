#pragma once
// Parsing and validating a job submission body (POST /v1/jobs). Every check
// names the field at fault and says how to fix it; nothing here has effects.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/model/batch_script.h"
#include "unisched/model/job.h"
#include "unisched/service/admission.h"

namespace unisched::api {

using Submission = service::JobRequest;

// Wrong JSON types are 400 (invalid_type); values out of range are 422
// (invalid_value); unknown keys are 400 (unknown_field) so typos never pass
// silently.
// With a batch `script` (docs/slurm-users.md): its #SBATCH directives give
// the fields the body does not (resources field by field, the others
// whole; --mem-per-cpu multiplies the body's own cpus where it gives them); `command`, optional then, is the script's
// name and arguments
// (["script"] without it); without `workload` the job takes its queue's
// kind (JobRequest::workload_from_queue). A directive that cannot be
// followed is 422 naming its line (field "script"), as is one for a field
// this server lacks (--array, --dependency); one it ignores is a warning,
// into `warnings`.
Result<Submission> ParseSubmission(const nlohmann::json& body, std::vector<model::BatchWarning>* warnings = nullptr);

// PATCH /v1/jobs/{id}: {"queue", "priority", "resources": {"walltime_seconds"}},
// with the same types and bounds as a submission; any other key is 400
// unknown_field.
Result<service::JobUpdate> ParseJobUpdate(const nlohmann::json& body);

}  // namespace unisched::api
