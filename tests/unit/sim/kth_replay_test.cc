// The KTH SP2 trace (shared/traces/hpc-kth-sp2) replayed on 100 processors
// lands within 2% of the independent simulator pyss's figures for each
// policy (docs/simulate.md lists both). scripts/kth-replay.sh does the same
// from the command line and reports the time each replay takes.

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "unisched/sim/simulate.h"

namespace unisched::sim {
namespace {

struct Reference {
  model::BackfillMode policy;
  double avg_wait_seconds;
  double avg_bounded_slowdown;
  double utilization;
  double makespan_seconds;
};

constexpr double kTolerance = 0.02;

// From shared/traces/hpc-kth-sp2/README.md (pyss on the 28,481 cleaned jobs).
void ExpectWithinTolerance(const Reference& ref) {
#if !defined(__OPTIMIZE__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "a whole-trace replay is for optimized builds; run scripts/kth-replay.sh";
#endif
  const std::string trace = UNISCHED_SOURCE_DIR "/../shared/traces/hpc-kth-sp2/KTH-SP2-1996.swf.gz";
  if (!std::filesystem::exists(trace)) GTEST_SKIP() << trace << " is not there";
  SimulateOptions options;
  options.trace_path = trace;
  options.processors = 100;
  options.policy = ref.policy;
  std::ostringstream log;
  auto report = RunSimulation(options, log);
  ASSERT_TRUE(report.ok()) << report.error().message;
  const Metrics& m = report->result.metrics;
  EXPECT_EQ(m.jobs, 28481);
  EXPECT_NEAR(m.avg_wait_seconds, ref.avg_wait_seconds, kTolerance * ref.avg_wait_seconds);
  EXPECT_NEAR(m.avg_bounded_slowdown, ref.avg_bounded_slowdown, kTolerance * ref.avg_bounded_slowdown);
  EXPECT_NEAR(m.utilization, ref.utilization, kTolerance * ref.utilization);
  EXPECT_NEAR(m.makespan_seconds, ref.makespan_seconds, kTolerance * ref.makespan_seconds);
}

TEST(KthReplayTest, FcfsWithinTwoPercentOfTheReference) {
  ExpectWithinTolerance({model::BackfillMode::kFcfs, 353776.4, 6814.97, 0.6852, 29379608});
}

TEST(KthReplayTest, EasyWithinTwoPercentOfTheReference) {
  ExpectWithinTolerance({model::BackfillMode::kEasy, 6836.9, 92.58, 0.6856, 29363626});
}

TEST(KthReplayTest, ConservativeWithinTwoPercentOfTheReference) {
  ExpectWithinTolerance({model::BackfillMode::kConservative, 7310.6, 89.00, 0.6856, 29363626});
}

}  // namespace
}  // namespace unisched::sim
