// The composition root (daemon.h). The order of Start is the order of
// dependence; Stop goes the other way, with the listener closed first so no
// request arrives at a part that has stopped.

#include "daemon/daemon.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "api/submission.h"
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

// The bootstrap admin's token: UNISCHED_ADMIN_TOKEN, else the state
// directory's admin.token, made on first start. Replicas share one, kept in
// the database so it outlives any one replica's machine (docs/replicas.md);
// each writes it to its admin.token for the operator on its machine.
Result<std::string> BootstrapAdminToken(const config::Config& cfg, store::Store& store, const fs::path& state_dir) {
  std::string token;
  if (const char* env = std::getenv("UNISCHED_ADMIN_TOKEN"); env && *env) {
    token = env;
  } else {
    const fs::path file = state_dir / "admin.token";
    std::ifstream in(file);
    std::string local;
    const bool have_local = (in >> local) && !local.empty();
    token = have_local ? local : auth::GenerateToken();
    if (cfg.server.replica.enabled) {
      auto shared = store.ClusterSecret("admin_token", token);
      if (!shared.ok()) return shared.error();
      token = *shared;
    }
    if (token != local) {
      if (!WriteSecretFile(file, token + "\n")) {
        return Error::Internal("cannot write " + file.string());
      }
      spdlog::info("bootstrap admin token written to {}", file.string());
    }
  }
  // Nothing started from here on may see the token (jobs get a clean environment anyway).
  ::unsetenv("UNISCHED_ADMIN_TOKEN");
  return token;
}

// Users named in the config are created or updated from it at every start,
// plus the bootstrap platform-admin "admin" and its token.
Status SyncUsersAndBootstrap(const config::Config& cfg, store::Store& store, const std::string& token,
                             const Clock& clock) {
  std::vector<store::UserRecord> users;
  std::vector<std::string> all_projects;
  for (const auto& p : cfg.projects) all_projects.push_back(p.name);
  users.push_back({kAdminUser, "platform-admin", all_projects, {}, "", true});
  for (const auto& u : cfg.users) users.push_back({u.name, u.role, u.projects, u.queues, u.unix_user, true});

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

// Calls a standby forwards at once; beyond, they wait in its queue. An
// agent's heartbeat holds one for its long poll.
constexpr int kForwarderThreads = 64;

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "replica";
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
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
  daemon->options_ = std::move(options);
  if (Status s = daemon->StartParts(); !s.ok()) {
    daemon->Stop();
    return s.error();
  }
  return daemon;
}

Daemon::~Daemon() {
  Stop();
}

