// The route table and the endpoint handlers of the REST API (contract v1).

#include "unisched/api/api.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "api/audit_trail.h"
#include "api/body.h"
#include "api/call.h"
#include "api/responses.h"
#include "api/submission.h"
#include "unisched/api/reconcile.h"
#include "unisched/codec/job_json.h"
#include "unisched/ledger/ledger.h"
#include "unisched/router/router.h"

namespace unisched::api {

using nlohmann::json;

int StatusOf(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kBadRequest:
      return 400;
    case ErrorKind::kUnauthenticated:
      return 401;
    case ErrorKind::kForbidden:
      return 403;
    case ErrorKind::kNotFound:
      return 404;
    case ErrorKind::kConflict:
      return 409;
    case ErrorKind::kTooLarge:
      return 413;
    case ErrorKind::kUnprocessable:
      return 422;
    case ErrorKind::kRateLimited:
      return 429;
    case ErrorKind::kUnavailable:
      return 503;
    case ErrorKind::kInternal:
      break;
  }
  return 500;
}

HttpResponse FromError(const Error& e) {
  return ErrorResponse(StatusOf(e.kind), e.code, e.message, e.field);
}

HttpResponse Json(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

namespace {

using model::JobState;

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

// The token of an "Authorization: Bearer <token>" header. The scheme is
// case-insensitive and may be followed by several spaces (RFC 9110 11.1 and
// 11.4), so "bearer <token>" from some clients works too.
std::optional<std::string_view> BearerCredentials(std::string_view header) {
  static constexpr std::string_view kScheme = "bearer";
  if (header.size() <= kScheme.size() ||
      !std::equal(kScheme.begin(), kScheme.end(), header.begin(),
                  [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); })) {
    return std::nullopt;
  }
  std::string_view rest = header.substr(kScheme.size());
  if (rest.front() != ' ' && rest.front() != '\t') return std::nullopt;
  const size_t start = rest.find_first_not_of(" \t");
  if (start == std::string_view::npos) return std::nullopt;
  rest = rest.substr(start);
  const size_t end = rest.find_last_not_of(" \t");
  return rest.substr(0, end + 1);
}

bool IsMutating(const std::string& method) {
  return method == "POST" || method == "DELETE" || method == "PUT";
}

json LabelsJson(const model::Labels& labels) {
  json out = json::object();
  for (const auto& [k, v] : labels) out[k] = v;
  return out;
}

json NodeJson(const ClusterView::Node& node) {
  const auto& u = node.usage;
  json gpus = json::array();
  json busy = json::array();
  for (size_t i = 0; i < u.spec.gpus.size(); ++i) {
    const auto& g = u.spec.gpus[i];
    gpus.push_back({{"index", g.index}, {"model", g.model}, {"memory_gb", g.memory_gb}});
    if (i < u.gpu_busy.size() && u.gpu_busy[i]) busy.push_back(g.index);
  }
  return {{"name", u.spec.name},
          {"pool", u.spec.pool},
          {"labels", LabelsJson(u.spec.labels)},
          {"state", std::string(model::ToString(u.state))},
          {"reason", node.reason},
          {"resources", {{"cpus", u.spec.cpus}, {"memory_mb", u.spec.memory_mb}, {"gpus", gpus}}},
          {"allocated", {{"cpus", u.cpus_used}, {"memory_mb", u.memory_used_mb}, {"gpus", busy}}},
          {"last_heartbeat", node.last_heartbeat ? json(FormatRfc3339(*node.last_heartbeat)) : json(nullptr)},
          {"agent", u.spec.agent}};
}

json UserJson(const store::UserRecord& u) {
  return {{"name", u.name},     {"role", u.role},           {"projects", u.projects},
          {"queues", u.queues}, {"unix_user", u.unix_user}, {"from_config", u.from_config}};
}

bool ValidUserName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  if (!(std::islower(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  for (char c : name) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_' ||
          c == '-' || c == '.')) {
      return false;
    }
  }
  return true;
}

}  // namespace

Api::~Api() = default;

