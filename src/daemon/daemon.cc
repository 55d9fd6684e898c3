// The composition root (daemon.h). The order of Start is the order of
// dependence; Stop goes the other way, with the listener closed first so no
// request arrives at a part that has stopped.

#include "daemon/daemon.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "unisched/auth/auth.h"
#include "unisched/auth/jwt.h"
#include "unisched/service/unix_accounts.h"

namespace unisched::daemon {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAdminUser = service::kBootstrapAdmin;

// Creates `path` with `mode` (and parents), and sets the mode if it exists.
Status MakeStateDir(const fs::path& path, mode_t mode) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return Error::Internal("cannot create " + path.string() + ": " + ec.message());
  if (::chmod(path.c_str(), mode) != 0) {
    return Error::Internal("cannot chmod " + path.string() + ": " + std::strerror(errno));
  }
  return Status::Ok();
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
  // Users made through the API before user_accounts was switched on get
  // their accounts now, as do the config's users and projects.
  for (const auto& u : store.ListUsers()) {
    if (!u.from_config) users.push_back(u);
  }
  const config::UserAccountSettings& accounts = cfg.executor.user_accounts;
  return store.WriteSync([&](store::Transaction& t) -> Status {
    for (const auto& u : users) {
      if (auto s = t.UpsertUser(u); !s.ok()) return s;
      if (auto s = service::AllocateUnixIds(t, accounts, u); !s.ok()) return s;
    }
    for (const auto& project : all_projects) {
      if (auto s = service::AllocateProjectGroup(t, accounts, project); !s.ok()) return s;
    }
    if (!known) return t.InsertToken({hash, kAdminUser, "user", "", clock.Now()});
    return Status::Ok();
  });
}

// The store's options from the config; the PostgreSQL password is read
// here, from its file or environment variable, never from the YAML.
Result<store::StoreOptions> StoreOptionsFor(const config::StoreSettings& cfg, const fs::path& state_dir) {
  store::StoreOptions options;
  options.path = (state_dir / "unisched.db").string();
  options.synchronous = cfg.synchronous;
  options.max_batch = cfg.group_commit_max_batch;
  if (cfg.backend != "postgresql") return options;
  options.backend = store::StoreBackend::kPostgresql;
  options.conninfo = cfg.postgresql.conninfo;
  if (!cfg.postgresql.password_file.empty()) {
    std::ifstream in(cfg.postgresql.password_file);
    if (!in) {
      return Error::BadRequest(
          "invalid_config",
          "store.postgresql.password_file: cannot read " + cfg.postgresql.password_file + ": " + std::strerror(errno),
          "store.postgresql.password_file");
    }
    std::getline(in, options.password);
  } else if (!cfg.postgresql.password_env.empty()) {
    const char* value = std::getenv(cfg.postgresql.password_env.c_str());
    if (value == nullptr) {
      return Error::BadRequest("invalid_config",
                               "store.postgresql.password_env: the environment has no " + cfg.postgresql.password_env +
                                   "; set it, or use password_file",
                               "store.postgresql.password_env");
    }
    options.password = value;
  }
  return options;
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

}  // namespace

Result<std::unique_ptr<Daemon>> Daemon::Start(config::Config config, DaemonOptions options) {
  std::unique_ptr<Daemon> daemon(new Daemon(std::move(config)));
  if (Status s = daemon->StartParts(options); !s.ok()) {
    daemon->Stop();
    return s.error();
  }
  return daemon;
}

Daemon::~Daemon() {
  Stop();
}

