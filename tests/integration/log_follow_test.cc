// Following a job's output while it runs (GET /v1/jobs/{id}/log?follow=true,
// `unisched logs -f`): through a real daemon and real processes, on the
// daemon's own nodes and on node agents (whose output the daemon receives
// shipped, docs/agents.md). Output arrives while the job still runs, the
// stream ends with the attempt, and a retried job is followed into its next
// attempt.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "testing/agent_process.h"
#include "testing/daemon.h"
#include "unisched/client/http_client.h"

namespace unisched::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

// Follows one target in a thread of its own, keeping what arrived.
class Follower {
 public:
  Follower(const TestDaemon& daemon, std::string target) {
    thread_ = std::thread([this, port = daemon.port(), token = daemon.admin_token(), target = std::move(target)] {
      client::HttpClient client("127.0.0.1", port);
      client.SetBearerToken(token);
      auto response = client.Follow(target, [this](std::string_view piece) {
        std::lock_guard lock(mu_);
        received_.append(piece);
        return true;
      });
      std::lock_guard lock(mu_);
      status_ = response.ok() ? response->status : -1;
      attempt_ = response.ok() ? response->Header("x-unisched-attempt") : response.error().message;
      ended_ = true;
    });
  }
  ~Follower() { Join(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  // Waits (a generous bound, not a timing check) until `what` has arrived.
  bool WaitFor(const std::string& what) {
    for (int i = 0; i < 600; ++i) {
      {
        std::lock_guard lock(mu_);
        if (received_.find(what) != std::string::npos) return true;
        if (ended_) return false;
      }
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }
  std::string received() {
    std::lock_guard lock(mu_);
    return received_;
  }
  bool ended() {
    std::lock_guard lock(mu_);
    return ended_;
  }
  int status() {
    std::lock_guard lock(mu_);
    return status_;
  }
  std::string attempt() {
    std::lock_guard lock(mu_);
    return attempt_;
  }

 private:
  std::mutex mu_;
  std::string received_;
  bool ended_ = false;
  int status_ = 0;
  std::string attempt_;
  std::thread thread_;
};

// Prints a line, then waits for the test's go (a file) before its last line:
// what the follower has before the go was streamed, not read at the end.
std::string GatedScript(const std::string& gate) {
  return "echo first line from $UNISCHED_NODE rank $UNISCHED_RANK; while [ ! -e " + gate +
         " ]; do sleep 0.05; done; echo last line";
}

class LocalFollowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shared_ = daemon_.state_dir() + "/shared";
    fs::create_directories(shared_);
    fs::permissions(shared_, fs::perms::all);
    daemon_.UseConfigText(R"yaml(
server:
  scheduler_tick_seconds: 0.1
pools:
  - name: cpu
    kind: cpu
    nodes: [x86-c4m4-hpc-01]
nodes:
  - {name: x86-c4m4-hpc-01, cpus: 4, memory_mb: 4096}
queues:
  - name: batch
    pool: cpu
    policy: {max_retries: 1, retry_backoff_seconds: 0}
projects:
  - name: default
)yaml");
    daemon_.Start();
  }
  json Job(const std::string& script) {
    return {{"queue", "batch"},
            {"workload", {{"kind", "hpc"}}},
            {"resources", {{"cpus", 1}, {"memory_mb", 128}}},
            {"command", {"/bin/sh", "-c", script}}};
  }
  TestDaemon daemon_;
  std::string shared_;
};

TEST_F(LocalFollowTest, OutputArrivesWhileTheJobRunsAndTheStreamEndsWithIt) {
  const std::string gate = shared_ + "/go";
  const std::string id = daemon_.Submit(Job(GatedScript(gate)));
  // Followed from before it starts: the stream waits for its first attempt.
  Follower follower(daemon_, "/v1/jobs/" + id + "/log?follow=true");
  ASSERT_TRUE(follower.WaitFor("first line")) << follower.received();
  EXPECT_EQ(daemon_.Call("GET", "/v1/jobs/" + id).json["state"], "RUNNING");  // it waits for the gate
  EXPECT_FALSE(follower.ended());
  std::ofstream(gate).put('\n');
  follower.Join();
  EXPECT_EQ(follower.status(), 200);
  EXPECT_EQ(follower.attempt(), "1");
  EXPECT_EQ(follower.received(), "first line from x86-c4m4-hpc-01 rank 0\nlast line\n");
  EXPECT_EQ(daemon_.WaitTerminal(id)["state"], "COMPLETED");
  // Following an ended job gives its output and ends at once.
  Follower after(daemon_, "/v1/jobs/" + id + "/log?follow=true&stream=stdout");
  after.Join();
  EXPECT_EQ(after.received(), "first line from x86-c4m4-hpc-01 rank 0\nlast line\n");
}

TEST_F(LocalFollowTest, TheCliFollowsARetriedJobIntoItsNextAttempt) {
  // Attempt 1 fails once the test has seen the CLI print its line, and is
  // retried (max_retries 1); attempt 2 succeeds.
  const std::string gate = shared_ + "/go";
  const std::string id =
      daemon_.Submit(Job("echo attempt $UNISCHED_ATTEMPT; if [ $UNISCHED_ATTEMPT = 1 ]; then while [ ! -e " + gate +
                         " ]; do sleep 0.05; done; exit 4; fi; echo done"));
  const std::string err_file = shared_ + "/cli.err";
  const std::string command = "UNISCHED_URL=" + daemon_.url() + " UNISCHED_TOKEN=" + daemon_.admin_token() + " " +
                              UNISCHED_BINARY + " logs -f " + id + " 2>" + err_file;
  FILE* cli = popen(command.c_str(), "r");
  ASSERT_NE(cli, nullptr);
  std::string out;
  char line[256];
  while (std::fgets(line, sizeof line, cli) != nullptr) {
    out += line;
    if (out == "attempt 1\n") std::ofstream(gate).put('\n');  // printed while attempt 1 runs: now let it fail
  }
  const int status = pclose(cli);
  std::ifstream err_in(err_file);
  const std::string err((std::istreambuf_iterator<char>(err_in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << " " << err;
  EXPECT_EQ(out, "attempt 1\nattempt 2\ndone\n") << err << daemon_.Call("GET", "/v1/jobs/" + id).body;
  // PENDING, or RUNNING already: the retry has no backoff here.
  EXPECT_NE(err.find("attempt 1 of job " + id + " ended; the job is "), std::string::npos) << err;
  EXPECT_NE(err.find(", following its next attempt"), std::string::npos) << err;
  // One attempt alone is one stream; `log` without -f is unchanged.
  EXPECT_EQ(daemon_.RunCli({"log", id, "--follow", "--attempt", "1"}).out, "attempt 1\n");
  EXPECT_EQ(daemon_.RunCli({"log", id}).out, "attempt 2\ndone\n");
}

TEST_F(LocalFollowTest, BadFollowRequestsNameTheField) {
  const std::string id = daemon_.Submit(Job("sleep 30"));
  Reply r = daemon_.Call("GET", "/v1/jobs/" + id + "/log?follow=sometimes");
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(r.json["error"]["field"], "follow") << r.body;
  ASSERT_EQ(daemon_.Call("DELETE", "/v1/jobs/" + id).status, 200);
  daemon_.WaitTerminal(id);
  EXPECT_EQ(daemon_.Call("GET", "/v1/jobs/" + id + "/log?follow=true&attempt=5").status, 404);
  const auto cli = daemon_.RunCli({"logs", "-x", id});
  EXPECT_EQ(cli.exit_code, 2);
  EXPECT_NE(cli.err.find("unknown option '-x'"), std::string::npos) << cli.err;
}

// On node agents: each rank's output is shipped to the daemon as it is
// written, so a rank on another machine is followed as one on this one.
TEST(AgentFollowTest, EachRankOfAGangOnAgentsIsFollowedWhileItRuns) {
  TestDaemon daemon;
  const std::string shared = daemon.state_dir() + "/shared";
  fs::create_directories(shared);
  fs::permissions(shared, fs::perms::all);
  daemon.UseConfigText(R"yaml(
server:
  scheduler_tick_seconds: 0.1
health:
  heartbeat_interval_seconds: 1
  heartbeat_timeout_seconds: 10
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
)yaml");
  daemon.Start();
  AgentFleet agents(daemon, "cpu", {"x86-c2m2-hpc-01", "x86-c2m2-hpc-02"});
  ASSERT_TRUE(daemon.WaitNodes("up")) << daemon.Call("GET", "/v1/nodes").body;
  const std::string gate = shared + "/go";
  const std::string id = daemon.Submit({{"queue", "batch"},
                                        {"workload", {{"kind", "hpc"}}},
                                        {"launch", "per_node"},
                                        {"resources", {{"nodes", 2}, {"cpus", 1}, {"memory_mb", 128}}},
                                        {"command", {"/bin/sh", "-c", GatedScript(gate)}}});
  const json running = daemon.WaitJob(id, [](const json& j) { return j["state"] == "RUNNING"; });
  ASSERT_EQ(running["state"], "RUNNING") << running.dump(2);
  const std::vector<std::string> nodes = running["nodes"];
  Follower rank1(daemon, "/v1/jobs/" + id + "/log?follow=true&rank=1");
  Follower by_node(daemon, "/v1/jobs/" + id + "/log?follow=true&node=" + nodes[0]);
  ASSERT_TRUE(rank1.WaitFor("first line")) << rank1.received();
  ASSERT_TRUE(by_node.WaitFor("first line")) << by_node.received();
  EXPECT_FALSE(rank1.ended());
  std::ofstream(gate).put('\n');
  rank1.Join();
  by_node.Join();
  EXPECT_EQ(rank1.received(), "first line from " + nodes[1] + " rank 1\nlast line\n");
  EXPECT_EQ(by_node.received(), "first line from " + nodes[0] + " rank 0\nlast line\n");
  EXPECT_EQ(daemon.WaitTerminal(id)["state"], "COMPLETED");
}

}  // namespace
}  // namespace unisched::testing
