#include "unisched/agent/agent.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "agent/log_shipper.h"
#include "agent/node_probe.h"
#include "unisched/client/http_client.h"
#include "unisched/executor/executor.h"
#include "unisched/executor/wire.h"

namespace unisched::agent {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Options {
  std::string server;
  std::string token_file;
  std::string node;
  std::string pool;
  std::string state_dir;
  model::Labels labels;
  std::string address;  // --address; else the one this machine reaches the first server from
  std::optional<int> cpus;
  std::optional<int64_t> memory_mb;
  std::optional<int> gpus;
  std::string gpu_model = "unknown";
  int gpu_memory_gb = 0;
  bool use_cgroups = true;
  bool pin_cpus = false;                  // --pin-cpus: tasks pinned to their CPU sets
  double work_dir_retention_hours = 168;  // as the daemon's executor.work_dir_retention_hours
  client::TlsOptions tls;                 // --ca-file, --client-cert, --client-key (https:// servers)
};

constexpr const char* kUsage =
    "usage: unisched agent --server URL[,URL...] --token-file FILE --node NAME --pool POOL\n"
    "         [--state-dir DIR] [--labels k=v,...] [--address A] [--cpus N] [--memory-mb N]\n"
    "         [--gpus N [--gpu-model M] [--gpu-memory-gb G]] [--no-cgroups] [--pin-cpus]\n"
    "         [--work-dir-retention-hours H] [--ca-file PEM] [--client-cert PEM --client-key PEM]\n"
    "Several URLs name the daemon's replicas (docs/replicas.md): any live one forwards to the leader.\n"
    "An https:// server's certificate is checked against --ca-file (else the system's CAs);\n"
    "--client-cert/--client-key present the node's certificate (mTLS, docs/access.md).\n"
    "Without --cpus/--memory-mb/--gpus the node's are detected (GPUs with nvidia-smi).\n";

std::optional<Options> ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    std::optional<std::string> v;
    try {
      if (flag == "--no-cgroups") {
        o.use_cgroups = false;
      } else if (flag == "--pin-cpus") {
        o.pin_cpus = true;
      } else if (!(v = value())) {
        std::cerr << "unisched agent: " << flag << " needs a value\n" << kUsage;
        return std::nullopt;
      } else if (flag == "--server") {
        o.server = *v;
      } else if (flag == "--token-file") {
        o.token_file = *v;
      } else if (flag == "--node") {
        o.node = *v;
      } else if (flag == "--pool") {
        o.pool = *v;
      } else if (flag == "--state-dir") {
        o.state_dir = *v;
      } else if (flag == "--address") {
        o.address = *v;
      } else if (flag == "--ca-file") {
        o.tls.ca_file = *v;
      } else if (flag == "--client-cert") {
        o.tls.cert_file = *v;
      } else if (flag == "--client-key") {
        o.tls.key_file = *v;
      } else if (flag == "--cpus") {
        o.cpus = std::stoi(*v);
      } else if (flag == "--memory-mb") {
        o.memory_mb = std::stoll(*v);
      } else if (flag == "--gpus") {
        o.gpus = std::stoi(*v);
      } else if (flag == "--gpu-model") {
        o.gpu_model = *v;
      } else if (flag == "--gpu-memory-gb") {
        o.gpu_memory_gb = std::stoi(*v);
      } else if (flag == "--work-dir-retention-hours") {
        o.work_dir_retention_hours = std::stod(*v);
        if (o.work_dir_retention_hours < 0) throw std::invalid_argument("negative");
      } else if (flag == "--labels") {
        std::istringstream pairs(*v);
        std::string pair;
        while (std::getline(pairs, pair, ',')) {
          const size_t eq = pair.find('=');
          if (eq == std::string::npos || eq == 0) {
            std::cerr << "unisched agent: --labels takes key=value pairs separated by commas, got '" << pair << "'\n";
            return std::nullopt;
          }
          o.labels[pair.substr(0, eq)] = pair.substr(eq + 1);
        }
      } else {
        std::cerr << "unisched agent: unknown flag " << flag << "\n" << kUsage;
        return std::nullopt;
      }
    } catch (const std::exception&) {
      std::cerr << "unisched agent: " << flag << " needs a number >= 0, got '" << v.value_or("") << "'\n";
      return std::nullopt;
    }
  }
  for (const auto& [name, field] : {std::pair{"--server", &o.server}, std::pair{"--token-file", &o.token_file},
                                    std::pair{"--node", &o.node}, std::pair{"--pool", &o.pool}}) {
    if (field->empty()) {
      std::cerr << "unisched agent: " << name << " is required\n" << kUsage;
      return std::nullopt;
    }
  }
  if (o.tls.cert_file.empty() != o.tls.key_file.empty()) {
    std::cerr << "unisched agent: give --client-cert and --client-key together\n" << kUsage;
    return std::nullopt;
  }
  if (o.state_dir.empty()) o.state_dir = "/var/lib/unisched-agent/" + o.node;
  return o;
}

