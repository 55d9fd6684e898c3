// The job object codec: model::Job <-> the contract's JSON job object.

#include "unisched/codec/job_json.h"

#include <charconv>
#include <limits>
#include <utility>

#include "unisched/codec/json_reader.h"

namespace unisched::codec {
namespace {

using nlohmann::json;

json TimestampOrNull(const std::optional<Timestamp>& t) {
  return t ? json(FormatRfc3339(*t)) : json(nullptr);
}

json IntOrNull(const std::optional<int>& v) {
  return v ? json(*v) : json(nullptr);
}

json NodeNamesOf(const model::Allocation& allocation) {
  json names = json::array();
  for (const auto& a : allocation) names.push_back(a.node);
  return names;
}

// [{"name": "db-password"}, {"name": "aws-key", "env": "AWS_SECRET_ACCESS_KEY"}]:
// names only, never a value.
json SecretsToJson(const std::vector<model::SecretUse>& secrets) {
  json list = json::array();
  for (const auto& use : secrets) {
    json item = {{"name", use.name}};
    if (!use.env.empty()) item["env"] = use.env;
    list.push_back(std::move(item));
  }
  return list;
}

// {"stage_in": [{"from", "to"}], "stage_out": [{"from", "to", "when"}]}.
json DataToJson(const model::DataStaging& data) {
  json in = json::array(), out = json::array();
  for (const auto& stage : data.stage_in) in.push_back({{"from", stage.from}, {"to", stage.to}});
  for (const auto& stage : data.stage_out) {
    out.push_back({{"from", stage.from}, {"to", stage.to}, {"when", std::string(model::ToString(stage.when))}});
  }
  return {{"stage_in", std::move(in)}, {"stage_out", std::move(out)}};
}

json AttemptToJson(const model::Attempt& attempt) {
  json allocation = json::array();
  for (const auto& a : attempt.allocation) {
    json share = {{"node", a.node}, {"cpus", a.cpus}, {"memory_mb", a.memory_mb}, {"gpus", a.gpu_indices}};
    if (!a.gpu_models.empty()) share["gpu_models"] = a.gpu_models;
    if (!a.cpu_ids.empty()) share["cpu_ids"] = a.cpu_ids;
    allocation.push_back(std::move(share));
  }
  json usage = nullptr;
  if (attempt.usage) {
    usage = {{"wall_seconds", attempt.usage->wall_seconds},
             {"user_cpu_seconds", attempt.usage->user_cpu_seconds},
             {"system_cpu_seconds", attempt.usage->system_cpu_seconds},
             {"max_rss_kb", attempt.usage->max_rss_kb}};
    // Only for an attempt that staged data (docs/data.md).
    if (attempt.usage->network_bytes_in != 0) usage["network_bytes_in"] = attempt.usage->network_bytes_in;
    if (attempt.usage->network_bytes_out != 0) usage["network_bytes_out"] = attempt.usage->network_bytes_out;
  }
  json doc = {{"attempt", attempt.number},
              {"nodes", attempt.allocation.empty() ? json(attempt.placed_on) : NodeNamesOf(attempt.allocation)},
              {"started_at", TimestampOrNull(attempt.started_at)},
              {"process_started_at", TimestampOrNull(attempt.process_started_at)},
              {"ended_at", TimestampOrNull(attempt.ended_at)},
              {"state", std::string(model::ToString(attempt.state))},
              {"exit_code", IntOrNull(attempt.exit_code)},
              {"reason", attempt.reason},
              {"allocation", std::move(allocation)},
              {"usage", std::move(usage)}};
  // Only on the attempts it is true of: a stored attempt without it (every
  // one written before it existed) was no transient launch failure.
  if (attempt.transient) doc["transient"] = true;
  // Pools whose backend places jobs: where it says it ran the attempt.
  if (!attempt.placed_on.empty()) doc["placed_on"] = attempt.placed_on;
  // A gang's attempt: each task's end, by rank.
  if (!attempt.tasks.empty()) {
    json tasks = json::array();
    for (const auto& t : attempt.tasks) {
      tasks.push_back({{"rank", t.rank},
                       {"node", t.node},
                       {"state", std::string(model::ToString(t.state))},
                       {"exit_code", IntOrNull(t.exit_code)},
                       {"reason", t.reason}});
    }
    doc["tasks"] = std::move(tasks);
  }
  return doc;
}

using Decoder = JsonReader;

void DecodeAttempt(Decoder& d, const json& doc, const std::string& path, model::Attempt& a) {
  if (!doc.is_object()) return d.Fail(path, "must be an object");
  d.Integer(doc, "attempt", path + ".attempt", a.number);
  d.Time(doc, "started_at", path + ".started_at", a.started_at);
  d.Time(doc, "process_started_at", path + ".process_started_at", a.process_started_at);
  d.Time(doc, "ended_at", path + ".ended_at", a.ended_at);
  d.Enum(doc, "state", path + ".state", &model::ParseJobState, a.state);
  d.OptionalInt(doc, "exit_code", path + ".exit_code", a.exit_code);
  d.String(doc, "reason", path + ".reason", a.reason);
  d.Bool(doc, "transient", path + ".transient", a.transient);
  d.StringList(doc, "placed_on", path + ".placed_on", a.placed_on);
  if (const json* tasks = d.Array(doc, "tasks", path + ".tasks")) {
    for (size_t i = 0; i < tasks->size() && !d.failed(); ++i) {
      const json& item = (*tasks)[i];
      const std::string p = path + ".tasks[" + std::to_string(i) + "]";
      if (!item.is_object()) return d.Fail(p, "must be an object");
      model::TaskEnd t;
      d.Integer(item, "rank", p + ".rank", t.rank);
      d.String(item, "node", p + ".node", t.node);
      d.Enum(item, "state", p + ".state", &model::ParseJobState, t.state);
      d.OptionalInt(item, "exit_code", p + ".exit_code", t.exit_code);
      d.String(item, "reason", p + ".reason", t.reason);
      a.tasks.push_back(std::move(t));
    }
  }
  if (const json* alloc = d.Array(doc, "allocation", path + ".allocation")) {
    for (size_t i = 0; i < alloc->size() && !d.failed(); ++i) {
      const json& item = (*alloc)[i];
      const std::string p = path + ".allocation[" + std::to_string(i) + "]";
      if (!item.is_object()) return d.Fail(p, "must be an object");
      model::NodeAllocation n;
      d.String(item, "node", p + ".node", n.node);
      d.Integer(item, "cpus", p + ".cpus", n.cpus);
      d.Integer(item, "memory_mb", p + ".memory_mb", n.memory_mb);
      d.IntList(item, "gpus", p + ".gpus", n.gpu_indices);
      d.StringList(item, "gpu_models", p + ".gpu_models", n.gpu_models);
      d.IntList(item, "cpu_ids", p + ".cpu_ids", n.cpu_ids);
      a.allocation.push_back(std::move(n));
    }
  }
  if (const json* usage = d.Object(doc, "usage", path + ".usage")) {
    model::RunUsage u;
    d.Double(*usage, "wall_seconds", path + ".usage.wall_seconds", u.wall_seconds);
    d.Double(*usage, "user_cpu_seconds", path + ".usage.user_cpu_seconds", u.user_cpu_seconds);
    d.Double(*usage, "system_cpu_seconds", path + ".usage.system_cpu_seconds", u.system_cpu_seconds);
    d.Integer(*usage, "max_rss_kb", path + ".usage.max_rss_kb", u.max_rss_kb);
    d.Integer(*usage, "network_bytes_in", path + ".usage.network_bytes_in", u.network_bytes_in);  // absent: 0
    d.Integer(*usage, "network_bytes_out", path + ".usage.network_bytes_out", u.network_bytes_out);
    a.usage = u;
  }
}

}  // namespace

json FeatureValueToJson(const std::string& text) {
  if (text == "true") return true;
  if (text == "false") return false;
  // Only a text that is exactly how its number prints becomes a number, so
  // the text comes back unchanged from FeatureValueFromJson.
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_number() && parsed.dump() == text) return parsed;
  return text;
}

