// Daemon replicas over one PostgreSQL database (docs/replicas.md): two
// `unisched server` processes, node agents that list both, a leader killed
// with -9 under a stream of submissions, a leader paused past its lease.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "testing/agent_process.h"
#include "testing/daemon.h"
#include "testing/pg_cluster.h"
#include "testing/submission_stream.h"

namespace unisched::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr int kLeaseSeconds = 3;

// One replica's config: agent nodes only, as replicas require.
std::string ReplicaConfig(const std::string& name, const std::string& conninfo) {
  return R"yaml(
server:
  scheduler_tick_seconds: 0.2
  replica: {name: )yaml" +
         name + ", lease_seconds: " + std::to_string(kLeaseSeconds) + R"yaml(}
store:
  backend: postgresql
  postgresql: {conninfo: ")yaml" +
         conninfo + R"yaml("}
health:
  heartbeat_interval_seconds: 1
  heartbeat_timeout_seconds: 20
pools:
  - name: cpu
    kind: cpu
    nodes: [x86-c2m2-hpc-01, x86-c2m2-hpc-02]
nodes:
  - {name: x86-c2m2-hpc-01, cpus: 2, memory_mb: 1024, agent: true}
  - {name: x86-c2m2-hpc-02, cpus: 2, memory_mb: 1024, agent: true}
queues:
  - name: batch
    pool: cpu
projects:
  - name: default
)yaml";
}

// A one-CPU job of the batch queue running `command`.
json Job(std::vector<std::string> command) {
  return json{{"queue", "batch"},
              {"workload", {{"kind", "hpc"}}},
              {"resources", {{"cpus", 1}, {"memory_mb", 64}}},
              {"command", std::move(command)}};
}

class ReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    conninfo_ = CreatePgSchema();
    for (auto* d : {&r1_, &r2_}) d->SetPort(FreeLoopbackPort());
    r1_.UseConfigText(ReplicaConfig("r1", conninfo_));
    r2_.UseConfigText(ReplicaConfig("r2", conninfo_));
    r1_.Start();  // the first takes the lease
    r2_.StartStandby();
  }
  void TearDown() override {
    for (auto& [node, pid] : agents_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      KillEverythingUnder(AgentDir(node));
    }
    r1_.Kill9();
    r2_.Kill9();
    DropPgSchema(conninfo_);
  }

  std::string AgentDir(const std::string& node) { return r1_.state_dir() + "/agent-" + node; }
  // Agents on both nodes, each listing both replicas.
  void StartAgents(TestDaemon& via) {
    const Reply token = via.Call("POST", "/v1/node-tokens", json{{"pool", "cpu"}});
    ASSERT_EQ(token.status, 201) << token.body;
    const std::string token_file = r1_.state_dir() + "/node.token";
    std::ofstream(token_file) << token.json["token"].get<std::string>() << "\n";
    for (const std::string node : {"x86-c2m2-hpc-01", "x86-c2m2-hpc-02"}) {
      agents_[node] = SpawnAgent(r1_.url() + "," + r2_.url(), token_file, node, "cpu", AgentDir(node));
    }
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    for (;;) {
      const Reply nodes = via.Call("GET", "/v1/nodes");
      int up = 0;
      for (const auto& n : nodes.json["nodes"]) up += n["state"] == "up" ? 1 : 0;
      if (up == 2) break;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << nodes.body;
      std::this_thread::sleep_for(100ms);
    }
  }
  // Waits until `d` answers /readyz 200 (it leads); returns how long it took.
  std::chrono::milliseconds WaitLeading(TestDaemon& d, std::chrono::seconds limit = 60s) {
    const auto began = std::chrono::steady_clock::now();
    while (d.Call("GET", "/readyz").status != 200) {
      if (std::chrono::steady_clock::now() - began > limit) {
        ADD_FAILURE() << "never led: " << d.Call("GET", "/healthz").body;
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began);
  }
  // Attempts the job has had (each a launch; none may run twice).
  size_t Attempts(TestDaemon& d, const std::string& id) {
    return d.Call("GET", "/v1/jobs/" + id).json["attempts"].size();
  }
  // A directory every job's user may write: the jobs mark each run in it.
  std::string SharedDir() {
    const std::string dir = r1_.state_dir() + "/shared";
    std::filesystem::create_directories(dir);
    ::chmod(dir.c_str(), 0777);
    return dir;
  }
  static int Lines(const std::string& file) {
    std::ifstream in(file);
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    return lines;
  }

  std::string conninfo_;
  TestDaemon r1_, r2_;
  std::map<std::string, pid_t> agents_;
};

