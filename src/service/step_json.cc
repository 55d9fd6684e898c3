#include "unisched/service/step_json.h"

#include <string>

namespace unisched::service {

using nlohmann::json;

json StepToJson(const StepView& step) {
  json tasks = json::array();
  for (const model::TaskEnd& t : step.tasks) {
    tasks.push_back({{"rank", t.rank},
                     {"node", t.node},
                     {"state", std::string(model::ToString(t.state))},
                     {"exit_code", t.exit_code ? json(*t.exit_code) : json()},
                     {"reason", t.reason}});
  }
  return {{"job_id", std::to_string(step.job_id)},
          {"attempt", step.attempt},
          {"step", step.step},
          {"state", std::string(model::ToString(step.state))},
          {"exit_code", step.exit_code ? json(*step.exit_code) : json()},
          {"reason", step.reason},
          {"nodes", step.nodes},
          {"tasks_per_node", step.tasks_per_node},
          {"tasks", std::move(tasks)},
          {"started_at", FormatRfc3339(step.started_at)},
          {"ended_at", step.ended_at ? json(FormatRfc3339(*step.ended_at)) : json()}};
}

Result<StepView> StepFromJson(const json& doc) {
  auto bad = [](const std::string& field) { return Error::Internal("a stored step has no valid '" + field + "'"); };
  auto state_of = [](const json& value) -> std::optional<model::JobState> {
    return value.is_string() ? model::ParseJobState(value.get<std::string>()) : std::nullopt;
  };
  try {
    StepView step;
    step.job_id = std::stoll(doc.at("job_id").get<std::string>());
    step.attempt = doc.at("attempt").get<int>();
    step.step = doc.at("step").get<int>();
    auto state = state_of(doc.at("state"));
    if (!state) return bad("state");
    step.state = *state;
    if (!doc.at("exit_code").is_null()) step.exit_code = doc.at("exit_code").get<int>();
    step.reason = doc.at("reason").get<std::string>();
    step.nodes = doc.at("nodes").get<std::vector<std::string>>();
    step.tasks_per_node = doc.at("tasks_per_node").get<int>();
    for (const json& t : doc.at("tasks")) {
      model::TaskEnd task;
      task.rank = t.at("rank").get<int>();
      task.node = t.at("node").get<std::string>();
      auto task_state = state_of(t.at("state"));
      if (!task_state) return bad("tasks.state");
      task.state = *task_state;
      if (!t.at("exit_code").is_null()) task.exit_code = t.at("exit_code").get<int>();
      task.reason = t.at("reason").get<std::string>();
      step.tasks.push_back(std::move(task));
    }
    auto started = ParseRfc3339(doc.at("started_at").get<std::string>());
    if (!started) return bad("started_at");
    step.started_at = *started;
    if (!doc.at("ended_at").is_null()) {
      auto ended = ParseRfc3339(doc.at("ended_at").get<std::string>());
      if (!ended) return bad("ended_at");
      step.ended_at = *ended;
    }
    return step;
  } catch (const std::exception& e) {
    return Error::Internal(std::string("a stored step is not valid: ") + e.what());
  }
}

Result<StepView> StepFromDocument(const std::string& doc) {
  const json parsed = json::parse(doc, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Error::Internal("a stored step is not valid JSON");
  return StepFromJson(parsed);
}

}  // namespace unisched::service
