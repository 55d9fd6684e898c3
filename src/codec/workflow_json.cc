// Workflows as JSON (codec/workflow_json.h).

#include "unisched/codec/workflow_json.h"

#include <algorithm>
#include <initializer_list>

#include "unisched/codec/json_reader.h"

namespace unisched::codec {

namespace {

using nlohmann::json;

// The contract's status rule (src/api/body.h): a value of the wrong type
// is 400 malformed_value, an unknown field 422 unknown_field.
Error WrongType(const std::string& field, const std::string& what) {
  return Error::BadRequest("malformed_value", field + " must be " + what, field);
}

std::optional<Error> UnknownKeys(const json& obj, const std::string& at, std::initializer_list<const char*> known) {
  for (const auto& [key, value] : obj.items()) {
    bool found = false;
    for (const char* k : known) found = found || key == k;
    if (!found) {
      std::string list;
      for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      const std::string field = at.empty() ? key : at + "." + key;
      return Error::Unprocessable("unknown_field", "unknown field " + field + "; known: " + list, field);
    }
  }
  return std::nullopt;
}

std::optional<Error> ReadString(const json& obj, const char* key, const std::string& field, std::string& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return WrongType(field, "a string");
  out = it->get<std::string>();
  return std::nullopt;
}

std::optional<Error> ReadStrings(const json& obj, const char* key, const std::string& field,
                                 std::vector<std::string>& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) return WrongType(field, "an array of strings");
  out.clear();
  out.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    if (!(*it)[i].is_string()) return WrongType(field + "[" + std::to_string(i) + "]", "a string");
    out.push_back((*it)[i].get<std::string>());
  }
  return std::nullopt;
}

std::optional<Error> ReadNumber(const json& obj, const char* key, const std::string& field, double& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return WrongType(field, "a number");
  out = it->get<double>();
  return std::nullopt;
}

Result<model::WorkflowTask> ReadTask(const json& doc, const std::string& at) {
  if (!doc.is_object()) return WrongType(at, "an object");
  if (auto e = UnknownKeys(doc, at, {"name", "job", "after", "on_failure", "scatter"})) return *e;
  model::WorkflowTask task;
  if (auto e = ReadString(doc, "name", at + ".name", task.name)) return *e;
  auto job = doc.find("job");
  if (job == doc.end() || !job->is_object()) {
    const std::string what = at + ".job must be a job object, as the body of POST /v1/jobs";
    if (job == doc.end() || job->is_null()) return Error::Unprocessable("missing_field", what, at + ".job");
    return Error::BadRequest("malformed_value", what, at + ".job");
  }
  task.job = job->dump();
  if (auto e = ReadStrings(doc, "after", at + ".after", task.after)) return *e;
  if (auto f = doc.find("on_failure"); f != doc.end() && !f->is_null()) {
    const std::string af = at + ".on_failure";
    if (!f->is_object()) return WrongType(af, "an object");
    if (auto e = UnknownKeys(*f, af, {"retries", "change", "alternative", "then"})) return *e;
    if (auto r = f->find("retries"); r != f->end() && !r->is_null()) {
      if (!r->is_number_integer()) return WrongType(af + ".retries", "an integer");
      const int64_t retries = r->get<int64_t>();
      task.on_failure.retries = static_cast<int>(std::clamp<int64_t>(retries, -1, 1000));
    }
    if (auto c = f->find("change"); c != f->end() && !c->is_null()) {
      if (!c->is_object()) return WrongType(af + ".change", "an object");
      if (auto e = UnknownKeys(*c, af + ".change", {"memory_factor", "walltime_factor"})) return *e;
      if (auto e =
              ReadNumber(*c, "memory_factor", af + ".change.memory_factor", task.on_failure.change.memory_factor)) {
        return *e;
      }
      if (auto e = ReadNumber(*c, "walltime_factor", af + ".change.walltime_factor",
                              task.on_failure.change.walltime_factor)) {
        return *e;
      }
    }
    if (auto e = ReadString(*f, "alternative", af + ".alternative", task.on_failure.alternative)) return *e;
    std::string then;
    if (auto e = ReadString(*f, "then", af + ".then", then)) return *e;
    if (!then.empty()) {
      auto parsed = model::FailureThenFromString(then);
      if (!parsed) {
        return Error::Unprocessable("invalid_value", af + ".then must be fail, skip or continue", af + ".then");
      }
      task.on_failure.then = *parsed;
    }
  }
  if (auto s = doc.find("scatter"); s != doc.end() && !s->is_null()) {
    if (!s->is_object()) return WrongType(at + ".scatter", "an object: {\"over\": [items]}");
    if (auto e = UnknownKeys(*s, at + ".scatter", {"over"})) return *e;
    if (auto e = ReadStrings(*s, "over", at + ".scatter.over", task.scatter)) return *e;
    if (task.scatter.empty()) {
      return Error::Unprocessable("invalid_value", at + ".scatter.over must list at least one item",
                                  at + ".scatter.over");
    }
  }
  return task;
}

