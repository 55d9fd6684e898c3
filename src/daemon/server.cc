// The composition root: reads the config, opens the store, wires the
// controller, the executor and the API to each other, starts the listener,
// and shuts all of it down on SIGTERM.

#include "daemon/server.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "daemon/controller.h"
#include "daemon/housekeeper.h"
#include "daemon/runtime_dir.h"
#include "daemon/sandbox_manager.h"
#include "daemon/state_lock.h"
#include "unisched/api/api.h"
#include "unisched/api/server.h"
#include "unisched/auth/auth.h"
#include "unisched/config/config.h"
#include "unisched/executor/executor.h"
#include "unisched/metrics/metrics.h"
#include "unisched/store/store.h"

namespace unisched::daemon {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAdminUser = "admin";

void PrintErrors(const std::vector<config::ConfigError>& errors, std::ostream& out) {
  for (const auto& e : errors) out << e.ToString() << "\n";
}

// Creates `path` with `mode` (and parents), and sets the mode if it exists.
bool MakeStateDir(const fs::path& path, mode_t mode) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) {
    spdlog::critical("cannot create {}: {}", path.string(), ec.message());
    return false;
  }
  if (::chmod(path.c_str(), mode) != 0) {
    spdlog::critical("cannot chmod {}: {}", path.string(), std::strerror(errno));
    return false;
  }
  return true;
}

bool WriteSecretFile(const fs::path& path, const std::string& content) {
  const std::string tmp = path.string() + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool ok =
      ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) && ::fsync(fd) == 0;
  ::close(fd);
  return ok && ::rename(tmp.c_str(), path.c_str()) == 0;
}

// Users named in the config are created or updated from it at every start,
// plus the bootstrap platform-admin "admin" and its token.
Status SyncUsersAndBootstrap(const config::Config& cfg, store::Store& store, const fs::path& state_dir,
                             const Clock& clock) {
  std::vector<store::UserRecord> users;
  std::vector<std::string> all_projects;
  for (const auto& p : cfg.projects) all_projects.push_back(p.name);
  users.push_back({kAdminUser, "platform-admin", all_projects, {}, "", true});
  for (const auto& u : cfg.users) users.push_back({u.name, u.role, u.projects, u.queues, u.unix_user, true});

  std::string token;
  if (const char* env = std::getenv("UNISCHED_ADMIN_TOKEN"); env && *env) {
    token = env;
  } else {
    const fs::path file = state_dir / "admin.token";
    std::ifstream in(file);
    if (!(in >> token) || token.empty()) {
      token = auth::GenerateToken();
      if (!WriteSecretFile(file, token + "\n")) {
        return Error::Internal("cannot write " + file.string());
      }
      spdlog::info("bootstrap admin token written to {}", file.string());
    }
  }
  // Nothing started from here on may see the token (jobs get a clean environment anyway).
  ::unsetenv("UNISCHED_ADMIN_TOKEN");
  const std::string hash = auth::HashToken(token);
  const bool known = store.FindToken(hash).has_value();
  return store.WriteSync([&](store::Transaction& t) -> Status {
    for (const auto& u : users) {
      if (auto s = t.UpsertUser(u); !s.ok()) return s;
    }
    if (!known) return t.InsertToken({hash, kAdminUser, "user", "", clock.Now()});
    return Status::Ok();
  });
}

struct ServerArgs {
  std::string config_path;
  std::string listen;
  std::string state_dir;
};

std::optional<ServerArgs> ParseServerArgs(int argc, char** argv) {
  ServerArgs args;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    bool ok = true;
    if (a == "--config") {
      ok = value(args.config_path);
    } else if (a == "--listen") {
      ok = value(args.listen);
    } else if (a == "--state-dir") {
      ok = value(args.state_dir);
    } else {
      ok = false;
    }
    if (!ok) {
      std::cerr << "usage: unisched server [--config FILE] [--listen HOST:PORT] [--state-dir DIR]\n";
      return std::nullopt;
    }
  }
  return args;
}

std::string SupervisorPath(const config::Config& cfg) {
  if (!cfg.executor.supervisor_path.empty()) return cfg.executor.supervisor_path;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "unisched-supervisor").string();
}

std::string SandboxInitPath(const config::Config& cfg) {
  if (!cfg.sandboxes.init_path.empty()) return cfg.sandboxes.init_path;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "unisched-sandbox").string();
}