Api::Api(ApiContext context)
    : ctx_(std::move(context)), audit_(std::make_unique<AuditTrail>(*ctx_.store, *ctx_.metrics, *ctx_.clock)) {
  auto add = [this](std::string method, std::string templ, Endpoint endpoint, bool needs_auth = true) {
    Route route;
    route.method = std::move(method);
    route.segments = SplitPath(templ);
    route.templ = std::move(templ);
    route.endpoint = endpoint;
    route.needs_auth = needs_auth;
    routes_.push_back(std::move(route));
  };
  add("GET", "/healthz", &Api::Healthz, false);
  add("GET", "/readyz", &Api::Readyz, false);
  add("GET", "/metrics", &Api::MetricsText, ctx_.config->server.metrics_require_token);
  add("POST", "/v1/jobs", &Api::SubmitJob);
  add("GET", "/v1/jobs", &Api::ListJobs);
  routes_.back().query = {QueryParam::Choice("state", {"PENDING", "HELD", "RUNNING", "COMPLETED", "FAILED", "CANCELLED",
                                                       "TIMEOUT", "NODE_FAIL"}),
                          QueryParam::Text("queue"),
                          QueryParam::Text("pool"),
                          QueryParam::Text("project"),
                          QueryParam::Text("user"),
                          QueryParam::Integer("limit", 0, 1000),
                          QueryParam::Integer("cursor", 1, INT64_MAX)};
  add("GET", "/v1/jobs/{id}", &Api::GetJob);
  add("DELETE", "/v1/jobs/{id}", &Api::CancelJob);
  add("POST", "/v1/jobs/{id}/hold", &Api::HoldJob);
  add("POST", "/v1/jobs/{id}/release", &Api::ReleaseJob);
  add("GET", "/v1/jobs/{id}/log", &Api::JobLog);
  routes_.back().query = {QueryParam::Choice("stream", {"stdout", "stderr"})};
  add("GET", "/v1/jobs/{id}/events", &Api::JobEvents);
  add("GET", "/v1/pools", &Api::ListPools);
  add("GET", "/v1/queues", &Api::ListQueues);
  add("GET", "/v1/nodes", &Api::ListNodes);
  add("POST", "/v1/nodes/{name}/drain", &Api::DrainNode);
  add("POST", "/v1/nodes/{name}/resume", &Api::ResumeNode);
  add("POST", "/v1/users", &Api::CreateUser);
  add("GET", "/v1/users", &Api::ListUsers);
  add("POST", "/v1/users/{name}/tokens", &Api::CreateToken);
  add("GET", "/v1/audit", &Api::ListAudit);
  routes_.back().query = {QueryParam::Integer("limit", 1, 10000)};
  add("GET", "/v1/whoami", &Api::WhoAmI);
  add("GET", "/v1/usage", &Api::Usage);
  routes_.back().query = {QueryParam::Time("from"), QueryParam::Time("to"),
                          QueryParam::ChoiceList("group_by", {"user", "project", "queue", "pool", "workload_kind"}),
                          QueryParam::Choice("format", {"json", "csv"})};
  add("GET", "/v1/usage/reconcile", &Api::Reconcile);
  add("GET", "/v1/events", &Api::ListEvents);
  routes_.back().query = {QueryParam::Text("kind"), QueryParam::Text("object", 512), QueryParam::Time("since"),
                          QueryParam::Integer("limit", 1, 10000)};
  add("POST", "/v1/node-tokens", &Api::CreateNodeToken);
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
  add("POST", "/v1/agents/heartbeat", &Api::AgentHeartbeat);
  routes_.back().for_agents = true;
  add("POST", "/v1/agents/results", &Api::AgentResults);
  routes_.back().for_agents = true;
}

std::vector<Api::RouteInfo> Api::Routes() const {
  std::vector<RouteInfo> out;
  for (const auto& r : routes_) out.push_back({r.method, r.templ, r.query, r.needs_auth});
  return out;
}

void Api::InvalidateCredentials() {
  std::lock_guard lock(credentials_mu_);
  credentials_.clear();
}

Result<auth::Principal> Api::Authenticate(const HttpRequest& request) {
  const std::string header = request.Header("authorization");
  auto credentials = BearerCredentials(header);
  if (!credentials) return Error::Unauthenticated("missing bearer token: send 'Authorization: Bearer <token>'");
  const std::string hash = auth::HashToken(*credentials);
  {
    std::lock_guard lock(credentials_mu_);
    if (auto it = credentials_.find(hash); it != credentials_.end()) return it->second;
  }
  auto token = ctx_.store->FindToken(hash);
  if (token && token->kind == "node") {
    // A node agent's token: it acts for the nodes of one pool, nothing else.
    auth::Principal p;
    p.user = "node:" + token->pool;
    p.node_pool = token->pool;
    std::lock_guard lock(credentials_mu_);
    credentials_[hash] = p;
    return p;
  }
  if (!token || token->kind != "user") return Error::Unauthenticated("invalid or revoked token");
  auto user = ctx_.store->GetUser(token->user);
  if (!user) return Error::Unauthenticated("the token's user no longer exists");
  auth::Principal p;
  p.user = user->name;
  p.role = auth::ParseRole(user->role).value_or(auth::Role::kUser);
  p.projects = user->projects;
  p.queues = user->queues;
  p.unix_user = user->unix_user;
  std::lock_guard lock(credentials_mu_);
  credentials_[hash] = p;
  return p;
}

