// Jobs run unprivileged, with a clean environment, contained, and cannot
// reach the daemon's secrets.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

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

// Jobs of a sandboxed pool (the default elastic-light-pool: agent tool
// calls) run with no network but loopback, a read-only root, a private /tmp,
// no_new_privs and no capabilities. Each check has its positive control: the
// same script as an HPC job (an ordinary pool) does reach the daemon, does
// write outside its work directory. A test that fails if isolation is removed.
TEST(IsolationTest, SandboxedPoolJobsReachNoNetworkAndWriteOnlyTheirWorkDirectory) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces and mounts need root";
  TestDaemon d;
  d.Start();
  const std::string tag = std::to_string(::getpid());
  const std::string port = std::to_string(d.port());
  const std::string script = "exec 3<>/dev/tcp/127.0.0.1/" + port +
                             " && echo REACHED_DAEMON; exec 3>&-; "
                             "touch /var/tmp/unisched-escape-$UNISCHED_JOB_ID && echo WROTE_VAR_TMP; "
                             "touch /tmp/unisched-tmp-$UNISCHED_JOB_ID && echo WROTE_TMP; "
                             "grep -q 'NoNewPrivs:[[:space:]]*1' /proc/self/status && echo NO_NEW_PRIVS; "
                             "grep -q 'CapBnd:[[:space:]]*0000000000000000' /proc/self/status && echo NO_CAPS; "
                             "echo ok > in-work-dir && cat in-work-dir; "
                             "echo PROCS=$(ls /proc | grep -c '^[0-9]'); echo UID=$(id -u); echo PWD=$(pwd); "
                             "echo HOST=$(hostname); true";
  auto run = [&](const std::string& kind) {
    const std::string id = d.Submit({{"workload", {{"kind", kind}}},
                                     {"resources", {{"cpus", 1}, {"memory_mb", 256}}},
                                     {"command", {"/bin/bash", "-c", script}}});
    const json job = d.WaitTerminal(id);
    EXPECT_EQ(job["state"], "COMPLETED") << job.dump();
    return std::make_pair(id, d.Call("GET", "/v1/jobs/" + id + "/log").body);
  };
  const auto [sandboxed, inside] = run("agent");
  const auto [control, outside] = run("hpc");
  // Positive controls: the tools work, and without the sandbox they reach out.
  EXPECT_NE(outside.find("REACHED_DAEMON"), std::string::npos) << outside;
  EXPECT_NE(outside.find("WROTE_VAR_TMP"), std::string::npos) << outside;
  EXPECT_TRUE(std::filesystem::exists("/var/tmp/unisched-escape-" + control));
  EXPECT_TRUE(std::filesystem::exists("/tmp/unisched-tmp-" + control));
  EXPECT_NE(inside.find("ok\n"), std::string::npos) << "the work directory is writable: " << inside;
  EXPECT_NE(inside.find("WROTE_TMP"), std::string::npos) << "a private /tmp is writable: " << inside;
  // The sandbox.
  EXPECT_EQ(inside.find("REACHED_DAEMON"), std::string::npos) << inside;
  EXPECT_EQ(inside.find("WROTE_VAR_TMP"), std::string::npos) << inside;
  EXPECT_FALSE(std::filesystem::exists("/var/tmp/unisched-escape-" + sandboxed));
  EXPECT_FALSE(std::filesystem::exists("/tmp/unisched-tmp-" + sandboxed)) << "its /tmp is its own";
  EXPECT_NE(inside.find("NO_NEW_PRIVS"), std::string::npos) << inside;
  EXPECT_NE(inside.find("NO_CAPS"), std::string::npos) << inside;
  EXPECT_EQ(outside.find("NO_NEW_PRIVS"), std::string::npos) << outside;
  // The same walls as an API sandbox: its own pid namespace (its PID 1,
  // bash, and the $(...) pipeline's few), its own uid from the sandbox
  // range, the work directory at /home/sandbox, hostname sandbox.
  auto procs = [](const std::string& out) {
    const size_t at = out.find("PROCS=");
    return at == std::string::npos ? -1 : std::stoi(out.substr(at + 6));
  };
  EXPECT_GE(procs(inside), 2) << inside;
  EXPECT_LE(procs(inside), 5) << inside;
  EXPECT_GT(procs(outside), 5) << outside;                       // the host's processes
  EXPECT_NE(inside.find("UID=3"), std::string::npos) << inside;  // uid_base 3000000
  EXPECT_NE(inside.find("PWD=/home/sandbox\n"), std::string::npos) << inside;
  EXPECT_NE(inside.find("HOST=sandbox\n"), std::string::npos) << inside;
  std::error_code ec;
  std::filesystem::remove("/var/tmp/unisched-escape-" + control, ec);
  std::filesystem::remove("/tmp/unisched-tmp-" + control, ec);
  (void)tag;
}

