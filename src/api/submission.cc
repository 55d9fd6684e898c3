#include "api/submission.h"

#include <chrono>
#include <set>

#include "api/body.h"
#include "unisched/codec/batch_json.h"
#include "unisched/model/batch_script.h"
#include "unisched/model/dependency.h"
#include "unisched/model/output_pattern.h"

namespace unisched::api {
namespace {

using nlohmann::json;

constexpr int kMaxNodes = 4096;
constexpr int kMaxCpus = 1 << 20;
constexpr int kMaxGpus = 1024;
constexpr size_t kMaxNameLength = 255;
constexpr int64_t kMaxRetries = 100;  // a job's own max_retries at most

using body::CheckKeys;
using body::ReadInt;
using body::WrongType;

// A scalar as text: strings as they are, numbers and booleans in JSON form.
std::optional<std::string> ScalarText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number() || v.is_boolean()) return v.dump();
  return std::nullopt;
}

constexpr size_t kMaxPathBytes = 4096;

// The body's fields, whether the client gave them or a script's directives
// did (ParseSubmission merges those in first).
// "data": {"stage_in": [{"from": "s3://...", "to": "input/"}], "stage_out":
// [{"from": "output/", "to": "s3://.../{job_id}/", "when": "success"}]}
// (docs/data.md). Shapes here; the stores and what the project may use at
// admission (service::StagingRefusal).
std::optional<Error> ReadDataStaging(const json& body, model::DataStaging& out) {
  auto data = body.find("data");
  if (data == body.end() || data->is_null()) return std::nullopt;
  constexpr const char* kShape =
      "an object, e.g. {\"stage_in\": [{\"from\": \"s3://STORE/bucket/prefix/\", \"to\": \"input/\"}], "
      "\"stage_out\": [{\"from\": \"output/\", \"to\": \"s3://STORE/bucket/results/{job_id}/\"}]}";
  if (!data->is_object()) return WrongType("data", kShape, *data);
  if (auto e = CheckKeys(*data, "data", {"stage_in", "stage_out"})) return *e;
  for (const char* list : {"stage_in", "stage_out"}) {
    auto items = data->find(list);
    if (items == data->end() || items->is_null()) continue;
    const std::string list_field = std::string("data.") + list;
    if (!items->is_array()) return WrongType(list_field, "a list of {\"from\": ..., \"to\": ...} objects", *items);
    const bool in = std::string_view(list) == "stage_in";
    for (size_t i = 0; i < items->size(); ++i) {
      const json& item = (*items)[i];
      const std::string field = list_field + "[" + std::to_string(i) + "]";
      if (!item.is_object()) return WrongType(field, "an object with from and to", item);
      if (auto e = CheckKeys(item, field,
                             in ? std::set<std::string>{"from", "to"} : std::set<std::string>{"from", "to", "when"})) {
        return *e;
      }
      std::string from, to, when = "success";
      if (auto e = body::ReadString(item, "from", field + ".from", 2048, from, /*empty_ok=*/false)) return *e;
      if (auto e = body::ReadString(item, "to", field + ".to", 2048, to)) return *e;
      if (from.empty() || (!in && to.empty())) {
        return Error::Unprocessable("missing_field", field + (from.empty() ? ".from" : ".to") + " is required",
                                    field + (from.empty() ? ".from" : ".to"));
      }
      if (in) {
        out.stage_in.push_back({std::move(from), std::move(to)});
        continue;
      }
      if (auto e = body::ReadString(item, "when", field + ".when", 16, when)) return *e;
      auto parsed = model::ParseStageWhen(when);
      if (!parsed) {
        return Error::Unprocessable(
            "invalid_value", field + ".when must be \"success\" or \"always\", not '" + when + "'", field + ".when");
      }
      out.stage_out.push_back({std::move(from), std::move(to), *parsed});
    }
  }
  return std::nullopt;
}