void Api::FlushAudit(Timestamp now, bool all) {
  audit_->Flush(now, all);
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
    auto principal = Authenticate(call.request);
    if (!principal.ok()) {
      const std::string header = call.request.Header("authorization");
      const bool presented = BearerCredentials(header).has_value();
      audit_->CountUnauthenticated(call.request.remote, presented ? "invalid" : "missing");
      call.reply(FromError(principal.error()));
      return;
    }
    call.principal = std::move(principal.value());
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

// ---- probes and metrics ----

void Api::Healthz(Call& call) {
  call.reply(Json(200, {{"status", "ok"}}));
}

void Api::Readyz(Call& call) {
  if (ctx_.ready && !ctx_.ready()) {
    call.reply(ErrorResponse(503, "not_ready", "the daemon is starting: recovery is not finished"));
    return;
  }
  call.reply(Json(200, {{"status", "ready"}}));
}

void Api::MetricsText(Call& call) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = ctx_.metrics->Serialize();
  call.reply(std::move(r));
}

// ---- jobs ----

namespace {
// The stored job plus what the last scheduling cycle said about it. While a
// job is pending, `priority` is the multifactor priority it is ordered by and
// `priority_factors` its named terms (docs/policy/priority.md); otherwise
// `priority` is the job's own value (the adjustment term).
json JobView(const model::Job& job, const ClusterView* view) {
  json out = codec::JobToJson(job);
  json reasons = json::array();
  model::PriorityFactors factors;
  factors.adjustment = job.priority;
  std::optional<Timestamp> estimated_start;
  if (job.state == JobState::kHeld) {
    reasons.push_back({{"code", "Held"}, {"message", "held; release it to let it be scheduled"}});
  } else if (job.state == JobState::kPending && view) {
    if (auto it = view->pending->find(job.id); it != view->pending->end()) {
      for (const auto& r : it->second.Reasons()) reasons.push_back({{"code", r.code}, {"message", r.message}});
      factors = it->second.priority;
      estimated_start = it->second.estimated_start;
    }
  }
  out["pending_reasons"] = std::move(reasons);
  out["priority"] = factors.Total();
  out["priority_factors"] = {{"fairshare", factors.fairshare},
                             {"age", factors.age},
                             {"tier", factors.tier},
                             {"size", factors.size},
                             {"adjustment", factors.adjustment}};
  out["estimated_start"] = estimated_start ? json(FormatRfc3339(*estimated_start)) : json(nullptr);
  return out;
}
}  // namespace

void Api::SubmitJob(Call& call) {
  auto body = body::ParseObject(call.request.body, R"({"workload": {"kind": "hpc"}, "command": ["true"]})");
  if (!body.ok()) {
    call.reply(FromError(body.error()));
    return;
  }
  auto parsed = ParseSubmission(*body);
  if (!parsed.ok()) {
    call.reply(FromError(parsed.error()));
    return;
  }
  // Refusals are audited by the API as any other call; an accepted job's
  // record is committed with it.
  auto state = call.state;
  auto reply = call.reply;
  ctx_.jobs->Submit(*call.principal, std::move(parsed).value(), call.request.Header("idempotency-key"), "POST /v1/jobs",
                    [this, state, reply](Result<service::JobService::Submitted> submitted) {
                      if (!submitted.ok()) {
                        reply(FromError(submitted.error()));
                        return;
                      }
                      state->audited = true;
                      if (submitted->replayed) {
                        auto r = Json(201, JobView(*submitted->replayed, ctx_.jobs->View().get()));
                        r.headers.emplace_back("Idempotent-Replayed", "true");
                        reply(std::move(r));
                        return;
                      }
                      HttpResponse r;
                      r.status = 201;
                      r.body = *submitted->document;
                      r.headers.emplace_back("Location", "/v1/jobs/" + std::to_string(submitted->id));
                      reply(std::move(r));
                    });
}

void Api::ListJobs(Call& call) {
  store::JobFilter filter;
  if (auto state = call.Query("state")) filter.state = model::ParseJobState(*state);
  for (auto [key, slot] : {std::pair{"queue", &filter.queue}, std::pair{"pool", &filter.pool},
                           std::pair{"project", &filter.project}, std::pair{"user", &filter.user}}) {
    if (auto value = call.Query(key)) *slot = *value;
  }
  filter.limit = static_cast<int>(call.QueryInt("limit", 100));
  if (auto cursor = call.Query("cursor")) filter.cursor = call.QueryInt("cursor", 0);
  const auth::Principal& who = *call.principal;
  if (!auth::IsPlatformAdmin(who)) {
    filter.visible_projects = who.projects;
    if (who.role == auth::Role::kQueueAdmin) filter.visible_queues = who.queues;
  }
  auto page = ctx_.store->ListJobs(filter);
  auto view = ctx_.control->View();
  json jobs = json::array();
  for (const auto& job : page.jobs) jobs.push_back(JobView(job, view.get()));
  call.reply(Json(200, {{"jobs", std::move(jobs)},
                        {"total", page.total},
                        {"next_cursor", page.next_cursor ? json(std::to_string(*page.next_cursor)) : json(nullptr)}}));
}

