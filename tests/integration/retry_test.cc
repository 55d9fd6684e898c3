// Job retries through the real daemon: a failing attempt goes back to
// PENDING with state_reason Retry and a backoff, the attempt history is kept,
// and the job ends when its retries are used up.

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "testing/daemon.h"
#include "unisched/common/time.h"

namespace unisched::testing {
namespace {

using nlohmann::json;

constexpr const char* kRetryConfig = R"yaml(
server:
  scheduler_tick_seconds: 0.2
pools:
  - name: cpu
    kind: cpu
    nodes: [x86-c8m16-hpc-01]
nodes:
  - name: x86-c8m16-hpc-01
    cpus: 8
    memory_mb: 16384
queues:
  - name: batch
    pool: cpu
    policy: {max_retries: 2, retry_backoff_seconds: 1}
  - name: once
    pool: cpu
    policy: {retry_backoff_seconds: 1}   # max_retries: 0 (the default)
projects:
  - name: default
)yaml";

class RetryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_.UseConfigText(kRetryConfig);
    daemon_.Start();
  }
  TestDaemon& d() { return daemon_; }
  TestDaemon daemon_;
};

json Job(const std::string& queue, const std::string& script) {
  return {{"queue", queue},
          {"workload", {{"kind", "hpc"}}},
          {"resources", {{"cpus", 1}, {"memory_mb", 64}}},
          {"command", {"/bin/sh", "-c", script}}};
}

TEST_F(RetryTest, AFailureIsRetriedAndTheSecondAttemptCompletes) {
  // Fails the first time (no marker in its work directory yet), then succeeds.
  const std::string id = d().Submit(Job("batch", "if [ -e marker ]; then exit 0; fi; touch marker; exit 3"));
  // While it waits out the backoff it says why.
  // (Bounded generously: the first attempt must start and fail first, which
  // a slow host under the sanitizers may take seconds for.)
  json pending;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until) {
    pending = d().Call("GET", "/v1/jobs/" + id).json;
    if (pending["state"] == "PENDING" && pending["state_reason"] == "Retry") break;
    if (pending["attempts"].size() > 1 || IsTerminalState(pending.value("state", ""))) break;  // missed it
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(pending["state_reason"], "Retry") << pending.dump();
  const json job = d().WaitTerminal(id);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump();
  ASSERT_EQ(job["attempts"].size(), 2u) << job.dump();
  EXPECT_EQ(job["attempts"][0]["state"], "FAILED");
  EXPECT_EQ(job["attempts"][0]["exit_code"], 3);
  EXPECT_EQ(job["attempts"][1]["state"], "COMPLETED");
  // At least the backoff between the two attempts.
  const auto failed_at = ParseRfc3339(job["attempts"][0]["ended_at"].get<std::string>());
  const auto retried_at = ParseRfc3339(job["attempts"][1]["started_at"].get<std::string>());
  EXPECT_GE(*retried_at - *failed_at, std::chrono::milliseconds(900));
  bool requeued = false;
  const json events = d().Call("GET", "/v1/jobs/" + id + "/events").json;
  for (const auto& e : events["events"]) {
    if (e["kind"] == "requeued") requeued = e["message"].get<std::string>().find("retry 1 of 2") != std::string::npos;
  }
  EXPECT_TRUE(requeued) << events.dump();
}

TEST_F(RetryTest, RetriesRunOutAndTheJobEndsFailedWithItsHistory) {
  const std::string id =
      d().Submit(Job("batch", "echo attempt $UNISCHED_ATTEMPT restart $SLURM_RESTART_COUNT; exit 1"));
  const json job = d().WaitTerminal(id);
  ASSERT_EQ(job["state"], "FAILED") << job.dump();
  EXPECT_EQ(job["attempts"].size(), 3u) << "the first run and two retries";
  EXPECT_EQ(job["exit_code"], 1);
  // Each attempt's output stays readable (?attempt=N); the default is the last.
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + id + "/log?attempt=1").body, "attempt 1 restart 0\n");
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + id + "/log?attempt=2").body, "attempt 2 restart 1\n");
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + id + "/log").body, "attempt 3 restart 2\n");
  const Reply missing = d().Call("GET", "/v1/jobs/" + id + "/log?attempt=4");
  EXPECT_EQ(missing.status, 404) << missing.body;
  EXPECT_EQ(missing.json["error"]["field"], "attempt") << missing.body;
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + id + "/log?attempt=0").status, 422);
}

TEST_F(RetryTest, TheJobsOwnLimitOverridesItsQueue) {
  json spec = Job("once", "exit 1");
  spec["max_retries"] = 1;
  const json job = d().WaitTerminal(d().Submit(spec));
  ASSERT_EQ(job["state"], "FAILED") << job.dump();
  EXPECT_EQ(job["attempts"].size(), 2u);
  EXPECT_EQ(d().WaitTerminal(d().Submit(Job("once", "exit 1")))["attempts"].size(), 1u) << "no retries by default";
  json bad = Job("once", "true");
  bad["max_retries"] = -1;
  const Reply refused = d().Call("POST", "/v1/jobs", bad);
  EXPECT_EQ(refused.status, 422);
  EXPECT_EQ(refused.json["error"]["field"], "max_retries");
}

