// Event passes through the real daemon (docs/scheduling-cycle.md, "Full
// passes and event passes"): with a queue deeper than
// scheduler.event_pass_depth, passes woken by submissions and ends look at
// the head of the queue only, between the ticks' full passes. Nothing is
// lost and the order holds: every job runs, in FIFO order, and the waiting
// ones carry the full passes' reasons.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// One 4-CPU node; a tick of 1 s, so most passes between ticks are woken by
// events; a depth of 2, so a queue of 3 or more waiting jobs is deep.
constexpr const char* kConfig = R"yaml(
server:
  scheduler_tick_seconds: 1.0
scheduler:
  event_pass_depth: 2
pools:
  - name: p
    kind: cpu
    backfill: easy
    nodes: [x86-c4m8-batch-01]
nodes:
  - name: x86-c4m8-batch-01
    cpus: 4
    memory_mb: 8192
queues:
  - name: batch
    pool: p
    policy:
      type: fifo
projects:
  - name: default
)yaml";

json Job(int cpus, const std::string& script) {
  return {{"workload", {{"kind", "hpc"}}},
          {"queue", "batch"},
          {"resources", {{"cpus", cpus}, {"memory_mb", 256}, {"walltime_seconds", 600}}},
          {"command", {"/bin/sh", "-c", script}}};
}

TEST(EventPassTest, ADeepQueueRunsWholeAndInOrderThroughEventPasses) {
  TestDaemon d;
  d.UseConfigText(kConfig);
  d.Start();

  // The node is taken while the queue fills: eight jobs of 2 CPUs wait.
  const std::string blocker = d.Submit(Job(4, "sleep 3"));
  const json running = d.WaitJob(blocker, [](const json& j) { return j["state"] == "RUNNING"; });
  ASSERT_EQ(running["state"], "RUNNING") << running.dump();
  std::vector<std::string> waiting;
  for (int i = 0; i < 8; ++i) waiting.push_back(d.Submit(Job(2, "sleep 0.5")));

  // A full pass explains each waiting job (the depth does not cut that).
  json last = d.WaitJob(waiting.back(), [](const json& j) { return !j["pending_reasons"].empty(); });
  ASSERT_EQ(last["state"], "PENDING") << last.dump();
  ASSERT_FALSE(last["pending_reasons"].empty()) << last.dump();

  // Then every job runs: each end wakes an event pass that starts the next.
  std::vector<json> ended;
  for (const auto& id : waiting) ended.push_back(d.WaitTerminal(id, 90s));
  for (size_t i = 0; i < ended.size(); ++i) {
    ASSERT_EQ(ended[i]["state"], "COMPLETED") << ended[i].dump();
    if (i > 0) {
      EXPECT_LE(ended[i - 1]["started_at"].get<std::string>(), ended[i]["started_at"].get<std::string>())
          << "FIFO: job " << waiting[i - 1] << " started after " << waiting[i];
    }
  }
  EXPECT_GT(d.Metric(R"(unisched_scheduler_passes_total{pass="event"})"), 0);
  EXPECT_GT(d.Metric(R"(unisched_scheduler_passes_total{pass="full"})"), 0);
}

}  // namespace
}  // namespace unisched::testing
