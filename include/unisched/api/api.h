#pragma once
// The REST API: a route table and one handler per endpoint. Handlers are plain
// functions from HttpRequest to HttpResponse (delivered through Respond, so a
// submission can answer after its durable commit); none of them sees Beast.

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "unisched/api/http.h"
#include "unisched/auth/auth.h"
#include "unisched/common/log_range.h"
#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/config/config.h"
#include "unisched/config/live.h"
#include "unisched/executor/wire.h"
#include "unisched/metrics/metrics.h"
#include "unisched/model/fit.h"
#include "unisched/model/job.h"
#include "unisched/policy/quota.h"
#include "unisched/service/job_service.h"
#include "unisched/service/planes.h"
#include "unisched/service/secret_vault.h"
#include "unisched/store/store.h"

namespace unisched::service {
class WorkflowBook;
}

namespace unisched::api {

// The daemon's live parts as the API sees them (service/planes.h).
using service::ClusterView;
using service::ControlPlane;
using service::SandboxPlane;
using PendingInfoMap = service::PendingInfoMap;

// The daemon's side of the node agents (docs/agents.md), as the API needs
// it. Implemented by the daemon's agent hub; safe from any thread.
class AgentPlane {
 public:
  virtual ~AgentPlane() = default;
  // A heartbeat from an agent whose node token is for `token_pool`. `done`
  // gets the commands for the node, at once when there are any, else after
  // up to heartbeat.wait_ms; or NotFound/Forbidden for a node that is not an
  // agent node of that pool.
  virtual void Heartbeat(const std::string& token_pool, executor::Heartbeat heartbeat,
                         std::function<void(Result<executor::Commands>)> done) = 0;
  // A result that was not applied, and why.
  struct IgnoredResult {
    model::JobId job_id = 0;
    int attempt = 0;
    std::string reason;
  };
  // Results of attempts that ended on the node. Only an attempt the daemon
  // sent to that very node is applied: one it sent to another node (or runs
  // on a local node) makes the whole call Forbidden and changes nothing; one
  // it does not know as an agent attempt (a late report after a restart or
  // retention) is ignored and listed, so the agent stops resending it.
  virtual Result<std::vector<IgnoredResult>> Results(const std::string& token_pool, const std::string& node,
                                                     std::vector<executor::RunResult> results) = 0;
  // Output of a task the daemon sent to `node`: `bytes` at `offset` of its
  // stream ("stdout" or "stderr"), kept where the log endpoint reads it.
  // Written only when `offset` is where the daemon's copy ends (a repeat or
  // a gap writes nothing); returns the copy's size after, where the agent
  // goes on from.
  virtual Result<int64_t> AppendLog(const std::string& token_pool, const std::string& node,
                                    const executor::AttemptRef& task, const std::string& stream, int64_t offset,
                                    std::string_view bytes) = 0;
};

struct ApiContext {
  const config::LiveConfig* config = nullptr;  // the config in force (live versions)
  store::Store* store = nullptr;
  ControlPlane* control = nullptr;
  // Every change to work (submit, cancel, hold, release, sandbox create)
  // goes through it; the handlers parse and render.
  service::JobService* jobs = nullptr;
  AgentPlane* agents = nullptr;                // null: node agents are not served
  SandboxPlane* sandboxes = nullptr;           // null: 503 for /v1/sandboxes and /v1/images
  service::ConfigPlane* configs = nullptr;     // null: 503 for /v1/config
  service::StepPlane* steps = nullptr;         // null: 503 for /v1/jobs/{id}/steps
  service::SecretVault* secrets = nullptr;     // null: 503 for writes of /v1/secrets, saying secrets_problem
  service::WorkflowBook* workflows = nullptr;  // null: 503 for /v1/workflows
  std::string secrets_problem;
  // Checks job tokens (auth::CheckJobToken); empty: none is accepted.
  std::string job_token_secret;
  metrics::Metrics* metrics = nullptr;
  const Clock* clock = nullptr;
  // The output of (job, attempt, task), stream "stdout" or "stderr", as its
  // pool backend keeps it ("" when none): the bytes of the range.
  std::function<std::string(const model::Job&, int, int, std::string_view, LogRange)> read_log;
  // Whether the daemon is ready (store open, recovery done) for /readyz.
  std::function<bool()> ready;
  // Applies the storage lifecycle rules now (docs/data.md): the actions as
  // JSON; null: 503 for POST /v1/storage/lifecycle/run.
  std::function<Result<nlohmann::json>(bool dry_run, const std::string& actor)> run_lifecycle;
};

class AuditTrail;
class AccessGate;

// A query parameter an endpoint reads. Api::Handle checks every one against
// its route before the endpoint runs, by the contract's rule: a value that
// cannot be parsed as its kind (not an integer, an integer beyond int64, not
// an RFC 3339 time, not UTF-8) is 400 `malformed_value`; one that parses but
// is out of bounds or not among the choices is 422 `invalid_value`. An empty
// value counts as absent. docs/openapi.yaml states the same bounds (a test
// holds the two together).
struct QueryParam {
  enum class Kind { kInteger, kTime, kChoice, kChoiceList, kText };
  std::string name;
  Kind kind = Kind::kText;
  int64_t min = 0, max = 0;          // kInteger: inclusive bounds
  std::vector<std::string> choices;  // kChoice: one of them; kChoiceList: comma-separated, each one of them
  size_t max_length = 256;           // kText: bytes at most