Status Daemon::MakeBackends(backend::BackendSet& set) {
  std::map<std::string, backend::PoolBackend*> by_name;
  auto sink = [controller = controller_.get()](executor::RunResult result) {
    controller->OnRunResult(std::move(result));
  };
  for (const auto& pool : live_->Current().cluster.pools) {
    auto made = by_name.find(pool.backend);
    if (made == by_name.end()) {
      std::unique_ptr<backend::PoolBackend> b;
      if (pool.backend == model::kLocalBackend) {
        b = std::make_unique<backend::ExecutorBackend>(*local_executor_, *local_gangs_);
      } else if (pool.backend == model::kAgentBackend) {
        b = std::make_unique<backend::ExecutorBackend>(*agents_, *agent_gangs_);
      } else if (auto factory = options_.backends.find(pool.backend); factory != options_.backends.end()) {
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

Status Daemon::StartParts() {
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
  store_options->on_commit = [metrics = &metrics_](double seconds, size_t writes) {
    metrics->ObserveCommit(seconds, static_cast<double>(writes));
  };
  auto store = store::Store::Open(*store_options);
  if (!store.ok()) return Error::Internal("cannot open the store: " + store.error().message);
  store_ = std::move(*store);
  // The config in force is the store's version (docs/config-versions.md);
  // a file that differs stops the start here, before anything runs.
  config_keeper_ = std::make_unique<ConfigKeeper>(*store_, config_,
                                                  options_.config_path.empty() ? "<embedded>" : options_.config_path);
  auto adopted = config_keeper_->Adopt(options_.config_adoption);
  if (!adopted.ok()) return adopted.error();
  live_ = std::make_unique<config::LiveConfig>(std::move(*adopted));
  if (config_.server.replica.enabled) return StartReplica();
  metrics_.SetLeadership(true, 0);  // without replicas it leads alone
  if (Status s = StartLeaderParts(); !s.ok()) return s;
  if (Status s = Listen([api = api_.get()](api::HttpRequest req, api::Respond respond) {
        api->Handle(std::move(req), std::move(respond));
      });
      !s.ok()) {
    return s;
  }
  GiveJobsAccess();
  return Status::Ok();
}

// Jobs reach the daemon (`unisched step`) at its URL, with a token of
// their attempt's own; a wildcard listen address is reached on loopback.
void Daemon::GiveJobsAccess() {
  if (url_.empty() || !controller_) return;
  std::string url = url_;
  for (const std::string any : {"//0.0.0.0:", "//[::]:"}) {
    if (auto at = url.find(any); at != std::string::npos) url.replace(at, any.size(), "//127.0.0.1:");
  }
  controller_->SetJobAccess(job_token_secret_, url);
}

// The key secrets are sealed with (docs/secrets.md): store.secrets_key_file,
// made on the first start. Every replica of one store must hold the same
// key: the first to start records its id in the store, and a replica with
// another key refuses to start (a key file it just made is removed again).
Status Daemon::OpenSecretVault() {
  const std::string key_file = config_.store.secrets_key_file.empty() ? (fs::path(state_dir_) / "secrets.key").string()
                                                                      : config_.store.secrets_key_file;
  std::error_code ec;
  const bool existed = fs::exists(key_file, ec);
  auto box = auth::SecretBox::OpenKeyFile(key_file, /*create=*/true);
  if (!box.ok()) return box.error();
  auto recorded = store_->ClusterSecret("secrets_key_id", box->key_id());
  if (!recorded.ok()) return Error::Internal("cannot set up the secrets key: " + recorded.error().message);
  if (*recorded != box->key_id()) {
    // Not a reason to stop: everything but secrets works, and a standby
    // that cannot take over would be worse (docs/secrets.md).
    if (!existed) fs::remove(key_file, ec);
    secrets_problem_ = "the secrets key " + key_file + " (key " + box->key_id() +
                       ") is not the one this store's secrets are sealed with (key " + *recorded +
                       "); copy the key file of the daemon that made it there (store.secrets_key_file, "
                       "docs/secrets.md) and restart";
    spdlog::critical("{}", secrets_problem_);
    return Status::Ok();
  }
  if (!existed) spdlog::info("secrets key made: {} (key {})", key_file, box->key_id());
  vault_ = std::make_unique<service::SecretVault>(*store_, std::move(*box), clock_);
  return Status::Ok();
}

Status Daemon::StartLeaderParts() {
  const fs::path state_dir = state_dir_;
  const config::Config& config = live_->Current();
  // An IdP's keys that cannot be read refuse to start, rather than every
  // portal user's call later (docs/access.md); the version in force says
  // which keys.
  if (config.access.jwt.enabled()) {
    if (Status s = auth::JwtVerifier(config.access.jwt).Load(); !s.ok()) {
      return Error::Unprocessable("invalid_config", "access.jwt.jwks_file: " + s.error().message);
    }
  }
  if (admin_token_.empty()) {
    auto token = BootstrapAdminToken(config_, *store_, state_dir);
    if (!token.ok()) return Error::Internal("cannot set up the bootstrap admin token: " + token.error().message);
    admin_token_ = *token;
  }
  if (Status s = SyncUsersAndBootstrap(config, *store_, admin_token_, clock_); !s.ok()) {
    return Error::Internal("cannot set up users: " + s.error().message);
  }

  controller_ = std::make_unique<Controller>(*live_, *store_, metrics_, clock_);
  // Attempts' control files on a tmpfs, their output under the state
  // directory (docs/execution.md#where-the-files-are).
  runtime_ = ChooseRuntimeRunsDir(config.executor.runtime_dir, state_dir_);
  spdlog::info("attempt control files in {} ({})", runtime_.runs_dir, runtime_.why);
  // For operators (and test harnesses) looking for them.
  if (std::ofstream out(state_dir / "runtime-dir"); !(out << runtime_.runs_dir << "\n")) {
    spdlog::warn("cannot write {}", (state_dir / "runtime-dir").string());
  }
  const executor::LocalExecutorOptions exec_options{runtime_.runs_dir,
                                                    (state_dir / "runs").string(),
                                                    (state_dir / "work").string(),
                                                    SupervisorPath(config),
                                                    config.executor.use_cgroups,
                                                    executor::WorkDirRetention(config::WorkDirRetentionHours(config)),
                                                    config.executor.pin_cpus};
  auto to_controller = [controller = controller_.get()](executor::RunResult result) {
    controller->OnRunResult(std::move(result));
  };
  // Steps' tasks are numbered step * kStepTaskStride + rank in both books.
  local_gangs_ = std::make_unique<backend::GangBook>(to_controller, service::kStepTaskStride);
  agent_gangs_ = std::make_unique<backend::GangBook>(to_controller, service::kStepTaskStride);
  steps_ = std::make_unique<StepBook>();
  for (backend::GangBook* gangs : {local_gangs_.get(), agent_gangs_.get()}) {
    gangs->SetStepSink([controller = controller_.get()](int step, executor::RunResult result) {
      controller->OnStepEnded(step, std::move(result));
    });
  }
  controller_->SetStepBook(steps_.get());
  auto job_secret = store_->ClusterSecret("job_token_secret", auth::GenerateToken());
  if (!job_secret.ok()) return Error::Internal("cannot set up job tokens: " + job_secret.error().message);
  job_token_secret_ = *job_secret;
  if (Status s = OpenSecretVault(); !s.ok()) return s;
  controller_->SetSecretVault(vault_.get(), secrets_problem_);
  local_executor_ = executor::MakeLocalExecutor(exec_options, [gangs = local_gangs_.get()](executor::RunResult result) {
    gangs->OnTaskResult(std::move(result));
  });
  local_gangs_->SetCanceller(
      [executor = local_executor_.get()](model::JobId job, int attempt, const std::vector<int>& tasks) {
        tasks.empty() ? executor->Cancel(job, attempt, false) : executor->CancelTasks(job, attempt, tasks);
      });
  // Nodes with `agent: true` run their attempts through their agents.
  agents_ = std::make_unique<AgentHub>(config, clock_);
  agents_->SetSink(controller_.get());
  agents_->SetLogsDir((state_dir / "runs").string());
  agents_->SetResultSink(
      [gangs = agent_gangs_.get()](executor::RunResult result) { gangs->OnTaskResult(std::move(result)); });
  agent_gangs_->SetCanceller([hub = agents_.get()](model::JobId job, int attempt, const std::vector<int>& tasks) {
    tasks.empty() ? hub->Cancel(job, attempt, false) : hub->CancelTasks(job, attempt, tasks);
  });
  agents_->Start();
  controller_->SetStagingExecutors({local_executor_.get(), agents_.get()});
  backend::BackendSet backends;
  if (Status s = MakeBackends(backends); !s.ok()) return s;
  if (Status s = controller_->SetBackends(backends); !s.ok()) return s;
  notifier_ = std::make_unique<WebhookNotifier>(config.alerts.webhook);
  notifier_->Start();
  controller_->SetNotifier(notifier_.get());

  // API sandboxes live in this machine: replicas serve none (the API says
  // why, docs/replicas.md#what-replicas-require).
  if (!config_.server.replica.enabled) {
    sandboxes_ = std::make_unique<SandboxManager>(*live_, *store_, metrics_, clock_, *controller_, state_dir_,
                                                  SandboxInitPath(config));
  }
  jobs_ = std::make_unique<service::JobService>(*live_, *store_, *controller_, sandboxes_.get(), metrics_, clock_);
  api::ApiContext context;
  context.config = live_.get();
  context.configs = config_keeper_.get();
  context.store = store_.get();
  context.control = controller_.get();
  context.agents = agents_.get();
  context.sandboxes = sandboxes_.get();
  context.jobs = jobs_.get();
  // Workflows' tasks are read as POST /v1/jobs bodies are.
  workflows_ = std::make_unique<service::WorkflowBook>(
      *live_, *store_, *jobs_, [](const nlohmann::json& body) { return api::ParseSubmission(body); }, clock_);
  controller_->SetWorkflowJobEnded(
      [book = workflows_.get()](model::JobId job, model::JobState state, std::string reason) {
        book->JobEnded(job, state, std::move(reason));
      });
  context.workflows = workflows_.get();
  context.metrics = &metrics_;
  context.clock = &clock_;
  // Output is wherever the job's pool backend keeps it.
  context.read_log = [backends](const model::Job& job, int attempt, int task, std::string_view stream, LogRange range) {
    const backend::PoolBackend* b = backends.For(job.pool);
    return b ? b->ReadLog(job.id, attempt, task, stream, range) : std::string();
  };
  context.ready = [controller = controller_.get()] { return controller->Ready(); };
  context.steps = controller_.get();
  context.job_token_secret = job_token_secret_;
  context.secrets = vault_.get();
  context.secrets_problem = secrets_problem_;
  lifecycle_ = std::make_unique<Lifecycle>(*live_, *store_, vault_.get(), clock_);
  context.run_lifecycle = [lifecycle = lifecycle_.get()](bool dry_run,
                                                         const std::string& actor) -> Result<nlohmann::json> {
    auto actions = lifecycle->Run(dry_run, actor);
    if (!actions.ok()) return actions.error();
    nlohmann::json list = nlohmann::json::array();
    int64_t failed = 0;
    for (const LifecycleAction& a : *actions) {
      failed += a.error.empty() ? 0 : 1;
      list.push_back({{"rule", a.rule},
                      {"action", a.action},
                      {"source", a.source},
                      {"target", a.target.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.target)},
                      {"bytes", a.bytes},
                      {"age_days", a.age_days},
                      {"error", a.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.error)}});
    }
    return nlohmann::json{{"dry_run", dry_run}, {"actions", std::move(list)}, {"failed", failed}};
  };
  api_ = std::make_unique<api::Api>(context);

  controller_->Start();
  workflows_->Start();
  if (sandboxes_) {
    if (Status started = sandboxes_->Start(); !started) {
      return Error::Internal("cannot start the sandbox manager: " + started.error().message);
    }
  }
  housekeeper_ = std::make_unique<Housekeeper>(*live_, *store_, metrics_, clock_, exec_options.work_root);
  housekeeper_->OnReconciled(
      [controller = controller_.get()](int64_t discrepancies) { controller->SetLedgerDiscrepancies(discrepancies); });
  housekeeper_->OnMinute([api = api_.get()](Timestamp now) { api->FlushAudit(now); });
  housekeeper_->MeasureArchivesWith(
      [lifecycle = lifecycle_.get()](Timestamp now) { return lifecycle->MeasureArchives(now); });
  housekeeper_->Start();
  lifecycle_->Start();
  metrics_.SetConfigVersion(config.number, config.canary_number);
  DeclareConfiguredSeries(config);
  // A new config version: its users into the store, callers' roles again.
  config_keeper_->Attach(
      *live_, [store = store_.get()] { return store->LoadActiveJobs(); },
      [this](const config::Config& now) {
        metrics_.SetConfigVersion(now.number, now.canary_number);
        DeclareConfiguredSeries(now);
        if (Status s = SyncUsersAndBootstrap(now, *store_, admin_token_, clock_); !s.ok()) {
          spdlog::error("config version {}: cannot update its users: {}", now.number, s.error().message);
        }
        api_->InvalidateCredentials();
      });
  return Status::Ok();
}

void Daemon::DeclareConfiguredSeries(const config::Config& config) {
  std::vector<std::string> pools, rules;
  std::vector<metrics::Metrics::KnownQueue> queues;
  for (const auto& p : config.cluster.pools) pools.push_back(p.name);
  for (const auto& q : config.cluster.queues) {
    const model::PoolSpec* pool = config.cluster.FindPool(q.pool);
    queues.push_back({q.name, q.pool, pool != nullptr && pool->sandbox});
  }
  for (const auto& r : config.alerts.rules) rules.push_back(r.name);
  metrics_.DeclareConfigured(pools, queues, rules);
}

Status Daemon::Listen(api::Handler handler) {
  const fs::path state_dir = state_dir_;
  api::ServerOptions http = options_.http;
  http.on_connection_refused = [metrics = &metrics_](const std::string& limit) {
    metrics->CountConnectionRefused(limit);
  };
  auto server = api::StartHttpServer(http, std::move(handler));
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
  spdlog::info("unisched listening on {} (state {}, config version {} ({}), store synchronous={})", url_, state_dir_,
               live_->Current().number, live_->Current().version, config_.store.synchronous);
  return Status::Ok();
}

Status Daemon::StartReplica() {
  const auto& replica = config_.server.replica;
  replica_name_ = replica.name.empty() ? HostName() : replica.name;
  // Before listening: whoever finds the endpoint file finds the token too.
  auto token = BootstrapAdminToken(config_, *store_, state_dir_);
  if (!token.ok()) return Error::Internal("cannot set up the bootstrap admin token: " + token.error().message);
  admin_token_ = *token;
  auto secret = store_->ClusterSecret("replica_forward_secret", auth::GenerateToken());
  if (!secret.ok()) return Error::Internal("cannot read the cluster's secrets: " + secret.error().message);
  forward_secret_ = *secret;
  forwarder_ = std::make_unique<Forwarder>(forward_secret_, replica.ca_file, config_.server.tls.cert_file,
                                           config_.server.tls.key_file, kForwarderThreads);
  keeper_ = std::make_unique<LeaseKeeper>(*store_, replica_name_, std::chrono::seconds(replica.lease_seconds), metrics_,
                                          LeaseKeeper::Callbacks{[this](int64_t epoch) { return Lead(epoch); },
                                                                 [this](const std::string& why) { StepDown(why); }});
  if (Status s =
          Listen([this](api::HttpRequest req, api::Respond respond) { Dispatch(std::move(req), std::move(respond)); });
      !s.ok()) {
    return s;
  }
  const std::string advertise = replica.advertise_url.empty() ? url_ : replica.advertise_url;
  if (Status s = store_->AnnounceReplica(replica_name_, advertise); !s.ok()) {
    return Error::Internal("cannot announce this replica in the store: " + s.error().message);
  }
  spdlog::info("replica {} ({}): standing by for the lease ({} s)", replica_name_, advertise, replica.lease_seconds);
  keeper_->Start();
  return Status::Ok();
}

// On the keeper's thread. Writes are fenced before anything is read, so
// nothing this replica does as leader lands once another took the lease.
Status Daemon::Lead(int64_t epoch) {
  store_->FenceWrites(epoch, replica_name_, [this] { StepDown("a write found the lease taken by another replica"); });
  const auto began = std::chrono::steady_clock::now();
  // The version in force now, which may be newer than this replica's start.
  auto in_force = config_keeper_->LoadInForce();
  if (!in_force.ok()) return in_force.error();
  live_ = std::make_unique<config::LiveConfig>(std::move(*in_force));
  if (Status s = StartLeaderParts(); !s.ok()) return s;
  GiveJobsAccess();
  leader_api_.store(api_.get());
  spdlog::info("replica {}: leading at epoch {} (state rebuilt from the database in {} ms)", replica_name_, epoch,
               std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began).count());
  return Status::Ok();
}

void Daemon::StepDown(const std::string& why) {
  if (stepping_down_.exchange(true)) return;
  leader_api_.store(nullptr);
  spdlog::critical("replica {}: stops leading: {}", replica_name_, why);
  if (options_.on_step_down) {
    options_.on_step_down(why);
    return;
  }
  spdlog::default_logger()->flush();
  std::_Exit(kStepDownExitCode);
}

void Daemon::Dispatch(api::HttpRequest request, api::Respond respond) {
  if (api::Api* api = leader_api_.load()) {
    AcceptForwarded(request, forward_secret_);
    api->Handle(std::move(request), std::move(respond));
    return;
  }
  Standby(std::move(request), std::move(respond));
}

bool Daemon::KnownUserToken(const api::HttpRequest& request) const {
  const std::string header = request.Header("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (header.size() <= kBearer.size() || header.compare(0, kBearer.size(), kBearer) != 0) return false;
  std::optional<store::TokenRecord> token;
  try {
    token = store_->FindToken(auth::HashToken(header.substr(kBearer.size())));
  } catch (const store::StoreFailure&) {
    return false;
  }
  const Timestamp now = clock_.Now();
  return token && token->kind == "user" && !token->revoked_at && (!token->expires_at || *token->expires_at > now);
}

void Daemon::Standby(api::HttpRequest request, api::Respond respond) {
  const LeaseKeeper::Leader leader = keeper_->leader();
  const bool starting = keeper_->leading() || leader.name == replica_name_;
  const std::string role = starting ? "starting" : "standby";
  if (request.path == "/healthz" && !keeper_->started()) {
    // Listening, but the lease not read yet: it cannot say who leads.
    respond(api::ErrorResponse(503, "starting", "replica " + replica_name_ + " is starting: reading the lease"));
    return;
  }
  if (request.path == "/healthz") {
    respond(api::HttpResponse{200,
                              "application/json",
                              nlohmann::json{{"status", "ok"},
                                             {"role", role},
                                             {"replica", replica_name_},
                                             {"leader", leader.name},
                                             {"epoch", leader.epoch}}
                                  .dump(),
                              {},
                              nullptr});
    return;
  }
  if (request.path == "/metrics") {
    // This replica's own series (unisched_replica_leader 0 here), not the leader's.
    if (config_.server.metrics_require_token && !KnownUserToken(request)) {
      respond(api::ErrorResponse(401, "unauthenticated",
                                 "this replica's /metrics needs a user token (server.metrics_require_token): send "
                                 "Authorization: Bearer TOKEN"));
      return;
    }
    respond(api::HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", metrics_.Serialize(), {}, nullptr});
    return;
  }
  auto unavailable = [&](const std::string& code, const std::string& message) {
    api::HttpResponse r = api::ErrorResponse(503, code, message);
    r.headers.emplace_back("Retry-After", "1");
    respond(std::move(r));
  };
  if (request.path == "/readyz") {
    unavailable("not_leader", "replica " + replica_name_ + " " +
                                  (starting ? "has taken the lease and is starting" : "stands by") +
                                  (leader.name.empty() || starting ? "" : "; replica " + leader.name + " leads") +
                                  ": send traffic to any replica, which forwards it (docs/replicas.md)");
    return;
  }
  if (starting) {
    unavailable("not_ready", "replica " + replica_name_ +
                                 " has just taken the lease and is rebuilding its state from the database; retry in a "
                                 "second");
    return;
  }
  // A call another replica forwarded here believing this one leads: not
  // passed on again, so two standbys with stale views never loop.
  if (request.headers.count(kForwardedSecret) != 0) {
    unavailable("not_leader", "replica " + replica_name_ + " does not lead (any more); retry");
    return;
  }
  if (leader.url.empty()) {
    unavailable("no_leader",
                "no replica leads at this moment (the lease is being taken over, or the database cannot be reached); "
                "retry in a few seconds (a submission with the same Idempotency-Key is safe to retry)");
    return;
  }
  forwarder_->Forward(std::move(request), leader.url, std::move(respond));
}

Status Daemon::ReloadTls() {
  if (!server_) return Status::Ok();
  return server_->ReloadTls();
}

Result<std::string> Daemon::ReloadConfig() {
  if (options_.config_path.empty()) return std::string("no --config file: nothing to read again");
  if (!api_ || (keeper_ && leader_api_.load() == nullptr)) {
    return std::string("this replica does not lead: the leader applies config changes (POST /v1/config)");
  }
  std::ifstream in(options_.config_path);
  if (!in) return Error::Unavailable("cannot read " + options_.config_path + ": " + std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto applied = config_keeper_->Apply({text, "", "SIGHUP: " + options_.config_path, false}, "SIGHUP");
  if (!applied.ok()) return applied.error();
  return applied->dump();
}

void Daemon::Stop() {
  if (stopped_) return;
  stopped_ = true;
  // No takeover starts the leader parts while they stop.
  if (keeper_) keeper_->Stop();
  if (agents_) agents_->Stop();  // parked heartbeats are answered while the listener still runs
  if (server_) server_->Stop();
  if (housekeeper_) housekeeper_->Stop();
  if (lifecycle_) lifecycle_->Stop();
  if (workflows_) workflows_->Stop();  // what it decided and has not released is reconciled at the next start
  if (api_) api_->FlushAudit(clock_.Now(), /*all=*/true);
  if (sandboxes_) sandboxes_->Stop();  // sandboxes end with the daemon (charged to now)
  if (controller_) controller_->Stop();
  if (notifier_) notifier_->Stop();
  for (auto& b : backends_) b->Shutdown();
  if (agents_) agents_->Shutdown();
  if (local_executor_) local_executor_->Shutdown();
  if (forwarder_) forwarder_->Stop();
  // After the last write: a standby may take over at once.
  if (keeper_) keeper_->ReleaseIfLeading();
  // Attempts not collected yet keep it (and so are found at the next start).
  // So does a RUNNING job whose supervisor has not made its attempt's
  // directory yet (the launch follows the commit): removed now, the
  // supervisor could not make it, and the next start would find the
  // directory gone, as after a reboot, and call the attempt lost instead of
  // launching it (seen as an array's two running tasks FAILED across a
  // restart under the sanitizers).
  if (runtime_.chosen && !(controller_ && controller_->AnyRunning())) RemoveRuntimeDirIfEmpty(runtime_.runs_dir);
  if (store_) store_->Close();
}

}  // namespace unisched::daemon
