// The seed's launch check 4 through real processes: a daemon and two
// `unisched agent` processes on loopback. A job whose process is killed
// fails with the reason and is retried; an agent killed with its jobs (a
// dead machine) takes its node down within a few heartbeats, its job comes
// back as attempt 2 on the other node and completes, and the NodeDown alert
// reaches a webhook listener; the agent restarted brings the node up and
// resolves the alert; a failing health check drains the nodes.

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "testing/agent_process.h"
#include "testing/daemon.h"
#include "unisched/client/http_client.h"
#include "unisched/containment/containment.h"

namespace unisched::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

// A webhook receiver: accepts HTTP POSTs on a loopback port, answers 200,
// keeps the JSON bodies.
class WebhookListener {
 public:
  WebhookListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(fd_, 16);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~WebhookListener() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  uint16_t port() const { return port_; }
  std::vector<json> Received() {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  bool Has(const std::string& alert, const std::string& state, const std::string& object) {
    for (const auto& b : Received()) {
      if (b.value("alert", "") == alert && b.value("state", "") == state && b.value("object", "") == object)
        return true;
    }
    return false;
  }

 private:
  void Serve() {
    while (!stop_) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string data;
      char buf[4096];
      ssize_t n;
      size_t header_end = std::string::npos;
      size_t length = 0;
      while ((n = ::read(c, buf, sizeof buf)) > 0) {
        data.append(buf, static_cast<size_t>(n));
        if (header_end == std::string::npos && (header_end = data.find("\r\n\r\n")) != std::string::npos) {
          std::string headers = data.substr(0, header_end);
          for (auto& ch : headers) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          const size_t at = headers.find("content-length:");
          if (at != std::string::npos) length = std::stoul(headers.substr(at + 15));
        }
        if (header_end != std::string::npos && data.size() >= header_end + 4 + length) break;
      }
      if (header_end != std::string::npos) {
        json body = json::parse(data.substr(header_end + 4), nullptr, false);
        std::lock_guard lock(mu_);
        bodies_.push_back(body);
      }
      const std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      (void)!::write(c, ok.data(), ok.size());
      ::close(c);
    }
  }
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<json> bodies_;
};

constexpr const char* kNode1 = "x86-c2m2-hpc-01";
constexpr const char* kNode2 = "x86-c2m2-hpc-02";
// Agents heartbeat every second. The timeout leaves room for a slow host
// (the sanitizers, a loaded CI machine): a live agent must not be taken for
// dead (its node flapping down fails its jobs), and an agent restarted must
// be heard again before its node is declared down.
constexpr int kHeartbeatTimeoutSeconds = 6;

class AgentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sick_file_ = daemon_.state_dir() + "/sick";
    marker_ = daemon_.state_dir() + "/shared/marker";
    fs::create_directories(daemon_.state_dir() + "/shared");
    ::chmod((daemon_.state_dir() + "/shared").c_str(), 0777);
    daemon_.UseConfigText(std::string(R"yaml(
server:
  scheduler_tick_seconds: 0.2
health:
  heartbeat_interval_seconds: 1
  heartbeat_timeout_seconds: )yaml") +
                          std::to_string(kHeartbeatTimeoutSeconds) + R"yaml(
alerts:
  webhook: {url: "http://127.0.0.1:)yaml" +
                          std::to_string(hook_.port()) + R"yaml(/hook", timeout_seconds: 2, retries: 2}
  rules:
    - {name: NodeDown, kind: node_down, severity: critical}
    - {name: NodeDrainedAutomatically, kind: node_drained_automatically, severity: warning}
pools:
  - name: cpu
    kind: cpu
    nodes: [x86-c2m2-hpc-01, x86-c2m2-hpc-02]
    health_check: {command: [/bin/sh, -c, "test ! -e )yaml" +
                          sick_file_ + R"yaml("], interval_seconds: 1, timeout_seconds: 5}
nodes:
  - {name: x86-c2m2-hpc-01, cpus: 2, memory_mb: 1024, agent: true}
  - {name: x86-c2m2-hpc-02, cpus: 2, memory_mb: 1024, agent: true}
queues:
  - name: batch
    pool: cpu
    policy: {max_retries: 1, retry_backoff_seconds: 1}
projects:
  - name: default
)yaml");
    daemon_.Start();
    const Reply token = daemon_.Call("POST", "/v1/node-tokens", json{{"pool", "cpu"}});
    ASSERT_EQ(token.status, 201) << token.body;
    token_file_ = daemon_.state_dir() + "/node.token";
    std::ofstream(token_file_) << token.json["token"].get<std::string>() << "\n";
    StartAgent(kNode1);
    StartAgent(kNode2);
    ASSERT_TRUE(WaitNode(kNode1, "up") && WaitNode(kNode2, "up")) << daemon_.Call("GET", "/v1/nodes").body;
  }
  void TearDown() override {
    for (auto& [node, pid] : agents_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      KillEverythingUnder(AgentDir(node));
    }
  }
  std::string AgentDir(const std::string& node) const { return daemon_.state_dir() + "/agent-" + node; }
  void StartAgent(const std::string& node) {
    agents_[node] = SpawnAgent(daemon_.url(), token_file_, node, "cpu", AgentDir(node));
  }
  void KillMachine(const std::string& node) {
    ::kill(agents_[node], SIGKILL);
    ::waitpid(agents_[node], nullptr, 0);
    agents_.erase(node);
    KillEverythingUnder(AgentDir(node));
  }
  json Node(const std::string& name) {
    const json nodes = daemon_.Call("GET", "/v1/nodes").json;
    for (const auto& n : nodes["nodes"]) {
      if (n["name"] == name) return n;
    }
    return json();
  }
  bool WaitNode(const std::string& name, const std::string& state, std::chrono::seconds deadline = 60s) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    while (std::chrono::steady_clock::now() < until) {
      if (Node(name).value("state", "") == state) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }
  json WaitJob(const std::string& id, const std::function<bool(const json&)>& done,
               std::chrono::seconds deadline = 30s) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    json job;
    while (std::chrono::steady_clock::now() < until) {
      job = daemon_.Call("GET", "/v1/jobs/" + id).json;
      if (done(job)) break;
      std::this_thread::sleep_for(100ms);
    }
    return job;
  }
  // Submits `sleep <seconds>` on `cpus` CPUs of the batch queue; the job once
  // it runs (or as it stands after 30 s). Sets `id` to the job's id.
  json SubmitSleeperAndWaitRunning(int cpus, int seconds, std::string& id) {
    id = daemon_.Submit({{"queue", "batch"},
                         {"workload", {{"kind", "hpc"}}},
                         {"resources", {{"cpus", cpus}, {"memory_mb", 64}}},
                         {"command", {"sleep", std::to_string(seconds)}}});
    return WaitJob(id, [](const json& j) { return j["state"] == "RUNNING"; });
  }
  bool WaitHook(const std::string& alert, const std::string& state, const std::string& object) {
    const auto until = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < until) {
      if (hook_.Has(alert, state, object)) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }

  WebhookListener hook_;
  TestDaemon daemon_;
  std::string token_file_, sick_file_, marker_;
  std::map<std::string, pid_t> agents_;
};