Result<std::vector<model::WorkflowTask>> ReadTaskList(const json& body, const std::string& at) {
  auto tasks = body.find("tasks");
  if (tasks == body.end() || tasks->is_null()) {
    return Error::Unprocessable("missing_field", "tasks is required: a list of {name, job, after, on_failure, scatter}",
                                "tasks");
  }
  if (!tasks->is_array()) return WrongType(at, "an array of tasks");
  std::vector<model::WorkflowTask> out;
  out.reserve(tasks->size());
  for (size_t i = 0; i < tasks->size(); ++i) {
    auto task = ReadTask((*tasks)[i], at + "[" + std::to_string(i) + "]");
    if (!task.ok()) return task.error();
    out.push_back(std::move(task).value());
  }
  return out;
}

}  // namespace

Result<WorkflowRequest> ReadWorkflowRequest(const json& body) {
  if (!body.is_object()) return WrongType("body", "a JSON object");
  if (auto e = UnknownKeys(body, "", {"name", "project", "tasks"})) return *e;
  WorkflowRequest request;
  if (auto e = ReadString(body, "name", "name", request.spec.name)) return *e;
  if (request.spec.name.size() > 256) {
    return Error::Unprocessable("invalid_value", "name must be at most 256 characters", "name");
  }
  std::string project;
  if (auto e = ReadString(body, "project", "project", project)) return *e;
  if (project.size() > 256) {
    return Error::Unprocessable("invalid_value", "project must be at most 256 characters", "project");
  }
  if (!project.empty()) request.project = project;
  auto tasks = ReadTaskList(body, "tasks");
  if (!tasks.ok()) return tasks.error();
  request.spec.tasks = std::move(tasks).value();
  return request;
}

Result<std::vector<model::WorkflowTask>> ReadWorkflowTasks(const json& body) {
  if (!body.is_object()) return WrongType("body", "a JSON object");
  if (auto e = UnknownKeys(body, "", {"tasks"})) return *e;
  return ReadTaskList(body, "tasks");
}

json WorkflowTaskToJson(const model::WorkflowTask& task) {
  json out = {{"name", task.name}, {"job", json::parse(task.job, nullptr, false)}, {"after", task.after}};
  const model::OnFailure& f = task.on_failure;
  out["on_failure"] = {
      {"retries", f.retries},
      {"change", {{"memory_factor", f.change.memory_factor}, {"walltime_factor", f.change.walltime_factor}}},
      {"alternative", f.alternative.empty() ? json(nullptr) : json(f.alternative)},
      {"then", std::string(model::ToString(f.then))}};
  out["scatter"] = task.scatter.empty() ? json(nullptr) : json{{"over", task.scatter}};
  return out;
}

json WorkflowSpecToJson(const model::WorkflowSpec& spec) {
  json tasks = json::array();
  for (const auto& task : spec.tasks) tasks.push_back(WorkflowTaskToJson(task));
  return {{"name", spec.name}, {"tasks", std::move(tasks)}};
}