  static QueryParam Integer(std::string name, int64_t min, int64_t max) {
    QueryParam p = Named(std::move(name), Kind::kInteger);
    p.min = min;
    p.max = max;
    return p;
  }
  static QueryParam Time(std::string name) { return Named(std::move(name), Kind::kTime); }
  static QueryParam Choice(std::string name, std::vector<std::string> choices) {
    QueryParam p = Named(std::move(name), Kind::kChoice);
    p.choices = std::move(choices);
    return p;
  }
  static QueryParam ChoiceList(std::string name, std::vector<std::string> choices) {
    QueryParam p = Choice(std::move(name), std::move(choices));
    p.kind = Kind::kChoiceList;
    return p;
  }
  static QueryParam Text(std::string name, size_t max_length = 256) {
    QueryParam p = Named(std::move(name), Kind::kText);
    p.max_length = max_length;
    return p;
  }

 private:
  static QueryParam Named(std::string name, Kind kind) {
    QueryParam p;
    p.name = std::move(name);
    p.kind = kind;
    return p;
  }
};

// The error a query parameter value gets under `param`, or nullopt if it
// is valid.
std::optional<Error> CheckQueryValue(const QueryParam& param, const std::string& value);

class Api {
 public:
  // What a route answers, as the route table declares it (for tests and
  // documentation checks).
  struct RouteInfo {
    std::string method;
    std::string path;  // the template, e.g. /v1/jobs/{id}
    std::vector<QueryParam> query;
    bool needs_auth = true;
  };

  explicit Api(ApiContext context);
  ~Api();
  std::vector<RouteInfo> Routes() const;
  // The HTTP handler: routes, authenticates, authorizes, answers.
  void Handle(HttpRequest request, Respond respond);
  // Handle() and wait for the answer (tests, tools).
  HttpResponse HandleSync(HttpRequest request);
  // Forget cached token -> principal resolutions (after user changes).
  void InvalidateCredentials();
  // Writes the audit tallies of refused requests of minutes ended before
  // `now` (every minute), and when tokens were last used; `all`: the current
  // minute's tallies too (at shutdown).
  void FlushAudit(Timestamp now, bool all = false);

 private:
  struct Call;
  using Endpoint = void (Api::*)(Call&);
  struct Route {
    std::string method;
    std::vector<std::string> segments;  // "{id}" captures
    std::string templ;
    Endpoint endpoint;
    bool needs_auth;
    bool for_agents = false;        // only node tokens may call it, and they may call nothing else
    bool for_jobs = false;          // a job token may call it (for its own job); it may call nothing else
    bool tail_param = false;        // the last capture takes the rest of the path (file paths)
    std::vector<QueryParam> query;  // checked before the endpoint runs
  };

