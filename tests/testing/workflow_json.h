#pragma once
// Reading a workflow as GET /v1/workflows/{id} answers it, for the tests
// that run workflows through a real daemon.

#include <nlohmann/json.hpp>
#include <string>

namespace unisched::testing {

// The task named `name` of workflow `w`; null JSON when it has none.
inline const nlohmann::json& WorkflowTask(const nlohmann::json& w, const std::string& name) {
  for (const auto& task : w["tasks"]) {
    if (task["name"] == name) return task;
  }
  static const nlohmann::json none;
  return none;
}

}  // namespace unisched::testing
