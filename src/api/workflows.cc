// /v1/workflows: workflows of tasks (docs/workflows.md). The book
// (service::WorkflowBook) decides and makes the jobs; this file reads the
// bodies and renders the answers, the graph also as DOT or Mermaid.

#include <nlohmann/json.hpp>
#include <string>

#include "api/body.h"
#include "api/call.h"
#include "api/responses.h"
#include "unisched/api/api.h"
#include "unisched/codec/workflow_json.h"
#include "unisched/service/workflow_book.h"

namespace unisched::api {

namespace {

using nlohmann::json;

constexpr const char* kExample =
    R"({"name": "variants", "tasks": [{"name": "align", "job": {"command": ["bwa", "mem", "ref.fa", "r.fq"]}}, )"
    R"({"name": "call", "after": ["align"], "job": {"command": ["bcftools", "call"]}}]})";

HttpResponse NoBook() {
  return ErrorResponse(503, "unavailable", "this daemon runs no workflows");
}

// A DOT or Mermaid identifier for a task name (which may hold . and -).
std::string NodeId(const std::string& name) {
  std::string id = "t_";
  for (char c : name) id += (std::isalnum(static_cast<unsigned char>(c)) != 0) ? c : '_';
  return id;
}

// "align: 3/4 SUCCEEDED, 1 FAILED" for a task of the view.
std::string TaskLabel(const json& task) {
  std::map<std::string, int> states;
  for (const auto& instance : task["instances"]) ++states[instance["state"].get<std::string>()];
  std::string label = task["name"].get<std::string>();
  if (!task["alternative_for"].is_null()) return label + " (alternative)";
  std::string counts;
  for (const auto& [state, n] : states) counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + state;
  return label + (counts.empty() ? "" : ": " + counts);
}

std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string ToDot(const json& view) {
  std::string out = "digraph " + Quoted("workflow " + view["id"].get<std::string>()) + " {\n  rankdir=LR;\n";
  for (const auto& task : view["tasks"]) {
    out += "  " + NodeId(task["name"]) + " [label=" + Quoted(TaskLabel(task)) +
           (task["alternative_for"].is_null() ? "" : ", style=dashed") + "];\n";
    if (!task["alternative_for"].is_null()) {
      out += "  " + NodeId(task["alternative_for"]) + " -> " + NodeId(task["name"]) +
             " [style=dashed, label=\"on failure\"];\n";
    }
  }
  for (const auto& edge : view["edges"]) out += "  " + NodeId(edge["from"]) + " -> " + NodeId(edge["to"]) + ";\n";
  return out + "}\n";
}

std::string ToMermaid(const json& view) {
  std::string out = "flowchart LR\n";
  for (const auto& task : view["tasks"]) {
    std::string label = TaskLabel(task);
    for (char& c : label) c = c == '"' ? '\'' : c;
    out += "  " + NodeId(task["name"]) + "[\"" + label + "\"]\n";
    if (!task["alternative_for"].is_null()) {
      out += "  " + NodeId(task["alternative_for"]) + " -.->|on failure| " + NodeId(task["name"]) + "\n";
    }
  }
  for (const auto& edge : view["edges"]) out += "  " + NodeId(edge["from"]) + " --> " + NodeId(edge["to"]) + "\n";
  return out;
}

std::function<void(Result<json>)> Answer(const std::function<void(HttpResponse)>& reply, int status) {
  return [reply, status](Result<json> view) {
    if (!view.ok()) return reply(FromError(view.error()));
    HttpResponse r = Json(status, *view);
    if (status == 201) r.headers.emplace_back("Location", "/v1/workflows/" + (*view)["id"].get<std::string>());
    reply(std::move(r));
  };
}

}  // namespace

void Api::CreateWorkflow(Call& call) {
  if (ctx_.workflows == nullptr) return call.reply(NoBook());
  auto body = body::ParseObject(call.request.body, kExample);
  if (!body.ok()) return call.reply(FromError(body.error()));
  auto request = codec::ReadWorkflowRequest(*body);
  if (!request.ok()) return call.reply(FromError(request.error()));
  ctx_.workflows->Submit(*call.principal, std::move(request).value(), Answer(call.reply, 201));
}

void Api::ListWorkflows(Call& call) {
  const auth::Principal& who = *call.principal;
  const auto state = call.Query("state");
  const auto project = call.Query("project");
  const int64_t limit = call.QueryInt("limit", 100);
  json items = json::array();
  if (who.job_id != 0) return call.reply(Json(200, {{"items", std::move(items)}}));  // a job's token sees none
  // Newest first, read in pages of the store (state and project filtered
  // there) until `limit` the caller may see, or none are left.
  store::WorkflowFilter page;
  page.state = state.value_or("");
  page.project = project.value_or("");
  page.limit = 1000;
  while (static_cast<int64_t>(items.size()) < limit) {
    auto records = ctx_.store->ListWorkflows(page);
    if (!records.ok()) return call.reply(FromError(records.error()));
    for (const auto& w : *records) {
      if (static_cast<int64_t>(items.size()) >= limit) break;
      if (!auth::IsPlatformAdmin(who) && !auth::BelongsTo(who, w.project) && w.user != who.user) continue;
      items.push_back({{"id", std::to_string(w.id)},
                       {"name", w.name},
                       {"project", w.project},
                       {"user", w.user},
                       {"state", w.state},
                       {"created_at", FormatRfc3339(w.created_at)},
                       {"updated_at", FormatRfc3339(w.updated_at)},
                       {"ended_at", w.ended_at ? json(FormatRfc3339(*w.ended_at)) : json(nullptr)}});
    }
    if (static_cast<int>(records->size()) < page.limit) break;
    page.before_id = records->back().id;
  }
  call.reply(Json(200, {{"items", std::move(items)}}));
}

void Api::GetWorkflow(Call& call) {
  if (ctx_.workflows == nullptr) return call.reply(NoBook());
  const std::string format = call.Query("format").value_or("json");
  auto reply = call.reply;
  ctx_.workflows->Get(*call.principal, call.Param("id"), [reply, format](Result<json> view) {
    if (!view.ok()) return reply(FromError(view.error()));
    if (format == "json") return reply(Json(200, *view));
    HttpResponse r;
    r.status = 200;
    r.body = format == "dot" ? ToDot(*view) : ToMermaid(*view);
    r.content_type = format == "dot" ? "text/vnd.graphviz; charset=utf-8" : "text/plain; charset=utf-8";
    reply(std::move(r));
  });
}

void Api::CancelWorkflow(Call& call) {
  if (ctx_.workflows == nullptr) return call.reply(NoBook());
  ctx_.workflows->Cancel(*call.principal, call.Param("id"), Answer(call.reply, 200));
}

void Api::ResumeWorkflow(Call& call) {
  if (ctx_.workflows == nullptr) return call.reply(NoBook());
  ctx_.workflows->Resume(*call.principal, call.Param("id"), Answer(call.reply, 200));
}

void Api::AddWorkflowTasks(Call& call) {
  if (ctx_.workflows == nullptr) return call.reply(NoBook());
  auto body = body::ParseObject(call.request.body, R"({"tasks": [{"name": "report", "after": ["call"], "job": {}}]})");
  if (!body.ok()) return call.reply(FromError(body.error()));
  auto tasks = codec::ReadWorkflowTasks(*body);
  if (!tasks.ok()) return call.reply(FromError(tasks.error()));
  ctx_.workflows->AddTasks(*call.principal, call.Param("id"), std::move(tasks).value(), Answer(call.reply, 200));
}

}  // namespace unisched::api
