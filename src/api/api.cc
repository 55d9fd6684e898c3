// The REST API's route table and the dispatch of each request: match the
// route, authenticate the bearer token (with its cache), check the query
// parameters, run the endpoint, answer once (metrics, audit). The endpoints
// are in files by resource (jobs.cc, cluster.cc, ...).

#include "unisched/api/api.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "api/access_gate.h"
#include "api/audit_trail.h"
#include "api/call.h"
#include "api/responses.h"

namespace unisched::api {

namespace {

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    size_t j = i;
    while (j < path.size() && path[j] != '/') ++j;
    if (j > i) out.emplace_back(path.substr(i, j - i));
    i = j;
  }
  return out;
}

bool IsMutating(const std::string& method) {
  return method == "POST" || method == "DELETE" || method == "PUT" || method == "PATCH";
}

}  // namespace

Api::~Api() = default;

Api::Api(ApiContext context)
    : ctx_(std::move(context)),
      audit_(std::make_unique<AuditTrail>(*ctx_.store, *ctx_.metrics, *ctx_.clock)),
      gate_(std::make_unique<AccessGate>(ctx_.config->Current().access,
                                         ctx_.config->Current().server.tls.agents_need_client_cert, *ctx_.store,
                                         *ctx_.clock, ctx_.job_token_secret)) {
  auto add = [this](std::string method, std::string templ, Endpoint endpoint, bool needs_auth = true) {
    Route route;
    route.method = std::move(method);
    route.segments = SplitPath(templ);
    route.templ = std::move(templ);
    route.endpoint = endpoint;
    route.needs_auth = needs_auth;
    routes_.push_back(std::move(route));
  };
  add("GET", "/", &Api::Console, false);
  add("GET", "/console/{file}", &Api::ConsoleFile, false);
  add("GET", "/healthz", &Api::Healthz, false);
  add("GET", "/readyz", &Api::Readyz, false);
  add("GET", "/metrics", &Api::MetricsText, ctx_.config->Current().server.metrics_require_token);
  add("POST", "/v1/jobs", &Api::SubmitJob);
  add("GET", "/v1/jobs", &Api::ListJobs);
  routes_.back().query = {QueryParam::Choice("state", {"PENDING", "HELD", "RUNNING", "COMPLETED", "FAILED", "CANCELLED",
                                                       "TIMEOUT", "NODE_FAIL"}),
                          QueryParam::Text("queue"),
                          QueryParam::Text("pool"),
                          QueryParam::Text("project"),
                          QueryParam::Text("user"),
                          QueryParam::Integer("limit", 0, 1000),
                          QueryParam::Integer("cursor", 1, INT64_MAX),
                          QueryParam::Text("array", 32)};
  add("GET", "/v1/jobs/{id}", &Api::GetJob);
  add("DELETE", "/v1/jobs/{id}", &Api::CancelJob);
  add("POST", "/v1/jobs/{id}/hold", &Api::HoldJob);
  add("POST", "/v1/jobs/{id}/release", &Api::ReleaseJob);
  add("POST", "/v1/jobs/{id}/requeue", &Api::RequeueJob);
  add("PATCH", "/v1/jobs/{id}", &Api::UpdateJob);
  add("GET", "/v1/jobs/{id}/log", &Api::JobLog);
  routes_.back().query = {QueryParam::Choice("stream", {"stdout", "stderr"}),
                          QueryParam::Integer("attempt", 1, 1'000'000),
                          QueryParam::Integer("rank", 0, 1 << 30),
                          QueryParam::Text("node"),
                          QueryParam::Integer("step", 1, 1 << 30),
                          QueryParam::Choice("follow", {"true", "false"})};
  routes_.back().for_jobs = true;
  add("POST", "/v1/jobs/{id}/steps", &Api::StartStep);
  routes_.back().for_jobs = true;
  add("GET", "/v1/jobs/{id}/steps/{step}", &Api::GetStep);
  routes_.back().for_jobs = true;
  add("GET", "/v1/jobs/{id}/events", &Api::JobEvents);
  add("GET", "/v1/pools", &Api::ListPools);
  add("GET", "/v1/queues", &Api::ListQueues);
  add("GET", "/v1/nodes", &Api::ListNodes);
  add("POST", "/v1/nodes/{name}/drain", &Api::DrainNode);
  add("POST", "/v1/nodes/{name}/resume", &Api::ResumeNode);
  add("POST", "/v1/users", &Api::CreateUser);
  add("GET", "/v1/users", &Api::ListUsers);
  add("GET", "/v1/unix-ids", &Api::ListUnixIds);
  add("POST", "/v1/users/{name}/tokens", &Api::CreateToken);
  add("GET", "/v1/users/{name}/tokens", &Api::ListTokens);
  add("DELETE", "/v1/users/{name}/tokens/{id}", &Api::RevokeToken);
  add("GET", "/v1/audit", &Api::ListAudit);
  routes_.back().query = {QueryParam::Integer("limit", 1, 10000)};
  add("GET", "/v1/whoami", &Api::WhoAmI);
  add("GET", "/v1/reports/pending", &Api::PendingReport);
  routes_.back().query = {QueryParam::Integer("limit", 1, 1000)};
  add("GET", "/v1/reports/capacity", &Api::CapacityReport);
  routes_.back().query = {QueryParam::Time("from"), QueryParam::Time("to"),
                          QueryParam::Integer("target_headroom_percent", 0, 90)};
  add("GET", "/v1/reports/cost", &Api::CostReport);
  routes_.back().query = {QueryParam::Time("from"), QueryParam::Time("to"), QueryParam::Integer("top", 1, 100)};
  add("GET", "/v1/usage", &Api::Usage);
  routes_.back().query = {
      QueryParam::Time("from"), QueryParam::Time("to"),
      QueryParam::ChoiceList("group_by", {"user", "project", "queue", "pool", "workload_kind", "tier", "job", "hour"}),
      QueryParam::Choice("format", {"json", "csv"})};
  add("GET", "/v1/usage/reconcile", &Api::Reconcile);
  add("POST", "/v1/storage/lifecycle/run", &Api::RunLifecycle);
  routes_.back().query = {QueryParam::Choice("dry_run", {"true", "false"})};
  add("GET", "/v1/events", &Api::ListEvents);
  routes_.back().query = {QueryParam::Text("kind"), QueryParam::Text("object", 512), QueryParam::Time("since"),
                          QueryParam::Integer("limit", 1, 10000)};
  add("POST", "/v1/node-tokens", &Api::CreateNodeToken);
  add("GET", "/v1/node-tokens", &Api::ListNodeTokens);
  add("DELETE", "/v1/node-tokens/{id}", &Api::RevokeNodeToken);
  add("GET", "/v1/alerts", &Api::ListAlerts);
  routes_.back().query = {QueryParam::Choice("state", {"firing", "resolved"})};
  add("POST", "/v1/sandboxes", &Api::CreateSandbox);
  add("GET", "/v1/sandboxes", &Api::ListSandboxes);
  routes_.back().query = {QueryParam::Choice("all", {"true", "false"})};
  add("GET", "/v1/sandboxes/{id}", &Api::GetSandbox);
  add("DELETE", "/v1/sandboxes/{id}", &Api::DeleteSandbox);
  add("POST", "/v1/sandboxes/{id}/exec", &Api::ExecSandbox);
  add("PUT", "/v1/sandboxes/{id}/files/{path}", &Api::PutSandboxFile);
  routes_.back().tail_param = true;
  add("GET", "/v1/sandboxes/{id}/files/{path}", &Api::GetSandboxFile);
  routes_.back().tail_param = true;
  add("GET", "/v1/images", &Api::ListImages);
  add("POST", "/v1/images", &Api::CreateImage);
  add("POST", "/v1/images/{name}/rollback", &Api::RollbackImage);
  add("GET", "/v1/config", &Api::ShowConfig);
  routes_.back().query = {QueryParam::Integer("version", 1, INT64_MAX)};
  add("POST", "/v1/config", &Api::ApplyConfig);
  routes_.back().query = {QueryParam::Choice("dry_run", {"true", "false"})};
  add("GET", "/v1/config/versions", &Api::ListConfigVersions);
  routes_.back().query = {QueryParam::Integer("limit", 1, 1000)};
  add("POST", "/v1/config/rollback", &Api::RollbackConfig);
  add("POST", "/v1/config/promote", &Api::PromoteConfig);
  add("POST", "/v1/secrets", &Api::CreateSecret);
  add("GET", "/v1/secrets", &Api::ListSecrets);
  routes_.back().query = {QueryParam::Text("project")};
  add("GET", "/v1/secrets/{project}/{name}", &Api::GetSecret);
  add("PUT", "/v1/secrets/{project}/{name}", &Api::RotateSecret);
  add("DELETE", "/v1/secrets/{project}/{name}", &Api::DeleteSecret);
  add("POST", "/v1/workflows", &Api::CreateWorkflow);
  add("GET", "/v1/workflows", &Api::ListWorkflows);
  routes_.back().query = {QueryParam::Choice("state", {"RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"}),
                          QueryParam::Text("project"), QueryParam::Integer("limit", 1, 1000)};
  add("GET", "/v1/workflows/{id}", &Api::GetWorkflow);
  routes_.back().query = {QueryParam::Choice("format", {"json", "dot", "mermaid"})};
  add("DELETE", "/v1/workflows/{id}", &Api::CancelWorkflow);
  add("POST", "/v1/workflows/{id}/resume", &Api::ResumeWorkflow);
  add("POST", "/v1/workflows/{id}/tasks", &Api::AddWorkflowTasks);
  add("POST", "/v1/baselines", &Api::RecordBaseline);
  add("GET", "/v1/baselines", &Api::ListBaselines);
  routes_.back().query = {QueryParam::Integer("limit", 1, 1000), QueryParam::Text("pools", 4096)};
  add("GET", "/v1/baselines/{id}", &Api::GetBaseline);
  add("POST", "/v1/agents/heartbeat", &Api::AgentHeartbeat);
  routes_.back().for_agents = true;
  add("POST", "/v1/agents/results", &Api::AgentResults);
  routes_.back().for_agents = true;
  add("POST", "/v1/agents/logs", &Api::AgentLogs);
  routes_.back().query = {QueryParam::Text("node"),
                          QueryParam::Integer("job", 1, INT64_MAX),
                          QueryParam::Integer("attempt", 1, 1'000'000),
                          QueryParam::Integer("task", 0, INT32_MAX),
                          QueryParam::Choice("stream", {"stdout", "stderr"}),
                          QueryParam::Integer("offset", 0, INT64_MAX)};
  routes_.back().for_agents = true;
}