Result<Submission> ParseFields(const json& body) {
  Submission s;

  if (auto e = body::ReadString(body, "name", "name", kMaxNameLength, s.name)) return *e;
  for (const char* key : {"project", "queue"}) {
    std::string value;
    if (auto e = body::ReadString(body, key, key, kMaxNameLength, value)) return *e;
    if (body.contains(key) && !body[key].is_null() && value.empty()) {
      return Error::Unprocessable("invalid_value", std::string(key) + " must not be empty; omit it to use the default",
                                  key);
    }
    if (!value.empty()) (std::string_view(key) == "project" ? s.project : s.queue) = value;
  }

  // workload: required, {"kind": ..., features...}
  auto wl = body.find("workload");
  if (wl == body.end() || wl->is_null()) {
    return Error::Unprocessable("missing_field",
                                "workload is required, e.g. {\"kind\": \"hpc\"}; kinds: hpc, ai-training, "
                                "ai-inference, agent",
                                "workload");
  }
  if (!wl->is_object()) return WrongType("workload", "an object", *wl);
  auto kind = wl->find("kind");
  if (kind == wl->end()) {
    return Error::Unprocessable(
        "missing_field", "workload.kind is required: one of hpc, ai-training, ai-inference, agent", "workload.kind");
  }
  if (!kind->is_string()) return WrongType("workload.kind", "a string", *kind);
  auto parsed_kind = model::ParseWorkloadKind(kind->get<std::string>());
  if (!parsed_kind) {
    return Error::Unprocessable("invalid_value",
                                "workload.kind '" + kind->get<std::string>() +
                                    "' is not known; use one of hpc, ai-training, ai-inference, agent",
                                "workload.kind");
  }
  s.workload.kind = *parsed_kind;
  for (const auto& [key, value] : wl->items()) {
    if (key == "kind") continue;
    auto text = ScalarText(value);
    if (!text) return WrongType("workload." + key, "a string, number or boolean", value);
    if (auto e = body::CheckNoNul(key + *text, "workload." + key)) return *e;
    s.workload.features[key] = *text;
  }

  if (auto res = body.find("resources"); res != body.end() && !res->is_null()) {
    if (!res->is_object()) return WrongType("resources", "an object", *res);
    if (auto e = CheckKeys(*res, "resources",
                           {"nodes", "cpus", "memory_mb", "gpus", "gpu_model", "walltime_seconds", "tasks_per_node"})) {
      return *e;
    }
    int64_t nodes = 1, cpus = 1, memory = 0, gpus = 0, walltime = 0, tasks_per_node = 1;
    if (auto e = ReadInt(*res, "nodes", "resources.nodes", 1, kMaxNodes, nodes)) return *e;
    if (auto e = ReadInt(*res, "cpus", "resources.cpus", 1, kMaxCpus, cpus)) return *e;
    if (auto e = ReadInt(*res, "memory_mb", "resources.memory_mb", 1, int64_t{1} << 40, memory)) return *e;
    if (auto e = ReadInt(*res, "gpus", "resources.gpus", 0, kMaxGpus, gpus)) return *e;
    if (auto e =
            ReadInt(*res, "walltime_seconds", "resources.walltime_seconds", 1, int64_t{10} * 365 * 86400, walltime)) {
      return *e;
    }
    if (auto e = ReadInt(*res, "tasks_per_node", "resources.tasks_per_node", 1, kMaxCpus, tasks_per_node)) return *e;
    // Each task gets a whole share of its node: cpus (and GPUs) per node
    // divide among its tasks.
    if (tasks_per_node > cpus) {
      return Error::Unprocessable("invalid_value",
                                  "resources.tasks_per_node (" + std::to_string(tasks_per_node) +
                                      ") exceeds resources.cpus (" + std::to_string(cpus) +
                                      ", per node): each task needs a CPU; ask for at least as many cpus",
                                  "resources.tasks_per_node");
    }
    if (gpus % tasks_per_node != 0) {
      return Error::Unprocessable("invalid_value",
                                  "resources.gpus (" + std::to_string(gpus) + ", per node) must divide evenly among " +
                                      std::to_string(tasks_per_node) +
                                      " tasks per node; ask for a multiple of tasks_per_node",
                                  "resources.gpus");
    }
    s.resources.tasks_per_node = static_cast<int>(tasks_per_node);
    s.resources.nodes = static_cast<int>(nodes);
    s.resources.cpus = static_cast<int>(cpus);
    s.resources.memory_mb = memory;
    s.resources.gpus = static_cast<int>(gpus);
    s.resources.walltime_seconds = walltime;
    if (auto gm = res->find("gpu_model"); gm != res->end() && !gm->is_null()) {
      if (!gm->is_string()) return WrongType("resources.gpu_model", "a string", *gm);
      s.resources.gpu_model = gm->get<std::string>();
    }
  }

  if (auto c = body.find("constraints"); c != body.end() && !c->is_null()) {
    if (!c->is_object()) return WrongType("constraints", "an object of node labels", *c);
    for (const auto& [key, value] : c->items()) {
      auto text = ScalarText(value);
      if (!text) return WrongType("constraints." + key, "a string, number or boolean", value);
      if (auto e = body::CheckNoNul(key + *text, "constraints." + key)) return *e;
      s.constraints[key] = *text;
    }
  }

  if (auto launch = body.find("launch"); launch != body.end() && !launch->is_null()) {
    if (!launch->is_string()) return WrongType("launch", "a string", *launch);
    auto mode = model::ParseLaunchMode(launch->get<std::string>());
    if (!mode) {
      return Error::Unprocessable("invalid_value",
                                  "launch '" + launch->get<std::string>() +
                                      "' is not known; use batch (the command runs once, on the first node) or "
                                      "per_node (tasks_per_node tasks on every node at once)",
                                  "launch");
    }
    s.launch = *mode;
  }

  auto cmd = body.find("command");
  if (cmd == body.end() || cmd->is_null()) {
    return Error::Unprocessable("missing_field",
                                "command is required: a non-empty list of strings, e.g. [\"/bin/sh\", \"-c\", "
                                "\"echo hello\"] (or a batch script in script)",
                                "command");
  }
  if (!cmd->is_array()) return WrongType("command", "a list of strings", *cmd);
  if (cmd->empty()) {
    return Error::Unprocessable("invalid_value", "command must not be empty; give the program and its arguments",
                                "command");
  }
  for (size_t i = 0; i < cmd->size(); ++i) {
    const auto& arg = (*cmd)[i];
    const std::string field = "command[" + std::to_string(i) + "]";
    if (!arg.is_string()) return WrongType(field, "a string", arg);
    const auto& text = arg.get_ref<const std::string&>();
    if (auto e = body::CheckNoNul(text, field)) return *e;
    if (i == 0 && text.empty()) return Error::Unprocessable("invalid_value", "command[0] must name a program", field);
    s.command.push_back(text);
  }

  if (auto env = body.find("env"); env != body.end() && !env->is_null()) {
    if (!env->is_object()) return WrongType("env", "an object of strings", *env);
    for (const auto& [key, value] : env->items()) {
      const std::string field = "env." + key;
      if (!value.is_string()) return WrongType(field, "a string", value);
      if (!model::IsEnvName(key)) {
        return Error::Unprocessable("invalid_value", "env name '" + key + "' is not valid; use letters, digits and '_'",
                                    field);
      }
      if (key.rfind("UNISCHED_", 0) == 0) {
        return Error::Unprocessable("invalid_value", "env names starting with UNISCHED_ are set by the scheduler",
                                    field);
      }
      // The value reaches execve as "KEY=value\0": a NUL would cut it short.
      if (auto e = body::CheckNoNul(value.get_ref<const std::string&>(), field)) return *e;
      s.env[key] = value.get<std::string>();
    }
  }

  // Secrets by name, each a file or an env variable (docs/secrets.md); that
  // the job's project has them is checked at admission.
  if (auto secrets = body.find("secrets"); secrets != body.end() && !secrets->is_null()) {
    constexpr const char* kShape =
        "a list of secret names or {\"name\": ..., \"env\": ...} objects, e.g. [\"db-password\", "
        "{\"name\": \"aws-key\", \"env\": \"AWS_SECRET_ACCESS_KEY\"}]";
    if (!secrets->is_array()) return WrongType("secrets", kShape, *secrets);
    if (secrets->size() > model::kMaxSecretsPerJob) {
      return Error::Unprocessable("invalid_value",
                                  "secrets may name at most " + std::to_string(model::kMaxSecretsPerJob) + " secrets",
                                  "secrets");
    }
    for (size_t i = 0; i < secrets->size(); ++i) {
      const json& item = (*secrets)[i];
      const std::string field = "secrets[" + std::to_string(i) + "]";
      model::SecretUse use;
      if (item.is_string()) {
        use.name = item.get<std::string>();
      } else if (item.is_object()) {
        if (auto e = CheckKeys(item, field, {"name", "env"})) return *e;
        if (auto e = body::ReadString(item, "name", field + ".name", 256, use.name)) return *e;
        if (auto e = body::ReadString(item, "env", field + ".env", 256, use.env)) return *e;
      } else {
        return WrongType(field, kShape, item);
      }
      const std::string name_field = item.is_object() ? field + ".name" : field;
      if (std::string why = model::CheckSecretName(use.name); !why.empty()) {
        return Error::Unprocessable("invalid_value", "secret name '" + use.name + "' " + why, name_field);
      }
      if (!use.env.empty()) {
        if (!model::IsEnvName(use.env) || use.env.rfind("UNISCHED_", 0) == 0) {
          return Error::Unprocessable("invalid_value",
                                      "env '" + use.env +
                                          "' is not a variable the job may set: use letters, digits and '_', not "
                                          "starting with a digit or UNISCHED_",
                                      field + ".env");
        }
        if (s.env.count(use.env) != 0) {
          return Error::Unprocessable("invalid_value", "env '" + use.env + "' is set in env as well; give it one value",
                                      field + ".env");
        }
      }
      for (const auto& earlier : s.secrets) {
        if (earlier.name == use.name || (!use.env.empty() && earlier.env == use.env)) {
          return Error::Unprocessable("invalid_value",
                                      earlier.name == use.name ? "secret '" + use.name + "' is named twice"
                                                               : "env '" + use.env + "' is given two secrets",
                                      field);
        }
      }
      s.secrets.push_back(std::move(use));
    }
  }
  if (auto e = ReadDataStaging(body, s.data)) return *e;

  // Slurm's -o and -e: file name patterns (model/output_pattern.h).
  for (const auto& [key, out] : {std::pair{"output_file", &s.output_file}, std::pair{"error_file", &s.error_file}}) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    if (!it->is_string()) return WrongType(key, "a string (a file name pattern, e.g. \"slurm-%j.out\")", *it);
    const auto& pattern = it->get_ref<const std::string&>();
    if (std::string why = model::CheckOutputPattern(pattern); !why.empty()) {
      return Error::Unprocessable("invalid_value", std::string(key) + " " + why, key);
    }
    *out = pattern;
  }

  // Slurm's -D: where the job starts (its account must be able to enter it).
  if (auto e = body::ReadString(body, "workdir", "workdir", kMaxPathBytes, s.workdir)) return *e;
  if (!s.workdir.empty() && s.workdir.front() != '/') {
    return Error::Unprocessable("invalid_value",
                                "workdir '" + s.workdir + "' is relative; give an absolute path on the job's nodes",
                                "workdir");
  }

  int64_t priority = 0;
  if (auto e = ReadInt(body, "priority", "priority", -1000000, 1000000, priority)) return *e;
  s.priority = static_cast<int>(priority);
  if (auto it = body.find("begin_at"); it != body.end() && !it->is_null()) {
    auto when = it->is_string() ? ParseRfc3339(it->get<std::string>()) : std::nullopt;
    if (!when) return WrongType("begin_at", "an RFC 3339 time, e.g. \"2026-12-24T08:00:00Z\"", *it);
    s.begin_at = *when;
  }
  if (auto it = body.find("hold"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return WrongType("hold", "true or false", *it);
    s.hold = it->get<bool>();
  }
  if (auto it = body.find("max_retries"); it != body.end() && !it->is_null()) {
    int64_t retries = 0;
    if (auto e = ReadInt(body, "max_retries", "max_retries", 0, kMaxRetries, retries)) return *e;
    s.max_retries = static_cast<int>(retries);
  }
  // Slurm's --dependency text; the jobs it names are checked at admission
  // (they must exist and be visible to the caller).
  if (auto it = body.find("dependency"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return WrongType("dependency", "a string, e.g. \"afterok:12:13\"", *it);
    auto dependency = model::ParseDependency(it->get_ref<const std::string&>());
    if (!dependency.ok()) return dependency.error();
    s.dependency = std::move(dependency).value();
  }
  // Slurm's --array: {"indices": "1-1000:2", "max_running": 50}, or the
  // cap written Slurm's way, "1-1000:2%50" (docs/arrays.md).
  if (auto it = body.find("array"); it != body.end() && !it->is_null()) {
    if (!it->is_object())
      return WrongType("array", "an object, e.g. {\"indices\": \"1-100\", \"max_running\": 10}", *it);
    if (auto e = CheckKeys(*it, "array", {"indices", "max_running"})) return *e;
    std::string indices;
    if (auto e = body::ReadString(*it, "indices", "array.indices", 65536, indices)) return *e;
    int64_t max_running = 0;
    if (auto e = ReadInt(*it, "max_running", "array.max_running", 0, model::kMaxArrayTasks, max_running)) return *e;
    auto spec = model::ParseArraySpec(indices, "array.indices");
    if (!spec.ok()) return spec.error();
    if (spec->max_running != 0 && max_running != 0 && spec->max_running != max_running) {
      return Error::Unprocessable("invalid_value",
                                  "'" + indices + "' caps the array at " + std::to_string(spec->max_running) +
                                      " but max_running is " + std::to_string(max_running) + "; give the cap once",
                                  "array.max_running");
    }
    model::JobArray array;
    array.indices = std::move(spec->indices);
    array.waiting = array.indices;
    array.max_running = spec->max_running != 0 ? spec->max_running : max_running;
    s.array = std::move(array);
  }
  return s;
}

// The body of a job with a batch script: the script's directives as body
// fields, under the body's own (docs/slurm-users.md).
Result<Submission> ParseScriptSubmission(const json& body, const std::string& script,
                                         std::vector<model::BatchWarning>* warnings) {
  model::BatchOptions options;
  if (Status read = model::ReadBatchScript(script, options); !read.ok()) return read.error();
  // The body's own fields win: the directives for them are skipped.
  model::DropSettingsGiven(options, [&body](std::string_view path) {
    auto has = [](const json& obj, std::string_view key) {
      auto it = obj.find(std::string(key));  // end() for a non-object
      return it != obj.end() && !it->is_null();
    };
    const size_t dot = path.find('.');
    if (dot == std::string_view::npos) return has(body, path);
    const std::string outer(path.substr(0, dot));
    return has(body, outer) && has(body.at(outer), path.substr(dot + 1));
  });
  model::SubmitContext context;  // the API has no submitting environment nor directory
  context.now = std::chrono::time_point_cast<Timestamp::duration>(std::chrono::system_clock::now());
  if (auto res = body.find("resources"); res != body.end() && res->is_object()) {
    if (auto cpus = res->find("cpus"); cpus != res->end() && cpus->is_number_integer()) {
      context.cpus = cpus->get<int64_t>();
    }
  }
  auto request = model::ResolveBatchOptions(options, context);
  if (!request.ok()) return request.error();
  const json fragment = codec::BatchRequestToBody(*request);
  json merged = body;
  const std::vector<std::string> from_script = codec::MergeUnder(merged, fragment);
  const bool workload_given = merged.contains("workload") && !merged["workload"].is_null();
  if (!workload_given) merged["workload"] = {{"kind", "hpc"}};
  // command[0] only names the script; without a command, "script".
  if (!merged.contains("command") || merged["command"].is_null()) merged["command"] = json::array({"script"});
  auto parsed = ParseFields(merged);
  if (!parsed.ok()) {
    Error e = parsed.error();
    // A value a directive gave: say which.
    for (const std::string& path : from_script) {
      if (e.field == path || e.field.rfind(path + ".", 0) == 0) {
        if (auto source = request->sources.find(path); source != request->sources.end()) {
          e.message += " (from the script's " + source->second.Where() + ")";
        }
        break;
      }
    }
    return e;
  }
  Submission s = std::move(parsed).value();
  s.script = script;
  s.workload_from_queue = !workload_given;
  if (warnings != nullptr) *warnings = std::move(request->warnings);
  return s;
}

}  // namespace

