#pragma once
// The job object of the public API (contract "The job object") as JSON, and
// back. The store keeps this same document, so JobFromJson(JobToJson(job))
// must give back every field of the job unchanged.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "unisched/common/status.h"
#include "unisched/model/job.h"

namespace unisched::codec {

// The contract shape: "id" as a string, RFC 3339 timestamps (or null),
// workload features as JSON scalars, "nodes" of the current attempt, an
// empty "pending_reasons", "priority_factors" with only the adjustment, a
// null "estimated_start" and a null "predicted_run_seconds" (the API fills
// these four from the scheduler).
nlohmann::json JobToJson(const model::Job& job);

// JobToJson(job).dump(), written straight into a string: the same bytes,
// about ten times faster (no tree of JSON values to build, copy and walk).
// Every submission and every job update stores this document, so it is on
// the daemon's hottest path. A job with text that is not valid UTF-8 gets
// JobToJson's dump with invalid bytes replaced by U+FFFD.
std::string JobDocument(const model::Job& job);

// The inverse of JobToJson. Fields it derives ("nodes", "pending_reasons",
// "priority_factors", "estimated_start", "predicted_run_seconds", an
// attempt's "nodes") and unknown
// fields are ignored; absent fields keep
// their model defaults. A field of the wrong type is a kBadRequest error
// naming that field.
Result<model::Job> JobFromJson(const nlohmann::json& doc);
// An array parent's "array" member: its indices, those still waiting, its
// cap, the id of its first task and counts of its tasks per state.
nlohmann::json ArrayToJson(const model::JobArray& array);

// A feature's text as the JSON scalar it spells: "80" -> 80, "1.5" -> 1.5,
// "true" -> true, anything else (including "080" or "1.50", whose number
// would not print back the same) stays a string.
nlohmann::json FeatureValueToJson(const std::string& text);

// A feature value back to its text form: 80 -> "80", true -> "true", a
// string as is; nullopt for null, arrays and objects.
std::optional<std::string> FeatureValueFromJson(const nlohmann::json& value);

}  // namespace unisched::codec