// The open-file limit goes up to its hard limit (systemd and login shells
// start daemons at a soft 1,024), and the connection cap is held under it
// minus the descriptors reserved for launches, the store, agents and
// sandboxes, so clients alone can never exhaust them. Jobs inherit the raised
// soft limit, as under Slurm with PropagateResourceLimits.
int ConnectionCap(const config::ServerSettings& server) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return server.max_connections;
  if (limit.rlim_cur < limit.rlim_max) {
    const rlim_t before = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) {
      spdlog::info("open-file limit raised from {} to its hard limit {}", before, limit.rlim_max);
    } else {
      limit.rlim_cur = before;
    }
  }
  // The smallest cap that still serves: a few admin clients and agents.
  constexpr int64_t kMinimumCap = 16;
  const int64_t open_files = limit.rlim_cur == RLIM_INFINITY ? INT64_MAX : static_cast<int64_t>(limit.rlim_cur);
  const int64_t room = open_files - server.reserved_descriptors;
  if (room >= server.max_connections) return server.max_connections;
  const int cap = static_cast<int>(std::max(kMinimumCap, room));
  spdlog::warn(
      "at most {} connections (server.max_connections is {}): the open-file limit is {} and {} descriptors are "
      "reserved (server.reserved_descriptors); raise the hard limit (LimitNOFILE=, ulimit -Hn) for more",
      cap, server.max_connections, open_files, server.reserved_descriptors);
  return cap;
}

}  // namespace

int RunValidateConfig(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: unisched validate-config FILE\n";
    return 2;
  }
  auto loaded = config::LoadConfigFile(argv[2]);
  if (auto* errors = std::get_if<std::vector<config::ConfigError>>(&loaded)) {
    PrintErrors(*errors, std::cout);
    return 1;
  }
  std::cout << "OK\n";
  return 0;
}