// ---- usage (docs/ledger.md) ----

void Api::Usage(Call& call) {
  store::UsageQuery query;
  query.from = call.QueryTime("from");
  query.to = call.QueryTime("to");
  if (auto groups = call.Query("group_by")) {
    std::string rest = *groups;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string name = rest.substr(0, comma);
      rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
      if (std::find(query.group_by.begin(), query.group_by.end(), name) == query.group_by.end()) {
        query.group_by.push_back(name);
      }
    }
  }
  const std::string format = call.Query("format").value_or("json");
  const auth::Principal& who = *call.principal;
  if (!auth::IsPlatformAdmin(who)) {
    query.visible_projects = who.projects;
    if (who.role == auth::Role::kQueueAdmin) query.visible_queues = who.queues;
  }
  std::vector<store::UsageRow> rows;
  const auto& pools = ctx_.config->cluster.pools;
  const bool priced =
      std::any_of(pools.begin(), pools.end(), [](const model::PoolSpec& p) { return !p.prices.empty(); });
  if (!priced) {
    rows = ctx_.store->QueryUsage(query);
  } else {
    // Cost = sum over pools of quantity / 3600 x the pool's price per hour of
    // the metric: query per pool, price, then fold into the requested groups.
    store::UsageQuery by_pool = query;
    if (std::find(by_pool.group_by.begin(), by_pool.group_by.end(), "pool") == by_pool.group_by.end()) {
      by_pool.group_by.push_back("pool");
    }
    std::map<std::map<std::string, std::string>, store::UsageRow> folded;
    for (const auto& row : ctx_.store->QueryUsage(by_pool)) {
      const model::PoolSpec* pool = ctx_.config->cluster.FindPool(row.group.at("pool"));
      double cost = 0;
      for (const auto& [metric, quantity] : row.metrics) {
        if (!pool) continue;
        auto price = pool->prices.find(metric);
        if (price != pool->prices.end()) cost += quantity / 3600.0 * price->second;
      }
      std::map<std::string, std::string> key;
      for (const auto& g : query.group_by) key[g] = row.group.at(g);
      store::UsageRow& out = folded[key];
      out.group = key;
      for (const auto& [metric, quantity] : row.metrics) out.metrics[metric] += quantity;
      out.metrics["cost"] += cost;
    }
    for (auto& [key, row] : folded) rows.push_back(std::move(row));
  }
  // Sandbox and elastic work is reported in instance-minutes as well: the
  // row's instance-seconds / 60, rounded to the nearest hundredth of a minute
  // (0.6 s; halves away from zero). Rounded once per row, from its exact
  // total, so rounding never accumulates over entries.
  for (auto& row : rows) {
    if (auto it = row.metrics.find(ledger::kInstanceSeconds); it != row.metrics.end()) {
      row.metrics["instance_minutes"] = std::round(it->second / 60.0 * 100.0) / 100.0;
    }
  }
  if (format == "csv") {
    // Columns: the groups, then every metric any row has (absent: empty).
    std::set<std::string> metric_names;
    for (const auto& row : rows) {
      for (const auto& [metric, value] : row.metrics) metric_names.insert(metric);
    }
    std::string text;
    auto add_cell = [&text](bool first, const std::string& cell) { text += (first ? "" : ",") + cell; };
    bool first = true;
    for (const auto& g : query.group_by) add_cell(std::exchange(first, false), g);
    for (const auto& m : metric_names) add_cell(std::exchange(first, false), m);
    text += "\n";
    for (const auto& row : rows) {
      first = true;
      for (const auto& g : query.group_by) add_cell(std::exchange(first, false), row.group.at(g));
      for (const auto& m : metric_names) {
        auto it = row.metrics.find(m);
        add_cell(std::exchange(first, false), it == row.metrics.end() ? "" : json(it->second).dump());
      }
      text += "\n";
    }
    HttpResponse r;
    r.content_type = "text/csv; charset=utf-8";
    r.body = std::move(text);
    call.reply(std::move(r));
    return;
  }
  json out = json::array();
  for (const auto& row : rows) {
    json o = json::object();
    for (const auto& g : query.group_by) o[g] = row.group.at(g);
    for (const auto& [metric, value] : row.metrics) o[metric] = value;
    out.push_back(std::move(o));
  }
  call.reply(Json(200, {{"rows", std::move(out)}}));
}

