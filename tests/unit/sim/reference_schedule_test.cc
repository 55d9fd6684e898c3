// Real traces replayed against the independent simulator pyss: KTH SP2
// (shared/traces/hpc-kth-sp2, 100 processors) and HPC2N-2002
// (shared/traces/hpc-hpc2n, 240), each with FCFS, EASY and conservative
// backfilling, start every job at the very second pyss started it
// (shared/anchors/pyss holds pyss's start of every job), and so give pyss's
// summary figures to every printed digit. docs/simulate.md describes both
// simulators' rules; scripts/trace-replay.sh does the same from the command
// line and times each replay.

#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <ostream>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "unisched/sim/simulate.h"

namespace unisched::sim {
namespace {

const std::string kShared = UNISCHED_SOURCE_DIR "/../shared";

// A whole trace on one pool of `processors`, as `unisched simulate` replays it.
using model::BackfillMode;

Result<SimulationReport> Replay(const std::string& trace, int processors, model::BackfillChoice policy) {
  SimulateOptions options;
  options.trace_path = trace;
  options.processors = processors;
  options.policy = policy;
  std::ostringstream log;
  return RunSimulation(options, log);
}

// pyss's schedule: `<job id> <start>` per line (shared/anchors/pyss/README.md).
std::unordered_map<int64_t, int64_t> ReferenceStarts(const std::string& text) {
  std::unordered_map<int64_t, int64_t> starts;
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t eol = rest.find('\n');
    std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view{} : rest.substr(eol + 1);
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) continue;
    int64_t id = 0, start = 0;
    std::from_chars(line.data(), line.data() + space, id);
    std::from_chars(line.data() + space + 1, line.data() + line.size(), start);
    starts[id] = start;
  }
  return starts;
}

struct ScheduleCase {
  const char* trace;      // under shared/traces
  const char* reference;  // under shared/anchors/pyss, without .starts.gz
  int processors;
  model::BackfillMode policy;
  int64_t jobs;
  // pyss's figures as its README prints them (1 and 2 decimals).
  double avg_wait_seconds;
  double avg_bounded_slowdown;
};

// For test names and failure messages (else gtest prints the bytes).
void PrintTo(const ScheduleCase& c, std::ostream* out) {
  *out << c.reference << " on " << c.processors << " processors";
}

class ReferenceScheduleTest : public testing::TestWithParam<ScheduleCase> {};

TEST_P(ReferenceScheduleTest, EveryJobStartsWhenPyssStartedIt) {
#if !defined(__OPTIMIZE__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "a whole-trace replay is for optimized builds; run scripts/trace-replay.sh";
#endif
  const ScheduleCase& c = GetParam();
  const std::string trace = kShared + "/traces/" + c.trace;
  const std::string reference = kShared + "/anchors/pyss/" + c.reference + ".starts.gz";
  if (!std::filesystem::exists(trace) || !std::filesystem::exists(reference)) {
    GTEST_SKIP() << trace << " or " << reference << " is not there";
  }
  auto text = ReadTraceFile(reference);
  ASSERT_TRUE(text.ok()) << text.error().message;
  const auto expected = ReferenceStarts(*text);
  ASSERT_EQ(static_cast<int64_t>(expected.size()), c.jobs);

  auto report = Replay(trace, c.processors, c.policy);
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_EQ(static_cast<int64_t>(report->starts.size()), c.jobs);
  int64_t differ = 0;
  std::string first;
  for (const auto& start : report->starts) {
    auto it = expected.find(start.source_id);
    if (it != expected.end() && it->second * 1000 == start.start_ms) continue;
    if (++differ <= 5) {
      first += "\n  job " + std::to_string(start.source_id) + ": started at " +
               std::to_string(static_cast<double>(start.start_ms) / 1000) + " s, pyss " +
               (it == expected.end() ? std::string("never") : std::to_string(it->second) + " s");
    }
  }
  EXPECT_EQ(differ, 0) << differ << " jobs start at another time than in pyss's schedule; the first:" << first;

  const Metrics& m = report->result.metrics;
  EXPECT_EQ(m.jobs, c.jobs);
  EXPECT_LE(std::abs(m.avg_wait_seconds - c.avg_wait_seconds), 0.05) << m.avg_wait_seconds;
  EXPECT_LE(std::abs(m.avg_bounded_slowdown - c.avg_bounded_slowdown), 0.005) << m.avg_bounded_slowdown;

  // Estimates at submit planned with the requests are promises: a backfill
  // never delays a reservation, so no job starts after the estimate it got.
  const EstimateAccuracy& e = report->result.estimates;
  if (c.policy == BackfillMode::kFcfs) {
    EXPECT_EQ(e.estimated, 0);
  } else {
    EXPECT_GT(e.estimated, 0);
    EXPECT_EQ(e.late, 0) << e.late << " of " << e.estimated << " jobs started after their estimate";
  }
}