std::atomic<bool> g_stop{false};

// The daemon's replicas, as --server lists them (docs/replicas.md): every
// replica forwards to the leader, so any live one will do. A connection
// that fails, or a 503 (no leader at this moment), moves both loops to the
// next one.
class Servers {
 public:
  explicit Servers(std::vector<client::BaseUrl> urls) : urls_(std::move(urls)) {}

  // The index of the server to use now, and a client for it.
  size_t Current() const { return current_.load(); }
  client::HttpClient Connect(size_t index, const client::TlsOptions& tls, const std::string& token) const {
    const client::BaseUrl& url = urls_[index % urls_.size()];
    client::TlsOptions with_scheme = tls;
    with_scheme.enabled = url.tls;
    client::HttpClient http(url.host, url.port, with_scheme);
    http.SetBearerToken(token);
    return http;
  }
  // After `index` failed: the next server, unless the other loop moved on already.
  void Failed(size_t index) {
    if (urls_.size() < 2) return;
    size_t expected = index;
    if (current_.compare_exchange_strong(expected, (index + 1) % urls_.size())) {
      const client::BaseUrl& next = urls_[(index + 1) % urls_.size()];
      spdlog::warn("trying the next server, {}:{}", next.host, next.port);
    }
  }
  // The server in use, as a URL a job on this node calls (UNISCHED_URL).
  std::string CurrentUrl() const {
    const client::BaseUrl& url = urls_[current_.load() % urls_.size()];
    return std::string(url.tls ? "https://" : "http://") + url.host + ":" + std::to_string(url.port);
  }
  std::string Describe() const {
    std::string out;
    for (const auto& url : urls_) out += (out.empty() ? "" : ",") + url.host + ":" + std::to_string(url.port);
    return out;
  }

 private:
  const std::vector<client::BaseUrl> urls_;
  std::atomic<size_t> current_{0};
};

class Agent {
 public:
  Agent(Options options, std::string token, std::vector<client::BaseUrl> servers)
      : o_(std::move(options)), token_(std::move(token)), servers_(std::move(servers)) {}

  int Run() {
    if (!PrepareDirs()) return 1;
    Detect();
    const fs::path self = fs::read_symlink("/proc/self/exe");
    executor::LocalExecutorOptions exec{(fs::path(o_.state_dir) / "runs").string(),
                                        "",
                                        (fs::path(o_.state_dir) / "work").string(),
                                        (self.parent_path() / "unisched-supervisor").string(),
                                        o_.use_cgroups,
                                        executor::WorkDirRetention(o_.work_dir_retention_hours),
                                        o_.pin_cpus};
    executor_ = executor::MakeLocalExecutor(exec, [this](executor::RunResult r) { OnResult(std::move(r)); });
    RecoverAttempts();
    std::thread results([this] { SendResults(); });
    std::thread logs([this] { ShipLogs(); });
    std::thread health([this] { CheckHealth(); });
    spdlog::info("agent for node {} (pool {}): {} cpus, {} MB, {} GPUs; daemon {}", o_.node, o_.pool, cpus_, memory_mb_,
                 gpus_.size(), servers_.Describe());
    Poll();
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    results.join();
    logs.join();
    health.join();
    executor_->Shutdown();
    spdlog::info("agent stopped; running jobs keep running and are adopted at the next start");
    return 0;
  }

 private:
  std::string SpecsDir() const { return o_.state_dir + "/specs"; }
  // JOB-ATTEMPT for a task 0, JOB-ATTEMPT.TASK for a gang's other ranks.
  std::string SpecFile(model::JobId job, int attempt, int task, const char* ext) const {
    return SpecsDir() + "/" + std::to_string(job) + "-" + executor::TaskDirName(attempt, task) + ext;
  }

  bool PrepareDirs() {
    std::error_code ec;
    fs::create_directories(SpecsDir(), ec);
    if (ec) {
      spdlog::critical("cannot create {}: {}", SpecsDir(), ec.message());
      return false;
    }
    // Jobs run as an unprivileged account and must reach their work
    // directory: the state directory is traversable, not listable.
    ::chmod(o_.state_dir.c_str(), 0711);
    ::chmod(SpecsDir().c_str(), 0700);
    return true;
  }