// A sandboxed job's processes end with it, also those that left its process
// group and parent (setsid, a double fork, nohup): its PID 1 exits with the
// job's main process, and the kernel kills the rest of its pid namespace.
// The job also runs under the sandbox's system call filter: no user
// namespace (the HPC job beside it, not sandboxed, gets one).
TEST(IsolationTest, SandboxedJobsDetachedProcessesEndWithItAndItRunsUnderTheFilter) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces and mounts need root";
  TestDaemon d;
  d.Start();
  const std::string tag = std::to_string(::getpid());
  const std::vector<std::string> tokens = {"1000.1" + tag, "1000.2" + tag, "1000.3" + tag};
  const std::string script = "setsid sleep " + tokens[0] + " </dev/null >/dev/null 2>&1 & (sleep " + tokens[1] +
                             " </dev/null >/dev/null 2>&1 &); nohup sleep " + tokens[2] +
                             " </dev/null >/dev/null 2>&1 & for t in " + tokens[0] + " " + tokens[1] + " " + tokens[2] +
                             "; do until pgrep -fx \"sleep $t\" >/dev/null; do sleep 0.05; done; done; echo started; "
                             "unshare -Ur id -u 2>&1; grep '^Seccomp:' /proc/self/status";
  const std::string id = d.Submit({{"workload", {{"kind", "agent"}}}, {"command", {"/bin/sh", "-c", script}}});
  const json job = d.WaitTerminal(id);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump();
  const std::string out = d.Call("GET", "/v1/jobs/" + id + "/log").body;
  EXPECT_NE(out.find("started\n"), std::string::npos) << out;  // they ran
  auto sleepers = [&] {
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      std::ifstream file(entry.path() / "cmdline");
      std::vector<std::string> argv;
      for (std::string arg; std::getline(file, arg, '\0');) argv.push_back(arg);
      if (argv.size() == 2 && std::filesystem::path(argv[0]).filename() == "sleep") {
        for (const std::string& t : tokens) count += argv[1] == t ? 1 : 0;
      }
    }
    return count;
  };
  const auto gone_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (sleepers() > 0 && std::chrono::steady_clock::now() < gone_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(sleepers(), 0) << "detached processes outlived the job";
  EXPECT_NE(out.find("Operation not permitted"), std::string::npos) << out;
  EXPECT_NE(out.find("Seccomp:\t2\n"), std::string::npos) << out;
  // Positive control: an HPC job (no sandbox) makes its user namespace.
  const std::string hpc =
      d.Submit({{"workload", {{"kind", "hpc"}}},
                {"command", {"/bin/sh", "-c", "unshare -Ur id -u; grep '^Seccomp:' /proc/self/status"}}});
  ASSERT_EQ(d.WaitTerminal(hpc)["state"], "COMPLETED");
  EXPECT_EQ(d.Call("GET", "/v1/jobs/" + hpc + "/log").body, "0\nSeccomp:\t0\n");
}

}  // namespace
}  // namespace unisched::testing
