// Tests of `unisched usage` and `unisched reconcile` output: the bodies of
// GET /v1/usage and GET /v1/usage/reconcile (shared/contract/api-v1.md,
// "Usage (C)") as the tables the client prints. No server involved.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/format.h"

namespace unisched::cli {
namespace {

using nlohmann::json;

TEST(UsageFormatTest, Quantities) {
  EXPECT_EQ(FormatQuantity(json(8.0)), "8");
  EXPECT_EQ(FormatQuantity(json(2.5)), "2.5");
  EXPECT_EQ(FormatQuantity(json(1.0234)), "1.02");
  EXPECT_EQ(FormatQuantity(json(7200.004)), "7200");
  EXPECT_EQ(FormatQuantity(json(-30.0)), "-30");
  EXPECT_EQ(FormatQuantity(json(-0.001)), "0");
  EXPECT_EQ(FormatQuantity(json(1234567890123)), "1234567890123");
  EXPECT_EQ(FormatQuantity(json(nullptr)), "-");
}

TEST(UsageFormatTest, GroupColumnsThenMetricsInContractOrderAndATotal) {
  // nlohmann sorts object keys, so the column order must come from the
  // request and the contract, not from the body.
  const json body = json::parse(R"({"rows": [
      {"project": "default", "queue": "ai-training", "gpu_seconds": 2.0, "cpu_core_seconds": 8.0,
       "memory_mb_seconds": 4096.0, "cpu_seconds_used": 0.013},
      {"project": "ml", "queue": "hpc-precision", "cpu_core_seconds": 7200.5, "memory_mb_seconds": 1024.25,
       "cpu_seconds_used": 3599.999}]})");
  EXPECT_EQ(FormatUsageTable(body, {"queue", "project"}),
            "QUEUE          PROJECT  CPU_CORE_SECONDS  CPU_SECONDS_USED  MEMORY_MB_SECONDS  GPU_SECONDS\n"
            "ai-training    default  8                 0.01              4096               2\n"
            "hpc-precision  ml       7200.5            3600              1024.25            -\n"
            "TOTAL                   7208.5            3600.01           5120.25            2\n"
            "(units: *_seconds are resource-seconds, 3600 = 1 hour; memory_mb_seconds MB x s; network_bytes bytes; "
            "\"-\" = not measured)\n");
}

TEST(UsageFormatTest, GroupKeysNotAskedForComeFromTheRows) {
  const json body = json::parse(R"({"rows": [{"workload_kind": "agent", "pool": "elastic-light-pool",
      "instance_seconds": 60, "cost_hint": 1.5}]})");
  EXPECT_EQ(FormatUsageTable(body, {}),
            "POOL                WORKLOAD_KIND  INSTANCE_SECONDS  COST_HINT\n"
            "elastic-light-pool  agent          60                1.5\n"
            "(units: *_seconds are resource-seconds, 3600 = 1 hour; memory_mb_seconds MB x s; network_bytes bytes; "
            "\"-\" = not measured)\n");
}

TEST(UsageFormatTest, NoRows) {
  EXPECT_EQ(FormatUsageTable(json::parse(R"({"rows": []})"), {"project"}),
            "PROJECT\n(no usage recorded in this window)\n");
  EXPECT_EQ(FormatUsageTable(json::object(), {}), "USAGE\n(no usage recorded in this window)\n");
}

TEST(UsageFormatTest, ReconcileCleanLedger) {
  const json body =
      json::parse(R"({"missing": 0, "duplicated": 0, "mismatched": 0, "attempts_checked": 12, "details": []})");
  EXPECT_EQ(DiscrepancyCount(body), 0);
  EXPECT_EQ(FormatReconcile(body),
            "Attempts checked: 12\n"
            "Missing:          0\n"
            "Duplicated:       0\n"
            "Mismatched:       0\n"
            "The ledger reconciles: no discrepancies.\n");
}

TEST(UsageFormatTest, ReconcileListsEachDiscrepancy) {
  const json body = json::parse(R"({"missing": 1, "duplicated": 1, "mismatched": 1, "attempts_checked": 3,
      "details": [
        {"kind": "missing", "job": 7, "attempt": 1, "metric": "gpu_seconds", "detail": "h100",
         "node": "gpu-01", "expected": 4.0, "recorded": 0.0},
        {"kind": "duplicated", "job": 8, "attempt": 2, "metric": "cpu_core_seconds", "detail": "",
         "node": "cpu-01", "expected": 240.0, "recorded": 480.0},
        {"kind": "mismatched", "job": 9, "attempt": 1, "metric": "cpu_seconds_used", "detail": "",
         "node": "cpu-02", "expected": 1.0234, "recorded": 0.5}]})");
  EXPECT_EQ(DiscrepancyCount(body), 3);
  EXPECT_EQ(FormatReconcile(body),
            "Attempts checked: 3\n"
            "Missing:          1\n"
            "Duplicated:       1\n"
            "Mismatched:       1\n"
            "\n"
            "KIND        JOB  ATTEMPT  METRIC            DETAIL  NODE    EXPECTED  RECORDED\n"
            "missing     7    1        gpu_seconds       h100    gpu-01  4         0\n"
            "duplicated  8    2        cpu_core_seconds  -       cpu-01  240       480\n"
            "mismatched  9    1        cpu_seconds_used  -       cpu-02  1.02      0.5\n");
  EXPECT_EQ(DiscrepancyCount(json::object()), 0);
}

TEST(UsageArgsTest, ParsesGroupBy) {
  EXPECT_EQ(ParseGroupBy("project").value(), (std::vector<std::string>{"project"}));
  EXPECT_EQ(ParseGroupBy("queue, project,workload_kind").value(),
            (std::vector<std::string>{"queue", "project", "workload_kind"}));
  for (const char* bad : {"", "project,", "node", "project,project", "Project"}) {
    SCOPED_TRACE(bad);
    auto got = ParseGroupBy(bad);
    ASSERT_FALSE(got.ok());
    EXPECT_TRUE(IsUsageError(got.error()));
  }
}

}  // namespace
}  // namespace unisched::cli
