#include "unisched/executor/wire.h"

#include <stdexcept>
#include <string>

#include "executor/attempt_files.h"

namespace unisched::executor {

using nlohmann::json;

namespace {

// A malformed message is a 400 naming the field, like any other request.
Error Malformed(const std::string& what, const std::exception& e) {
  return Error::BadRequest("malformed_message", what + ": " + e.what());
}

// Thrown by the integer reads below; caught with nlohmann's exceptions.
struct MalformedField : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An integer member of a message: a JSON integer that fits Int. Not
// nlohmann's get<int>(), which converts any number unchecked: 2.5 or
// 4294967297 would silently become another int, and a float beyond the type
// (1e300) is undefined behaviour (found by tests/fuzz/agent_fuzz.cc).
template <class Int>
Int IntegerOf(const json& value, const std::string& field) {
  codec::JsonReader reader("malformed_message");
  Int out{};
  reader.IntegerValue(value, field, out);
  if (reader.failed()) throw MalformedField(reader.TakeError().message);
  return out;
}

// The same for an optional member, as obj.value(key, fallback) reads one.
template <class Int>
Int IntegerOr(const json& obj, const char* key, Int fallback, const std::string& field) {
  if (!obj.is_object()) throw MalformedField(field + ": the message part holding it must be an object");
  auto it = obj.find(key);
  return it == obj.end() ? fallback : IntegerOf<Int>(*it, field);
}

}  // namespace

json LaunchSpecToJson(const LaunchSpec& spec, bool with_secrets) {
  // The supervisor's spec format, minus what only the side that runs it
  // knows (its work directory, whether it uses cgroups). The node is
  // always sent: an agent reads "" for a spec without one.
  json doc = files::SpecToJson(files::AttemptSpec{spec, "", false, std::nullopt, ""});
  doc.erase("work_dir");
  doc.erase("use_cgroups");
  if (!with_secrets) {
    doc.erase("secrets");
    if (auto data = doc.find("data"); data != doc.end()) {
      for (auto& store : (*data)["stores"]) {
        store.erase("access_key");
        store.erase("secret_key");
      }
    }
  }
  doc["node"] = spec.node;
  return doc;
}

Result<LaunchSpec> LaunchSpecFromJson(const json& doc) {
  if (!doc.is_object()) return Error::BadRequest("invalid_message", "a launch spec must be an object");
  json full = doc;
  full["work_dir"] = "";
  full["use_cgroups"] = false;
  auto spec = files::SpecFromDocument(full);
  if (!spec.ok()) return spec.error();
  return spec->launch;
}

json RunResultToJson(const RunResult& result) {
  return files::ResultToJson(result);
}

Result<RunResult> RunResultFromJson(const json& doc) {
  return files::ResultFromDocument(doc);
}

json HeartbeatToJson(const Heartbeat& h) {
  json gpus = json::array();
  for (const auto& g : h.gpus) gpus.push_back({{"index", g.index}, {"model", g.model}, {"memory_gb", g.memory_gb}});
  auto refs = [](const std::vector<AttemptRef>& list) {
    json out = json::array();
    for (const auto& r : list) {
      json entry{{"job", r.job}, {"attempt", r.attempt}};
      if (r.task != 0) entry["task"] = r.task;
      out.push_back(std::move(entry));
    }
    return out;
  };
  json staging = json::array();
  for (const auto& p : h.staging) {
    staging.push_back({{"job", p.job_id},
                       {"attempt", p.attempt},
                       {"task", p.task},
                       {"phase", p.phase},
                       {"bytes_done", p.bytes_done},
                       {"bytes_total", p.bytes_total}});
  }
  return {{"node", h.node},
          {"pool", h.pool},
          {"staging", std::move(staging)},
          {"resources", {{"cpus", h.cpus}, {"memory_mb", h.memory_mb}, {"gpus", std::move(gpus)}}},
          {"labels", h.labels},
          {"address", h.address},
          {"running", refs(h.running)},
          {"needs_store_keys", refs(h.needs_store_keys)},
          {"healthy", h.healthy},
          {"health_message", h.health_message},
          {"wait_ms", h.wait_ms}};
}

Result<Heartbeat> HeartbeatFromJson(const json& doc) {
  try {
    Heartbeat h;
    h.node = doc.at("node").get<std::string>();
    h.pool = doc.at("pool").get<std::string>();
    const json& r = doc.at("resources");
    h.cpus = IntegerOf<int>(r.at("cpus"), "resources.cpus");
    h.memory_mb = IntegerOf<int64_t>(r.at("memory_mb"), "resources.memory_mb");
    for (const auto& g : r.value("gpus", json::array())) {
      h.gpus.push_back({IntegerOf<int>(g.at("index"), "resources.gpus[].index"), g.value("model", std::string()),
                        IntegerOr<int>(g, "memory_gb", 0, "resources.gpus[].memory_gb")});
    }
    h.labels = doc.value("labels", model::Labels{});
    h.address = doc.value("address", std::string());
    // Absent (older agents): none.
    for (const char* list : {"running", "needs_store_keys"}) {
      const std::string at = std::string(list) + "[].";
      for (const auto& a : doc.value(list, json::array())) {
        (std::string(list) == "running" ? h.running : h.needs_store_keys)
            .push_back({IntegerOf<model::JobId>(a.at("job"), at + "job"),
                        IntegerOf<int>(a.at("attempt"), at + "attempt"), IntegerOr<int>(a, "task", 0, at + "task")});
      }
    }
    h.healthy = doc.value("healthy", true);
    h.health_message = doc.value("health_message", std::string());
    h.wait_ms = IntegerOr<int>(doc, "wait_ms", 0, "wait_ms");
    for (const auto& p : doc.value("staging", json::array())) {  // absent (older agents): none
      const std::string phase = p.value("phase", std::string());
      if (phase != "staging_in" && phase != "staging_out")
        throw MalformedField("staging[].phase: unknown '" + phase + "'");
      h.staging.push_back({IntegerOf<model::JobId>(p.at("job"), "staging[].job"),
                           IntegerOf<int>(p.at("attempt"), "staging[].attempt"),
                           IntegerOr<int>(p, "task", 0, "staging[].task"), phase,
                           IntegerOr<int64_t>(p, "bytes_done", 0, "staging[].bytes_done"),
                           IntegerOr<int64_t>(p, "bytes_total", 0, "staging[].bytes_total")});
    }
    return h;
  } catch (const json::exception& e) {
    return Malformed("malformed heartbeat", e);
  } catch (const MalformedField& e) {
    return Malformed("malformed heartbeat", e);
  }
}

json CommandsToJson(const Commands& c) {
  json launch = json::array();
  for (const auto& spec : c.launch) launch.push_back(LaunchSpecToJson(spec));
  json cancel = json::array();
  for (const auto& x : c.cancel) {
    json entry{{"job", x.job}, {"attempt", x.attempt}, {"preempt", x.preempt}, {"stale", x.stale}};
    if (!x.tasks.empty()) entry["tasks"] = x.tasks;
    cancel.push_back(std::move(entry));
  }
  return {{"node_state", c.node_state},
          {"heartbeat_interval_seconds", c.heartbeat_interval_seconds},
          {"launch", std::move(launch)},
          {"cancel", std::move(cancel)},
          {"health_check",
           {{"command", c.health_check.command},
            {"interval_seconds", c.health_check.interval_seconds},
            {"timeout_seconds", c.health_check.timeout_seconds}}}};
}

Result<Commands> CommandsFromJson(const json& doc) {
  try {
    Commands c;
    c.node_state = doc.value("node_state", std::string());
    c.heartbeat_interval_seconds = IntegerOr<int>(doc, "heartbeat_interval_seconds", 5, "heartbeat_interval_seconds");
    for (const auto& spec : doc.value("launch", json::array())) {
      auto parsed = LaunchSpecFromJson(spec);
      if (!parsed.ok()) return parsed.error();
      c.launch.push_back(std::move(*parsed));
    }
    for (const auto& x : doc.value("cancel", json::array())) {
      executor::CancelCommand cancel{IntegerOf<model::JobId>(x.at("job"), "cancel[].job"),
                                     IntegerOf<int>(x.at("attempt"), "cancel[].attempt"), x.value("preempt", false),
                                     x.value("stale", false)};
      for (const auto& t : x.value("tasks", json::array()))
        cancel.tasks.push_back(IntegerOf<int>(t, "cancel[].tasks[]"));
      c.cancel.push_back(std::move(cancel));
    }
    if (doc.contains("health_check")) {
      const json& hc = doc["health_check"];
      c.health_check.command = hc.value("command", std::vector<std::string>{});
      c.health_check.interval_seconds = IntegerOr<int>(hc, "interval_seconds", 60, "health_check.interval_seconds");
      c.health_check.timeout_seconds = IntegerOr<int>(hc, "timeout_seconds", 10, "health_check.timeout_seconds");
    }
    return c;
  } catch (const json::exception& e) {
    return Malformed("malformed commands", e);
  } catch (const MalformedField& e) {
    return Malformed("malformed commands", e);
  }
}

}  // namespace unisched::executor