std::optional<std::string> FeatureValueFromJson(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number()) return value.dump();
  return std::nullopt;
}

json JobToJson(const model::Job& job) {
  json workload = json::object();
  for (const auto& [key, value] : job.workload.features) workload[key] = FeatureValueToJson(value);
  workload["kind"] = std::string(model::ToString(job.workload.kind));

  json attempts = json::array();
  for (const auto& a : job.attempts) attempts.push_back(AttemptToJson(a));

  json preempted_by = json::array();
  for (model::JobId id : job.preempted_by) preempted_by.push_back(std::to_string(id));

  const auto& r = job.resources;
  json out = {
      {"id", std::to_string(job.id)},
      {"name", job.name},
      {"user", job.user},
      {"project", job.project},
      {"queue", job.queue},
      {"pool", job.pool},
      {"state", std::string(model::ToString(job.state))},
      {"state_reason", job.state_reason},
      {"workload", std::move(workload)},
      {"resources",
       {{"nodes", r.nodes},
        {"cpus", r.cpus},
        {"memory_mb", r.memory_mb},
        {"gpus", r.gpus},
        {"gpu_model", r.gpu_model},
        {"tasks_per_node", r.tasks_per_node},
        {"walltime_seconds", r.walltime_seconds}}},
      {"constraints", job.constraints},
      {"launch", std::string(model::ToString(job.launch))},
      {"output_file", job.output_file},
      {"error_file", job.error_file},
      {"command", job.command},
      {"script", job.script.str()},
      {"env", job.env},
      {"secrets", SecretsToJson(job.secrets)},
      {"data", DataToJson(job.data)},
      {"dependency", model::ToString(job.dependency)},
      {"workdir", job.workdir},
      {"priority", job.priority},
      {"routing", {{"pool", job.routing.pool}, {"queue", job.routing.queue}, {"reason", job.routing.reason}}},
      {"nodes", json(job.NodeNames())},
      {"exit_code", IntOrNull(job.exit_code)},
      {"pending_reasons", json::array()},
      // Derived by the API from the last scheduling cycle while the job is
      // pending; stored as for a job no cycle has seen yet.
      {"priority_factors", {{"fairshare", 0}, {"age", 0}, {"tier", 0}, {"size", 0}, {"adjustment", job.priority}}},
      {"estimated_start", nullptr},
      {"predicted_run_seconds", nullptr},
      {"attempts", std::move(attempts)},
      {"submitted_at", FormatRfc3339(job.submitted_at)},
      {"started_at", TimestampOrNull(job.started_at)},
      {"ended_at", TimestampOrNull(job.ended_at)},
      {"config_version", job.config_version},
      {"cancel_requested", job.cancel_requested},
      {"requeue_requested", job.requeue_requested},
      {"preempting_for", job.preempting_for ? json(std::to_string(*job.preempting_for)) : json(nullptr)},
      {"preempted_by", std::move(preempted_by)},
      {"stop_requested_at", TimestampOrNull(job.stop_requested_at)},
      {"max_retries", IntOrNull(job.max_retries)},
      {"eligible_at", TimestampOrNull(job.eligible_at)},
  };
  if (job.array) out["array"] = ArrayToJson(*job.array);
  if (job.array_task) {
    out["array_job_id"] = std::to_string(job.array_task->array_job_id);
    out["array_task_id"] = job.array_task->index;
  }
  return out;
}

