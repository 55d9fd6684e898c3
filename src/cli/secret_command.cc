// `unisched secret ...` (cli/secret_command.h).

#include "cli/secret_command.h"

#include <unistd.h>

#include <iostream>
#include <iterator>

#include "cli/format.h"

namespace unisched::cli {

using nlohmann::json;

namespace {

// The value: all of standard input, one trailing newline dropped (what
// `echo` and a here-string add), so `echo s3cr3t | unisched secret create x`
// stores "s3cr3t".
std::string ReadValue() {
  if (::isatty(STDIN_FILENO)) std::cerr << "value (end with Ctrl-D): " << std::flush;
  std::string value((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (!value.empty() && value.back() == '\n') value.pop_back();
  if (!value.empty() && value.back() == '\r') value.pop_back();
  return value;
}

}  // namespace

int RunSecret(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure) {
  const std::string sub = args.positionals.empty() ? "" : args.positionals[0];
  const bool as_json = args.Has("json");
  const std::string project = args.Get("project").value_or("");
  if (sub == "ls") {
    if (args.positionals.size() != 1) return usage_failure("secret ls takes no arguments, only flags");
    std::string raw;
    auto list = session.CallJson("GET", "/v1/secrets" + (project.empty() ? "" : "?project=" + UrlEncode(project)), "",
                                 {}, &raw);
    if (!list) return 1;
    if (as_json) {
      PrintBody(raw);
      return 0;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& s : list->value("secrets", json::array())) {
      rows.push_back({StringField(s, "project"), StringField(s, "name"), std::to_string(s.value("version", 0)),
                      StringField(s, "updated_at"), StringField(s, "updated_by"), StringField(s, "description")});
    }
    std::cout << FormatTable({"PROJECT", "NAME", "VERSION", "UPDATED", "BY", "DESCRIPTION"}, rows);
    return 0;
  }
  if (sub != "create" && sub != "rotate" && sub != "rm") {
    return usage_failure(sub.empty() ? "give a subcommand: create, rotate, ls or rm"
                                     : "unknown subcommand '" + sub + "'; use create, rotate, ls or rm");
  }
  if (args.positionals.size() != 2) return usage_failure("secret " + sub + " takes one NAME");
  const std::string& name = args.positionals[1];
  std::string raw;
  std::optional<json> answer;
  if (sub == "create") {
    json body = {{"name", name}, {"value", ReadValue()}};
    if (!project.empty()) body["project"] = project;
    if (auto d = args.Get("description")) body["description"] = *d;
    answer = session.CallJson("POST", "/v1/secrets", body.dump(), {}, &raw);
  } else {
    // The path needs the project: the flag's, else the caller's only one.
    std::string owner = project;
    if (owner.empty()) {
      auto me = session.CallJson("GET", "/v1/whoami");
      if (!me) return 1;
      const json projects = me->value("projects", json::array());
      if (projects.size() != 1)
        return usage_failure("give --project: you are in " + std::to_string(projects.size()) + " projects");
      owner = projects[0].get<std::string>();
    }
    const std::string path = "/v1/secrets/" + UrlEncode(owner) + "/" + UrlEncode(name);
    if (sub == "rotate") {
      json body = {{"value", ReadValue()}};
      if (auto d = args.Get("description")) body["description"] = *d;
      answer = session.CallJson("PUT", path, body.dump(), {}, &raw);
    } else {
      answer = session.CallJson("DELETE", path, "", {}, &raw);
    }
  }
  if (!answer) return 1;
  if (as_json) {
    PrintBody(raw);
  } else {
    std::cout << (sub == "rm"       ? "Deleted"
                  : sub == "create" ? "Created"
                                    : "Rotated")
              << " secret " << StringField(*answer, "project") << "/" << StringField(*answer, "name")
              << (sub == "rm" ? "" : " (version " + std::to_string(answer->value("version", 0)) + ")") << "\n";
  }
  return 0;
}

}  // namespace unisched::cli