constexpr const char* kKth = "hpc-kth-sp2/KTH-SP2-1996.swf.gz";
constexpr const char* kHpc2n = "hpc-hpc2n/HPC2N-2002-2.1-cln.swf.gz";

INSTANTIATE_TEST_SUITE_P(
    Traces, ReferenceScheduleTest,
    testing::Values(
        ScheduleCase{kKth, "kth-fcfs_scheduler", 100, BackfillMode::kFcfs, 28481, 353776.4, 6814.97},
        ScheduleCase{kKth, "kth-easy_backfill_scheduler", 100, BackfillMode::kEasy, 28481, 6836.9, 92.58},
        ScheduleCase{kKth, "kth-conservative_scheduler", 100, BackfillMode::kConservative, 28481, 7310.6, 89.00},
        ScheduleCase{kHpc2n, "hpc2n-fcfs_scheduler", 240, BackfillMode::kFcfs, 202876, 15842.5, 207.34},
        ScheduleCase{kHpc2n, "hpc2n-easy_backfill_scheduler", 240, BackfillMode::kEasy, 202876, 10711.7, 87.67},
        ScheduleCase{kHpc2n, "hpc2n-conservative_scheduler", 240, BackfillMode::kConservative, 202876, 10790.0, 86.63}),
    [](const testing::TestParamInfo<ScheduleCase>& info) {
      const std::string_view reference = info.param.reference;
      return std::string(reference.substr(0, reference.find('-'))) + "_" +
             std::string(model::ToString(info.param.policy));
    });

// Backfilling with predicted run times (issue 20's goals; parameters chosen
// on KTH, HPC2N held out): on KTH an average bounded slowdown of at most 56,
// at least 10% better than EASY++'s 62.86; on HPC2N better than EASY's 87.67.
struct PredictedCase {
  const char* trace;
  int processors;
  model::BackfillMode policy;
  double at_most_bounded_slowdown;
};

void PrintTo(const PredictedCase& c, std::ostream* out) {
  *out << c.trace << " on " << c.processors << " processors, " << model::ToString(c.policy)
       << "-predicted, average bounded slowdown at most " << c.at_most_bounded_slowdown;
}

class PredictedBackfillTest : public testing::TestWithParam<PredictedCase> {};

TEST_P(PredictedBackfillTest, MeetsItsGoal) {
#if !defined(__OPTIMIZE__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "a whole-trace replay is for optimized builds; run scripts/trace-replay.sh";
#endif
  const PredictedCase& c = GetParam();
  const std::string trace = kShared + "/traces/" + c.trace;
  if (!std::filesystem::exists(trace)) GTEST_SKIP() << trace << " is not there";
  auto report = Replay(trace, c.processors, model::BackfillChoice{c.policy, true});
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_LE(report->result.metrics.avg_bounded_slowdown, c.at_most_bounded_slowdown);
  EXPECT_GT(report->result.prediction.predicted, report->result.metrics.jobs * 9 / 10);
}

INSTANTIATE_TEST_SUITE_P(Traces, PredictedBackfillTest,
                         testing::Values(PredictedCase{kKth, 100, BackfillMode::kEasy, 56.0},
                                         PredictedCase{kHpc2n, 240, BackfillMode::kEasy, 87.67},
                                         PredictedCase{kHpc2n, 240, BackfillMode::kConservative, 86.63}),
                         [](const testing::TestParamInfo<PredictedCase>& info) {
                           return std::string(info.param.trace[4] == 'k' ? "kth_" : "hpc2n_") +
                                  std::string(model::ToString(info.param.policy));
                         });

}  // namespace
}  // namespace unisched::sim