Result<model::WorkflowSpec> WorkflowSpecFromJson(const json& doc) {
  if (!doc.is_object()) return Error::Internal("stored workflow spec is not an object");
  model::WorkflowSpec spec;
  if (auto e = ReadString(doc, "name", "name", spec.name)) return *e;
  auto tasks = ReadTaskList(doc, "tasks");
  if (!tasks.ok()) return tasks.error();
  spec.tasks = std::move(tasks).value();
  return spec;
}

json WorkflowStatusToJson(const model::WorkflowStatus& status) {
  json instances = json::object();
  for (const auto& [task, list] : status.instances) {
    json items = json::array();
    for (const auto& instance : list) {
      // Waiting instances that never ran are the bulk of a large scatter:
      // written as their state alone.
      if (instance.state == model::InstanceState::kWaiting && instance.tries == 0) {
        items.push_back(json{{"state", "WAITING"}});
        continue;
      }
      json item = {{"state", std::string(model::ToString(instance.state))},
                   {"tries", instance.tries},
                   {"tool_tries", instance.tool_tries},
                   {"jobs", instance.jobs}};
      if (!instance.tool.empty()) item["tool"] = instance.tool;
      if (!instance.reason.empty()) item["reason"] = instance.reason;
      if (instance.failure_ignored) item["failure_ignored"] = true;
      items.push_back(std::move(item));
    }
    instances[task] = std::move(items);
  }
  json events = json::array();
  for (const auto& e : status.events) {
    events.push_back({{"at", FormatRfc3339(e.at)},
                      {"kind", e.kind},
                      {"task", e.task},
                      {"instance", e.instance},
                      {"message", e.message}});
  }
  return {{"state", std::string(model::ToString(status.state))},
          {"reason", status.reason},
          {"instances", std::move(instances)},
          {"events", std::move(events)}};
}

Result<model::WorkflowStatus> WorkflowStatusFromJson(const json& doc) {
  JsonReader read("invalid_workflow_document");
  model::WorkflowStatus status;
  read.Enum(doc, "state", "state", model::WorkflowStateFromString, status.state);
  read.String(doc, "reason", "reason", status.reason);
  if (const json* instances = read.Object(doc, "instances", "instances")) {
    for (const auto& [task, list] : instances->items()) {
      if (!list.is_array()) {
        read.Fail("instances." + task, "must be an array");
        break;
      }
      auto& out = status.instances[task];
      out.reserve(list.size());
      for (size_t i = 0; i < list.size() && !read.failed(); ++i) {
        const std::string at = "instances." + task + "[" + std::to_string(i) + "]";
        model::TaskInstance instance;
        read.Enum(list[i], "state", at + ".state", model::InstanceStateFromString, instance.state);
        read.Integer(list[i], "tries", at + ".tries", instance.tries);
        read.Integer(list[i], "tool_tries", at + ".tool_tries", instance.tool_tries);
        if (const json* jobs = read.Array(list[i], "jobs", at + ".jobs")) {
          for (size_t j = 0; j < jobs->size(); ++j) {
            model::WorkflowJobId id = 0;
            read.JobIdValue((*jobs)[j], at + ".jobs[" + std::to_string(j) + "]", id);
            instance.jobs.push_back(id);
          }
        }
        read.String(list[i], "tool", at + ".tool", instance.tool);
        read.String(list[i], "reason", at + ".reason", instance.reason);
        read.Bool(list[i], "failure_ignored", at + ".failure_ignored", instance.failure_ignored);
        out.push_back(std::move(instance));
      }
    }
  }
  if (const json* events = read.Array(doc, "events", "events")) {
    for (size_t i = 0; i < events->size() && !read.failed(); ++i) {
      const json& e = (*events)[i];
      const std::string at = "events[" + std::to_string(i) + "]";
      model::WorkflowEvent event;
      std::optional<Timestamp> when;
      read.Time(e, "at", at + ".at", when);
      event.at = when.value_or(Timestamp{});
      read.String(e, "kind", at + ".kind", event.kind);
      read.String(e, "task", at + ".task", event.task);
      read.Integer(e, "instance", at + ".instance", event.instance);
      read.String(e, "message", at + ".message", event.message);
      status.events.push_back(std::move(event));
    }
  }
  if (read.failed()) return read.TakeError();
  return status;
}

}  // namespace unisched::codec