Result<Submission> ParseSubmission(const json& body, std::vector<model::BatchWarning>* warnings) {
  if (!body.is_object()) {
    return Error::BadRequest("malformed_json", "the request body must be a JSON object describing the job");
  }
  if (auto e = CheckKeys(body, "",
                         {"name",       "project",    "queue", "workload", "resources", "constraints", "launch",
                          "command",    "script",     "env",   "workdir",  "priority",  "max_retries", "output_file",
                          "error_file", "dependency", "array", "secrets",  "data",      "hold",        "begin_at"})) {
    return *e;
  }
  auto script = body.find("script");
  if (script == body.end() || script->is_null()) return ParseFields(body);
  if (!script->is_string()) return WrongType("script", "a string (a batch script, starting with #!)", *script);
  return ParseScriptSubmission(body, script->get<std::string>(), warnings);
}

Result<service::JobUpdate> ParseJobUpdate(const json& body) {
  if (auto e = CheckKeys(body, "", {"queue", "priority", "resources"})) return *e;
  service::JobUpdate update;
  if (auto it = body.find("queue"); it != body.end() && !it->is_null()) {
    std::string queue;
    if (auto e = body::ReadString(body, "queue", "queue", kMaxNameLength, queue)) return *e;
    if (queue.empty()) return Error::Unprocessable("invalid_value", "queue must not be empty", "queue");
    update.queue = queue;
  }
  if (auto it = body.find("priority"); it != body.end() && !it->is_null()) {
    int64_t priority = 0;
    if (auto e = ReadInt(body, "priority", "priority", -1000000, 1000000, priority)) return *e;
    update.priority = static_cast<int>(priority);
  }
  if (auto res = body.find("resources"); res != body.end() && !res->is_null()) {
    if (!res->is_object()) return WrongType("resources", "an object", *res);
    if (auto e = CheckKeys(*res, "resources", {"walltime_seconds"})) return *e;
    if (auto it = res->find("walltime_seconds"); it != res->end() && !it->is_null()) {
      int64_t walltime = 0;
      if (auto e =
              ReadInt(*res, "walltime_seconds", "resources.walltime_seconds", 1, int64_t{10} * 365 * 86400, walltime)) {
        return *e;
      }
      update.walltime_seconds = walltime;
    }
  }
  return update;
}

}  // namespace unisched::api
