// Node health on local nodes and the alerts it raises, through the real
// daemon: black-hole detection drains a node on which jobs keep failing,
// and a job left pending past its queue's threshold fires pending_age.

#include <gtest/gtest.h>

#include <thread>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kConfig = R"yaml(
server:
  scheduler_tick_seconds: 0.2
health:
  black_hole_failures: 3
  black_hole_window_seconds: 60
alerts:
  rules:
    - {name: NodeDrainedAutomatically, kind: node_drained_automatically}
    - {name: BatchPendingTooLong, kind: pending_age, queue: batch, threshold_seconds: 1, severity: info}
pools:
  - name: cpu
    kind: cpu
    nodes: [x86-c4m4-hpc-01]
nodes:
  - {name: x86-c4m4-hpc-01, cpus: 4, memory_mb: 4096}
queues:
  - {name: batch, pool: cpu}
projects:
  - name: default
)yaml";

json FindAlert(const json& alerts, const std::string& name) {
  for (const auto& a : alerts["alerts"]) {
    if (a["name"] == name) return a;
  }
  return json();
}

TEST(HealthTest, ABlackHoleIsDrainedAndLongPendingJobsFireAnAlert) {
  TestDaemon d;
  d.UseConfigText(kConfig);
  d.Start();
  const json failing = {{"queue", "batch"},
                        {"workload", {{"kind", "hpc"}}},
                        {"resources", {{"cpus", 1}, {"memory_mb", 64}}},
                        {"command", {"/bin/sh", "-c", "exit 1"}}};
  for (int i = 0; i < 3; ++i) ASSERT_EQ(d.WaitTerminal(d.Submit(failing))["state"], "FAILED");
  // The waits below are bounded generously: a slow host under the
  // sanitizers must not run out of time before the daemon gets there.
  json node;
  const auto drained_by = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < drained_by) {
    node = d.Call("GET", "/v1/nodes").json["nodes"][0];
    if (node["state"] == "drained") break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(node["state"], "drained") << node.dump();
  EXPECT_NE(node["reason"].get<std::string>().find("black hole: 3 jobs failed"), std::string::npos) << node.dump();

  // Nothing runs on a drained node: a new job waits, and past the queue's
  // threshold its pending age fires an alert.
  const std::string waiting = d.Submit({{"queue", "batch"},
                                        {"workload", {{"kind", "hpc"}}},
                                        {"resources", {{"cpus", 1}, {"memory_mb", 64}}},
                                        {"command", {"true"}}});
  json alerts;
  const auto fired_by = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < fired_by) {
    alerts = d.Call("GET", "/v1/alerts?state=firing").json;
    if (!FindAlert(alerts, "BatchPendingTooLong").is_null() &&
        !FindAlert(alerts, "NodeDrainedAutomatically").is_null()) {
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  const json drained = FindAlert(alerts, "NodeDrainedAutomatically");
  ASSERT_FALSE(drained.is_null()) << alerts.dump();
  EXPECT_EQ(drained["object"], "node/x86-c4m4-hpc-01");
  const json pending = FindAlert(alerts, "BatchPendingTooLong");
  ASSERT_FALSE(pending.is_null()) << alerts.dump();
  EXPECT_EQ(pending["object"], "queue/batch");
  EXPECT_EQ(pending["severity"], "info");
  EXPECT_NE(pending["message"].get<std::string>().find("job " + waiting), std::string::npos) << pending.dump();

  // Resumed: the job runs, both alerts resolve.
  ASSERT_EQ(d.Call("POST", "/v1/nodes/x86-c4m4-hpc-01/resume", json::object()).status, 200);
  EXPECT_EQ(d.WaitTerminal(waiting)["state"], "COMPLETED");
  const auto resolved_by = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < resolved_by) {
    alerts = d.Call("GET", "/v1/alerts?state=firing").json;
    if (alerts["alerts"].empty()) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(alerts["alerts"].empty()) << alerts.dump();
  EXPECT_EQ(d.Call("GET", "/v1/alerts?state=resolved").json["alerts"].size(), 2u);
  EXPECT_EQ(d.Call("GET", "/v1/alerts?state=sideways").status, 422);  // unknown: parsed, out of range
}

}  // namespace
}  // namespace unisched::testing
