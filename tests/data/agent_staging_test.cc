// Data staging on an agent node (docs/data.md): the agent's executor stages
// the input in and the results out, as the daemon's does for local nodes,
// with the store's credentials from the launch; the agent keeps no copy of
// them on its disk, and the bytes moved come back with the result.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "testing/agent_process.h"
#include "testing/daemon.h"
#include "testing/s3_server.h"

namespace unisched::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class AgentStagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "staging runs as the root executor beside the supervisor";
    s3 = S3ServerEnv();
    ASSERT_TRUE(s3.count("UNISCHED_TEST_S3_URL")) << "no S3 server: run through ctest (the s3_server fixture)";
    const std::string scratch = fs::temp_directory_path() / ("unisched-agent-staging-" + std::to_string(::getpid()));
    curl.emplace(s3, scratch);
    bucket = "agent-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}() % 100000);
    ASSERT_EQ(curl->MakeBucket(bucket), "200");
    d.UseConfigText(R"yaml(
server:
  scheduler_tick_seconds: 0.1
health:
  heartbeat_interval_seconds: 1
pools:
  - name: cpu
    kind: cpu
    nodes: [x86-c2m2-hpc-01]
nodes:
  - {name: x86-c2m2-hpc-01, cpus: 2, memory_mb: 1024, agent: true}
queues:
  - name: batch
    pool: cpu
projects:
  - name: default
storage:
  object_stores:
    - name: rgw
      endpoint: )yaml" +
                    s3["UNISCHED_TEST_S3_URL"] + "\n      " + kS3CredentialsYaml + R"yaml(
      access: [{projects: [default], bucket: )yaml" +
                    bucket + R"yaml(}]
)yaml");
    d.Start();
    for (const std::string& body : S3KeySecretBodies(s3)) {
      ASSERT_EQ(d.Call("POST", "/v1/secrets", body).status, 201);
    }
    agents.emplace(d, "cpu", std::vector<std::string>{"x86-c2m2-hpc-01"});
    ASSERT_TRUE(d.WaitNodes("up")) << d.Call("GET", "/v1/nodes").body;
  }
  void TearDown() override { agents.reset(); }

  std::map<std::string, std::string> s3;
  std::optional<S3Curl> curl;
  std::string bucket;
  TestDaemon d;
  std::optional<AgentFleet> agents;
};

TEST_F(AgentStagingTest, TheAgentStagesInAndOutAndKeepsNoCredentials) {
  const std::string input(3 << 20, 'q');
  ASSERT_EQ(curl->Put(bucket, "in/data.bin", input), "200");
  const std::string url = "s3://rgw/" + bucket + "/";
  const std::string id =
      d.Submit({{"workload", {{"kind", "hpc"}}},
                {"queue", "batch"},
                {"command", {"/bin/sh", "-c", "mkdir -p out && wc -c < in/data.bin > out/size.txt && sleep 1"}},
                {"data",
                 {{"stage_in", {{{"from", url + "in/"}, {"to", "in/"}}}},
                  {"stage_out", {{{"from", "out/"}, {"to", url + "results/{job_id}/"}}}}}}});
  d.WaitJob(id, [](const json& j) { return j["state"] == "RUNNING"; });
  // The agent's record of the launch on its disk has no credentials.
  EXPECT_EQ(FilesHolding(agents->Dir("x86-c2m2-hpc-01"), {s3["UNISCHED_TEST_S3_SECRET"]}), std::vector<std::string>());
  const json done = d.WaitTerminal(id);
  ASSERT_EQ(done["state"], "COMPLETED") << done.dump() << d.Call("GET", "/v1/jobs/" + id + "/log").body;
  EXPECT_EQ(done["nodes"], json::array({"x86-c2m2-hpc-01"}));
  EXPECT_EQ(curl->Get(bucket, "results/" + id + "/size.txt"), std::to_string(input.size()) + "\n");
  EXPECT_EQ(done["attempts"][0]["usage"]["network_bytes_in"], static_cast<int64_t>(input.size())) << done.dump();
  EXPECT_EQ(done["attempts"][0]["usage"]["network_bytes_out"],
            static_cast<int64_t>(std::to_string(input.size()).size() + 1))
      << done.dump();
  EXPECT_EQ(FilesHolding(agents->Dir("x86-c2m2-hpc-01"), {s3["UNISCHED_TEST_S3_SECRET"]}), std::vector<std::string>());
}

// An agent killed while its job runs keeps no keys on its disk: the one that
// takes over asks the daemon for them (its heartbeat names the attempt), and
// the stage-out after the command succeeds with the keys sent again.
TEST_F(AgentStagingTest, AnAgentRestartedMidRunStillStagesOut) {
  const std::string url = "s3://rgw/" + bucket + "/";
  const std::string id =
      d.Submit({{"workload", {{"kind", "hpc"}}},
                {"queue", "batch"},
                {"command", {"/bin/sh", "-c", "touch started && sleep 4 && mkdir -p out && echo done > out/r.txt"}},
                {"data", {{"stage_out", {{{"from", "out/"}, {"to", url + "after/{job_id}/"}}}}}}});
  // Running on the node (not only sent to it): its command has begun.
  const std::string started = agents->Dir("x86-c2m2-hpc-01") + "/work/" + id + "/started";
  for (int i = 0; i < 1000 && !fs::exists(started); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(fs::exists(started)) << d.Call("GET", "/v1/jobs/" + id).body;
  agents->Restart("x86-c2m2-hpc-01");
  const json done = d.WaitTerminal(id);
  ASSERT_EQ(done["state"], "COMPLETED") << done.dump() << d.Call("GET", "/v1/jobs/" + id + "/log").body;
  EXPECT_EQ(done["attempts"].size(), 1u) << "adopted, not rerun: " << done.dump();
  EXPECT_EQ(curl->Get(bucket, "after/" + id + "/r.txt"), "done\n");
  EXPECT_EQ(FilesHolding(agents->Dir("x86-c2m2-hpc-01"), {s3["UNISCHED_TEST_S3_SECRET"]}), std::vector<std::string>());
}

}  // namespace
}  // namespace unisched::testing