TEST_F(AgentsTest, LaunchCheck4) {
  // 1. A job's own process killed: FAILED with the reason, then retried.
  const std::string flaky = daemon_.Submit(
      {{"queue", "batch"},
       {"workload", {{"kind", "hpc"}}},
       {"resources", {{"cpus", 1}, {"memory_mb", 64}}},
       {"command",
        {"/bin/sh", "-c", "if [ -e " + marker_ + " ]; then exit 0; fi; touch " + marker_ + "; exec sleep 60"}}});
  json job = WaitJob(flaky, [&](const json& j) { return j["state"] == "RUNNING" && fs::exists(marker_); });
  ASSERT_EQ(job["state"], "RUNNING") << job.dump();
  // The job's process: `sleep 60` with its cwd in the job's work directory on its node.
  std::this_thread::sleep_for(200ms);
  KillEverythingUnder(AgentDir(job["nodes"][0].get<std::string>()) + "/work/" + flaky);
  job = daemon_.WaitTerminal(flaky);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump();
  ASSERT_EQ(job["attempts"].size(), 2u) << job.dump();
  EXPECT_EQ(job["attempts"][0]["state"], "FAILED");
  EXPECT_EQ(job["attempts"][0]["exit_code"], 137) << "killed by signal 9";
  EXPECT_NE(job["attempts"][0]["reason"].get<std::string>(), "") << job.dump();

  // 2. A machine dies under its job: node down, the job requeued and
  // completed on the other node as attempt 2, the alert delivered.
  std::string id;
  job = SubmitSleeperAndWaitRunning(2, 3, id);
  ASSERT_EQ(job["state"], "RUNNING") << job.dump();
  const std::string dead = job["nodes"][0];
  const std::string other = dead == kNode1 ? kNode2 : kNode1;
  const auto killed_at = std::chrono::steady_clock::now();
  KillMachine(dead);
  ASSERT_TRUE(WaitNode(dead, "down")) << Node(dead).dump();
  const double seconds_to_down = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_LT(seconds_to_down, 3.0 * kHeartbeatTimeoutSeconds)
      << "within a few heartbeat intervals of the " << kHeartbeatTimeoutSeconds << " s timeout";
  job = daemon_.WaitTerminal(id);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump();
  ASSERT_EQ(job["attempts"].size(), 2u) << job.dump();
  EXPECT_EQ(job["attempts"][0]["state"], "NODE_FAIL");
  EXPECT_EQ(job["attempts"][1]["nodes"][0], other);
  bool requeued_node_fail = false;
  const json events = daemon_.Call("GET", "/v1/events?object=job/" + id).json;
  for (const auto& e : events["events"]) {
    if (e["kind"] == "requeued" && e["message"].get<std::string>().find("node") != std::string::npos) {
      requeued_node_fail = true;
    }
  }
  EXPECT_TRUE(requeued_node_fail) << events.dump();
  ASSERT_TRUE(WaitHook("NodeDown", "firing", "node/" + dead)) << json(hook_.Received()).dump();
  const json firing = daemon_.Call("GET", "/v1/alerts?state=firing").json;
  ASSERT_EQ(firing["alerts"].size(), 1u) << firing.dump();
  EXPECT_EQ(firing["alerts"][0]["severity"], "critical");
  EXPECT_NE(daemon_.Call("GET", "/metrics").body.find("unisched_alerts_firing{alert=\"NodeDown\"} 1"),
            std::string::npos);

  // 3. The agent back: node up, the alert resolved.
  StartAgent(dead);
  ASSERT_TRUE(WaitNode(dead, "up")) << Node(dead).dump();
  ASSERT_TRUE(WaitHook("NodeDown", "resolved", "node/" + dead)) << json(hook_.Received()).dump();
  // Resolved in the store too. (Not "none firing": on a loaded machine, e.g.
  // under the sanitizers, a short heartbeat timeout may see the node flap down again.)
  const json resolved = daemon_.Call("GET", "/v1/alerts?state=resolved").json;
  bool found = false;
  for (const auto& a : resolved["alerts"]) found = found || (a["object"] == "node/" + dead && a["name"] == "NodeDown");
  EXPECT_TRUE(found) << resolved.dump();
  // Nothing charged twice: the ledger reconciles.
  const json report = daemon_.Call("GET", "/v1/usage/reconcile").json;
  EXPECT_EQ(report["missing"], 0) << report.dump();
  EXPECT_EQ(report["mismatched"], 0) << report.dump();
  EXPECT_EQ(report["duplicated"], 0) << report.dump();

  // 4. A failing health check drains the nodes, with the reason.
  std::ofstream(sick_file_) << "x";
  ASSERT_TRUE(WaitNode(kNode1, "drained")) << Node(kNode1).dump();
  EXPECT_NE(Node(kNode1)["reason"].get<std::string>().find("health check failed"), std::string::npos);
  ASSERT_TRUE(WaitHook("NodeDrainedAutomatically", "firing", std::string("node/") + kNode1));
}

