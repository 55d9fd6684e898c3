// /metrics of a live daemon by Prometheus' conventions: the store's commits
// observed, the ledger's discrepancy gauges present from the start and set
// by a reconciliation on request, and the whole scrape accepted by
// `promtool check metrics` (Debian's Prometheus).

#include <gtest/gtest.h>
#include <stdio.h>

#include <string>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;

TEST(MetricsTest, CommitsAreObservedAndTheLedgerGaugesExistFromTheStart) {
  TestDaemon d;
  d.Start();
  const std::string first = d.Call("GET", "/metrics").body;
  EXPECT_GE(Series(first, "unisched_ledger_discrepancies{kind=\"missing\"}"), 0) << first;
  EXPECT_GE(Series(first, "unisched_ledger_reconciled_timestamp_seconds"), 0) << first;

  d.WaitTerminal(d.Submit({{"workload", {{"kind", "hpc"}}}, {"command", {"true"}}}));
  ASSERT_EQ(d.Call("GET", "/v1/usage/reconcile").status, 200);
  const std::string after = d.Call("GET", "/metrics").body;
  EXPECT_GT(Series(after, "unisched_store_commit_seconds_count"), 0) << after;
  EXPECT_GT(Series(after, "unisched_store_batch_size_count"), 0) << after;
  EXPECT_GT(Series(after, "unisched_store_batch_size_sum"), 0) << after;
  EXPECT_GT(Series(after, "unisched_ledger_reconciled_timestamp_seconds"), 1.7e9)
      << "a reconciliation on request sets the gauges too";
  EXPECT_EQ(Series(after, "unisched_ledger_discrepancies{kind=\"missing\"}"), 0);
}

TEST(MetricsTest, TheScrapePassesPromtoolCheckMetrics) {
  TestDaemon d;
  d.Start();
  d.WaitTerminal(d.Submit({{"workload", {{"kind", "hpc"}}}, {"command", {"true"}}}));
  const std::string scrape = d.Call("GET", "/metrics").body;
  const std::string file = d.state_dir() + "/scrape.txt";
  FILE* out = ::fopen(file.c_str(), "w");
  ASSERT_NE(out, nullptr);
  ::fwrite(scrape.data(), 1, scrape.size(), out);
  ::fclose(out);
  FILE* check = ::popen(("promtool check metrics < " + file + " 2>&1").c_str(), "r");
  ASSERT_NE(check, nullptr);
  std::string said;
  char buffer[4096];
  for (size_t n; (n = ::fread(buffer, 1, sizeof buffer, check)) > 0;) said.append(buffer, n);
  const int status = ::pclose(check);
  EXPECT_EQ(status, 0) << said;
  EXPECT_EQ(said, "") << said;
}

}  // namespace
}  // namespace unisched::testing