int RunServer(int argc, char** argv) {
  auto args = ParseServerArgs(argc, argv);
  if (!args) return 2;
  auto loaded = config::LoadConfigFileOrDefault(args->config_path);
  if (auto* errors = std::get_if<std::vector<config::ConfigError>>(&loaded)) {
    std::cerr << "invalid config " << (args->config_path.empty() ? "<embedded>" : args->config_path) << ":\n";
    PrintErrors(*errors, std::cerr);
    return 2;
  }
  config::Config cfg = std::move(std::get<config::Config>(loaded));
  if (!args->listen.empty()) cfg.server.listen = args->listen;
  if (!args->state_dir.empty()) cfg.server.state_dir = args->state_dir;

  const auto colon = cfg.server.listen.rfind(':');
  api::ServerOptions http;
  try {
    if (colon == std::string::npos) throw std::invalid_argument("no port");
    http.host = cfg.server.listen.substr(0, colon);
    http.port = static_cast<uint16_t>(std::stoi(cfg.server.listen.substr(colon + 1)));
  } catch (const std::exception&) {
    std::cerr << "--listen must be HOST:PORT, got '" << cfg.server.listen << "'\n";
    return 2;
  }
  http.threads = cfg.server.http_threads;
  http.max_body_bytes = cfg.server.max_body_bytes;
  http.header_timeout_seconds = cfg.server.header_timeout_seconds;
  http.body_timeout_seconds = cfg.server.body_timeout_seconds;
  http.idle_timeout_seconds = cfg.server.idle_timeout_seconds;
  http.max_connections = ConnectionCap(cfg.server);
  http.max_connections_per_client = cfg.server.max_connections_per_client;

  // SIGTERM/SIGINT are taken by sigwait below; every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  // State directory: traversable but not listable by others (jobs reach their
  // work directories through it); the database, tokens and run files are root's.
  const fs::path state_dir = fs::absolute(cfg.server.state_dir);
  if (!MakeStateDir(state_dir, 0711) || !MakeStateDir(state_dir / "runs", 0700) ||
      !MakeStateDir(state_dir / "work", 0711)) {
    return 1;
  }
  ::umask(0077);
  auto state_lock = StateLock::Acquire(state_dir.string());
  if (!state_lock.ok()) {
    spdlog::critical("{}", state_lock.error().message);
    return 1;
  }

  store::StoreOptions store_options{(state_dir / "unisched.db").string(), cfg.store.synchronous,
                                    cfg.store.group_commit_max_batch};
  auto store = store::Store::Open(store_options);
  if (!store.ok()) {
    spdlog::critical("cannot open the store: {}", store.error().message);
    return 1;
  }
  SystemClock clock;
  if (Status s = SyncUsersAndBootstrap(cfg, **store, state_dir, clock); !s.ok()) {
    spdlog::critical("cannot set up users: {}", s.error().message);
    return 1;
  }

  metrics::Metrics metrics;
  Controller controller(cfg, **store, metrics, clock);
  // Attempts' control files on a tmpfs, their output under the state
  // directory (docs/execution.md#where-the-files-are).
  const RuntimeDirChoice runtime = ChooseRuntimeRunsDir(cfg.executor.runtime_dir, state_dir.string());
  spdlog::info("attempt control files in {} ({})", runtime.runs_dir, runtime.why);
  // For operators (and test harnesses) looking for them.
  if (std::ofstream out(state_dir / "runtime-dir"); !(out << runtime.runs_dir << "\n")) {
    spdlog::warn("cannot write {}", (state_dir / "runtime-dir").string());
  }
  executor::LocalExecutorOptions exec_options{runtime.runs_dir, (state_dir / "runs").string(),
                                              (state_dir / "work").string(), SupervisorPath(cfg),
                                              cfg.executor.use_cgroups};
  auto local_executor = executor::MakeLocalExecutor(
      exec_options, [&controller](executor::RunResult result) { controller.OnRunResult(std::move(result)); });
  // Nodes with `agent: true` run their attempts through their agents.
  AgentHub agents(cfg, clock);
  agents.SetSink(&controller);
  agents.Start();
  auto executor = std::make_unique<RoutingExecutor>(cfg, *local_executor, agents);
  controller.SetExecutor(executor.get());
  WebhookNotifier notifier(cfg.alerts.webhook);
  notifier.Start();
  controller.SetNotifier(&notifier);

  api::ApiContext context;
  context.config = &cfg;
  context.store = store->get();
  context.control = &controller;
  context.agents = &agents;
  SandboxManager sandboxes(cfg, **store, metrics, clock, controller, state_dir.string(), SandboxInitPath(cfg));
  context.sandboxes = &sandboxes;
  service::JobService jobs(cfg, **store, controller, &sandboxes, metrics, clock);
  context.jobs = &jobs;
  context.metrics = &metrics;
  context.clock = &clock;
  context.log_path = [&executor](model::JobId id, int attempt, std::string_view stream) {
    return executor->LogPath(id, attempt, stream);
  };
  context.ready = [&controller] { return controller.Ready(); };
  api::Api api(context);

  controller.Start();
  if (Status started = sandboxes.Start(); !started) {
    spdlog::critical("cannot start the sandbox manager: {}", started.error().message);
    controller.Stop();
    executor->Shutdown();
    return 1;
  }
  Housekeeper housekeeper(cfg, **store, metrics, clock, exec_options.work_root);
  housekeeper.OnReconciled([&controller](int64_t discrepancies) { controller.SetLedgerDiscrepancies(discrepancies); });
  housekeeper.OnMinute([&api](Timestamp now) { api.FlushAudit(now); });
  housekeeper.Start();
  http.on_connection_refused = [&metrics](const std::string& limit) { metrics.CountConnectionRefused(limit); };
  auto server = api::StartHttpServer(
      http, [&api](api::HttpRequest req, api::Respond respond) { api.Handle(std::move(req), std::move(respond)); });
  if (!server.ok()) {
    spdlog::critical("cannot listen on {}: {}", cfg.server.listen, server.error().message);
    housekeeper.Stop();
    sandboxes.Stop();
    controller.Stop();
    executor->Shutdown();
    return 1;
  }
  const std::string url = "http://" + http.host + ":" + std::to_string((*server)->port());
  {
    std::ofstream endpoint(state_dir / "endpoint.tmp");
    endpoint << url << "\n";
  }
  fs::rename(state_dir / "endpoint.tmp", state_dir / "endpoint");
  spdlog::info("unisched listening on {} (state {}, config version {}, store synchronous={})", url, state_dir.string(),
               cfg.version, cfg.store.synchronous);

  int received = 0;
  sigwait(&signals, &received);
  spdlog::info("signal {}: shutting down", received);
  agents.Stop();  // parked heartbeats are answered while the listener still runs
  (*server)->Stop();
  housekeeper.Stop();
  api.FlushAudit(clock.Now(), /*all=*/true);
  sandboxes.Stop();  // sandboxes end with the daemon (charged to now)
  controller.Stop();
  notifier.Stop();
  executor->Shutdown();
  // Attempts not collected yet keep it (and so are found at the next start).
  if (runtime.chosen) RemoveRuntimeDirIfEmpty(runtime.runs_dir);
  (*store)->Close();
  spdlog::info("stopped; running jobs keep running and are collected at the next start");
  return 0;
}

}  // namespace unisched::daemon