// An agent restarted while its job still runs re-adopts the attempt; one the
// daemon has requeued elsewhere meanwhile is stopped on the node.
TEST_F(AgentsTest, AnAgentRestartedReadoptsItsRunningAttempt) {
  std::string id;
  json job = SubmitSleeperAndWaitRunning(2, 4, id);
  ASSERT_EQ(job["state"], "RUNNING");
  const std::string node = job["nodes"][0];
  // Only the agent dies (its supervisor and the job keep running), and comes
  // back within the heartbeat timeout.
  ::kill(agents_[node], SIGKILL);
  ::waitpid(agents_[node], nullptr, 0);
  StartAgent(node);
  job = daemon_.WaitTerminal(id);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump();
  EXPECT_EQ(job["attempts"].size(), 1u) << "adopted, not rerun: " << job.dump();
}

// An agent cut off (stopped, not dead) while its job runs: the daemon
// requeues the job elsewhere; when the agent is heard again its attempt is
// stale, stopped on the node, and its late report changes nothing.
TEST_F(AgentsTest, AStaleAttemptIsStoppedAndItsLateReportIgnored) {
  std::string id;
  json job = SubmitSleeperAndWaitRunning(2, 20, id);
  ASSERT_EQ(job["state"], "RUNNING");
  const std::string node = job["nodes"][0];
  ::kill(agents_[node], SIGSTOP);
  ASSERT_TRUE(WaitNode(node, "down"));
  job = WaitJob(id, [](const json& j) { return j["attempts"].size() == 2 && j["state"] == "RUNNING"; });
  ASSERT_EQ(job["attempts"].size(), 2u) << job.dump();
  ::kill(agents_[node], SIGCONT);
  ASSERT_TRUE(WaitNode(node, "up"));
  // Attempt 1's processes on the node are stopped.
  const std::string work = AgentDir(node) + "/work/" + id;
  bool gone = false;
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (!gone && std::chrono::steady_clock::now() < until) {
    gone = true;
    for (const auto& entry : fs::directory_iterator("/proc")) {
      std::error_code ec;
      const std::string cwd = fs::read_symlink(entry.path() / "cwd", ec).string();
      if (!ec && cwd == work) gone = false;
    }
    if (!gone) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(gone) << "attempt 1 still runs in " << work;
  job = daemon_.Call("GET", "/v1/jobs/" + id).json;
  EXPECT_EQ(job["state"], "RUNNING") << "the stale report did not end the job: " << job.dump();
  EXPECT_EQ(job["attempts"][0]["state"], "NODE_FAIL");
  EXPECT_EQ(job["attempts"].size(), 2u);
  daemon_.Call("DELETE", "/v1/jobs/" + id);
}

// An agent's node token reports for the attempts sent to that node only: a
// result for an attempt running on the pool's other node is refused whole.
TEST_F(AgentsTest, AResultForAnAttemptOnAnotherNodeIsRefused) {
  std::string id;
  json job = SubmitSleeperAndWaitRunning(1, 30, id);
  ASSERT_EQ(job["state"], "RUNNING") << job.dump();
  const std::string runs_on = job["nodes"][0];
  const std::string other = runs_on == kNode1 ? kNode2 : kNode1;
  std::ifstream token_in(token_file_);
  std::string token;
  token_in >> token;
  const json forged = {{"node", other},
                       {"results",
                        {{{"job_id", std::stoll(id)},
                          {"attempt", 1},
                          {"outcome", "completed"},
                          {"exit_code", 0},
                          {"reason", ""},
                          {"usage", {{"wall_seconds", 1}}}}}}};
  const Reply answer = daemon_.Call("POST", "/v1/agents/results", forged.dump(), {}, &token);
  EXPECT_EQ(answer.status, 403) << answer.body;
  EXPECT_NE(answer.body.find(runs_on), std::string::npos) << answer.body;
  job = daemon_.Call("GET", "/v1/jobs/" + id).json;
  EXPECT_EQ(job["state"], "RUNNING") << job.dump();
  EXPECT_EQ(job["attempts"].size(), 1u) << job.dump();
  daemon_.Call("DELETE", "/v1/jobs/" + id);
}

// A node token of one pool cannot end (nor charge) work running elsewhere:
// the attack of issue 15, a forged "completed" result with a day of usage
// for a job running on a local node, sent with a token of the agent pool.
TEST(AgentResultBindingTest, AForgedResultForALocalJobChangesNothing) {
  TestDaemon daemon;
  daemon.UseConfigText(R"yaml(
server: {scheduler_tick_seconds: 0.2}
pools:
  - {name: cpu-hpc-pool, kind: cpu, nodes: [x86-c4m1-hpc-01]}
  - {name: gpu-train-pool, kind: gpu, nodes: [x86-c32m512g8-train-02]}
nodes:
  - {name: x86-c4m1-hpc-01, cpus: 4, memory_mb: 1024}
  - {name: x86-c32m512g8-train-02, cpus: 32, memory_mb: 524288, gpus: {count: 8, model: h100, memory_gb: 80},
     agent: true}
queues:
  - {name: hpc, pool: cpu-hpc-pool}
  - {name: train, pool: gpu-train-pool}
projects:
  - name: default
)yaml");
  daemon.Start();
  const Reply token = daemon.Call("POST", "/v1/node-tokens", json{{"pool", "gpu-train-pool"}});
  ASSERT_EQ(token.status, 201) << token.body;
  const std::string node_token = token.json["token"];
  // The job runs as the job account: its files go where it may write.
  const std::string shared = daemon.state_dir() + "/shared";
  fs::create_directories(shared);
  ::chmod(shared.c_str(), 0777);
  const std::string marker = shared + "/forged-started";
  const std::string release = shared + "/forged-release";
  const std::string id = daemon.Submit({{"queue", "hpc"},
                                        {"workload", {{"kind", "hpc"}}},
                                        {"resources", {{"cpus", 1}, {"memory_mb", 64}}},
                                        {"command",
                                         {"/bin/sh", "-c",
                                          "touch " + marker + "; i=0; while [ ! -e " + release +
                                              " ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; "
                                              "exit 3"}}});
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (!fs::exists(marker) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(fs::exists(marker)) << daemon.Call("GET", "/v1/jobs/" + id).body;

  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const json forged = {
      {"node", "x86-c32m512g8-train-02"},
      {"results",
       {{{"job_id", std::stoll(id)},
         {"attempt", 1},
         {"outcome", "completed"},
         {"exit_code", 0},
         {"reason", ""},
         {"started_at", now_ms - 86'400'000},
         {"ended_at", now_ms},
         {"usage",
          {{"wall_seconds", 86400}, {"user_cpu_seconds", 1e9}, {"system_cpu_seconds", 0}, {"max_rss_kb", 1}}}}}}};
  const Reply answer = daemon.Call("POST", "/v1/agents/results", forged.dump(), {}, &node_token);
  ASSERT_EQ(answer.status, 200) << answer.body;
  ASSERT_EQ(answer.json["ignored"].size(), 1u) << answer.body;
  EXPECT_EQ(answer.json["ignored"][0]["job_id"], id) << answer.body;

  // Still running: the forged result was not applied.
  json job = daemon.Call("GET", "/v1/jobs/" + id).json;
  EXPECT_EQ(job["state"], "RUNNING") << job.dump();
  std::ofstream(release) << "go";
  job = daemon.WaitTerminal(id);
  EXPECT_EQ(job["state"], "FAILED") << job.dump();
  EXPECT_EQ(job["exit_code"], 3) << job.dump();
  // Charged for what it really ran (seconds), not a day of 4 CPUs and 1e9 CPU seconds.
  const json usage = daemon.Call("GET", "/v1/usage?group_by=project").json;
  ASSERT_EQ(usage["rows"].size(), 1u) << usage.dump();
  EXPECT_LT(usage["rows"][0]["cpu_core_seconds"].get<double>(), 600.0) << usage.dump();
  EXPECT_LT(usage["rows"][0].value("cpu_seconds_used", 0.0), 600.0) << usage.dump();
  const json reconcile = daemon.Call("GET", "/v1/usage/reconcile").json;
  EXPECT_EQ(reconcile["mismatched"], 0) << reconcile.dump();
}

// GPUs detected with nvidia-smi (a fake one on PATH here): a node that has
// what the config declares comes up; one that has fewer GPUs is drained.
TEST(AgentGpuTest, GpusFromNvidiaSmiAndANodeShortOfGpusIsDrained) {
  TestDaemon daemon;
  daemon.UseConfigText(R"yaml(
health: {heartbeat_interval_seconds: 1, heartbeat_timeout_seconds: 3}
pools:
  - name: gpu
    kind: gpu
    nodes: [x86-c2m2g2-train-01, x86-c2m2g4-train-02]
nodes:
  - {name: x86-c2m2g2-train-01, cpus: 2, memory_mb: 1024, gpus: {count: 2, model: h100, memory_gb: 80}, agent: true,
     labels: {interconnect: ib}}
  - {name: x86-c2m2g4-train-02, cpus: 2, memory_mb: 1024, gpus: {count: 4, model: h100, memory_gb: 80}, agent: true}
queues:
  - {name: train, pool: gpu}
projects:
  - name: default
)yaml");
  daemon.Start();
  const std::string bin = daemon.state_dir() + "/fakebin";
  fs::create_directories(bin);
  std::ofstream(bin + "/nvidia-smi") << "#!/bin/sh\necho '0, NVIDIA H100 80GB HBM3, 81559'\n"
                                        "echo '1, NVIDIA H100 80GB HBM3, 81559'\n";
  fs::permissions(bin + "/nvidia-smi", fs::perms::owner_all);
  const Reply token = daemon.Call("POST", "/v1/node-tokens", json{{"pool", "gpu"}});
  ASSERT_EQ(token.status, 201);
  const std::string token_file = daemon.state_dir() + "/node.token";
  std::ofstream(token_file) << token.json["token"].get<std::string>();
  std::vector<pid_t> agents;
  for (const std::string node : {"x86-c2m2g2-train-01", "x86-c2m2g4-train-02"}) {
    agents.push_back(SpawnAgent(daemon.url(), token_file, node, "gpu", daemon.state_dir() + "/agent-" + node,
                                {"--labels", "rack=r7,interconnect=forged"}, bin + ":/usr/bin:/bin"));
  }
  json one, two;
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < until) {
    const json nodes = daemon.Call("GET", "/v1/nodes").json;
    for (const auto& n : nodes["nodes"]) (n["name"] == "x86-c2m2g2-train-01" ? one : two) = n;
    if (one.value("state", "") == "up" && two.value("state", "") == "drained") break;
    std::this_thread::sleep_for(100ms);
  }
  for (pid_t pid : agents) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  EXPECT_EQ(one["state"], "up") << one.dump();
  EXPECT_FALSE(one["last_heartbeat"].is_null());
  // The agent's labels add to the node's; the config's win where both name a key.
  EXPECT_EQ(one["labels"].value("rack", ""), "r7") << one.dump();
  EXPECT_EQ(one["labels"].value("interconnect", ""), "ib") << one.dump();
  EXPECT_EQ(two["state"], "drained") << two.dump();
  EXPECT_NE(two["reason"].get<std::string>().find("2 GPUs (config: 4)"), std::string::npos) << two.dump();
  const json events = daemon.Call("GET", "/v1/events?kind=registered").json;
  ASSERT_FALSE(events["events"].empty());
  EXPECT_NE(events["events"][0]["message"].get<std::string>().find("2 GPUs"), std::string::npos) << events.dump();
}

// ---- over TLS (docs/access.md, "TLS") ----------------------------------

// Makes, with Debian's openssl, a CA and certificates it signs in `dir`:
// <name>.pem and <name>.key for each of `leaves` ({name, subject, extension}).
bool MakeCertificates(const std::string& dir, const std::string& ca,
                      const std::vector<std::array<std::string, 3>>& leaves) {
  std::string script = "set -e; cd '" + dir + "'; " +
                       "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
                       "-keyout " +
                       ca + ".key -out " + ca + ".pem -subj '/CN=" + ca + "' 2>/dev/null; ";
  for (const auto& [name, subject, extension] : leaves) {
    script += "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + name + ".key -out " +
              name + ".csr -subj '" + subject + "' 2>/dev/null; " + "printf '" + extension + "' > " + name + ".ext; " +
              "openssl x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca +
              ".key -CAcreateserial -days 2 -out " + name + ".pem -extfile " + name + ".ext 2>/dev/null; ";
  }
  return std::system(script.c_str()) == 0;
}

TEST(AgentsOverTlsTest, TheLaunchCheckRunsOverHttpsWithClientCertificates) {
  TestDaemon daemon;
  const std::string pki = daemon.state_dir() + "/pki";
  fs::create_directories(pki);
  const std::string server_ext = "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n";
  const std::string client_ext = "extendedKeyUsage=clientAuth\n";
  ASSERT_TRUE(MakeCertificates(pki, "ca",
                               {{"server", "/CN=127.0.0.1", server_ext},
                                {"node1", std::string("/CN=") + kNode1, client_ext},
                                {"node2", std::string("/CN=") + kNode2, client_ext}}));
  // A second CA for the certificate the daemon reloads on SIGHUP.
  ASSERT_TRUE(MakeCertificates(pki, "ca2", {{"server2", "/CN=127.0.0.1", server_ext}}));
  // The clients trust both CAs, as before a CA rollover; the daemon's
  // clients-CA is the first alone.
  ASSERT_EQ(std::system(("cat " + pki + "/ca.pem " + pki + "/ca2.pem > " + pki + "/trusted.pem").c_str()), 0);
  daemon.SetCaFile(pki + "/trusted.pem");
  daemon.UseConfigText(R"yaml(
server:
  scheduler_tick_seconds: 0.2
  tls: {cert_file: )yaml" +
                       pki + "/server.pem, key_file: " + pki + "/server.key, client_ca_file: " + pki +
                       R"yaml(/ca.pem, agents_need_client_cert: true}
health:
  heartbeat_interval_seconds: 1
  heartbeat_timeout_seconds: )yaml" +
                       std::to_string(kHeartbeatTimeoutSeconds) + R"yaml(
alerts:
  rules:
    - {name: NodeDown, kind: node_down, severity: critical}
pools:
  - {name: cpu, kind: cpu, nodes: [x86-c2m2-hpc-01, x86-c2m2-hpc-02]}
nodes:
  - {name: x86-c2m2-hpc-01, cpus: 2, memory_mb: 1024, agent: true}
  - {name: x86-c2m2-hpc-02, cpus: 2, memory_mb: 1024, agent: true}
queues:
  - {name: batch, pool: cpu}
projects:
  - name: default
)yaml");
  daemon.Start();
  ASSERT_EQ(daemon.url().rfind("https://127.0.0.1:", 0), 0u) << daemon.url();

  // Plain HTTP to the HTTPS port gets no answer; a client that does not
  // trust the daemon's CA refuses the connection.
  client::HttpClient plain("127.0.0.1", daemon.port());
  EXPECT_FALSE(plain.Request("GET", "/healthz").ok());
  client::HttpClient untrusting("127.0.0.1", daemon.port(), {true, pki + "/ca2.pem", "", ""});
  auto refused = untrusting.Request("GET", "/healthz");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, "tls_failed") << refused.error().message;

  const Reply token = daemon.Call("POST", "/v1/node-tokens", json{{"pool", "cpu"}});
  ASSERT_EQ(token.status, 201) << token.body;
  const std::string token_file = daemon.state_dir() + "/node.token";
  std::ofstream(token_file) << token.json["token"].get<std::string>() << "\n";
  // The node token alone is not enough: agents need their certificate too.
  client::HttpClient no_cert("127.0.0.1", daemon.port(), {true, pki + "/ca.pem", "", ""});
  no_cert.SetBearerToken(token.json["token"]);
  auto heartbeat = no_cert.Request("POST", "/v1/agents/heartbeat", "{}");
  ASSERT_TRUE(heartbeat.ok()) << heartbeat.error().message;
  EXPECT_EQ(heartbeat->status, 403) << heartbeat->body;
  EXPECT_NE(heartbeat->body.find("client_certificate_required"), std::string::npos) << heartbeat->body;

  std::map<std::string, pid_t> agents;
  auto start_agent = [&](const std::string& node, const std::string& cert) {
    agents[node] = SpawnAgent(daemon.url(), token_file, node, "cpu", daemon.state_dir() + "/agent-" + node,
                              {"--ca-file", pki + "/trusted.pem", "--client-cert", pki + "/" + cert + ".pem",
                               "--client-key", pki + "/" + cert + ".key"});
  };
  start_agent(kNode1, "node1");
  start_agent(kNode2, "node2");
  auto node_state = [&](const std::string& name) {
    const json nodes = daemon.Call("GET", "/v1/nodes").json;
    for (const auto& n : nodes["nodes"]) {
      if (n["name"] == name) return n.value("state", "");
    }
    return std::string();
  };
  auto wait_node = [&](const std::string& name, const std::string& state) {
    for (int i = 0; i < 600 && node_state(name) != state; ++i) std::this_thread::sleep_for(100ms);
    return node_state(name) == state;
  };
  ASSERT_TRUE(wait_node(kNode1, "up") && wait_node(kNode2, "up"))
      << daemon.Call("GET", "/v1/nodes").body << "\nagent log:\n"
      << [&] {
           std::ifstream in(daemon.state_dir() + "/agent-" + kNode1 + ".log");
           std::stringstream text;
           text << in.rdbuf();
           return text.str();
         }();

  // The launch check: a node dies under its job; the node goes down, the
  // job is requeued and completes on the other node, the alert fires.
  const std::string id = daemon.Submit({{"queue", "batch"},
                                        {"workload", {{"kind", "hpc"}}},
                                        {"resources", {{"cpus", 2}, {"memory_mb", 64}}},
                                        {"command", {"sleep", "3"}}});
  json job;
  for (int i = 0; i < 300; ++i) {
    job = daemon.Call("GET", "/v1/jobs/" + id).json;
    if (job["state"] == "RUNNING") break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(job["state"], "RUNNING") << job.dump();
  const std::string dead = job["nodes"][0];
  const std::string other = dead == kNode1 ? kNode2 : kNode1;

  // SIGHUP while the job runs: the daemon takes a certificate of the new CA
  // for new connections and drops nothing (a client trusting only the new
  // CA connects now).
  ::rename((pki + "/server2.pem").c_str(), (pki + "/server.pem").c_str());
  ::rename((pki + "/server2.key").c_str(), (pki + "/server.key").c_str());
  ASSERT_EQ(::kill(daemon.pid(), SIGHUP), 0);
  client::HttpClient after_reload("127.0.0.1", daemon.port(), {true, pki + "/ca2.pem", "", ""});
  bool reloaded = false;
  for (int i = 0; i < 100 && !reloaded; ++i) {
    auto r = after_reload.Request("GET", "/healthz");
    reloaded = r.ok() && r->status == 200;
    if (!reloaded) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(reloaded) << "new connections use the reloaded certificate";
  EXPECT_EQ(daemon.Call("GET", "/v1/jobs/" + id).json["state"], "RUNNING");  // the old connection and the job go on

  ::kill(agents[dead], SIGKILL);
  ::waitpid(agents[dead], nullptr, 0);
  agents.erase(dead);
  KillEverythingUnder(daemon.state_dir() + "/agent-" + dead);
  ASSERT_TRUE(wait_node(dead, "down")) << daemon.Call("GET", "/v1/nodes").body;
  job = daemon.WaitTerminal(id);
  EXPECT_EQ(job["state"], "COMPLETED") << job.dump();
  ASSERT_EQ(job["attempts"].size(), 2u) << job.dump();
  EXPECT_EQ(job["attempts"][0]["state"], "NODE_FAIL");
  EXPECT_EQ(job["attempts"][1]["nodes"][0], other);
  const json firing = daemon.Call("GET", "/v1/alerts?state=firing").json;
  bool node_down = false;
  for (const auto& a : firing["alerts"]) node_down |= a["name"] == "NodeDown" && a["object"] == "node/" + dead;
  EXPECT_TRUE(node_down) << firing.dump();

  for (auto& [node, pid] : agents) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    KillEverythingUnder(daemon.state_dir() + "/agent-" + node);
  }
}

}  // namespace
}  // namespace unisched::testing