namespace {

// Writes JSON text in nlohmann's dump() format (no spaces, keys in byte
// order, which the caller keeps). Strings are escaped as dump() does: the
// two-character escapes for \b \f \n \r \t \" \\, \u00xx for the other
// control characters, everything else (valid UTF-8) as is. A string that is
// not valid UTF-8 sets `invalid`: the caller then falls back to dump().
class DocWriter {
 public:
  explicit DocWriter(std::string& out) : out_(out) {}

  bool invalid() const { return invalid_; }

  DocWriter& Key(std::string_view key) {
    if (need_comma_) out_ += ',';
    String(key);
    out_ += ':';
    need_comma_ = false;
    return *this;
  }
  void Open(char bracket) {
    Separate();
    out_ += bracket;
    need_comma_ = false;
  }
  void Close(char bracket) {
    out_ += bracket;
    need_comma_ = true;
  }
  void Raw(std::string_view text) {
    Separate();
    out_ += text;
    need_comma_ = true;
  }
  void Int(int64_t v) { Raw(std::to_string(v)); }
  void Bool(bool v) { Raw(v ? "true" : "false"); }
  void Null() { Raw("null"); }
  void Str(std::string_view text) {
    Separate();
    String(text);
    need_comma_ = true;
  }
  void Time(const std::optional<Timestamp>& t) { t ? Str(FormatRfc3339(*t)) : Null(); }
  void OptInt(const std::optional<int>& v) { v ? Int(*v) : Null(); }
  void StringArray(const std::vector<std::string>& items) {
    Open('[');
    for (const auto& item : items) Str(item);
    Close(']');
  }
  void StringMap(const std::map<std::string, std::string>& items) {
    Open('{');
    for (const auto& [k, v] : items) Key(k).Str(v);
    Close('}');
  }

