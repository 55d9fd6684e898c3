// Builds the submission body from `unisched submit` arguments.

#include "cli/submit_args.h"

#include <charconv>
#include <chrono>
#include <cstdint>
#include <system_error>

#include "unisched/model/batch_script.h"

namespace unisched::cli {
namespace {

using nlohmann::json;

// "80" -> 80, "1.5" -> 1.5, anything else (including "080", " 7", "1e3",
// "inf") stays the string it was: only plain decimal numbers that print back
// the same way become numbers, so a label-like value is never altered.
json FeatureValue(const std::string& text) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  const char* digits = (begin != end && *begin == '-') ? begin + 1 : begin;
  if (digits == end || !std::isdigit(static_cast<unsigned char>(*digits))) return text;
  if (*digits == '0' && digits + 1 != end && digits[1] != '.') return text;  // leading zero: an identifier
  bool seen_dot = false;
  for (const char* p = digits; p != end; ++p) {
    if (*p == '.') {
      if (seen_dot || p + 1 == end) return text;
      seen_dot = true;
    } else if (!std::isdigit(static_cast<unsigned char>(*p))) {
      return text;
    }
  }
  if (!seen_dot) {
    int64_t i = 0;
    auto [ptr, ec] = std::from_chars(begin, end, i);
    if (ec == std::errc() && ptr == end) return i;
    return text;  // too large for an integer: keep it exact as text
  }
  double d = 0;
  auto [ptr, ec] = std::from_chars(begin, end, d);
  if (ec == std::errc() && ptr == end) return d;
  return text;
}

const char* const kKinds[] = {"hpc", "ai-training", "ai-inference", "agent"};

}  // namespace

Result<json> BuildWorkload(const std::optional<std::string>& kind_flag, const std::vector<std::string>& features) {
  const std::string kind = kind_flag.value_or("hpc");
  bool known = false;
  for (const char* k : kKinds) known |= kind == k;
  if (!known)
    return UsageError("--kind must be one of hpc, ai-training, ai-inference, agent; got '" + kind + "'", "kind");
  json workload = {{"kind", kind}};
  for (const auto& text : features) {
    auto kv = ParseKeyValue(text, "feature");
    if (!kv.ok()) return kv.error();
    if (kv->first == "kind")
      return UsageError("use --kind to set the workload kind, not --feature kind=...", "feature");
    workload[kv->first] = FeatureValue(kv->second);
  }
  return workload;
}

const std::vector<FlagSpec>& SubmitFlags() {
  static const std::vector<FlagSpec> kFlags = {
      {"name", true, false},
      {"project", true, false},
      {"queue", true, false},
      {"kind", true, false},
      {"feature", true, true},
      {"nodes", true, false},
      {"cpus", true, false},
      {"memory-mb", true, false},
      {"gpus", true, false},
      {"gpu-model", true, false},
      {"walltime", true, false},
      {"time", true, false},
      {"constraint", true, true},
      {"env", true, true},
      {"secret", true, true},
      {"priority", true, false},
      {"idempotency-key", true, false},
      {"wait", false, false},
      {"output", true, false, 'o'},
      {"error", true, false, 'e'},
      {"launch", true, false},
      {"tasks-per-node", true, false},
      {"dependency", true, false, 'd'},
      {"array", true, false, 'a'},
      {"hold", false, false, 'H'},
      {"begin", true, false, 'b'},
  };
  return kFlags;
}