void Api::Reconcile(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "reconciliation is for platform-admins"));
    return;
  }
  const ledger::Reconciliation report = ReconcileLedger(*ctx_.store, ctx_.config->cluster);
  json details = json::array();
  for (const auto& d : report.details) {
    details.push_back({{"kind", d.kind},
                       {"job", std::to_string(d.job)},
                       {"attempt", d.attempt},
                       {"metric", d.metric},
                       {"detail", d.detail},
                       {"node", d.node},
                       {"expected", d.expected},
                       {"recorded", d.recorded}});
  }
  call.reply(Json(200, {{"missing", report.missing},
                        {"duplicated", report.duplicated},
                        {"mismatched", report.mismatched},
                        {"attempts_checked", report.attempts_checked},
                        {"unverifiable_attempts", report.unverifiable_attempts},
                        {"details", std::move(details)}}));
}

void Api::GetJob(Call& call) {
  auto job = ctx_.jobs->VisibleJob(*call.principal, call.Param("id"));
  if (!job.ok()) {
    call.reply(FromError(job.error()));
    return;
  }
  call.reply(Json(200, JobView(*job, ctx_.control->View().get())));
}

void Api::ControlJobAction(Call& call, ControlPlane::JobAction action) {
  auto reply = call.reply;
  ctx_.jobs->Control(*call.principal, call.Param("id"), action, [reply, this](Result<model::Job> result) {
    if (!result.ok()) {
      reply(FromError(result.error()));
      return;
    }
    reply(Json(200, JobView(*result, ctx_.control->View().get())));
  });
}

void Api::CancelJob(Call& call) {
  ControlJobAction(call, ControlPlane::JobAction::kCancel);
}
void Api::HoldJob(Call& call) {
  ControlJobAction(call, ControlPlane::JobAction::kHold);
}
void Api::ReleaseJob(Call& call) {
  ControlJobAction(call, ControlPlane::JobAction::kRelease);
}