 private:
  void Separate() {
    if (need_comma_) out_ += ',';
  }

  void String(std::string_view text) {
    out_ += '"';
    size_t i = 0;
    while (i < text.size()) {
      // The run of characters that print as themselves, in one append.
      size_t plain = i;
      while (plain < text.size()) {
        const auto p = static_cast<unsigned char>(text[plain]);
        if (p < 0x20 || p >= 0x80 || p == '"' || p == '\\') break;
        ++plain;
      }
      out_.append(text.data() + i, plain - i);
      i = plain;
      if (i == text.size()) break;
      const auto c = static_cast<unsigned char>(text[i]);
      if (c >= 0x80) {
        const size_t n = Utf8Length(text, i);
        if (n == 0) {
          invalid_ = true;
          return;
        }
        out_.append(text.data() + i, n);
        i += n;
        continue;
      }
      switch (c) {
        case '"':
          out_ += "\\\"";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\b':
          out_ += "\\b";
          break;
        case '\f':
          out_ += "\\f";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\r':
          out_ += "\\r";
          break;
        case '\t':
          out_ += "\\t";
          break;
        default: {  // the other control characters (plain runs took the rest)
          static constexpr char kHex[] = "0123456789abcdef";
          out_ += "\\u00";
          out_ += kHex[c >> 4];
          out_ += kHex[c & 0xf];
        }
      }
      ++i;
    }
    out_ += '"';
  }

  // The length of the well-formed UTF-8 sequence at text[i] (RFC 3629: no
  // overlong forms, no surrogates, at most U+10FFFF), or 0.
  static size_t Utf8Length(std::string_view text, size_t i) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
    const auto cont = [&](size_t k) { return i + k < text.size() && (b(k) & 0xC0) == 0x80; };
    const unsigned char c = b(0);
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
      if (!cont(1) || !cont(2)) return 0;
      if (c == 0xE0 && b(1) < 0xA0) return 0;  // overlong
      if (c == 0xED && b(1) > 0x9F) return 0;  // surrogates
      return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
      if (!cont(1) || !cont(2) || !cont(3)) return 0;
      if (c == 0xF0 && b(1) < 0x90) return 0;  // overlong
      if (c == 0xF4 && b(1) > 0x8F) return 0;  // above U+10FFFF
      return 4;
    }
    return 0;
  }

  std::string& out_;
  bool need_comma_ = false;
  bool invalid_ = false;
};

}  // namespace

