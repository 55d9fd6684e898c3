// The baseline's figures, their comparison, percentiles and the kernel's
// report (unisched/baseline/baseline.h), and this machine's facts.

#include "unisched/baseline/baseline.h"

#include <gtest/gtest.h>

#include "unisched/baseline/machine.h"

namespace unisched::baseline {
namespace {

using nlohmann::json;

Figure Throughput(const std::string& node, double value) {
  return {"dgemm_gflops", "cpu-hpc-pool", node, value, "GFLOP/s", Better::kHigher, json::object()};
}
Figure Latency(const std::string& name, double value) {
  return {name, "cpu-hpc-pool", "", value, "ms", Better::kLower, json::object()};
}

TEST(CompareTest, FlagsWhatGotWorseByMoreThanTheMargin) {
  struct Case {
    std::string name;
    Figure before, after;
    double margin;
    std::optional<double> percent;
    bool flagged;
  };
  const std::vector<Case> cases = {
      {"throughput unchanged", Throughput("n1", 40), Throughput("n1", 40), 10, 0.0, false},
      {"throughput up", Throughput("n1", 40), Throughput("n1", 50), 10, 25.0, false},
      {"throughput down within the margin", Throughput("n1", 40), Throughput("n1", 36.4), 10, -9.0, false},
      {"throughput down exactly the margin", Throughput("n1", 40), Throughput("n1", 36), 10, -10.0, false},
      {"throughput down beyond the margin", Throughput("n1", 40), Throughput("n1", 35), 10, -12.5, true},
      {"any fall with margin 0", Throughput("n1", 40), Throughput("n1", 39.9), 0, -0.25, true},
      {"a latency that fell is better", Latency("job_start_ms_p99", 20), Latency("job_start_ms_p99", 5), 10, -75.0,
       false},
      {"a latency that rose within the margin", Latency("job_start_ms_p99", 20), Latency("job_start_ms_p99", 21), 10,
       5.0, false},
      {"a latency that rose beyond the margin", Latency("job_start_ms_p99", 20), Latency("job_start_ms_p99", 30), 10,
       50.0, true},
      {"a latency that doubled, margin 150", Latency("job_start_ms_p50", 10), Latency("job_start_ms_p50", 20), 150,
       100.0, false},
      {"no percentage from 0", Latency("job_start_ms_p50", 0), Latency("job_start_ms_p50", 12), 10, std::nullopt,
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto changes = Compare({c.before}, {c.after}, c.margin);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].key, c.after.Key());
    EXPECT_EQ(changes[0].before, c.before.value);
    EXPECT_EQ(changes[0].after, c.after.value);
    ASSERT_EQ(changes[0].percent.has_value(), c.percent.has_value());
    if (c.percent) {
      EXPECT_NEAR(*changes[0].percent, *c.percent, 1e-9);
    }
    EXPECT_EQ(changes[0].flagged, c.flagged);
  }
}

TEST(CompareTest, MatchesByNamePoolAndNodeAndListsOneSidedFiguresUnflagged) {
  const std::vector<Figure> previous = {Throughput("n1", 40), Throughput("n2", 40), Latency("job_start_ms_p50", 9)};
  const std::vector<Figure> current = {Throughput("n2", 20), Throughput("n3", 41), Latency("job_start_ms_p50", 9)};
  const auto changes = Compare(previous, current, 10);
  ASSERT_EQ(changes.size(), 4u);
  EXPECT_EQ(changes[0].key, "dgemm_gflops cpu-hpc-pool/n2");
  EXPECT_TRUE(changes[0].flagged) << "n2 halved";
  EXPECT_EQ(changes[1].key, "dgemm_gflops cpu-hpc-pool/n3");
  EXPECT_FALSE(changes[1].before) << "new in this run";
  EXPECT_FALSE(changes[1].flagged);
  EXPECT_EQ(changes[2].key, "job_start_ms_p50 cpu-hpc-pool");
  EXPECT_EQ(changes[3].key, "dgemm_gflops cpu-hpc-pool/n1") << "only the previous run has it: listed last";
  EXPECT_FALSE(changes[3].after);
  EXPECT_FALSE(changes[3].flagged) << "a figure not measured is not a fall";
}

TEST(FigureTest, KeysAndJsonRoundTrip) {
  EXPECT_EQ(Throughput("n1", 1).Key(), "dgemm_gflops cpu-hpc-pool/n1");
  EXPECT_EQ(Latency("job_start_ms_p99", 1).Key(), "job_start_ms_p99 cpu-hpc-pool");
  EXPECT_EQ((Figure{"sandbox_create_ms_p50", "", "", 1, "ms", Better::kLower, {}}.Key()), "sandbox_create_ms_p50");
  Figure f = Throughput("n1", 41.5);
  f.detail = {{"threads", 2}};
  const json run = {{"figures", {ToJson(f), {{"name", "no value"}}, ToJson(Latency("job_start_ms_p50", 3))}}};
  const auto back = FiguresOf(run);
  ASSERT_EQ(back.size(), 2u) << "an entry without a numeric value is not a figure";
  EXPECT_EQ(back[0].Key(), f.Key());
  EXPECT_EQ(back[0].value, 41.5);
  EXPECT_EQ(back[0].unit, "GFLOP/s");
  EXPECT_EQ(back[0].detail["threads"], 2);
  EXPECT_EQ(back[1].better, Better::kLower);
  EXPECT_TRUE(FiguresOf(json::object()).empty());
  EXPECT_EQ(ParseBetter("lower"), Better::kLower);
  EXPECT_FALSE(ParseBetter("faster"));
}

TEST(PercentileTest, NearestRank) {
  EXPECT_FALSE(Percentile({}, 50));
  EXPECT_EQ(Percentile({7}, 50), 7);
  EXPECT_EQ(Percentile({7}, 99), 7);
  EXPECT_EQ(Percentile({9, 3}, 50), 3) << "2 samples: p50 is the smaller";
  EXPECT_EQ(Percentile({9, 3}, 99), 9);
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);
  EXPECT_EQ(Percentile(hundred, 50), 50);
  EXPECT_EQ(Percentile(hundred, 99), 99);
  EXPECT_EQ(Percentile(hundred, 100), 100);
  EXPECT_EQ(Percentile({1, 2, 3, 4, 5}, 50), 3);
  EXPECT_EQ(Percentile({1, 2, 3, 4, 5}, 99), 5);
}

