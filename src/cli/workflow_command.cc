// `unisched workflow ...` (cli/workflow_command.h).

#include "cli/workflow_command.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <map>

#include "cli/format.h"

namespace unisched::cli {

using nlohmann::json;

namespace {

// "8 SUCCEEDED, 2 RUNNING" from a workflow's counts, leaving out zeros.
std::string CountsText(const json& counts) {
  std::string text;
  for (const auto& [state, n] : counts.items()) {
    if (!n.is_number() || n.get<int64_t>() == 0) continue;
    text += (text.empty() ? "" : ", ") + std::to_string(n.get<int64_t>()) + " " + state;
  }
  return text;
}

}  // namespace

int RunWorkflow(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure) {
  const std::string sub = args.positionals.empty() ? "" : args.positionals[0];
  const bool as_json = args.Has("json");
  std::string raw;
  if (sub == "submit") {
    if (args.positionals.size() != 2) return usage_failure("workflow submit takes one FILE (JSON; - for stdin)");
    const std::string& file = args.positionals[1];
    std::string body;
    if (file == "-") {
      body.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
      std::ifstream in(file);
      if (!in) return usage_failure("cannot read " + file);
      body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    if (auto project = args.Get("project")) {
      json doc = json::parse(body, nullptr, false);
      if (doc.is_discarded()) return usage_failure(file + " is not JSON");
      doc["project"] = *project;
      body = doc.dump();
    }
    auto answer = session.CallJson("POST", "/v1/workflows", body, {}, &raw);
    if (!answer) return 1;
    if (as_json) {
      PrintBody(raw);
    } else {
      std::cout << StringField(*answer, "id") << "\n";
    }
    return 0;
  }
  if (sub == "ls") {
    if (args.positionals.size() != 1) return usage_failure("workflow ls takes no arguments, only flags");
    std::string path = "/v1/workflows?limit=" + args.Get("limit").value_or("100");
    if (auto state = args.Get("state")) path += "&state=" + UrlEncode(*state);
    if (auto project = args.Get("project")) path += "&project=" + UrlEncode(*project);
    auto list = session.CallJson("GET", path, "", {}, &raw);
    if (!list) return 1;
    if (as_json) {
      PrintBody(raw);
      return 0;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& w : list->value("items", json::array())) {
      rows.push_back({StringField(w, "id"), StringField(w, "name"), StringField(w, "project"), StringField(w, "user"),
                      StringField(w, "state"), StringField(w, "created_at")});
    }
    std::cout << FormatTable({"ID", "NAME", "PROJECT", "USER", "STATE", "SUBMITTED"}, rows);
    return 0;
  }
  if (sub != "show" && sub != "graph" && sub != "cancel" && sub != "resume") {
    return usage_failure(sub.empty()
                             ? "give a subcommand: submit, ls, show, graph, cancel or resume"
                             : "unknown subcommand '" + sub + "'; use submit, ls, show, graph, cancel or resume");
  }
  if (args.positionals.size() != 2) return usage_failure("workflow " + sub + " takes one ID");
  const std::string path = "/v1/workflows/" + UrlEncode(args.positionals[1]);
  if (sub == "graph") {
    const std::string format = args.Get("format").value_or("mermaid");
    if (format != "dot" && format != "mermaid") return usage_failure("--format is dot or mermaid");
    auto answer = session.Call("GET", path + "?format=" + format);
    if (!answer) return 1;
    std::cout << answer->body;
    return 0;
  }
  std::optional<json> answer;
  if (sub == "show") answer = session.CallJson("GET", path, "", {}, &raw);
  if (sub == "cancel") answer = session.CallJson("DELETE", path, "", {}, &raw);
  if (sub == "resume") answer = session.CallJson("POST", path + "/resume", "{}", {}, &raw);
  if (!answer) return 1;
  if (as_json) {
    PrintBody(raw);
    return 0;
  }
  const json& w = *answer;
  std::cout << "workflow " << StringField(w, "id") << " '" << StringField(w, "name") << "' " << StringField(w, "state")
            << (StringField(w, "reason").empty() ? "" : ": " + StringField(w, "reason")) << "\n  "
            << CountsText(w.value("counts", json::object())) << "\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& task : w.value("tasks", json::array())) {
    std::map<std::string, int> states;
    std::string jobs;
    for (const auto& instance : task.value("instances", json::array())) {
      ++states[instance.value("state", "")];
      for (const auto& job : instance.value("jobs", json::array())) {
        if (jobs.size() < 40) jobs += (jobs.empty() ? "" : ",") + job.get<std::string>();
      }
    }
    std::string state_text;
    for (const auto& [state, n] : states)
      state_text += (state_text.empty() ? "" : " ") + std::to_string(n) + "x" + state;
    std::string after;
    for (const auto& a : task.value("after", json::array())) after += (after.empty() ? "" : ",") + a.get<std::string>();
    rows.push_back(
        {StringField(task, "name"), after, task["alternative_for"].is_string() ? "alternative" : state_text, jobs});
  }
  std::cout << FormatTable({"TASK", "AFTER", "INSTANCES", "JOBS"}, rows);
  return 0;
}

}  // namespace unisched::cli