  void ShowConfig(Call& call);
  void ListConfigVersions(Call& call);
  void ApplyConfig(Call& call);
  void RollbackConfig(Call& call);
  void PromoteConfig(Call& call);
  void Healthz(Call& call);
  void Readyz(Call& call);
  void MetricsText(Call& call);
  void SubmitJob(Call& call);
  void ListJobs(Call& call);
  void GetJob(Call& call);
  // The job's `usage`: its ledger entries summed by metric (jobs.cc).
  nlohmann::json JobUsage(const model::Job& job) const;
  void CancelJob(Call& call);
  void HoldJob(Call& call);
  void ReleaseJob(Call& call);
  void RequeueJob(Call& call);
  void UpdateJob(Call& call);
  void JobLog(Call& call);
  void StartStep(Call& call);
  void GetStep(Call& call);
  std::optional<model::Job> StepsJob(Call& call);
  void JobEvents(Call& call);
  void ListPools(Call& call);
  void ListQueues(Call& call);
  void ListNodes(Call& call);
  void DrainNode(Call& call);
  void ResumeNode(Call& call);
  void CreateUser(Call& call);
  void ListUsers(Call& call);
  void ListUnixIds(Call& call);
  void CreateToken(Call& call);
  void ListTokens(Call& call);
  void RevokeToken(Call& call);
  void ListNodeTokens(Call& call);
  void RevokeNodeToken(Call& call);
  // Writes `record` (a new token) and answers 201 with the token, once.
  void StoreNewToken(Call& call, store::TokenRecord record, const std::string& token);
  // Revokes `token`, forgets it from the cache, answers 200 with it.
  void RevokeTokenRecord(Call& call, store::TokenRecord token);
  void ListAudit(Call& call);
  void WhoAmI(Call& call);
  void Usage(Call& call);
  // Ledger sums for `query` with each row's cost at its pools' prices and
  // its instance-minutes (usage.cc).
  std::vector<store::UsageRow> PricedUsage(const store::UsageQuery& query) const;
  void PendingReport(Call& call);
  void CostReport(Call& call);
  void CapacityReport(Call& call);
  void Reconcile(Call& call);
  void RunLifecycle(Call& call);
  void ListEvents(Call& call);
  void CreateNodeToken(Call& call);
  void ListAlerts(Call& call);
  void AgentHeartbeat(Call& call);
  void AgentResults(Call& call);
  void AgentLogs(Call& call);
  void CreateSandbox(Call& call);
  void ListSandboxes(Call& call);
  void GetSandbox(Call& call);
  void DeleteSandbox(Call& call);
  void ExecSandbox(Call& call);
  void PutSandboxFile(Call& call);
  void GetSandboxFile(Call& call);
  void Console(Call& call);
  void ConsoleFile(Call& call);
  void CreateWorkflow(Call& call);
  void ListWorkflows(Call& call);
  void GetWorkflow(Call& call);
  void CancelWorkflow(Call& call);
  void ResumeWorkflow(Call& call);
  void AddWorkflowTasks(Call& call);
  void CreateSecret(Call& call);
  void RotateSecret(Call& call);
  void ListSecrets(Call& call);
  void GetSecret(Call& call);
  void DeleteSecret(Call& call);
  // The secret of the call's path, or nullopt after answering why not.
  std::optional<store::SecretRecord> SecretOfPath(Call& call);
  void RecordBaseline(Call& call);
  void ListBaselines(Call& call);
  void GetBaseline(Call& call);
  void ListImages(Call& call);
  void CreateImage(Call& call);
  void RollbackImage(Call& call);
  // The sandbox of path parameter {id} if the caller may use it; else answers
  // 404 (missing or not the caller's) and returns nullopt.
  std::optional<int64_t> VisibleSandbox(Call& call);
  void ControlJobAction(Call& call, ControlPlane::JobAction action);

  ApiContext ctx_;
  std::unique_ptr<AuditTrail> audit_;
  std::unique_ptr<AccessGate> gate_;
  std::vector<Route> routes_;
};

}  // namespace unisched::api
