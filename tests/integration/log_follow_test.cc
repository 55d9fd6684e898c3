// Following a job's output while it runs (GET /v1/jobs/{id}/log?follow=true,
// `unisched logs -f`) through a real daemon and real processes on its own
// nodes (on node agents: gang_test.cc). Output arrives while the job still
// runs, the stream ends with the attempt, and a retried job is followed into
// its next attempt.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "testing/daemon.h"
#include "testing/follower.h"

namespace unisched::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

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
  static json Job(const std::string& script) { return ShellJob("batch", script); }
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
  const std::string err = ReadFile(err_file);
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

}  // namespace
}  // namespace unisched::testing