  void Detect() {
    cpus_ = o_.cpus.value_or(static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
    memory_mb_ = o_.memory_mb.value_or(DetectMemoryMb());
    address_ = o_.address.empty() ? DetectAddress(o_.server) : o_.address;
    if (o_.gpus) {
      for (int i = 0; i < *o_.gpus; ++i) gpus_.push_back({i, o_.gpu_model, o_.gpu_memory_gb});
    } else {
      gpus_ = DetectGpus();
    }
  }

  // Attempts this agent launched before a restart: adopted if their
  // supervisors still run, else their results are collected.
  void RecoverAttempts() {
    for (const auto& entry : fs::directory_iterator(SpecsDir())) {
      if (entry.path().extension() != ".json") continue;
      std::ifstream in(entry.path());
      json doc = json::parse(in, nullptr, false);
      auto spec = executor::LaunchSpecFromJson(doc);
      if (!spec.ok()) continue;
      {
        std::lock_guard lock(mu_);
        running_.insert({spec->job_id, spec->attempt, spec->task});
      }
      executor_->Recover(*spec);
      spdlog::info("recovering attempt {}.{}", spec->job_id, spec->attempt);
    }
  }

  void OnResult(executor::RunResult result) {
    std::lock_guard lock(mu_);
    running_.erase({result.job_id, result.attempt, result.task});
    finished_.insert({result.job_id, result.attempt, result.task});
    results_.push_back(std::move(result));
    cv_.notify_all();
  }

  void Launch(executor::LaunchSpec spec) {
    // The job reaches the daemon (`unisched step`) the way this agent does.
    if (spec.env.count("UNISCHED_JOB_TOKEN") != 0) spec.env["UNISCHED_URL"] = servers_.CurrentUrl();
    const std::string done_file = SpecFile(spec.job_id, spec.attempt, spec.task, ".done");
    if (fs::exists(done_file)) {
      // Ran here already (the daemon restarted before it got the result):
      // the stored result, not a second run.
      std::ifstream in(done_file);
      auto result = executor::RunResultFromJson(json::parse(in, nullptr, false));
      if (result.ok()) OnResult(std::move(*result));
      return;
    }
    bool known = false;
    {
      std::lock_guard lock(mu_);
      // Running, or ended with its result on the way to the daemon (sent
      // again until answered): nothing to start; a recovered one may take
      // the stores' keys its stage-out needs (sent again for that).
      const executor::AttemptRef key{spec.job_id, spec.attempt, spec.task};
      known = running_.count(key) || finished_.count(key);
      if (!known) running_.insert(key);
    }
    if (known) {
      executor_->ProvideStoreKeys(spec);
      return;
    }
    // Recovery re-attaches to a running attempt and needs no secret: none
    // is written to disk.
    std::ofstream(SpecFile(spec.job_id, spec.attempt, spec.task, ".json"))
        << executor::LaunchSpecToJson(spec, /*with_secrets=*/false).dump();
    if (Status s = executor_->Launch(spec); !s) {
      // Transient (out of descriptors here, say) travels to the daemon,
      // which then launches a new attempt instead of counting a failure.
      executor::RunResult failed =
          executor::LaunchFailure(spec.job_id, spec.attempt, s.error(), "on node " + o_.node + ": ");
      failed.task = spec.task;
      OnResult(std::move(failed));
    }
  }

  executor::Heartbeat MakeHeartbeat(int wait_ms) {
    executor::Heartbeat h;
    h.node = o_.node;
    h.pool = o_.pool;
    h.cpus = cpus_;
    h.memory_mb = memory_mb_;
    h.gpus = gpus_;
    h.labels = o_.labels;
    h.address = address_;
    h.wait_ms = wait_ms;
    h.staging = executor_->Staging();
    h.needs_store_keys = executor_->NeedingStoreKeys();
    std::lock_guard lock(mu_);
    h.running.assign(running_.begin(), running_.end());
    h.healthy = healthy_;
    h.health_message = health_message_;
    return h;
  }

  // The heartbeat loop: a long poll, answered at once when the daemon has
  // launches or cancels for this node.
  void Poll() {
    size_t server = servers_.Current();
    client::HttpClient http = servers_.Connect(server, o_.tls, token_);
    int interval = 5;
    bool registered = false;
    while (!g_stop) {
      if (server != servers_.Current()) {
        server = servers_.Current();
        http = servers_.Connect(server, o_.tls, token_);
      }
      const int wait_ms = registered ? interval * 1000 : 0;
      http.SetTimeout(std::chrono::milliseconds(wait_ms + 15'000));
      auto response =
          http.Request("POST", "/v1/agents/heartbeat", executor::HeartbeatToJson(MakeHeartbeat(wait_ms)).dump());
      if (!response.ok() || response->status == 503) servers_.Failed(server);
      if (!response.ok() || response->status != 200) {
        const std::string why =
            response.ok() ? std::to_string(response->status) + " " + response->body : response.error().message;
        spdlog::warn("heartbeat failed: {}; retrying in 1 s", why);
        if (response.ok() && (response->status == 401 || response->status == 403 || response->status == 404)) {
          spdlog::error("the daemon refuses this agent: fix the token, node or pool");
        }
        std::this_thread::sleep_for(std::chrono::seconds(1));
        continue;
      }
      auto commands = executor::CommandsFromJson(json::parse(response->body, nullptr, false));
      if (!commands.ok()) {
        spdlog::warn("unreadable answer: {}", commands.error().message);
        std::this_thread::sleep_for(std::chrono::seconds(1));
        continue;
      }
      if (!registered) spdlog::info("registered; node is {}", commands->node_state);
      registered = true;
      interval = std::max(1, commands->heartbeat_interval_seconds);
      {
        std::lock_guard lock(mu_);
        if (!(health_check_ == commands->health_check)) {
          health_check_ = commands->health_check;
          cv_.notify_all();
        }
      }
      for (const auto& spec : commands->launch) Launch(spec);
      for (const auto& c : commands->cancel) {
        if (c.stale) spdlog::info("attempt {}.{} is not current any more: stopping it", c.job, c.attempt);
        if (c.tasks.empty()) {
          executor_->Cancel(c.job, c.attempt, c.preempt);
        } else {
          executor_->CancelTasks(c.job, c.attempt, c.tasks);
        }
      }
    }
  }

  // Results go on their own connection, as soon as they exist, until the
  // daemon has them; then their spec is kept as .done with the result.
  void SendResults() {
    size_t server = servers_.Current();
    client::HttpClient http = servers_.Connect(server, o_.tls, token_);
    http.SetTimeout(std::chrono::seconds(15));
    while (true) {
      std::vector<executor::RunResult> batch;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !results_.empty(); });
        if (results_.empty()) return;
        batch.assign(results_.begin(), results_.end());
        results_.clear();
      }
      // Each task's output whole before its result: a job seen ended has all its output.
      for (const auto& r : batch) {
        const executor::AttemptRef task{r.job_id, r.attempt, r.task};
        auto send = [&](const executor::AttemptRef& t, const std::string& stream, int64_t offset,
                        std::string_view bytes) { return SendLog(http, t, stream, offset, bytes); };
        for (int tries = 0; tries < 30 && !shipper_.Ship(task, send); ++tries) {
          std::unique_lock lock(mu_);
          if (cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; })) return;
        }
      }
      json list = json::array();
      for (const auto& r : batch) list.push_back(executor::RunResultToJson(r));
      const std::string body = json{{"node", o_.node}, {"results", list}}.dump();
      while (true) {
        if (server != servers_.Current()) {
          server = servers_.Current();
          http = servers_.Connect(server, o_.tls, token_);
          http.SetTimeout(std::chrono::seconds(15));
        }
        auto response = http.Request("POST", "/v1/agents/results", body);
        if (response.ok() && response->status == 200) break;
        if (!response.ok() || response->status == 503) servers_.Failed(server);
        spdlog::warn("cannot report {} results: {}; retrying", batch.size(),
                     response.ok() ? response->body : response.error().message);
        {
          std::unique_lock lock(mu_);
          cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; });
          if (stopping_) {
            // Kept for the next start: the specs are still .json, so their
            // results are collected again.
            return;
          }
        }
      }
      for (const auto& r : batch) {
        shipper_.Forget({r.job_id, r.attempt, r.task});
        std::ofstream(SpecFile(r.job_id, r.attempt, r.task, ".done")) << executor::RunResultToJson(r).dump();
        std::error_code ec;
        fs::remove(SpecFile(r.job_id, r.attempt, r.task, ".json"), ec);
        spdlog::info("attempt {}.{} reported: {}", r.job_id, r.attempt, executor::ToString(r.outcome));
      }
    }
  }

  // A client's call shipping output (LogShipper::Send); nullopt when the daemon could not take it.
  std::optional<int64_t> SendLog(client::HttpClient& http, const executor::AttemptRef& task, const std::string& stream,
                                 int64_t offset, std::string_view bytes) {
    const std::string target = "/v1/agents/logs?node=" + o_.node + "&job=" + std::to_string(task.job) +
                               "&attempt=" + std::to_string(task.attempt) + "&task=" + std::to_string(task.task) +
                               "&stream=" + stream + "&offset=" + std::to_string(offset);
    auto response = http.Request("POST", target, std::string(bytes), {{"Content-Type", "application/octet-stream"}});
    if (!response.ok() || response->status != 200) return std::nullopt;
    const json answer = json::parse(response->body, nullptr, false);
    if (!answer.is_object() || !answer.value("size", json()).is_number_integer()) return std::nullopt;
    return answer["size"].get<int64_t>();
  }

  // Running tasks' output, every second (results ship theirs whole first).
  void ShipLogs() {
    client::HttpClient http = servers_.Connect(servers_.Current(), o_.tls, token_);
    http.SetTimeout(std::chrono::seconds(15));
    size_t server = servers_.Current();
    std::unique_lock lock(mu_);
    while (!stopping_) {
      cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; });
      const std::vector<executor::AttemptRef> tasks(running_.begin(), running_.end());
      lock.unlock();
      if (server != servers_.Current()) {
        server = servers_.Current();
        http = servers_.Connect(server, o_.tls, token_);
        http.SetTimeout(std::chrono::seconds(15));
      }
      for (const auto& task : tasks) {
        shipper_.Ship(task, [&](const executor::AttemptRef& t, const std::string& stream, int64_t offset,
                                std::string_view bytes) { return SendLog(http, t, stream, offset, bytes); });
      }
      lock.lock();
    }
  }

  void CheckHealth() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      const executor::HealthCheck check = health_check_;
      if (check.command.empty()) {
        cv_.wait(lock, [this] { return stopping_ || !health_check_.command.empty(); });
        continue;
      }
      lock.unlock();
      auto [ok, message] = RunHealthCheck(check);
      lock.lock();
      if (ok != healthy_) spdlog::warn("health check {}: {}", ok ? "passes again" : "fails", message);
      healthy_ = ok;
      health_message_ = message;
      cv_.wait_for(lock, std::chrono::seconds(check.interval_seconds),
                   [this, &check] { return stopping_ || !(health_check_ == check); });
    }
  }

  Options o_;
  std::string token_;
  Servers servers_;
  int cpus_ = 0;
  int64_t memory_mb_ = 0;
  std::string address_;
  std::vector<model::GpuDevice> gpus_;
  std::unique_ptr<executor::Executor> executor_;
  LogShipper shipper_{[this](const executor::AttemptRef& task, const std::string& stream) {
    return executor_->LogPath(task.job, task.attempt, task.task, stream);
  }};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::set<executor::AttemptRef> running_;
  std::set<executor::AttemptRef> finished_;  // results produced since this agent started
  std::deque<executor::RunResult> results_;
  executor::HealthCheck health_check_;
  bool healthy_ = true;
  std::string health_message_;
};

}  // namespace

int RunAgent(int argc, char** argv) {
  auto options = ParseArgs(argc, argv);
  if (!options) return 2;
  std::ifstream token_file(options->token_file);
  std::string token;
  if (!token_file || !std::getline(token_file, token) || token.empty()) {
    std::cerr << "unisched agent: cannot read a token from " << options->token_file
              << " (create one with POST /v1/node-tokens {\"pool\": \"" << options->pool << "\"})\n";
    return 2;
  }
  // --server URL[,URL...]: one per daemon replica.
  std::vector<client::BaseUrl> servers;
  std::stringstream list(options->server);
  for (std::string url; std::getline(list, url, ',');) {
    if (url.empty()) continue;
    auto base = client::ParseUrl(url);
    if (!base.ok()) {
      std::cerr << "unisched agent: --server: " << base.error().message << "\n";
      return 2;
    }
    servers.push_back(*base);
  }
  if (servers.empty()) {
    std::cerr << "unisched agent: --server names no URL\n" << kUsage;
    return 2;
  }
  // SIGTERM/SIGINT end the heartbeat loop within one poll; jobs keep running.
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_stop = true; };
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  Agent agent(std::move(*options), token, std::move(servers));
  return agent.Run();
}

}  // namespace unisched::agent