// The daemon's supervisor hosts: its children running `unisched-supervisor --host`.
std::vector<pid_t> HostsOf(pid_t daemon) {
  std::vector<pid_t> hosts;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = ReadFile(entry.path().string() + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || std::atoi(stat.c_str() + close + 4) != daemon) continue;
    std::string cmdline = ReadFile(entry.path().string() + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find("unisched-supervisor --host") != std::string::npos) hosts.push_back(std::stoi(name));
  }
  return hosts;
}

// Lowers the soft limit of open files of running processes to nothing (no
// new descriptor at all: what a flood of idle connections leaves a daemon
// with), and gives each its limit back when destroyed or told to.
class NoDescriptors {
 public:
  explicit NoDescriptors(const std::vector<pid_t>& pids) {
    for (pid_t pid : pids) {
      rlimit old{};
      if (::prlimit(pid, RLIMIT_NOFILE, nullptr, &old) != 0) continue;
      rlimit none = old;
      none.rlim_cur = 0;
      if (::prlimit(pid, RLIMIT_NOFILE, &none, nullptr) == 0) saved_[pid] = old;
    }
  }
  ~NoDescriptors() { Lift(); }
  size_t size() const { return saved_.size(); }
  void Lift() {
    for (const auto& [pid, limit] : saved_) ::prlimit(pid, RLIMIT_NOFILE, &limit, nullptr);
    saved_.clear();
  }

 private:
  std::map<pid_t, rlimit> saved_;
};

// Out of descriptors, first in the supervisor hosts, then in the daemon
// itself (its account lookup fails with EMFILE, the reported symptom): each
// launch fails for a transient cause. The job is launched again, with
// state_reason LaunchRetry, and ends COMPLETED once descriptors are free
// again, although its queue allows no retry at all.
TEST_F(RetryTest, LaunchesOutOfDescriptorsAreRetriedUncountedUntilTheJobCompletes) {
#if defined(__SANITIZE_ADDRESS__)
  // The sanitizer runtimes need descriptors of their own: UBSan's vptr check
  // probes memory through a pipe and reports a false "invalid vptr" (fatal
  // here) when it cannot make one. The plain build runs this test.
  GTEST_SKIP() << "a daemon without descriptors cannot run under the sanitizers";
#endif
  // Every host started (one per CPU, each at its turn of a launch).
  const size_t count = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(d().WaitTerminal(d().Submit(Job("once", "true")))["state"], "COMPLETED");
  }
  std::vector<pid_t> hosts = HostsOf(d().pid());
  ASSERT_EQ(hosts.size(), count);
  NoDescriptors hosts_squeezed(hosts);
  ASSERT_EQ(hosts_squeezed.size(), count);

  const std::string id = d().Submit(Job("once", "echo ran"));  // max_retries 0
  json waiting;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until) {
    waiting = d().Call("GET", "/v1/jobs/" + id).json;
    if (waiting["state_reason"] == "LaunchRetry" || IsTerminalState(waiting.value("state", ""))) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(waiting["state_reason"], "LaunchRetry") << waiting.dump();
  const size_t host_failures = waiting["attempts"].size();

  // Now the daemon: a launch after the backoff fails there (its account
  // lookup or its spec memfd: "cannot ..."; the hosts' reason is "the
  // supervisor host could not ..."). The API cannot take a connection
  // meanwhile; the daemon's log says when.
  const std::string log = d().state_dir() + "/daemon.log";
  const auto failed_in_daemon = [&] {
    std::istringstream lines(ReadFile(log));
    for (std::string line; std::getline(lines, line);) {
      if (line.find("job " + id + ": attempt ") != std::string::npos &&
          line.find("could not be launched (cannot") != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  {
    NoDescriptors daemon_squeezed({d().pid()});
    ASSERT_EQ(daemon_squeezed.size(), 1u);
    hosts_squeezed.Lift();
    const auto logged_by = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!failed_in_daemon() && std::chrono::steady_clock::now() < logged_by) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ASSERT_TRUE(failed_in_daemon()) << "no launch failed in the daemon; log:\n" << ReadFile(log);

  const json job = d().WaitTerminal(id, std::chrono::seconds(180));
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump();
  const json& attempts = job["attempts"];
  ASSERT_GE(attempts.size(), host_failures + 2) << job.dump();
  bool host_side = false;
  bool daemon_side = false;
  for (size_t i = 0; i + 1 < attempts.size(); ++i) {
    EXPECT_EQ(attempts[i]["state"], "FAILED") << attempts[i].dump();
    EXPECT_EQ(attempts[i].value("transient", false), true) << attempts[i].dump();
    const std::string reason = attempts[i]["reason"];
    EXPECT_NE(reason.find("Too many open files"), std::string::npos) << reason;
    (reason.find("supervisor host") != std::string::npos ? host_side : daemon_side) = true;
  }
  EXPECT_TRUE(host_side) << job.dump();
  EXPECT_TRUE(daemon_side) << job.dump();
  EXPECT_EQ(attempts.back()["state"], "COMPLETED");
  EXPECT_FALSE(attempts.back().contains("transient"));
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + id + "/log").body, "ran\n");
  int launch_retries = 0;
  const json events = d().Call("GET", "/v1/jobs/" + id + "/events").json;
  for (const auto& e : events["events"]) {
    if (e["kind"] == "requeued" &&
        e["message"].get<std::string>().find("not counted against max_retries") != std::string::npos) {
      ++launch_retries;
    }
  }
  EXPECT_EQ(launch_retries, static_cast<int>(attempts.size()) - 1);
}

}  // namespace
}  // namespace unisched::testing