TEST(KernelReportTest, TheLastReportLineAmongOtherOutput) {
  EXPECT_FALSE(KernelReport(""));
  EXPECT_FALSE(KernelReport("OpenBLAS warning: precompiled NUM_THREADS exceeded\n"));
  EXPECT_FALSE(KernelReport(R"({"gflops": "fast"})")) << "gflops must be a number";
  auto one = KernelReport("noise\n{\"kernel\":\"dgemm\",\"gflops\":41.5,\"threads\":2}\nmore noise\n");
  ASSERT_TRUE(one);
  EXPECT_EQ((*one)["gflops"], 41.5);
  auto last = KernelReport("{\"gflops\":1}\n{\"gflops\":2}");
  ASSERT_TRUE(last);
  EXPECT_EQ((*last)["gflops"], 2);
}

TEST(MachineFactsTest, ThisMachineHasAHostCpusMemoryAndAKernel) {
  const MachineFacts facts = ReadMachineFacts();
  EXPECT_FALSE(facts.hostname.empty());
  EXPECT_GT(facts.cpus, 0);
  EXPECT_GT(facts.memory_mb, 0);
  EXPECT_FALSE(facts.kernel.empty());
  const json j = ToJson(facts);
  EXPECT_EQ(j["cpus"], facts.cpus);
  EXPECT_EQ(j["hostname"], facts.hostname);
}

}  // namespace
}  // namespace unisched::baseline