Result<SubmitRequest> BuildSubmitRequest(const ParsedArgs& args, const std::string& submit_dir) {
  if (!args.positionals.empty()) {
    return UsageError("unexpected argument '" + args.positionals.front() + "'; put the command after --");
  }
  if (args.rest.empty()) return UsageError("submit needs a command, e.g. unisched submit -- /bin/echo hello");
  if (args.rest.front().empty()) return UsageError("the command's program name is empty");

  SubmitRequest req;
  json& body = req.body;
  body = json::object();
  for (const char* key : {"name", "project", "queue"}) {
    if (auto v = args.Get(key)) body[key] = *v;
  }

  auto workload = BuildWorkload(args.Get("kind"), args.All("feature"));
  if (!workload.ok()) return workload.error();
  body["workload"] = std::move(workload).value();

  json resources = json::object();
  struct IntFlag {
    const char* flag;
    const char* key;
  };
  for (const auto& f :
       {IntFlag{"nodes", "nodes"}, IntFlag{"cpus", "cpus"}, IntFlag{"memory-mb", "memory_mb"}, IntFlag{"gpus", "gpus"},
        IntFlag{"walltime", "walltime_seconds"}, IntFlag{"tasks-per-node", "tasks_per_node"}}) {
    if (auto v = args.Get(f.flag)) {
      auto n = ParseInteger(*v, f.flag);
      if (!n.ok()) return n.error();
      resources[f.key] = *n;
    }
  }
  if (auto t = args.Get("time")) {
    if (args.Has("walltime")) return UsageError("give either --walltime or --time, not both", "time");
    auto seconds = ParseDuration(*t);
    if (!seconds.ok()) return seconds.error();
    resources["walltime_seconds"] = *seconds;
  }
  if (auto m = args.Get("gpu-model")) resources["gpu_model"] = *m;
  if (!resources.empty()) body["resources"] = std::move(resources);

  for (const auto& [flag, key] : {std::pair{"constraint", "constraints"}, std::pair{"env", "env"}}) {
    json obj = json::object();
    for (const auto& text : args.All(flag)) {
      auto kv = ParseKeyValue(text, flag);
      if (!kv.ok()) return kv.error();
      obj[kv->first] = kv->second;
    }
    if (!obj.empty()) body[key] = std::move(obj);
  }

  // --secret NAME (a file in $UNISCHED_SECRETS_DIR) or NAME=VAR (in $VAR): docs/secrets.md.
  for (const auto& text : args.All("secret")) {
    const size_t eq = text.find('=');
    if (eq == std::string::npos) {
      body["secrets"].push_back(text);
    } else {
      body["secrets"].push_back({{"name", text.substr(0, eq)}, {"env", text.substr(eq + 1)}});
    }
  }

  // Slurm's -o/-e patterns, the launch mode and -d/--dependency go as they are: the daemon
  // checks them and names the field of a bad one.
  for (const auto& [flag, key] : {std::pair{"output", "output_file"}, std::pair{"error", "error_file"},
                                  std::pair{"launch", "launch"}, std::pair{"dependency", "dependency"}}) {
    if (auto v = args.Get(flag)) body[key] = *v;
  }
  // Slurm's --array (1-100:2%10, the cap after '%'), as the API reads it.
  if (auto a = args.Get("array")) body["array"] = {{"indices", *a}};
  if (!submit_dir.empty() && !body.value("env", json::object()).contains("SLURM_SUBMIT_DIR")) {
    body["env"]["SLURM_SUBMIT_DIR"] = submit_dir;
  }
  if (args.Has("hold")) body["hold"] = true;
  if (auto b = args.Get("begin")) {
    auto when =
        model::ParseSlurmWhen(*b, std::chrono::time_point_cast<Timestamp::duration>(std::chrono::system_clock::now()));
    if (!when)
      return UsageError("--begin '" + *b + "' is not a time; write 16:00, now+1hour or 2026-12-24T08:00", "begin");
    body["begin_at"] = FormatRfc3339(*when);
  }
  body["command"] = args.rest;
  if (auto p = args.Get("priority")) {
    auto n = ParseInteger(*p, "priority");
    if (!n.ok()) return n.error();
    body["priority"] = *n;
  }
  req.idempotency_key = args.Get("idempotency-key").value_or("");
  req.wait = args.Has("wait");
  return req;
}

Result<SubmitRequest> ParseSubmit(const std::vector<std::string>& args) {
  auto parsed = ParseArgs(args, SubmitFlags(), /*stop_at_positional=*/true);
  if (!parsed.ok()) return parsed.error();
  return BuildSubmitRequest(*parsed);
}

}  // namespace unisched::cli
