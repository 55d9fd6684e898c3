// `unisched simulate`: `--json` prints exactly the documented keys, `--starts`
// writes every job's start in the reference schedules' format.

#include "cli/simulate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

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

TEST(SimulationJsonTest, PredictionsAddTheirAccuracy) {
  sim::SimulationReport report;
  report.result.prediction.predicted = 4;
  report.result.prediction.under = 1;
  report.result.prediction.absolute_error_sum = 100;
  nlohmann::json out = SimulationJson(report);
  EXPECT_EQ(out["predicted_jobs"], 4);
  EXPECT_DOUBLE_EQ(out["prediction_mae_seconds"].get<double>(), 25);
  EXPECT_DOUBLE_EQ(out["prediction_under_share"].get<double>(), 0.25);
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
  EXPECT_EQ(RunSimulate({}), 2);                                                  // no --trace
  EXPECT_EQ(RunSimulate({"--trace", "x.swf", "--policy", "sjf"}), 2);             // unknown policy
  EXPECT_EQ(RunSimulate({"--trace", "x.swf", "--processors", "many"}), 2);        // not a number
  EXPECT_EQ(RunSimulate({"--trace", "x.swf", "--policy", "fcfs-predicted"}), 2);  // fcfs plans nothing
  EXPECT_EQ(RunSimulate({"--trace", "x.swf", "--processors", "4", "--planned-share", "0"}), 2);
  EXPECT_EQ(RunSimulate({"--trace", "x.swf", "--processors", "4", "--planned-share", "1.5"}), 2);
  EXPECT_EQ(RunSimulate({"--trace", "x.swf", "--processors", "4", "--planned-share", "0.2x"}), 2);
  EXPECT_EQ(RunSimulate({"--trace", "x.swf"}), 2);                                    // no cluster size
  EXPECT_EQ(RunSimulate({"--trace", "/nonexistent/x.swf", "--processors", "4"}), 1);  // unreadable
}

TEST(RunSimulateTest, StartsAreWrittenOnePerJobInTraceIdOrder) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("simulate-starts-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  // Four processors: job 7 (4 processors, 100 s) runs first; job 3 (2
  // processors, submitted at 10 s) and job 5 (2 processors, at 10 s) wait for
  // it, then start together at 100 s.
  {
    std::ofstream trace(dir / "t.swf");
    trace << "; a header line\n"
             "7 0 -1 100 4 -1 -1 4 100 -1 1 1 1 -1 -1 -1 -1 -1\n"
             "5 10 -1 20 2 -1 -1 2 60 -1 1 1 1 -1 -1 -1 -1 -1\n"
             "3 10 -1 20 2 -1 -1 2 60 -1 1 1 1 -1 -1 -1 -1 -1\n";
  }
  EXPECT_EQ(RunSimulate({"--trace", (dir / "t.swf").string(), "--processors", "4", "--starts",
                         (dir / "starts").string(), "--json"}),
            0);
  std::ifstream starts(dir / "starts");
  std::stringstream text;
  text << starts.rdbuf();
  EXPECT_EQ(text.str(), "3 100\n5 100\n7 0\n");
  // A file that cannot be written: exit 1 after the replay.
  EXPECT_EQ(RunSimulate({"--trace", (dir / "t.swf").string(), "--processors", "4", "--starts",
                         (dir / "missing" / "starts").string()}),
            1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace unisched::cli