std::string JobDocument(const model::Job& job) {
  // Arrays and their tasks are rare on this path: dump() prints them.
  if (job.array || job.array_task) return JobToJson(job).dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(1024);
  DocWriter w(out);
  // Keys in byte order, as nlohmann's std::map-backed objects print them.
  w.Open('{');
  w.Key("attempts");
  if (job.attempts.empty()) {
    w.Raw("[]");
  } else {
    // Rare on this path and with doubles in it: dump() prints those.
    json attempts = json::array();
    for (const auto& a : job.attempts) attempts.push_back(AttemptToJson(a));
    w.Raw(attempts.dump(-1, ' ', false, json::error_handler_t::replace));
  }
  w.Key("cancel_requested").Bool(job.cancel_requested);
  w.Key("command").StringArray(job.command);
  w.Key("config_version").Str(job.config_version);
  w.Key("constraints").StringMap(job.constraints);
  w.Key("data").Raw(job.data.empty() ? std::string(R"({"stage_in":[],"stage_out":[]})") : DataToJson(job.data).dump());
  w.Key("dependency").Str(model::ToString(job.dependency));
  w.Key("eligible_at").Time(job.eligible_at);
  w.Key("ended_at").Time(job.ended_at);
  w.Key("env").StringMap(job.env);
  w.Key("error_file").Str(job.error_file);
  w.Key("estimated_start").Null();
  w.Key("exit_code").OptInt(job.exit_code);
  w.Key("id").Str(std::to_string(job.id));
  w.Key("launch").Str(model::ToString(job.launch));
  w.Key("max_retries").OptInt(job.max_retries);
  w.Key("name").Str(job.name);
  w.Key("nodes").StringArray(job.NodeNames());
  w.Key("output_file").Str(job.output_file);
  w.Key("pending_reasons").Raw("[]");
  w.Key("pool").Str(job.pool);
  w.Key("predicted_run_seconds").Null();
  w.Key("preempted_by").Open('[');
  for (model::JobId id : job.preempted_by) w.Str(std::to_string(id));
  w.Close(']');
  w.Key("preempting_for");
  job.preempting_for ? w.Str(std::to_string(*job.preempting_for)) : w.Null();
  w.Key("priority").Int(job.priority);
  w.Key("priority_factors").Open('{');
  w.Key("adjustment").Int(job.priority);
  w.Key("age").Int(0);
  w.Key("fairshare").Int(0);
  w.Key("size").Int(0);
  w.Key("tier").Int(0);
  w.Close('}');
  w.Key("project").Str(job.project);
  w.Key("queue").Str(job.queue);
  w.Key("requeue_requested").Bool(job.requeue_requested);
  const auto& r = job.resources;
  w.Key("resources").Open('{');
  w.Key("cpus").Int(r.cpus);
  w.Key("gpu_model").Str(r.gpu_model);
  w.Key("gpus").Int(r.gpus);
  w.Key("memory_mb").Int(r.memory_mb);
  w.Key("nodes").Int(r.nodes);
  w.Key("tasks_per_node").Int(r.tasks_per_node);
  w.Key("walltime_seconds").Int(r.walltime_seconds);
  w.Close('}');
  w.Key("routing").Open('{');
  w.Key("pool").Str(job.routing.pool);
  w.Key("queue").Str(job.routing.queue);
  w.Key("reason").Str(job.routing.reason);
  w.Close('}');
  w.Key("script").Str(job.script.str());
  w.Key("secrets").Raw(job.secrets.empty() ? std::string("[]") : SecretsToJson(job.secrets).dump());
  w.Key("started_at").Time(job.started_at);
  w.Key("state").Str(model::ToString(job.state));
  w.Key("state_reason").Str(job.state_reason);
  w.Key("stop_requested_at").Time(job.stop_requested_at);
  w.Key("submitted_at").Str(FormatRfc3339(job.submitted_at));
  w.Key("user").Str(job.user);
  w.Key("workdir").Str(job.workdir);
  // The workload: its features and "kind" (which wins over a feature of
  // that name), merged in key order. A feature's text is a JSON number or
  // boolean exactly when FeatureValueToJson makes it one, and then prints
  // as itself.
  w.Key("workload").Open('{');
  const std::string_view kind = model::ToString(job.workload.kind);
  bool kind_written = false;
  for (const auto& [key, value] : job.workload.features) {
    if (!kind_written && key >= "kind") {
      w.Key("kind").Str(kind);
      kind_written = true;
    }
    if (key == "kind") continue;
    w.Key(key);
    if (FeatureValueToJson(value).is_string()) {
      w.Str(value);
    } else {
      w.Raw(value);
    }
  }
  if (!kind_written) w.Key("kind").Str(kind);
  w.Close('}');
  w.Close('}');
  if (w.invalid()) return JobToJson(job).dump(-1, ' ', false, json::error_handler_t::replace);
  return out;
}