void Api::JobLog(Call& call) {
  auto job = ctx_.jobs->VisibleJob(*call.principal, call.Param("id"));
  if (!job.ok()) {
    call.reply(FromError(job.error()));
    return;
  }
  const std::string stream = call.Query("stream").value_or("stdout");
  HttpResponse r;
  r.content_type = "text/plain; charset=utf-8";
  if (const model::Attempt* attempt = job->CurrentAttempt()) {
    std::ifstream in(ctx_.log_path(job->id, attempt->number, stream), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    r.body = text.str();
  }
  call.reply(std::move(r));
}

void Api::ListEvents(Call& call) {
  store::EventFilter filter;
  if (auto kind = call.Query("kind")) filter.kind = *kind;
  if (auto object = call.Query("object")) filter.object = *object;
  filter.since = call.QueryTime("since");
  filter.limit = static_cast<int>(call.QueryInt("limit", filter.limit));
  // Node and alert events are for everyone (like GET /v1/nodes); a job's
  // events for those who may read the job; a sandbox's for those who may use it.
  const auth::Principal& who = *call.principal;
  if (!auth::IsPlatformAdmin(who)) {
    filter.visible_projects = who.projects;
    if (who.role == auth::Role::kQueueAdmin) filter.visible_queues = who.queues;
  }
  json events = json::array();
  // A sandbox's events (its command lines) only for those who may use it.
  std::map<std::string, bool> sandbox_visible;
  auto may_see = [&](const std::string& object) {
    if (auth::IsPlatformAdmin(who) || object.rfind("sandbox/", 0) != 0) return true;
    auto [it, fresh] = sandbox_visible.emplace(object, false);
    if (fresh && ctx_.sandboxes) {
      const std::string id = object.substr(std::string("sandbox/sb-").size());
      auto sandbox = id.empty() || id.find_first_not_of("0123456789") != std::string::npos
                         ? Result<json>(Error::NotFound("no sandbox"))
                         : ctx_.sandboxes->Get(std::stoll(id));
      it->second = sandbox.ok() &&
                   (sandbox->value("user", "") == who.user || auth::AdministersQueue(who, sandbox->value("queue", "")));
    }
    return it->second;
  };
  for (const auto& e : ctx_.store->ListClusterEvents(filter)) {
    if (!may_see(e.object)) continue;
    events.push_back({{"time", FormatRfc3339(e.time)},
                      {"kind", e.kind},
                      {"object", e.object},
                      {"severity", e.severity},
                      {"message", e.message}});
  }
  call.reply(Json(200, {{"events", std::move(events)}}));
}

void Api::JobEvents(Call& call) {
  auto job = ctx_.jobs->VisibleJob(*call.principal, call.Param("id"));
  if (!job.ok()) {
    call.reply(FromError(job.error()));
    return;
  }
  json events = json::array();
  for (const auto& e : ctx_.store->ListEvents(job->id)) {
    events.push_back({{"time", FormatRfc3339(e.time)}, {"kind", e.kind}, {"message", e.message}});
  }
  call.reply(Json(200, {{"events", std::move(events)}}));
}

// ---- cluster ----

void Api::ListPools(Call& call) {
  auto view = ctx_.control->View();
  json pools = json::array();
  for (const auto& pool : ctx_.config->cluster.pools) {
    int cpus = 0, gpus = 0, cpus_used = 0, gpus_used = 0;
    int64_t memory = 0, memory_used = 0;
    for (const auto& node : view->nodes) {
      const auto& u = node.usage;
      if (u.spec.pool != pool.name) continue;
      cpus += u.spec.cpus;
      memory += u.spec.memory_mb;
      gpus += static_cast<int>(u.spec.gpus.size());
      cpus_used += u.cpus_used;
      memory_used += u.memory_used_mb;
      for (bool b : u.gpu_busy) gpus_used += b ? 1 : 0;
    }
    pools.push_back({{"name", pool.name},
                     {"kind", std::string(model::ToString(pool.kind))},
                     {"labels", LabelsJson(pool.labels)},
                     {"nodes", pool.nodes},
                     {"capacity", {{"cpus", cpus}, {"memory_mb", memory}, {"gpus", gpus}}},
                     {"allocated", {{"cpus", cpus_used}, {"memory_mb", memory_used}, {"gpus", gpus_used}}}});
  }
  call.reply(Json(200, {{"pools", std::move(pools)}}));
}

void Api::ListQueues(Call& call) {
  auto view = ctx_.control->View();
  json queues = json::array();
  for (const auto& q : ctx_.config->cluster.queues) {
    json policy = {{"type", q.policy.type}, {"preemptible", q.policy.preemptible}};
    auto opt = [&policy](const char* key, const auto& value) {
      if (value) policy[key] = *value;
    };
    opt("max_walltime_hours", q.policy.max_walltime_hours);
    opt("default_walltime_hours", q.policy.default_walltime_hours);
    opt("default_memory_mb_per_cpu", q.policy.default_memory_mb_per_cpu);
    opt("gpu_quota_per_project", q.policy.gpu_quota_per_project);
    opt("scale_in_idle_seconds", q.policy.scale_in_idle_seconds);
    opt("max_concurrency", q.policy.max_concurrency);
    json kinds = json::array();
    for (auto k : q.workload_kinds) kinds.push_back(std::string(model::ToString(k)));
    auto count = [](const std::map<std::string, int>& m, const std::string& k) {
      auto it = m.find(k);
      return it == m.end() ? 0 : it->second;
    };
    queues.push_back({{"name", q.name},
                      {"pool", q.pool},
                      {"policy", std::move(policy)},
                      {"workload_kinds", std::move(kinds)},
                      {"priority_tier", q.priority_tier},
                      {"pending", count(view->pending_by_queue, q.name)},
                      {"running", count(view->running_by_queue, q.name)}});
  }
  call.reply(Json(200, {{"queues", std::move(queues)}}));
}

void Api::ListNodes(Call& call) {
  auto view = ctx_.control->View();
  json nodes = json::array();
  for (const auto& node : view->nodes) nodes.push_back(NodeJson(node));
  call.reply(Json(200, {{"nodes", std::move(nodes)}}));
}

void Api::DrainNode(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may drain nodes"));
    return;
  }
  auto body = body::ParseObject(call.request.body, R"({"reason": "disk replacement"})", /*empty_ok=*/true);
  std::string reason;
  std::optional<Error> invalid = body.ok() ? body::CheckKeys(*body, "", {"reason"}) : body.error();
  if (!invalid) invalid = body::ReadString(*body, "reason", "reason", 1024, reason);
  if (invalid) {
    call.reply(FromError(*invalid));
    return;
  }
  auto reply = call.reply;
  ctx_.control->SetNodeState(call.Param("name"), true, reason, call.principal->user,
                             [reply](Result<ClusterView::Node> node) {
                               reply(node.ok() ? Json(200, NodeJson(*node)) : FromError(node.error()));
                             });
}

void Api::ResumeNode(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may resume nodes"));
    return;
  }
  auto reply = call.reply;
  ctx_.control->SetNodeState(call.Param("name"), false, "", call.principal->user,
                             [reply](Result<ClusterView::Node> node) {
                               reply(node.ok() ? Json(200, NodeJson(*node)) : FromError(node.error()));
                             });
}

