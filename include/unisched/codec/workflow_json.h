#pragma once
// Workflows (model/workflow.h) as JSON: the request's spec (POST
// /v1/workflows, docs/workflows.md) and the stored status, and back.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/model/workflow.h"

namespace unisched::codec {

// The body of POST /v1/workflows: {"name", "project", "tasks": [...]}.
struct WorkflowRequest {
  model::WorkflowSpec spec;
  std::optional<std::string> project;  // absent: the caller's only project, else "default"
};

// Reads the spec's structure; a wrong type is 400 invalid_type and an
// unknown key 400 unknown_field, naming the field (tasks[2].on_failure.then).
// Each task's "job" must be an object; it is kept as JSON text (its fields
// are the job service's to check). The graph is checked by
// model::ValidateWorkflowGraph.
Result<WorkflowRequest> ReadWorkflowRequest(const nlohmann::json& body);
// {"tasks": [...]} of POST /v1/workflows/{id}/tasks.
Result<std::vector<model::WorkflowTask>> ReadWorkflowTasks(const nlohmann::json& body);

nlohmann::json WorkflowTaskToJson(const model::WorkflowTask& task);
nlohmann::json WorkflowSpecToJson(const model::WorkflowSpec& spec);
Result<model::WorkflowSpec> WorkflowSpecFromJson(const nlohmann::json& doc);

nlohmann::json WorkflowStatusToJson(const model::WorkflowStatus& status);
Result<model::WorkflowStatus> WorkflowStatusFromJson(const nlohmann::json& doc);

}  // namespace unisched::codec