TEST_F(ReplicaTest, TheStandbyForwardsEveryCallAndAnswersTheProbesForALoadBalancer) {
  const Reply health = r2_.Call("GET", "/healthz");
  ASSERT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(health.json["role"], "standby");
  EXPECT_EQ(health.json["leader"], "r1");
  const Reply ready = r2_.Call("GET", "/readyz");
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(ready.json["error"]["code"], "not_leader") << ready.body;
  EXPECT_EQ(r1_.admin_token(), r2_.admin_token()) << "one bootstrap token for the cluster, from the database";

  StartAgents(r2_);
  // A submission through the standby lands on the leader, with the caller's
  // credentials; a bad one is refused there just the same.
  const Reply submitted =
      r2_.Call("POST", "/v1/jobs", Job({"sh", "-c", "exit 3"}).dump(), {{"Idempotency-Key", "through-the-standby"}});
  ASSERT_EQ(submitted.status, 201) << submitted.body;
  const std::string id = submitted.json["id"];
  const std::string wrong = "not-a-token";
  EXPECT_EQ(r2_.Call("GET", "/v1/jobs/" + id, "", {}, &wrong).status, 401);
  const Reply again =
      r2_.Call("POST", "/v1/jobs", Job({"sh", "-c", "exit 3"}).dump(), {{"Idempotency-Key", "through-the-standby"}});
  EXPECT_EQ(again.json["id"], id) << "the leader's idempotency, through the standby: " << again.body;
  json job = r2_.WaitTerminal(id);
  EXPECT_EQ(job["state"], "FAILED") << job.dump();
  EXPECT_EQ(job["exit_code"], 3) << job.dump();

  // The standby's own metrics; the leader's say it leads.
  const std::string standby_metrics = r2_.Call("GET", "/metrics").body;
  EXPECT_EQ(Series(standby_metrics, "unisched_replica_leader"), 0) << standby_metrics;
  const std::string leader_metrics = r1_.Call("GET", "/metrics").body;
  EXPECT_EQ(Series(leader_metrics, "unisched_replica_leader"), 1);
  EXPECT_EQ(Series(leader_metrics, "unisched_leader_epoch"), 1);
  EXPECT_EQ(Series(leader_metrics, "unisched_leader_takeovers_total"), 1);

  // API sandboxes live in one daemon's machine: replicas say so.
  const Reply sandbox = r2_.Call("POST", "/v1/sandboxes", json::object().dump());
  EXPECT_EQ(sandbox.status, 501) << sandbox.body;
  EXPECT_EQ(sandbox.json["error"]["code"], "sandboxes_not_served") << sandbox.body;
}

TEST_F(ReplicaTest, Kill9OfTheLeaderUnderSubmissionsLosesNothingAndRunsNoAttemptTwice) {
  StartAgents(r1_);
  // Jobs that run across the failover and end with their own exit codes;
  // each run leaves a line in its file.
  const std::string shared = SharedDir();
  std::vector<std::string> long_jobs;
  for (int code : {0, 7}) {
    const std::string marks = shared + "/runs-" + std::to_string(code);
    const Reply r =
        r1_.Call("POST", "/v1/jobs",
                 Job({"sh", "-c", "echo run >> " + marks + "; sleep 4; exit " + std::to_string(code)}).dump());
    ASSERT_EQ(r.status, 201) << r.body;
    long_jobs.push_back(r.json["id"]);
  }
  for (const auto& id : long_jobs) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (r1_.Call("GET", "/v1/jobs/" + id).json["state"] != "RUNNING") {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline);
      std::this_thread::sleep_for(50ms);
    }
  }
  SubmissionStream stream(r1_.port(), r1_.admin_token(), Job({"true"}));
  stream.WaitForAcknowledged(30);
  r1_.Kill9();
  const auto killed = std::chrono::steady_clock::now();
  const std::vector<std::string> acknowledged = stream.Stop();
  ASSERT_GE(acknowledged.size(), 30u);

  // The standby takes over: its first 201.
  for (;;) {
    const Reply r = r2_.Call("POST", "/v1/jobs", Job({"true"}).dump());
    if (r.status == 201) break;
    ASSERT_EQ(r.status, 503) << r.body;
    ASSERT_LT(std::chrono::steady_clock::now() - killed, 60s) << r.body;
    std::this_thread::sleep_for(20ms);
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed);
  std::cout << "[ replica ] kill -9 of the leader to the new leader's first 201: " << took.count() << " ms\n";

  for (const auto& id : acknowledged) EXPECT_EQ(r2_.Call("GET", "/v1/jobs/" + id).status, 200) << id << " lost";
  EXPECT_EQ(r2_.WaitTerminal(long_jobs[0])["state"], "COMPLETED");
  json failed = r2_.WaitTerminal(long_jobs[1]);
  EXPECT_EQ(failed["state"], "FAILED") << failed.dump();
  EXPECT_EQ(failed["exit_code"], 7) << "the real exit code, collected by the new leader: " << failed.dump();
  for (const auto& id : acknowledged) EXPECT_EQ(r2_.WaitTerminal(id)["state"], "COMPLETED") << id;
  for (const auto& id : long_jobs) EXPECT_EQ(Attempts(r2_, id), 1u) << "job " << id << " launched twice";
  for (int code : {0, 7}) {
    EXPECT_EQ(Lines(shared + "/runs-" + std::to_string(code)), 1) << "the job exiting " << code << " ran twice";
  }
  for (const auto& id : acknowledged) EXPECT_EQ(Attempts(r2_, id), 1u) << "job " << id << " launched twice";
  const std::string metrics = r2_.Call("GET", "/metrics").body;
  EXPECT_EQ(Series(metrics, "unisched_replica_leader"), 1);
  EXPECT_EQ(Series(metrics, "unisched_leader_epoch"), 2);
}

