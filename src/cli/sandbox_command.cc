// `unisched sandbox ...` (cli/sandbox_command.h).

#include "cli/sandbox_command.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace unisched::cli {

using nlohmann::json;

namespace {

std::string SandboxPath(const std::string& id) {
  return "/v1/sandboxes/" + UrlEncode(id);
}

// Positive integer flag into body[key]; false (reported) when malformed.
bool IntegerFlag(const ParsedArgs& args, const std::string& flag, json& target, const std::string& key,
                 const UsageFailureFn& usage_failure) {
  auto value = args.Get(flag);
  if (!value) return true;
  char* end = nullptr;
  const long long n = std::strtoll(value->c_str(), &end, 10);
  if (value->empty() || *end != '\0' || n <= 0) {
    usage_failure("--" + flag + " must be a positive integer, got '" + *value + "'");
    return false;
  }
  target[key] = n;
  return true;
}

}  // namespace

// `unisched sandbox SUB ...`: positionals[0] is SUB (docs/sandboxes.md).
int RunSandbox(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure) {
  const std::string sub = args.positionals.empty() ? "" : args.positionals[0];
  const bool as_json = args.Has("json");
  if (sub == "create") {
    if (args.positionals.size() != 1) return usage_failure("sandbox create takes no arguments, only flags");
    json body = json::object();
    for (const char* key : {"image", "project", "queue"}) {
      if (auto v = args.Get(key)) body[key] = *v;
    }
    json limits = json::object();
    if (!IntegerFlag(args, "cpus", limits, "cpus", usage_failure) ||
        !IntegerFlag(args, "memory-mb", limits, "memory_mb", usage_failure) ||
        !IntegerFlag(args, "timeout", limits, "timeout_seconds", usage_failure) ||
        !IntegerFlag(args, "idle-timeout", body, "idle_timeout_seconds", usage_failure)) {
      return 2;
    }
    if (!limits.empty()) body["limits"] = limits;
    std::string raw;
    auto created = session.CallJson("POST", "/v1/sandboxes", body.dump(), {}, &raw);
    if (!created) return 1;
    if (as_json) {
      PrintBody(raw);
    } else {
      std::cout << StringField(*created, "id") << "\n";
    }
    return 0;
  }
  if (sub == "exec") {
    // ID -- COMMAND: the ID is a positional and rest the command; without
    // "--", rest is ID COMMAND.
    std::vector<std::string> rest = args.rest;
    std::string id;
    if (args.positionals.size() == 2) {
      id = args.positionals[1];
    } else if (args.positionals.size() == 1 && !rest.empty()) {
      id = rest.front();
      rest.erase(rest.begin());
    } else {
      return usage_failure("sandbox exec needs one sandbox ID and a command");
    }
    if (rest.empty()) return usage_failure("sandbox exec needs a command after the ID, e.g. -- python3 -c 'print(1)'");
    json body = {{"argv", rest}};
    if (!IntegerFlag(args, "timeout", body, "timeout_seconds", usage_failure)) return 2;
    json env = json::object();
    for (const std::string& kv : args.All("env")) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) return usage_failure("--env takes K=V, got '" + kv + "'");
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    if (!env.empty()) body["env"] = env;
    if (auto file = args.Get("stdin-file")) {
      std::ostringstream text;
      if (*file == "-") {
        text << std::cin.rdbuf();
      } else {
        std::ifstream in(*file, std::ios::binary);
        if (!in) return usage_failure("cannot read --stdin-file " + *file);
        text << in.rdbuf();
      }
      body["stdin"] = text.str();
    }
    std::string raw;
    auto result = session.CallJson("POST", SandboxPath(id) + "/exec",
                                   body.dump(-1, ' ', false, json::error_handler_t::replace), {}, &raw);
    if (!result) return 1;
    if (as_json) {
      PrintBody(raw);
    } else {
      std::cout << StringField(*result, "stdout") << std::flush;
      std::cerr << StringField(*result, "stderr");
      if (result->value("timed_out", false)) std::cerr << "unisched: the command hit its time cap and was killed\n";
    }
    // Like `docker exec`: the command's own exit status.
    return std::clamp(result->value("exit_code", 1), 0, 255);
  }
  if (sub == "rm") {
    if (args.positionals.size() < 2) return usage_failure("sandbox rm needs at least one sandbox ID");
    int status = 0;
    for (size_t i = 1; i < args.positionals.size(); ++i) {
      auto removed = session.CallJson("DELETE", SandboxPath(args.positionals[i]));
      if (!removed) {
        status = 1;
        continue;
      }
      if (as_json) {
        std::cout << removed->dump() << "\n";
      } else {
        std::cout << "Removed sandbox " << args.positionals[i] << " (" << removed->value("execs", 0) << " execs)\n";
      }
    }
    return status;
  }
  if (sub == "ls") {
    return RunShow(session, args, std::string("/v1/sandboxes") + (args.Has("all") ? "?all=true" : ""),
                   FormatSandboxesTable);
  }
  return usage_failure(sub.empty() ? "sandbox needs a subcommand: create, exec, rm or ls"
                                   : "unknown sandbox subcommand '" + sub + "' (create, exec, rm, ls)");
}

}  // namespace unisched::cli