// ---- users and tokens ----

void Api::CreateUser(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may create users"));
    return;
  }
  auto body = body::ParseObject(call.request.body, R"({"name": "alice", "role": "user", "projects": ["default"]})");
  store::UserRecord user;
  user.role = "user";
  std::optional<Error> invalid =
      body.ok() ? body::CheckKeys(*body, "", {"name", "role", "projects", "queues", "unix_user"}) : body.error();
  if (!invalid) invalid = body::ReadString(*body, "name", "name", 64, user.name);
  if (!invalid) invalid = body::ReadString(*body, "role", "role", 64, user.role);
  if (!invalid) invalid = body::ReadString(*body, "unix_user", "unix_user", 64, user.unix_user);
  if (!invalid) invalid = body::ReadStringList(*body, "projects", "projects", 256, user.projects);
  if (!invalid) invalid = body::ReadStringList(*body, "queues", "queues", 256, user.queues);
  if (invalid) {
    call.reply(FromError(*invalid));
    return;
  }
  if (!ValidUserName(user.name)) {
    call.reply(ErrorResponse(422, "invalid_value",
                             "name must be 1-64 characters: lower-case letters, digits, '_', '-', '.'", "name"));
    return;
  }
  if (!auth::ParseRole(user.role)) {
    call.reply(ErrorResponse(422, "invalid_value", "role must be platform-admin, queue-admin or user", "role"));
    return;
  }
  for (const auto& p : user.projects) {
    if (!ctx_.config->cluster.FindProject(p)) {
      call.reply(ErrorResponse(422, "unknown_project", "project '" + p + "' does not exist", "projects"));
      return;
    }
  }
  for (const auto& q : user.queues) {
    if (!ctx_.config->cluster.FindQueue(q)) {
      call.reply(ErrorResponse(422, "unknown_queue", "queue '" + q + "' does not exist", "queues"));
      return;
    }
  }
  if (user.role == "queue-admin" && user.queues.empty()) {
    call.reply(ErrorResponse(422, "invalid_value", "a queue-admin needs the queues it administers", "queues"));
    return;
  }
  for (const auto& cu : ctx_.config->users) {
    if (cu.name == user.name) {
      call.reply(ErrorResponse(409, "defined_in_config",
                               "user " + user.name + " is defined in the config file; change it there"));
      return;
    }
  }
  if (auto existing = ctx_.store->GetUser(user.name); existing && existing->from_config) {
    call.reply(ErrorResponse(409, "defined_in_config", "user " + user.name + " is managed by the daemon"));
    return;
  }
  auto reply = call.reply;
  ctx_.store->Write([user](store::Transaction& t) { return t.UpsertUser(user); },
                    [this, reply, user](Status s) {
                      if (!s.ok()) {
                        reply(FromError(s.error()));
                        return;
                      }
                      InvalidateCredentials();
                      reply(Json(201, UserJson(user)));
                    });
}

void Api::ListUsers(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may list users"));
    return;
  }
  json users = json::array();
  for (const auto& u : ctx_.store->ListUsers()) users.push_back(UserJson(u));
  call.reply(Json(200, {{"users", std::move(users)}}));
}

void Api::CreateToken(Call& call) {
  const std::string& name = call.Param("name");
  if (!auth::IsPlatformAdmin(*call.principal) && call.principal->user != name) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may create tokens for other users"));
    return;
  }
  if (!ctx_.store->GetUser(name)) {
    call.reply(ErrorResponse(404, "not_found", "no user " + name));
    return;
  }
  const std::string token = auth::GenerateToken();
  store::TokenRecord record{auth::HashToken(token), name, "user", "", ctx_.clock->Now()};
  auto reply = call.reply;
  ctx_.store->Write([record](store::Transaction& t) { return t.InsertToken(record); },
                    [reply, token, name](Status s) {
                      reply(s.ok() ? Json(201, {{"token", token}, {"user", name}}) : FromError(s.error()));
                    });
}

void Api::CreateNodeToken(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may create node tokens"));
    return;
  }
  auto body = body::ParseObject(call.request.body, R"({"pool": "cpu-hpc-pool"})");
  std::string name;
  std::optional<Error> invalid = body.ok() ? body::CheckKeys(*body, "", {"pool"}) : body.error();
  if (!invalid) invalid = body::ReadString(*body, "pool", "pool", 256, name);
  if (invalid) {
    call.reply(FromError(*invalid));
    return;
  }
  if (!ctx_.config->cluster.FindPool(name)) {
    std::string pools;
    for (const auto& p : ctx_.config->cluster.pools) pools += (pools.empty() ? "" : ", ") + p.name;
    call.reply(ErrorResponse(422, "invalid_value", "pool must name a pool of the config (" + pools + ")", "pool"));
    return;
  }
  const std::string token = auth::GenerateToken();
  store::TokenRecord record{auth::HashToken(token), "node:" + name, "node", name, ctx_.clock->Now()};
  auto reply = call.reply;
  ctx_.store->Write([record](store::Transaction& t) { return t.InsertToken(record); },
                    [reply, token, name](Status s) {
                      reply(s.ok() ? Json(201, {{"token", token}, {"pool", name}}) : FromError(s.error()));
                    });
}

