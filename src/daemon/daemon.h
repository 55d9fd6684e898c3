#pragma once
// One daemon in this process, the composition root: the state directory and
// its lock, the store, the controller, the pools' backends (local nodes,
// node agents, and any other a caller brings), the job service, the API and
// its listener, wired to each other. `unisched server` runs one until
// SIGTERM; tests run one in-process with backends of their own.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/agent_hub.h"
#include "daemon/controller.h"
#include "daemon/housekeeper.h"
#include "daemon/notifier.h"
#include "daemon/runtime_dir.h"
#include "daemon/sandbox_manager.h"
#include "daemon/state_lock.h"
#include "unisched/api/api.h"
#include "unisched/api/server.h"
#include "unisched/backend/pool_backend.h"
#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/config/config.h"
#include "unisched/executor/executor.h"
#include "unisched/metrics/metrics.h"
#include "unisched/service/job_service.h"
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
};

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

 private:
  explicit Daemon(config::Config config) : config_(std::move(config)) {}
  Status StartParts(DaemonOptions& options);
  Status MakeBackends(DaemonOptions& options, backend::BackendSet& set);

  const config::Config config_;
  SystemClock clock_;
  metrics::Metrics metrics_;
  std::string state_dir_;
  std::optional<StateLock> state_lock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Controller> controller_;
  RuntimeDirChoice runtime_;
  std::unique_ptr<executor::Executor> local_executor_;
  std::unique_ptr<AgentHub> agents_;
  std::vector<std::unique_ptr<backend::PoolBackend>> backends_;
  std::unique_ptr<WebhookNotifier> notifier_;
  std::unique_ptr<SandboxManager> sandboxes_;
  std::unique_ptr<service::JobService> jobs_;
  std::unique_ptr<api::Api> api_;
  std::unique_ptr<Housekeeper> housekeeper_;
  std::unique_ptr<api::HttpServer> server_;
  std::string url_;
  bool stopped_ = false;
};

}  // namespace unisched::daemon
