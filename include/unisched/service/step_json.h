#pragma once
// A step as JSON: what GET /v1/jobs/{id}/steps/{step} answers and what the
// store keeps of it (store::StepRecord::doc), one shape for both.

#include <nlohmann/json.hpp>
#include <string>

#include "unisched/common/status.h"
#include "unisched/service/planes.h"

namespace unisched::service {

nlohmann::json StepToJson(const StepView& step);
// The inverse of StepToJson; a field missing or of the wrong type is a
// kInternal error naming it (the store's rows are the daemon's own).
Result<StepView> StepFromJson(const nlohmann::json& doc);
// StepFromJson of a stored document's text (store::StepRecord::doc).
Result<StepView> StepFromDocument(const std::string& doc);

}  // namespace unisched::service