TEST_F(ReplicaTest, ALeaderPausedPastItsLeaseChangesNothingAndComesBackAsAStandby) {
  StartAgents(r1_);
  const Reply before = r1_.Call("POST", "/v1/jobs", Job({"true"}).dump());
  ASSERT_EQ(before.status, 201);
  ASSERT_EQ(::kill(r1_.pid(), SIGSTOP), 0);
  const auto took = WaitLeading(r2_);
  std::cout << "[ replica ] SIGSTOP of the leader to the standby leading: " << took.count() << " ms\n";
  const Reply during = r2_.Call("POST", "/v1/jobs", Job({"true"}).dump());
  ASSERT_EQ(during.status, 201) << during.body;
  ASSERT_EQ(::kill(r1_.pid(), SIGCONT), 0);

  // The deposed leader finds the lease gone, executes itself again (the
  // same process, the same port) and stands by.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (;;) {
    client::HttpClient probe("127.0.0.1", r1_.port());
    probe.SetTimeout(2s);
    auto health = probe.Request("GET", "/healthz");
    if (health.ok() && health->status == 200) {
      const json body = json::parse(health->body, nullptr, false);
      if (body.value("role", "") == "standby") {
        EXPECT_EQ(body["leader"], "r2") << health->body;
        EXPECT_EQ(body["epoch"], 2) << health->body;
        break;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::ifstream log(r1_.state_dir() + "/daemon.log");
      FAIL() << "r1 never stood by; its log:\n" << std::string(std::istreambuf_iterator<char>(log), {});
    }
    std::this_thread::sleep_for(100ms);
  }
  for (const std::string& id : {before.json["id"].get<std::string>(), during.json["id"].get<std::string>()}) {
    EXPECT_EQ(r2_.WaitTerminal(id)["state"], "COMPLETED") << id;
    EXPECT_EQ(Attempts(r2_, id), 1u) << "job " << id << " launched twice";
  }
  std::ifstream log(r1_.state_dir() + "/daemon.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("stops leading"), std::string::npos) << text;
}

TEST(ReplicaConfigTest, ReplicasRefuseLocalNodesAndSQLite) {
  TestDaemon d;
  const std::string file = d.state_dir() + "/replica.yaml";
  std::ofstream(file) << R"yaml(
server:
  replica: {name: r1}
pools:
  - {name: cpu, kind: cpu, nodes: [x86-c2m2-hpc-09]}
nodes:
  - {name: x86-c2m2-hpc-09, cpus: 2, memory_mb: 1024}
queues:
  - {name: batch, pool: cpu}
projects:
  - name: default
)yaml";
  const auto run = d.RunCli({"validate-config", file});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_NE(run.out.find("nodes[0].agent"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("set agent: true"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("set store.backend: postgresql"), std::string::npos) << run.out;
}

TEST_F(ReplicaTest, AConfigAppliedThroughAStandbyIsInForceOnTheNextLeader) {
  // The cluster's sections alone: each replica keeps its own server and store.
  const std::string full = ReplicaConfig("r1", conninfo_);
  std::string cluster = full.substr(full.find("health:"));
  cluster =
      cluster.replace(cluster.find("    pool: cpu\n"), 14, "    pool: cpu\n    policy: {max_walltime_hours: 1}\n");
  const Reply applied = r2_.Call("POST", "/v1/config", json{{"text", cluster}, {"comment", "through r2"}});
  ASSERT_EQ(applied.status, 201) << applied.body;
  EXPECT_EQ(applied.json["version"], 2);
  json two_hours = Job({"true"});
  two_hours["resources"]["walltime_seconds"] = 7200;
  EXPECT_EQ(r2_.Call("POST", "/v1/jobs", two_hours).status, 422) << "the leader runs version 2";

  r1_.Kill9();
  WaitLeading(r2_);
  const Reply shown = r2_.Call("GET", "/v1/config");
  ASSERT_EQ(shown.status, 200) << shown.body;
  EXPECT_EQ(shown.json["in_force"]["version"], 2) << shown.body;
  EXPECT_EQ(shown.json["comment"], "through r2");
  const Reply refused = r2_.Call("POST", "/v1/jobs", two_hours);
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_EQ(refused.json["error"]["code"], "walltime_exceeds_max") << refused.body;
  const std::string metrics = r2_.Call("GET", "/metrics").body;
  EXPECT_EQ(Series(metrics, "unisched_config_version{role=\"current\"}"), 2) << metrics;
}

}  // namespace
}  // namespace unisched::testing
