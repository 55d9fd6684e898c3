// Job retries through the real daemon: a failing attempt goes back to
// PENDING with state_reason Retry and a backoff, the attempt history is kept,
// and the job ends when its retries are used up.

#include <gtest/gtest.h>

#include <thread>

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
  const json job = d().WaitTerminal(d().Submit(Job("batch", "exit 1")));
  ASSERT_EQ(job["state"], "FAILED") << job.dump();
  EXPECT_EQ(job["attempts"].size(), 3u) << "the first run and two retries";
  EXPECT_EQ(job["exit_code"], 1);
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

}  // namespace
}  // namespace unisched::testing