void Api::ListAlerts(Call& call) {
  std::optional<bool> firing;
  if (auto state = call.Query("state")) firing = *state == "firing";
  json alerts = json::array();
  for (const auto& a : ctx_.store->ListAlerts(firing, 1000)) {
    alerts.push_back({{"name", a.name},
                      {"kind", a.kind},
                      {"object", a.object},
                      {"severity", a.severity},
                      {"message", a.message},
                      {"state", a.resolved_at ? "resolved" : "firing"},
                      {"fired_at", FormatRfc3339(a.fired_at)},
                      {"resolved_at", a.resolved_at ? json(FormatRfc3339(*a.resolved_at)) : json(nullptr)}});
  }
  call.reply(Json(200, {{"alerts", std::move(alerts)}}));
}

void Api::AgentHeartbeat(Call& call) {
  call.MarkAudited();  // every few seconds from every agent: not an audit trail
  if (!ctx_.agents) {
    call.reply(ErrorResponse(503, "unavailable", "this daemon serves no node agents"));
    return;
  }
  auto body = body::ParseObject(call.request.body, R"({"node": "...", "pool": "...", "resources": {...}})");
  if (!body.ok()) {
    call.reply(FromError(body.error()));
    return;
  }
  auto heartbeat = executor::HeartbeatFromJson(*body);
  if (!heartbeat.ok()) {
    call.reply(FromError(heartbeat.error()));
    return;
  }
  auto reply = call.reply;
  ctx_.agents->Heartbeat(
      call.principal->node_pool, std::move(*heartbeat), [reply](Result<executor::Commands> commands) {
        reply(commands.ok() ? Json(200, executor::CommandsToJson(*commands)) : FromError(commands.error()));
      });
}

void Api::AgentResults(Call& call) {
  call.MarkAudited();
  if (!ctx_.agents) {
    call.reply(ErrorResponse(503, "unavailable", "this daemon serves no node agents"));
    return;
  }
  auto parsed = body::ParseObject(call.request.body, R"({"node": "NAME", "results": [...]})");
  std::string node;
  std::optional<Error> invalid = parsed.ok() ? body::ReadString(*parsed, "node", "node", 256, node) : parsed.error();
  if (!invalid && !parsed->value("results", json()).is_array()) {
    invalid = body::WrongType("results", "a list of results", parsed->value("results", json()));
  }
  if (invalid) {
    call.reply(FromError(*invalid));
    return;
  }
  std::vector<executor::RunResult> results;
  for (size_t i = 0; i < (*parsed)["results"].size(); ++i) {
    auto result = executor::RunResultFromJson((*parsed)["results"][i]);
    if (!result.ok()) {
      const std::string field = "results[" + std::to_string(i) + "]";
      call.reply(FromError(Error::BadRequest("malformed_value", field + ": " + result.error().message, field)));
      return;
    }
    results.push_back(std::move(*result));
  }
  auto ignored = ctx_.agents->Results(call.principal->node_pool, node, std::move(results));
  if (!ignored.ok()) {
    call.reply(FromError(ignored.error()));
    return;
  }
  json list = json::array();
  for (const auto& i : *ignored) {
    list.push_back({{"job_id", std::to_string(i.job_id)}, {"attempt", i.attempt}, {"reason", i.reason}});
  }
  call.reply(Json(200, {{"accepted", true}, {"ignored", std::move(list)}}));
}

void Api::ListAudit(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may read the audit log"));
    return;
  }
  const int limit = static_cast<int>(call.QueryInt("limit", 100));
  json records = json::array();
  for (const auto& a : ctx_.store->ListAudit(limit)) {
    records.push_back({{"time", FormatRfc3339(a.time)},
                       {"actor", a.actor},
                       {"action", a.action},
                       {"target", a.target},
                       {"result", a.result}});
  }
  call.reply(Json(200, {{"audit", std::move(records)}}));
}

void Api::WhoAmI(Call& call) {
  const auto& p = *call.principal;
  call.reply(Json(200, {{"user", p.user},
                        {"role", std::string(auth::ToString(p.role))},
                        {"projects", p.projects},
                        {"queues", p.queues}}));
}

}  // namespace unisched::api
