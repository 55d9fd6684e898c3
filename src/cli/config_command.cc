// `unisched config ...` (config_command.h): the /v1/config endpoints.

#include "cli/config_command.h"

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace unisched::cli {

namespace {

using nlohmann::json;

std::string FieldText(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::string InForceLine(const json& body) {
  const json in_force = body.value("in_force", json::object());
  std::string line = "in force: version " + FieldText(in_force, "version");
  if (in_force.contains("canary")) {
    line += ", with version " + FieldText(in_force["canary"], "version") + " on queue " +
            FieldText(in_force["canary"], "queue");
  }
  return line;
}

// What apply answered, for people: the changes, then the impact.
void PrintApplied(const json& body) {
  if (body.value("dry_run", false)) {
    std::cout << "Dry run: nothing applied.\n";
  } else if (body.value("applied", false)) {
    std::cout << "Applied as version " << FieldText(body, "version") << ".\n";
  } else {
    std::cout << FieldText(body, "message") << "\n";
  }
  const json changes = body.value("changes", json::array());
  if (!changes.empty()) std::cout << "Changes (" << changes.size() << "):\n";
  for (const auto& c : changes) {
    std::cout << "  " << FieldText(c, "path") << ": " << FieldText(c, "before") << " -> " << FieldText(c, "after")
              << "\n";
  }
  const json impact = body.value("impact", json::object());
  const json rerouted = impact.value("pending_rerouted", json::array());
  const json over = impact.value("running_over_limit", json::array());
  if (impact.is_object() && !impact.empty()) {
    std::cout << "Pending jobs the router would now send elsewhere: " << rerouted.size() << "\n";
    for (const auto& r : rerouted) {
      std::cout << "  job " << FieldText(r, "job") << ": " << FieldText(r, "from_queue") << " -> "
                << (r.contains("to_queue") ? FieldText(r, "to_queue") : "refused: " + FieldText(r, "refused")) << "\n";
    }
    std::cout << "Running work over a new limit: " << over.size() << "\n";
    for (const auto& o : over) {
      std::cout << "  " << FieldText(o, "scope") << ": " << FieldText(o, "held") << " > " << FieldText(o, "new_limit")
                << " (" << FieldText(o, "limit") << ")\n";
    }
  }
  std::cout << InForceLine(body) << "\n";
}

}  // namespace

std::vector<FlagSpec> ConfigFlags() {
  return {{"version", true, false}, {"dry-run", false, false}, {"canary-queue", true, false}, {"comment", true, false}};
}

int RunConfig(Session& session, const ParsedArgs& args, const std::function<int(const std::string&)>& usage_failure) {
  const std::string sub = args.positionals.empty() ? "" : args.positionals[0];
  const bool as_json = args.Has("json");
  std::string raw;
  auto version = [&]() -> std::optional<int64_t> {
    auto text = args.Get("version");
    if (!text) return std::nullopt;
    auto n = ParseInteger(*text, "version");
    return n.ok() && *n > 0 ? std::optional<int64_t>(*n) : std::optional<int64_t>(-1);
  };
  if (sub == "show") {
    const auto n = version();
    if (n && *n < 0) return usage_failure("--version must be a positive integer");
    auto shown = session.CallJson("GET", "/v1/config" + (n ? "?version=" + std::to_string(*n) : ""), {}, {}, &raw);
    if (!shown) return 1;
    if (as_json) {
      PrintBody(raw);
    } else {
      std::cout << FieldText(*shown, "text");
    }
    return 0;
  }
  if (sub == "versions") {
    auto listed = session.CallJson("GET", "/v1/config/versions", {}, {}, &raw);
    if (!listed) return 1;
    if (as_json) {
      PrintBody(raw);
      return 0;
    }
    std::cout << "VERSION  CREATED               AUTHOR           STATE     COMMENT\n";
    for (const auto& v : listed->value("versions", json::array())) {
      std::string state = v.value("current", false) ? "current" : "";
      if (v.contains("canary_queue")) state = "canary:" + FieldText(v, "canary_queue");
      std::ostringstream line;
      line.setf(std::ios::left);
      line.width(9);
      line << FieldText(v, "version");
      line.width(22);
      line << FieldText(v, "created_at");
      line.width(17);
      line << FieldText(v, "author");
      line.width(10);
      line << state << FieldText(v, "comment");
      std::cout << line.str() << "\n";
    }
    return 0;
  }
  if (sub == "apply") {
    if (args.positionals.size() != 2) return usage_failure("config apply needs one FILE");
    auto text = ReadWholeFile(args.positionals[1]);
    if (!text.ok()) return usage_failure("cannot read " + args.positionals[1]);
    json body = {{"text", *text}};
    if (auto queue = args.Get("canary-queue")) body["canary_queue"] = *queue;
    body["comment"] = args.Get("comment").value_or("unisched config apply " + args.positionals[1]);
    auto applied = session.CallJson("POST", std::string("/v1/config") + (args.Has("dry-run") ? "?dry_run=true" : ""),
                                    body.dump(), {}, &raw);
    if (!applied) return 1;
    if (as_json) {
      PrintBody(raw);
    } else {
      PrintApplied(*applied);
    }
    return 0;
  }
  if (sub == "rollback") {
    const auto n = version();
    if (n && *n < 0) return usage_failure("--version must be a positive integer");
    json body = json::object();
    if (n) body["version"] = *n;
    auto rolled = session.CallJson("POST", "/v1/config/rollback", body.dump(), {}, &raw);
    if (!rolled) return 1;
    if (as_json) {
      PrintBody(raw);
    } else {
      std::cout << (rolled->contains("message") ? FieldText(*rolled, "message") + "\n" : "") << InForceLine(*rolled)
                << "\n";
    }
    return 0;
  }
  if (sub == "promote") {
    auto promoted = session.CallJson("POST", "/v1/config/promote", "", {}, &raw);
    if (!promoted) return 1;
    if (as_json) {
      PrintBody(raw);
    } else {
      std::cout << "Promoted version " << FieldText(*promoted, "promoted") << " to every queue.\n"
                << InForceLine(*promoted) << "\n";
    }
    return 0;
  }
  return usage_failure(sub.empty()
                           ? "config needs a subcommand: show, versions, apply, rollback or promote"
                           : "unknown config subcommand '" + sub + "' (show, versions, apply, rollback, promote)");
}

}  // namespace unisched::cli
