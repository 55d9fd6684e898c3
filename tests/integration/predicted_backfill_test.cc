// A pool with `backfill: easy-predicted` through the real daemon
// (docs/policy/backfill.md "Predicted run times"): jobs that ended teach the
// predictor, a pending job shows the run it is planned with, a job whose
// wall-time request would run past the blocked job's reservation is
// backfilled because its prediction does not, and the predictor survives a
// restart because it is learned again from the stored jobs.

#include <gtest/gtest.h>

#include <cstdlib>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kConfig = R"yaml(
server:
  scheduler_tick_seconds: 0.2
pools:
  - name: bf-pool
    kind: cpu
    backfill: easy-predicted
    planned_share: 1
    nodes: [x86-c4m8-batch-01]
nodes:
  - name: x86-c4m8-batch-01
    cpus: 4
    memory_mb: 8192
queues:
  - name: batch
    pool: bf-pool
    policy:
      type: fifo
      default_memory_mb_per_cpu: 256
projects:
  - name: default
)yaml";

json Job(const std::string& name, int cpus, int walltime, const std::string& script) {
  return json{{"name", name},
              {"workload", {{"kind", "hpc"}}},
              {"queue", "batch"},
              {"resources", {{"cpus", cpus}, {"walltime_seconds", walltime}}},
              {"command", {"/bin/sh", "-c", script}}};
}

TEST(PredictedBackfillDaemonTest, AShortPredictionBackfillsWhatTheRequestWouldNotAndOutlivesARestart) {
  TestDaemon d;
  d.UseConfigText(kConfig);
  d.Start();
  auto running = [](const json& j) { return j["state"] == "RUNNING"; };

  // Half the node for up to an hour, before the user has any history: it is
  // planned with its request, so the node is full until then.
  const std::string blocker = d.Submit(Job("blocker", 2, 3600, "sleep 300"));
  ASSERT_EQ(d.WaitJob(blocker, running)["state"], "RUNNING");
  // Two short runs in the other half teach the predictor (about 1 s each).
  for (int i = 0; i < 2; ++i) {
    const std::string sim = d.Submit(Job("sim", 2, 3600, "sleep 1"));
    ASSERT_EQ(d.WaitTerminal(sim)["state"], "COMPLETED");
  }
  // The whole node: blocked until the blocker's hour is up.
  const std::string big = d.Submit(Job("big", 4, 600, "true"));
  json waiting = d.WaitJob(big, [](const json& j) { return !j["estimated_start"].is_null(); });
  ASSERT_EQ(waiting["state"], "PENDING") << waiting.dump();
  ASSERT_TRUE(waiting["predicted_run_seconds"].is_number_integer()) << waiting.dump();
  const int64_t predicted = waiting["predicted_run_seconds"];
  EXPECT_GE(predicted, 1);
  EXPECT_LE(predicted, 5);  // the mean of the two runs of `sleep 1`, rounded up

  // Requests an hour, which by the request would end after the big job's
  // reservation (EASY holds it back); its name's history says 1 s.
  const std::string sim = d.Submit(Job("sim", 2, 3600, "sleep 1"));
  EXPECT_EQ(d.WaitTerminal(sim)["state"], "COMPLETED");
  EXPECT_EQ(d.Call("GET", "/v1/jobs/" + big).json["state"], "PENDING");

  // A restart learns the same history from the store.
  d.Stop();
  d.Start();
  json again = d.WaitJob(big, [](const json& j) { return j["predicted_run_seconds"].is_number_integer(); });
  EXPECT_EQ(again["state"], "PENDING") << again.dump();
  // The history now ends with the third `sleep 1` (the last two runs are
  // averaged), whose rounded-up mean may be a second off the first two's
  // on a loaded machine (it was, under the sanitizers in CI).
  const int64_t relearned = again["predicted_run_seconds"];
  EXPECT_GE(relearned, 1) << again.dump();
  EXPECT_LE(relearned, 5) << again.dump();
  EXPECT_LE(std::abs(relearned - predicted), 1) << again.dump();
  // Only a pending job shows one.
  const std::string other = d.Submit(Job("other", 1, 60, "true"));
  EXPECT_EQ(d.WaitTerminal(other)["predicted_run_seconds"], nullptr);

  for (const auto& id : {blocker, big}) d.Call("DELETE", "/v1/jobs/" + id);
  for (const auto& id : {blocker, big}) d.WaitTerminal(id);
}

}  // namespace
}  // namespace unisched::testing
