#pragma once
// One daemon in this process, the composition root: the state directory and
// its lock, the store, the controller, the pools' backends (local nodes,
// node agents, and any other a caller brings), the job service, the API and
// its listener, wired to each other. `unisched server` runs one until
// SIGTERM; tests run one in-process with backends of their own.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/agent_hub.h"
#include "daemon/config_keeper.h"
#include "daemon/controller.h"
#include "daemon/housekeeper.h"
#include "daemon/lifecycle.h"
#include "daemon/notifier.h"
#include "daemon/replica.h"
#include "daemon/runtime_dir.h"
#include "daemon/sandbox_manager.h"
#include "daemon/state_lock.h"
#include "unisched/api/api.h"
#include "unisched/api/server.h"
#include "unisched/backend/gang.h"
#include "unisched/backend/pool_backend.h"
#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/config/config.h"
#include "unisched/executor/executor.h"
#include "unisched/metrics/metrics.h"
#include "unisched/service/job_service.h"
#include "unisched/service/secret_vault.h"
#include "unisched/service/workflow_book.h"
#include "unisched/store/store.h"

namespace unisched::daemon {

// Makes the backend of a pool whose `backend` names none built in; results
// go to `sink`. Called once per backend name, for the first pool naming it.
using BackendFactory = std::function<std::unique_ptr<backend::PoolBackend>(backend::PoolBackend::ResultSink sink)>;

struct DaemonOptions {
  api::ServerOptions http;
  // Backends besides "local" and "agent", by the name pools[].backend gives
  // (docs/adr/0006-pool-backend-port.md). A pool naming a backend that is
  // neither built in nor here stops the start with an error.
  std::map<std::string, BackendFactory> backends;
  // With server.replica: called once when this replica must stop leading
  // at once (it lost the lease, or its writes were fenced), from whichever
  // thread found out. `unisched server` re-executes itself to come back as
  // a standby; without one the process ends (exit code 75) for its
  // supervisor to restart.
  std::function<void(const std::string& why)> on_step_down;
  // Live config versions (docs/config-versions.md): how the config the
  // daemon was started with meets the store's versions, and the file
  // SIGHUP reads again ("" without --config).
  ConfigAdoption config_adoption;
  std::string config_path;
};

// The exit code of a replica that stops leading with no on_step_down.
inline constexpr int kStepDownExitCode = 75;

class Daemon {
 public:
  // Starts every part and listens. On an error nothing keeps running and
  // the message says what could not start.
  static Result<std::unique_ptr<Daemon>> Start(config::Config config, DaemonOptions options);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // http://HOST:PORT the API answers on.
  const std::string& url() const { return url_; }
  // Stops listening and every part; running jobs keep running and are
  // collected at the next start. Idempotent.
  void Stop();
  // SIGHUP: reads the TLS certificate and key again (no connection or job
  // is dropped; new connections use them). An error keeps the old ones.
  Status ReloadTls();
  // SIGHUP: applies the --config file again as POST /v1/config would (a
  // replica that does not lead leaves it to the leader). Returns what the
  // change did, or why it was refused; the version in force stays then.
  Result<std::string> ReloadConfig();

 private:
  explicit Daemon(config::Config config) : config_(std::move(config)) {}
  Status StartParts();
  // Everything that acts on the cluster: one daemon starts them at once, a
  // replica when it takes the lease (rebuilt from the database).
  Status StartLeaderParts();
  Status OpenSecretVault();
  Status MakeBackends(backend::BackendSet& set);
  Status Listen(api::Handler handler);
  // metrics::Metrics::DeclareConfigured for `config`'s pools, queues and alert rules.
  void DeclareConfiguredSeries(const config::Config& config);
  // With server.replica: standby until the lease is ours (docs/replicas.md).
  Status StartReplica();
  Status Lead(int64_t epoch);
  void StepDown(const std::string& why);
  // A replica's front door: the leader's API once it leads, otherwise the
  // probes, this replica's metrics, and forwarding to the leader.
  void Dispatch(api::HttpRequest request, api::Respond respond);
  void GiveJobsAccess();
  void Standby(api::HttpRequest request, api::Respond respond);
  bool KnownUserToken(const api::HttpRequest& request) const;

  const config::Config config_;  // as started: this replica's server and store sections
  std::unique_ptr<ConfigKeeper> config_keeper_;
  // The config in force (the store's version); the leader's parts read it.
  std::unique_ptr<config::LiveConfig> live_;
  DaemonOptions options_;
  SystemClock clock_;
  metrics::Metrics metrics_;
  std::string state_dir_;
  std::string admin_token_;  // the bootstrap admin's
  std::optional<StateLock> state_lock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Controller> controller_;
  RuntimeDirChoice runtime_;
  // Between each executor and the controller: one result per gang attempt.
  // Made before the executors, which call them, and so outlive them.
  std::unique_ptr<StepBook> steps_;
  std::string job_token_secret_;                 // the cluster's, for job tokens (auth::MintJobToken)
  std::unique_ptr<service::SecretVault> vault_;  // docs/secrets.md; null with secrets_problem_
  std::string secrets_problem_;                  // why secrets are closed here (a key file of another store)
  std::unique_ptr<backend::GangBook> local_gangs_;
  std::unique_ptr<backend::GangBook> agent_gangs_;
  std::unique_ptr<executor::Executor> local_executor_;
  std::unique_ptr<AgentHub> agents_;
  std::vector<std::unique_ptr<backend::PoolBackend>> backends_;
  std::unique_ptr<WebhookNotifier> notifier_;
  std::unique_ptr<SandboxManager> sandboxes_;
  std::unique_ptr<service::JobService> jobs_;
  std::unique_ptr<service::WorkflowBook> workflows_;
  std::unique_ptr<api::Api> api_;
  std::unique_ptr<Housekeeper> housekeeper_;
  std::unique_ptr<Lifecycle> lifecycle_;  // storage.lifecycle (docs/data.md)
  std::unique_ptr<api::HttpServer> server_;
  std::string url_;
  bool stopped_ = false;
  // Replicas only.
  std::string replica_name_;
  std::string forward_secret_;
  std::unique_ptr<LeaseKeeper> keeper_;
  std::unique_ptr<Forwarder> forwarder_;
  std::atomic<api::Api*> leader_api_{nullptr};  // set once the leader parts run
  std::atomic<bool> stepping_down_{false};
};

}  // namespace unisched::daemon
