// Jobs run unprivileged, with a clean environment, contained, and cannot
// reach the daemon's secrets.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;

TEST(IsolationTest, JobIsUnprivilegedAndSeesNoSecrets) {
  TestDaemon d;
  const std::string secret = "usk_integration-secret-token-value";
  d.SetEnv("UNISCHED_ADMIN_TOKEN", secret);
  d.SetEnv("DAEMON_ONLY_VARIABLE", "leak");
  d.Start();
  const std::string state = d.state_dir();
  const std::string script =
      "echo uid=$(id -u); env; "
      "cat " +
      state +
      "/unisched.db >/dev/null 2>&1 && echo READ_DB; "
      "ls " +
      state +
      " >/dev/null 2>&1 && echo LISTED_STATE; "
      "ls " +
      state +
      "/runs >/dev/null 2>&1 && echo LISTED_RUNS; "
      "cat /proc/1/environ >/dev/null 2>&1 && echo READ_INIT_ENV; true";
  const std::string id = d.Submit(
      {{"workload", {{"kind", "agent"}}}, {"env", {{"MY_VAR", "mine"}}}, {"command", {"/bin/sh", "-c", script}}});
  json job = d.WaitTerminal(id);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump();
  const std::string out = d.Call("GET", "/v1/jobs/" + id + "/log").body;
  if (::geteuid() == 0) {
    EXPECT_EQ(out.find("uid=0\n"), std::string::npos) << out;
  }
  EXPECT_NE(out.find("uid="), std::string::npos) << out;
  EXPECT_EQ(out.find(secret), std::string::npos) << out;
  EXPECT_EQ(out.find("UNISCHED_ADMIN_TOKEN"), std::string::npos) << out;
  EXPECT_EQ(out.find("DAEMON_ONLY_VARIABLE"), std::string::npos) << out;
  EXPECT_NE(out.find("MY_VAR=mine"), std::string::npos) << out;
  EXPECT_NE(out.find("UNISCHED_JOB_ID=" + id), std::string::npos) << out;
  EXPECT_NE(out.find("UNISCHED_NODELIST=x86-"), std::string::npos) << out;
  EXPECT_NE(out.find("OMP_NUM_THREADS=1"), std::string::npos) << out;
  EXPECT_EQ(out.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << out;  // not a GPU job
  EXPECT_EQ(out.find("READ_DB"), std::string::npos) << out;
  EXPECT_EQ(out.find("LISTED_STATE"), std::string::npos) << out;
  EXPECT_EQ(out.find("LISTED_RUNS"), std::string::npos) << out;
  EXPECT_EQ(out.find("READ_INIT_ENV"), std::string::npos) << out;
}

TEST(IsolationTest, JobAboveItsMemoryIsKilled) {
  if (!std::filesystem::exists("/sys/fs/cgroup/memory") || ::geteuid() != 0) {
    GTEST_SKIP() << "needs cgroup v1 memory and root";
  }
  TestDaemon d;
  d.Start();
  // tail keeps the whole newline-free input in memory: 300 MB against a 64 MB limit.
  json job = d.WaitTerminal(d.Submit({{"workload", {{"kind", "hpc"}}},
                                      {"resources", {{"memory_mb", 64}}},
                                      {"command", {"/bin/sh", "-c", "head -c 300M /dev/zero | tail > /dev/null"}}}));
  EXPECT_EQ(job["state"], "FAILED") << job.dump();
  EXPECT_NE(job["state_reason"].get<std::string>().find("memory"), std::string::npos) << job.dump();
}

}  // namespace
}  // namespace unisched::testing
