// Batch script options as job body fields (codec/batch_json.h).

#include "unisched/codec/batch_json.h"

#include <optional>
#include <utility>

namespace unisched::codec {

using nlohmann::json;

namespace {

template <class T>
void Put(json& obj, const char* key, const std::optional<T>& value) {
  if (value) obj[key] = *value;
}

bool Absent(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null();
}

}  // namespace

json BatchRequestToBody(const model::BatchRequest& r) {
  json body = json::object();
  Put(body, "name", r.name);
  Put(body, "queue", r.queue);
  Put(body, "project", r.project);
  json resources = json::object();
  Put(resources, "nodes", r.nodes);
  Put(resources, "cpus", r.cpus);
  Put(resources, "memory_mb", r.memory_mb);
  Put(resources, "gpus", r.gpus);
  Put(resources, "gpu_model", r.gpu_model);
  Put(resources, "tasks_per_node", r.tasks_per_node);
  Put(resources, "walltime_seconds", r.walltime_seconds);
  if (!resources.empty()) body["resources"] = std::move(resources);
  Put(body, "constraints", r.constraints);
  Put(body, "output_file", r.output_file);
  Put(body, "error_file", r.error_file);
  Put(body, "workdir", r.workdir);
  Put(body, "env", r.env);
  Put(body, "max_retries", r.max_retries);
  Put(body, "hold", r.hold);
  Put(body, "begin_at", r.begin_at);
  Put(body, "dependency", r.dependency);
  if (r.array) {
    json array = {{"indices", r.array->indices}};
    if (r.array->max_running) array["max_running"] = *r.array->max_running;
    body["array"] = std::move(array);
  }
  return body;
}

json BatchWarningsToJson(const std::vector<model::BatchWarning>& warnings) {
  json out = json::array();
  for (const auto& w : warnings) {
    out.push_back({{"line", w.source.line}, {"option", w.source.text}, {"message", w.message}});
  }
  return out;
}

std::vector<std::string> MergeUnder(json& body, const json& fragment) {
  std::vector<std::string> put;
  for (const auto& [key, value] : fragment.items()) {
    if (key == "resources" && value.is_object()) {
      if (Absent(body, key)) body[key] = json::object();
      json& resources = body[key];
      if (!resources.is_object()) continue;  // the body's own error, reported by its parser
      for (const auto& [field, v] : value.items()) {
        if (!Absent(resources, field)) continue;
        resources[field] = v;
        put.push_back("resources." + field);
      }
      continue;
    }
    if (!Absent(body, key)) continue;
    body[key] = value;
    put.push_back(key);
  }
  return put;
}

}  // namespace unisched::codec
