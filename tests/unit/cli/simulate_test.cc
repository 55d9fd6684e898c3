// `unisched simulate --json`: exactly the documented keys.

#include "cli/simulate.h"

#include <gtest/gtest.h>

#include <set>

namespace unisched::cli {
namespace {

std::set<std::string> Keys(const nlohmann::json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.insert(key);
  return keys;
}

TEST(SimulationJsonTest, SwfHasTheFiveKeys) {
  sim::SimulationReport report;
  report.format = sim::TraceFormat::kSwf;
  report.result.metrics.jobs = 3;
  report.result.metrics.avg_wait_seconds = 65.5;
  report.result.metrics.utilization = 0.7;
  nlohmann::json out = SimulationJson(report);
  EXPECT_EQ(Keys(out), (std::set<std::string>{"jobs", "avg_wait_seconds", "avg_bounded_slowdown", "utilization",
                                              "makespan_seconds"}));
  EXPECT_EQ(out["jobs"], 3);
  EXPECT_DOUBLE_EQ(out["avg_wait_seconds"].get<double>(), 65.5);
}

TEST(SimulationJsonTest, PhillyAddsCompletionTimeAndGpuUtilization) {
  sim::SimulationReport report;
  report.format = sim::TraceFormat::kPhilly;
  report.result.metrics.utilization = 0.25;
  report.result.metrics.avg_jct_seconds = 120;
  nlohmann::json out = SimulationJson(report);
  EXPECT_EQ(Keys(out), (std::set<std::string>{"jobs", "avg_wait_seconds", "avg_bounded_slowdown", "utilization",
                                              "makespan_seconds", "avg_jct_seconds", "gpu_utilization"}));
  EXPECT_DOUBLE_EQ(out["gpu_utilization"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(out["avg_jct_seconds"].get<double>(), 120);
}

TEST(RunSimulateTest, UsageErrorsExitTwo) {
  EXPECT_EQ(RunSimulate({}), 2);                                                      // no --trace
  EXPECT_EQ(RunSimulate({"--trace", "x.swf", "--policy", "sjf"}), 2);                 // unknown policy
  EXPECT_EQ(RunSimulate({"--trace", "x.swf", "--processors", "many"}), 2);            // not a number
  EXPECT_EQ(RunSimulate({"--trace", "x.swf"}), 2);                                    // no cluster size
  EXPECT_EQ(RunSimulate({"--trace", "/nonexistent/x.swf", "--processors", "4"}), 1);  // unreadable
}

}  // namespace
}  // namespace unisched::cli