Result<model::Job> JobFromJson(const json& doc) {
  if (!doc.is_object()) return Error::BadRequest("invalid_job_document", "a job must be a JSON object");
  Decoder d("invalid_job_document");
  model::Job job;

  if (const json* id = d.Field(doc, "id")) d.JobIdValue(*id, "id", job.id);
  d.String(doc, "name", "name", job.name);
  d.String(doc, "user", "user", job.user);
  d.String(doc, "project", "project", job.project);
  d.String(doc, "queue", "queue", job.queue);
  d.String(doc, "pool", "pool", job.pool);
  d.Enum(doc, "state", "state", &model::ParseJobState, job.state);
  d.String(doc, "state_reason", "state_reason", job.state_reason);

  if (const json* w = d.Object(doc, "workload", "workload")) {
    d.Enum(*w, "kind", "workload.kind", &model::ParseWorkloadKind, job.workload.kind);
    for (const auto& [key, value] : w->items()) {
      if (key == "kind" || d.failed()) continue;
      auto text = FeatureValueFromJson(value);
      if (!text) {
        d.Fail("workload." + key, "must be a string, number or boolean");
        break;
      }
      job.workload.features[key] = std::move(*text);
    }
  }
  if (const json* r = d.Object(doc, "resources", "resources")) {
    d.Integer(*r, "nodes", "resources.nodes", job.resources.nodes);
    d.Integer(*r, "cpus", "resources.cpus", job.resources.cpus);
    d.Integer(*r, "memory_mb", "resources.memory_mb", job.resources.memory_mb);
    d.Integer(*r, "gpus", "resources.gpus", job.resources.gpus);
    d.String(*r, "gpu_model", "resources.gpu_model", job.resources.gpu_model);
    d.Integer(*r, "walltime_seconds", "resources.walltime_seconds", job.resources.walltime_seconds);
    d.Integer(*r, "tasks_per_node", "resources.tasks_per_node", job.resources.tasks_per_node);
  }
  d.Enum(doc, "launch", "launch", &model::ParseLaunchMode, job.launch);  // absent (before gangs): batch
  d.StringMap(doc, "constraints", "constraints", job.constraints);
  d.StringList(doc, "command", "command", job.command);
  d.StringMap(doc, "env", "env", job.env);
  // Both absent from documents written before batch scripts: a command, in the work directory.
  std::string script;
  d.String(doc, "script", "script", script);
  job.script = model::ScriptText(std::move(script));
  d.String(doc, "workdir", "workdir", job.workdir);
  if (auto it = doc.find("secrets"); it != doc.end() && it->is_array()) {  // absent (before secrets): none
    for (const auto& use : *it) {
      model::SecretUse parsed;
      if (use.is_object()) {
        d.String(use, "name", "secrets.name", parsed.name);
        d.String(use, "env", "secrets.env", parsed.env);
      }
      job.secrets.push_back(std::move(parsed));
    }
  }
  if (auto it = doc.find("data"); it != doc.end() && it->is_object()) {  // absent (before staging): none
    for (const char* list : {"stage_in", "stage_out"}) {
      auto items = it->find(list);
      if (items == it->end() || !items->is_array()) continue;
      for (const auto& item : *items) {
        if (!item.is_object()) continue;
        std::string from, to, when;
        d.String(item, "from", std::string("data.") + list + ".from", from);
        d.String(item, "to", std::string("data.") + list + ".to", to);
        if (std::string_view(list) == "stage_in") {
          job.data.stage_in.push_back({std::move(from), std::move(to)});
          continue;
        }
        d.String(item, "when", "data.stage_out.when", when);
        job.data.stage_out.push_back(
            {std::move(from), std::move(to), model::ParseStageWhen(when).value_or(model::StageWhen::kSuccess)});
      }
    }
  }
  d.String(doc, "output_file", "output_file", job.output_file);  // absent (before -o): none
  d.String(doc, "error_file", "error_file", job.error_file);
  d.Integer(doc, "priority", "priority", job.priority);
  std::string dependency;  // absent (before dependencies): none
  d.String(doc, "dependency", "dependency", dependency);
  if (!dependency.empty() && !d.failed()) {
    auto parsed = model::ParseDependency(dependency);
    if (parsed.ok()) {
      job.dependency = std::move(parsed).value();
    } else {
      d.Fail("dependency", parsed.error().message);
    }
  }
  if (const json* r = d.Object(doc, "routing", "routing")) {
    d.String(*r, "pool", "routing.pool", job.routing.pool);
    d.String(*r, "queue", "routing.queue", job.routing.queue);
    d.String(*r, "reason", "routing.reason", job.routing.reason);
  }
  d.OptionalInt(doc, "exit_code", "exit_code", job.exit_code);
  if (const json* attempts = d.Array(doc, "attempts", "attempts")) {
    for (size_t i = 0; i < attempts->size() && !d.failed(); ++i) {
      model::Attempt a;
      DecodeAttempt(d, (*attempts)[i], "attempts[" + std::to_string(i) + "]", a);
      job.attempts.push_back(std::move(a));
    }
  }
  std::optional<Timestamp> submitted;
  d.Time(doc, "submitted_at", "submitted_at", submitted);
  if (submitted) job.submitted_at = *submitted;
  d.Time(doc, "started_at", "started_at", job.started_at);
  d.Time(doc, "ended_at", "ended_at", job.ended_at);
  d.String(doc, "config_version", "config_version", job.config_version);
  d.Bool(doc, "cancel_requested", "cancel_requested", job.cancel_requested);
  d.Bool(doc, "requeue_requested", "requeue_requested", job.requeue_requested);  // absent (before requeue): false
  if (const json* v = d.Field(doc, "preempting_for")) {
    model::JobId id = 0;
    d.JobIdValue(*v, "preempting_for", id);
    if (!d.failed()) job.preempting_for = id;
  }
  d.Time(doc, "stop_requested_at", "stop_requested_at", job.stop_requested_at);
  d.OptionalInt(doc, "max_retries", "max_retries", job.max_retries);
  d.Time(doc, "eligible_at", "eligible_at", job.eligible_at);
  if (const json* list = d.Array(doc, "preempted_by", "preempted_by")) {
    for (size_t i = 0; i < list->size() && !d.failed(); ++i) {
      model::JobId id = 0;
      d.JobIdValue((*list)[i], "preempted_by[" + std::to_string(i) + "]", id);
      job.preempted_by.push_back(id);
    }
  }

  if (const json* a = d.Object(doc, "array", "array")) {
    model::JobArray array;
    std::string indices, waiting;
    d.String(*a, "indices", "array.indices", indices);
    d.String(*a, "waiting", "array.waiting", waiting);
    d.Integer(*a, "max_running", "array.max_running", array.max_running);
    if (const json* first = d.Field(*a, "first_task_id"))
      d.JobIdValue(*first, "array.first_task_id", array.first_task_id);
    if (const json* t = d.Object(*a, "tasks", "array.tasks")) {
      d.Integer(*t, "completed", "array.tasks.completed", array.tasks_completed);
      d.Integer(*t, "failed", "array.tasks.failed", array.tasks_failed);
    }
    if (!d.failed()) {
      auto all = model::IndexSet::Parse(indices, "array.indices");
      if (!all.ok()) return Error::BadRequest("invalid_job_document", all.error().message, "array.indices");
      array.indices = std::move(all).value();
      if (!waiting.empty()) {
        auto left = model::IndexSet::Parse(waiting, "array.waiting");
        if (!left.ok()) return Error::BadRequest("invalid_job_document", left.error().message, "array.waiting");
        array.waiting = std::move(left).value();
      }
      job.array = std::move(array);
    }
  }
  if (const json* parent = d.Field(doc, "array_job_id")) {
    model::ArrayTask task;
    d.JobIdValue(*parent, "array_job_id", task.array_job_id);
    d.Integer(doc, "array_task_id", "array_task_id", task.index);
    if (!d.failed()) job.array_task = task;
  }

  if (d.failed()) return d.TakeError();
  return job;
}

json ArrayToJson(const model::JobArray& array) {
  const int64_t total = array.indices.Count();
  const int64_t waiting = array.waiting.Count();
  return {{"indices", array.indices.ToString()},
          {"waiting", array.waiting.ToString()},
          {"max_running", array.max_running},
          {"first_task_id", std::to_string(array.first_task_id)},
          {"tasks",
           {{"total", total},
            {"waiting", waiting},
            {"active", array.ActiveTasks()},
            {"completed", array.tasks_completed},
            {"failed", array.tasks_failed}}}};
}

}  // namespace unisched::codec