std::vector<Api::RouteInfo> Api::Routes() const {
  std::vector<RouteInfo> out;
  for (const auto& r : routes_) out.push_back({r.method, r.templ, r.query, r.needs_auth});
  return out;
}

void Api::InvalidateCredentials() {
  gate_->Invalidate();
}

void Api::FlushAudit(Timestamp now, bool all) {
  audit_->Flush(now, all);
  if (auto last_use = gate_->TakeLastUse(); !last_use.empty()) {
    // Best effort: a lost write only makes a last_used_at a minute older.
    ctx_.store->Write([last_use = std::move(last_use)](store::Transaction& t) { return t.TouchTokens(last_use); },
                      [](Status) {});
  }
}

void Api::Handle(HttpRequest request, Respond respond) {
  Call call;
  call.request = std::move(request);
  call.state = std::make_shared<Call::Reply>();
  auto& state = *call.state;
  state.started = std::chrono::steady_clock::now();
  state.respond = std::move(respond);
  state.method = call.request.method;
  state.path = call.request.path;
  state.route = "unmatched";

  const auto parts = SplitPath(call.request.path);
  // HEAD is GET without the body (the listener drops it, keeping the length).
  const std::string& method = call.request.method == "HEAD" ? std::string("GET") : call.request.method;
  const Route* match = nullptr;
  bool path_known = false;
  for (const auto& route : routes_) {
    if (route.tail_param ? parts.size() < route.segments.size() : route.segments.size() != parts.size()) continue;
    std::map<std::string, std::string> params;
    bool ok = true;
    for (size_t i = 0; i < route.segments.size() && ok; ++i) {
      const auto& seg = route.segments[i];
      if (seg.size() > 2 && seg.front() == '{' && seg.back() == '}') {
        std::string value = parts[i];
        if (route.tail_param && i + 1 == route.segments.size()) {
          for (size_t j = i + 1; j < parts.size(); ++j) value += "/" + parts[j];
        }
        params[seg.substr(1, seg.size() - 2)] = std::move(value);
      } else {
        ok = seg == parts[i];
      }
    }
    if (!ok) continue;
    path_known = true;
    if (route.method != method) continue;
    match = &route;
    call.params = std::move(params);
    break;
  }
  if (match) state.route = match->templ;

  // Answer exactly once: metrics, audit of mutating calls, then the wire.
  call.reply = [this, reply_state = call.state](HttpResponse response) {
    if (reply_state->answered.exchange(true)) return;
    const auto& st = *reply_state;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - st.started).count();
    ctx_.metrics->ObserveHttp(st.route, st.method, response.status, seconds);
    // A mutating call is answered once its audit record is committed.
    if (!st.audited && st.authenticated && IsMutating(st.method)) {
      audit_->RecordThenRespond(st.actor, st.method + " " + st.route, st.path, std::move(response), st.respond);
      return;
    }
    st.respond(std::move(response));
  };

  // Every /v1 call needs a token, so one without a valid token is 401 even on
  // a path or method that does not exist (which stays hidden from it).
  const bool under_v1 = call.request.path == "/v1" || call.request.path.rfind("/v1/", 0) == 0;
  if ((match && match->needs_auth) || (!match && under_v1)) {
    std::optional<std::variant<auth::Principal, Refusal>> admission;
    try {
      admission.emplace(gate_->Admit(call.request));
    } catch (const store::StoreFailure& e) {
      // The token could not be looked up: the database is unreachable.
      spdlog::warn("{} {}: {}", call.request.method, call.request.path, e.what());
      call.reply(ErrorResponse(503, "store_unavailable", "the store cannot be read now; retry shortly"));
      return;
    }
    auto& admitted = *admission;
    if (auto* refusal = std::get_if<Refusal>(&admitted)) {
      if (!refusal->reason.empty()) audit_->CountUnauthenticated(call.request.remote, refusal->reason);
      HttpResponse response = FromError(refusal->error);
      if (refusal->retry_after_seconds > 0) {
        // Whole seconds (RFC 9110 10.2.3), rounded up so a client that waits
        // that long finds a token.
        response.headers.emplace_back("Retry-After",
                                      std::to_string(static_cast<int64_t>(std::ceil(refusal->retry_after_seconds))));
      }
      call.reply(std::move(response));
      return;
    }
    call.principal = std::move(std::get<auth::Principal>(admitted));
    state.actor = call.principal->user;
    state.authenticated = true;
  }
  if (!match) {
    call.reply(path_known ? ErrorResponse(405, "method_not_allowed",
                                          call.request.method + " is not allowed on " + call.request.path)
                          : ErrorResponse(404, "not_found", "no such endpoint: " + call.request.path));
    return;
  }
  if (call.principal) {
    // A job token starts and follows its own job's steps, and reads its
    // output; nothing else.
    if (call.principal->job_id != 0 && !match->for_jobs) {
      call.reply(ErrorResponse(403, "forbidden",
                               "a job token (UNISCHED_JOB_TOKEN) may only start and follow its own job's steps "
                               "(unisched step)"));
      return;
    }
    if (match->for_agents != !call.principal->node_pool.empty()) {
      call.reply(ErrorResponse(403, "forbidden",
                               match->for_agents ? "only node agents (a node token, POST /v1/node-tokens) may call this"
                                                 : "a node token may only be used by `unisched agent`"));
      return;
    }
  }
  for (const QueryParam& param : match->query) {
    auto it = call.request.query.find(param.name);
    if (it == call.request.query.end() || it->second.empty()) continue;
    if (auto error = CheckQueryValue(param, it->second)) {
      call.reply(FromError(*error));
      return;
    }
  }
  try {
    (this->*(match->endpoint))(call);
  } catch (const store::StoreFailure& e) {
    // The database is unreachable (a PostgreSQL server down or failing
    // over): worth retrying, not a bug.
    spdlog::warn("{} {}: {}", call.request.method, call.request.path, e.what());
    call.reply(ErrorResponse(503, "store_unavailable", "the store cannot be read now; retry shortly"));
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", call.request.method, call.request.path, e.what());
    call.reply(ErrorResponse(500, "internal", "internal error; see the daemon log"));
  }
}

HttpResponse Api::HandleSync(HttpRequest request) {
  auto promise = std::make_shared<std::promise<HttpResponse>>();
  auto future = promise->get_future();
  Handle(std::move(request), [promise](HttpResponse r) { promise->set_value(std::move(r)); });
  return future.get();
}

}  // namespace unisched::api
