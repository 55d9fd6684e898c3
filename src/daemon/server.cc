// `unisched server`: reads the config and the command line, raises the
// open-file limit, runs a Daemon (daemon.h, the composition root) until
// SIGTERM or SIGINT, then stops it.

#include "daemon/server.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "daemon/daemon.h"
#include "unisched/api/server.h"
#include "unisched/config/config.h"

namespace unisched::daemon {
namespace {

void PrintErrors(const std::vector<config::ConfigError>& errors, std::ostream& out) {
  for (const auto& e : errors) out << e.ToString() << "\n";
}

struct ServerArgs {
  std::string config_path;
  std::string listen;
  std::string state_dir;
  bool apply_config = false;
};

// Set in the environment of a replica that executes itself again as a
// standby: its file was checked against the store's config at its first
// start, and the store's version is in force since.
constexpr const char* kStandbyReexecEnv = "UNISCHED_STANDBY_REEXEC";

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
    } else if (a == "--apply-config") {
      args.apply_config = true;
    } else {
      ok = false;
    }
    if (!ok) {
      std::cerr << "usage: unisched server [--config FILE [--apply-config]] [--listen HOST:PORT] [--state-dir DIR]\n";
      return std::nullopt;
    }
  }
  return args;
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

// A replica that stops leading comes back as a standby by executing itself
// again, as a supervisor would restart it, but at once: its threads, its
// connections (the database's: its session ends) and its listener
// end with the old image, and nothing of the deposed leader's state stays.
// Agents' attempts keep running; the new leader collects them.
[[noreturn]] void ReexecAsStandby(char** argv, const std::string& why) {
  spdlog::warn("replica: executing again as a standby ({})", why);
  spdlog::default_logger()->flush();
  ::close_range(3, ~0U, 0);
  ::setenv(kStandbyReexecEnv, "1", 1);
  ::execv("/proc/self/exe", argv);
  std::fprintf(stderr, "unisched: cannot execute /proc/self/exe again (%s); exiting\n", std::strerror(errno));
  std::_Exit(75);
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
  // Valid YAML can still name a backend this binary does not have: the
  // server would refuse to start on it, so this says so now.
  const auto& cfg = std::get<config::Config>(loaded);
  std::vector<config::ConfigError> missing;
  for (size_t i = 0; i < cfg.cluster.pools.size(); ++i) {
    const model::PoolSpec& pool = cfg.cluster.pools[i];
    if (!pool.PlacedByBackend()) continue;
    missing.push_back({"pools[" + std::to_string(i) + "].backend",
                       "'" + pool.backend +
                           "' is not a backend of this daemon (built in: local, agent), so "
                           "`unisched server` would refuse to start; see docs/adr/0006-pool-backend-port.md"});
  }
  if (!missing.empty()) {
    PrintErrors(missing, std::cout);
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
  http.tls.cert_file = cfg.server.tls.cert_file;
  http.tls.key_file = cfg.server.tls.key_file;
  http.tls.client_ca_file = cfg.server.tls.client_ca_file;

  // SIGTERM/SIGINT are taken by sigwait below; every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);  // reloads the TLS files and the config file
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  DaemonOptions options;
  options.http = http;
  options.on_step_down = [argv](const std::string& why) { ReexecAsStandby(argv, why); };
  options.config_path = args->config_path;
  options.config_adoption.file_given = !args->config_path.empty();
  options.config_adoption.apply_file = args->apply_config;
  options.config_adoption.trust_store = std::getenv(kStandbyReexecEnv) != nullptr;
  auto daemon = Daemon::Start(std::move(cfg), std::move(options));
  if (!daemon.ok()) {
    spdlog::critical("{}", daemon.error().message);
    return 1;
  }
  int received = 0;
  while (sigwait(&signals, &received) == 0 && received == SIGHUP) {
    if (Status s = (*daemon)->ReloadTls(); s.ok()) {
      spdlog::info("SIGHUP: TLS certificate and key reloaded (new connections use them)");
    } else {
      spdlog::error("SIGHUP: {}; the previous certificate stays in use", s.error().message);
    }
    // As `scontrol reconfigure`: the file through the path of POST /v1/config.
    if (auto reloaded = (*daemon)->ReloadConfig(); reloaded.ok()) {
      spdlog::info("SIGHUP: config: {}", *reloaded);
    } else {
      spdlog::error("SIGHUP: config refused, the version in force stays: {}", reloaded.error().message);
    }
  }
  spdlog::info("signal {}: shutting down", received);
  (*daemon)->Stop();
  spdlog::info("stopped; running jobs keep running and are collected at the next start");
  return 0;
}

}  // namespace unisched::daemon