Status Daemon::MakeBackends(DaemonOptions& options, backend::BackendSet& set) {
  std::map<std::string, backend::PoolBackend*> by_name;
  auto sink = [controller = controller_.get()](executor::RunResult result) {
    controller->OnRunResult(std::move(result));
  };
  for (const auto& pool : config_.cluster.pools) {
    auto made = by_name.find(pool.backend);
    if (made == by_name.end()) {
      std::unique_ptr<backend::PoolBackend> b;
      if (pool.backend == model::kLocalBackend) {
        b = std::make_unique<backend::ExecutorBackend>(*local_executor_);
      } else if (pool.backend == model::kAgentBackend) {
        b = std::make_unique<backend::ExecutorBackend>(*agents_);
      } else if (auto factory = options.backends.find(pool.backend); factory != options.backends.end()) {
        b = factory->second(sink);
      }
      if (!b) {
        return Error::Internal("pool " + pool.name + " names backend '" + pool.backend +
                               "', which this daemon does not have (built in: local, agent); "
                               "see docs/adr/0006-pool-backend-port.md");
      }
      made = by_name.emplace(pool.backend, b.get()).first;
      backends_.push_back(std::move(b));
    }
    set.Serve(pool.name, made->second);
  }
  return Status::Ok();
}

Status Daemon::StartParts(DaemonOptions& options) {
  // An IdP's keys that cannot be read refuse to start, rather than every
  // portal user's call later (docs/access.md).
  if (config_.access.jwt.enabled()) {
    if (Status s = auth::JwtVerifier(config_.access.jwt).Load(); !s.ok()) {
      return Error::Unprocessable("invalid_config", "access.jwt.jwks_file: " + s.error().message);
    }
  }
  // State directory: traversable but not listable by others (jobs reach their
  // work directories through it); the database, tokens and run files are root's.
  const fs::path state_dir = fs::absolute(config_.server.state_dir);
  state_dir_ = state_dir.string();
  for (const auto& [dir, mode] : {std::pair{state_dir, 0711}, {state_dir / "runs", 0700}, {state_dir / "work", 0711}}) {
    if (Status s = MakeStateDir(dir, static_cast<mode_t>(mode)); !s.ok()) return s;
  }
  ::umask(0077);
  auto lock = StateLock::Acquire(state_dir_);
  if (!lock.ok()) return lock.error();
  state_lock_.emplace(std::move(*lock));

  auto store_options = StoreOptionsFor(config_.store, state_dir);
  if (!store_options.ok()) return store_options.error();
  auto store = store::Store::Open(*store_options);
  if (!store.ok()) return Error::Internal("cannot open the store: " + store.error().message);
  store_ = std::move(*store);
  if (Status s = SyncUsersAndBootstrap(config_, *store_, state_dir, clock_); !s.ok()) {
    return Error::Internal("cannot set up users: " + s.error().message);
  }

  controller_ = std::make_unique<Controller>(config_, *store_, metrics_, clock_);
  // Attempts' control files on a tmpfs, their output under the state
  // directory (docs/execution.md#where-the-files-are).
  runtime_ = ChooseRuntimeRunsDir(config_.executor.runtime_dir, state_dir_);
  spdlog::info("attempt control files in {} ({})", runtime_.runs_dir, runtime_.why);
  // For operators (and test harnesses) looking for them.
  if (std::ofstream out(state_dir / "runtime-dir"); !(out << runtime_.runs_dir << "\n")) {
    spdlog::warn("cannot write {}", (state_dir / "runtime-dir").string());
  }
  const executor::LocalExecutorOptions exec_options{runtime_.runs_dir, (state_dir / "runs").string(),
                                                    (state_dir / "work").string(), SupervisorPath(config_),
                                                    config_.executor.use_cgroups};
  local_executor_ = executor::MakeLocalExecutor(
      exec_options,
      [controller = controller_.get()](executor::RunResult result) { controller->OnRunResult(std::move(result)); });
  // Nodes with `agent: true` run their attempts through their agents.
  agents_ = std::make_unique<AgentHub>(config_, clock_);
  agents_->SetSink(controller_.get());
  agents_->Start();
  backend::BackendSet backends;
  if (Status s = MakeBackends(options, backends); !s.ok()) return s;
  if (Status s = controller_->SetBackends(backends); !s.ok()) return s;
  notifier_ = std::make_unique<WebhookNotifier>(config_.alerts.webhook);
  notifier_->Start();
  controller_->SetNotifier(notifier_.get());

  sandboxes_ = std::make_unique<SandboxManager>(config_, *store_, metrics_, clock_, *controller_, state_dir_,
                                                SandboxInitPath(config_));
  jobs_ = std::make_unique<service::JobService>(config_, *store_, *controller_, sandboxes_.get(), metrics_, clock_);
  api::ApiContext context;
  context.config = &config_;
  context.store = store_.get();
  context.control = controller_.get();
  context.agents = agents_.get();
  context.sandboxes = sandboxes_.get();
  context.jobs = jobs_.get();
  context.metrics = &metrics_;
  context.clock = &clock_;
  // Output is wherever the job's pool backend keeps it.
  context.read_log = [backends](const model::Job& job, int attempt, std::string_view stream) {
    const backend::PoolBackend* b = backends.For(job.pool);
    return b ? b->ReadLog(job.id, attempt, stream) : std::string();
  };
  context.ready = [controller = controller_.get()] { return controller->Ready(); };
  api_ = std::make_unique<api::Api>(context);

  controller_->Start();
  if (Status started = sandboxes_->Start(); !started) {
    return Error::Internal("cannot start the sandbox manager: " + started.error().message);
  }
  housekeeper_ = std::make_unique<Housekeeper>(config_, *store_, metrics_, clock_, exec_options.work_root);
  housekeeper_->OnReconciled(
      [controller = controller_.get()](int64_t discrepancies) { controller->SetLedgerDiscrepancies(discrepancies); });
  housekeeper_->OnMinute([api = api_.get()](Timestamp now) { api->FlushAudit(now); });
  housekeeper_->Start();
  api::ServerOptions http = options.http;
  http.on_connection_refused = [metrics = &metrics_](const std::string& limit) {
    metrics->CountConnectionRefused(limit);
  };
  auto server = api::StartHttpServer(http, [api = api_.get()](api::HttpRequest req, api::Respond respond) {
    api->Handle(std::move(req), std::move(respond));
  });
  if (!server.ok()) {
    return Error::Unavailable("cannot listen on " + http.host + ":" + std::to_string(http.port) + ": " +
                              server.error().message);
  }
  server_ = std::move(*server);
  url_ = std::string(http.tls.enabled() ? "https://" : "http://") + http.host + ":" + std::to_string(server_->port());
  {
    std::ofstream endpoint(state_dir / "endpoint.tmp");
    endpoint << url_ << "\n";
  }
  fs::rename(state_dir / "endpoint.tmp", state_dir / "endpoint");
  spdlog::info("unisched listening on {} (state {}, config version {}, store synchronous={})", url_, state_dir_,
               config_.version, config_.store.synchronous);
  return Status::Ok();
}

Status Daemon::ReloadTls() {
  if (!server_) return Status::Ok();
  return server_->ReloadTls();
}

void Daemon::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (agents_) agents_->Stop();  // parked heartbeats are answered while the listener still runs
  if (server_) server_->Stop();
  if (housekeeper_) housekeeper_->Stop();
  if (api_) api_->FlushAudit(clock_.Now(), /*all=*/true);
  if (sandboxes_) sandboxes_->Stop();  // sandboxes end with the daemon (charged to now)
  if (controller_) controller_->Stop();
  if (notifier_) notifier_->Stop();
  for (auto& b : backends_) b->Shutdown();
  if (agents_) agents_->Shutdown();
  if (local_executor_) local_executor_->Shutdown();
  // Attempts not collected yet keep it (and so are found at the next start).
  if (runtime_.chosen) RemoveRuntimeDirIfEmpty(runtime_.runs_dir);
  if (store_) store_->Close();
}

}  // namespace unisched::daemon
