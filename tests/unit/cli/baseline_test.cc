// `unisched baseline`'s pure parts: what a DGEMM job asks for, and how a
// run and a comparison are printed for people.

#include <gtest/gtest.h>

#include "cli/baseline_command.h"
#include "cli/baseline_run.h"

namespace unisched::cli {
namespace {

using nlohmann::json;

TEST(BaselineCliTest, ADgemmJobAsksForItsMatricesAndRoomForOpenBlas) {
  EXPECT_EQ(MatricesMb(2048), 96);  // 3 x 2048^2 doubles = 96 MiB
  EXPECT_EQ(MatricesMb(256), 2);    // 1.5 MiB, rounded up
  EXPECT_EQ(MatricesMb(0), 0);
  EXPECT_EQ(KernelMemoryMb(2048, 2), 96 + 256 + 8);
  EXPECT_EQ(KernelMemoryMb(65536, 64), 98304 + 256 + 256) << "no overflow at the largest --size";
}

TEST(BaselineCliTest, ARunPrintsItsFiguresAndWhatWasSkippedWithWhy) {
  const json run = {
      {"id", "4"},
      {"pools", {"cpu-hpc-pool", "gpu-train-pool"}},
      {"created_at", "2026-12-05T18:00:00.000Z"},
      {"created_by", "admin"},
      {"config", {{"version", 2}}},
      {"figures",
       {{{"name", "dgemm_gflops"},
         {"pool", "cpu-hpc-pool"},
         {"node", "n1"},
         {"value", 41.52},
         {"unit", "GFLOP/s"},
         {"better", "higher"}},
        {{"name", "job_start_ms_p99"}, {"pool", "cpu-hpc-pool"}, {"value", 12}, {"unit", "ms"}, {"better", "lower"}}}},
      {"skipped",
       {{{"name", "gpu_speedup"}, {"pool", "gpu-train-pool"}, {"node", "g1"}, {"reason", "declared only"}}}}};
  const std::string text = FormatBaseline(run);
  EXPECT_NE(text.find("Baseline run 4 of cpu-hpc-pool,gpu-train-pool, recorded 2026-12-05 18:00:00 by admin "
                      "(config version 2)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("41.5 GFLOP/s"), std::string::npos) << text;
  EXPECT_NE(text.find("12.0 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("gpu_speedup gpu-train-pool/g1: declared only"), std::string::npos) << text;
}

TEST(BaselineCliTest, AComparisonShowsEachChangeAndWhatGotWorse) {
  const std::vector<baseline::Change> changes = {
      {"dgemm_gflops cpu-hpc-pool/n1", "GFLOP/s", baseline::Better::kHigher, 40.0, 30.0, -25.0, true},
      {"job_start_ms_p99 cpu-hpc-pool", "ms", baseline::Better::kLower, 10.0, 15.0, 50.0, false},
      {"dgemm_gflops cpu-hpc-pool/n2", "GFLOP/s", baseline::Better::kHigher, std::nullopt, 41.0, std::nullopt, false},
      {"dgemm_gflops cpu-hpc-pool/n3", "GFLOP/s", baseline::Better::kHigher, 40.0, std::nullopt, std::nullopt, false},
  };
  const std::string text = FormatComparison(changes, {{"id", "3"}, {"created_at", "2026-12-04T10:00:00.000Z"}}, 60);
  EXPECT_NE(text.find("Compared with run 3 of 2026-12-04 10:00:00"), std::string::npos) << text;
  const size_t n1 = text.find("cpu-hpc-pool/n1");
  ASSERT_NE(n1, std::string::npos) << text;
  const std::string line = text.substr(n1, text.find('\n', n1) - n1);
  EXPECT_NE(line.find("40.0 -> 30.0 GFLOP/s  -25.0%"), std::string::npos) << line;
  EXPECT_EQ(line.substr(line.size() - 5), "WORSE") << line;
  EXPECT_NE(text.find("+50.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("- -> 41.0 GFLOP/s"), std::string::npos) << text;
  EXPECT_NE(text.find("new"), std::string::npos) << text;
  EXPECT_NE(text.find("not measured"), std::string::npos) << text;
  EXPECT_NE(text.find("1 figure(s) got worse by more than 60.0%."), std::string::npos) << text;
}

}  // namespace
}  // namespace unisched::cli
