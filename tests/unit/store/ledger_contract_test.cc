// The store contract's ledger part (every implementation): idempotent appends, append-only, sums per attempt,
// usage grouped and filtered by time and visibility.

#include <gtest/gtest.h>

#include <random>

#include "store_test_util.h"
#include "unisched/store/store.h"

namespace unisched::store {
namespace {

const Timestamp kT0 = FromUnixMillis(1'780'000'000'000);

LedgerEntry Entry(const std::string& key, model::JobId job, const std::string& project, const std::string& metric,
                  double quantity, int64_t start_s, int64_t end_s, bool final = false) {
  LedgerEntry e;
  e.key = key;
  e.job = job;
  e.attempt = 1;
  // Moved in from std::string temporaries: assigning the short literals
  // directly trips GCC 12's -Wrestrict (PR 105329).
  e.user = std::string("alice");
  e.project = project;
  e.queue = std::string("q");
  e.pool = std::string("p");
  e.workload_kind = std::string("hpc");
  e.node = std::string("n1");
  e.metric = metric;
  e.quantity = quantity;
  e.start = kT0 + std::chrono::seconds(start_s);
  e.end = kT0 + std::chrono::seconds(end_s);
  e.final = final;
  e.recorded_at = e.end;
  return e;
}

class LedgerStoreTest : public testing::StoreContract {
 protected:
  void Append(const LedgerEntry& e) {
    Status s = store_->WriteSync([&](Transaction& t) { return t.AppendLedger(e); });
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
};

INSTANTIATE_TEST_SUITE_P(Implementations, LedgerStoreTest, ::testing::ValuesIn(testing::StoreImplementations()),
                         [](const auto& info) { return info.param; });

TEST_P(LedgerStoreTest, RepeatedKeysAddNothing) {
  Append(Entry("1/1/cpu/a", 1, "genomics", "cpu_core_seconds", 60, 0, 60));
  Append(Entry("1/1/cpu/a", 1, "genomics", "cpu_core_seconds", 60, 0, 60));  // a replayed report
  Append(Entry("1/1/cpu/b", 1, "genomics", "cpu_core_seconds", 30, 60, 90));
  const LedgerCharged c = store_->LoadLedgerCharged(1, 1);
  EXPECT_DOUBLE_EQ((c.sums.at({"cpu_core_seconds", "", "n1"})), 90);
  ASSERT_TRUE(c.until.has_value());
  EXPECT_EQ(*c.until, kT0 + std::chrono::seconds(90));
  EXPECT_FALSE(c.closed);
  EXPECT_EQ(c.duplicated_entries, 0);
  Append(Entry("1/1/cpu/final", 1, "genomics", "cpu_core_seconds", -2, 0, 88, true));
  EXPECT_TRUE(store_->LoadLedgerCharged(1, 1).closed);
  EXPECT_EQ(*store_->LoadLedgerCharged(1, 1).until, kT0 + std::chrono::seconds(90));  // interim reach only
}

TEST_P(LedgerStoreTest, UsageGroupsFiltersAndHidesOtherProjects) {
  Append(Entry("a", 1, "genomics", "cpu_core_seconds", 60, 0, 60));
  Append(Entry("b", 1, "genomics", "gpu_seconds", 15, 0, 60));
  Append(Entry("c", 2, "climate", "cpu_core_seconds", 10, 100, 200));
  UsageQuery all;
  all.group_by = {"project"};
  const auto rows = store_->QueryUsage(all);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].group.at("project"), "climate");
  EXPECT_DOUBLE_EQ(rows[0].metrics.at("cpu_core_seconds"), 10);
  EXPECT_EQ(rows[0].metrics.count("gpu_seconds"), 0u);  // absent, not zero
  EXPECT_DOUBLE_EQ(rows[1].metrics.at("gpu_seconds"), 15);

  UsageQuery window;
  window.from = kT0 + std::chrono::seconds(60);  // entries ending after it
  EXPECT_DOUBLE_EQ(store_->QueryUsage(window).at(0).metrics.at("cpu_core_seconds"), 10);

  UsageQuery hidden;
  hidden.visible_projects = std::vector<std::string>{"climate"};
  const auto visible = store_->QueryUsage(hidden);
  ASSERT_EQ(visible.size(), 1u);
  EXPECT_DOUBLE_EQ(visible[0].metrics.at("cpu_core_seconds"), 10);
}

// group_by hour: the hour of each entry's end (Unix ms / 3,600,000), from
// the rollup for whole hours and from the entries at the window's edges
// alike, in hour order, with another key.
TEST_P(LedgerStoreTest, UsageGroupsByTheHourOfEachEntrysEnd) {
  const int64_t first_hour = ToUnixMillis(kT0) / 3'600'000;
  const int64_t into_hour = ToUnixMillis(kT0) % 3'600'000 / 1000;  // kT0's seconds into its hour
  Append(Entry("a", 1, "genomics", "cpu_core_seconds", 60, 0, 60));
  Append(Entry("b", 1, "genomics", "cpu_core_seconds", 30, 60, 90));
  Append(Entry("c", 2, "genomics", "cpu_core_seconds", 7, 3600, 3600 - into_hour + 3600 + 5));  // two hours on
  Append(Entry("d", 2, "climate", "cpu_core_seconds", 5, 0, 10));
  for (bool window : {false, true}) {
    SCOPED_TRACE(window ? "an edge of the window inside an hour" : "no window");
    UsageQuery q;
    q.group_by = {"project", "hour"};
    if (window) q.from = kT0 + std::chrono::seconds(1);  // the entries' ends are all after it
    const auto rows = store_->QueryUsage(q);
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[0].group.at("project"), "climate");
    EXPECT_EQ(rows[0].group.at("hour"), std::to_string(first_hour));
    EXPECT_EQ(rows[1].group.at("project"), "genomics");
    EXPECT_EQ(rows[1].group.at("hour"), std::to_string(first_hour));
    EXPECT_DOUBLE_EQ(rows[1].metrics.at("cpu_core_seconds"), 90);
    EXPECT_EQ(rows[2].group.at("hour"), std::to_string(first_hour + 2));
    EXPECT_DOUBLE_EQ(rows[2].metrics.at("cpu_core_seconds"), 7);
  }
  UsageQuery by_job;
  by_job.group_by = {"job", "hour"};
  const auto rows = store_->QueryUsage(by_job);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].group.at("job"), "2");
  EXPECT_EQ(rows[2].group.at("hour"), std::to_string(first_hour + 2));
}

// group_by tier: storage per tier, from the rollup for whole hours and
// from the entries at a window's edge alike; other metrics have tier "".
TEST_P(LedgerStoreTest, UsageGroupsStorageByTier) {
  auto storage = [](const std::string& key, const std::string& tier, double gb_hours, int64_t end_s) {
    LedgerEntry e = Entry(key, 0, "genomics", "storage_gb_hours", gb_hours, end_s - 60, end_s);
    e.tier = tier;
    return e;
  };
  Append(storage("s1", "hot", 1.5, 60));
  Append(storage("s2", "cold", 4, 60));
  Append(storage("s3", "cold", 2, 7200));
  Append(Entry("c", 1, "genomics", "cpu_core_seconds", 60, 0, 60));
  for (bool window : {false, true}) {
    SCOPED_TRACE(window ? "an edge of the window inside an hour" : "no window");
    UsageQuery q;
    q.group_by = {"tier"};
    if (window) q.from = kT0 + std::chrono::seconds(1);
    const auto rows = store_->QueryUsage(q);
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[0].group.at("tier"), "");
    EXPECT_DOUBLE_EQ(rows[0].metrics.at("cpu_core_seconds"), 60);
    EXPECT_EQ(rows[1].group.at("tier"), "cold");
    EXPECT_DOUBLE_EQ(rows[1].metrics.at("storage_gb_hours"), 6);
    EXPECT_EQ(rows[2].group.at("tier"), "hot");
    EXPECT_DOUBLE_EQ(rows[2].metrics.at("storage_gb_hours"), 1.5);
  }
}

TEST_P(LedgerStoreTest, DuplicatedRowsAreCounted) {
  Append(Entry("a", 1, "genomics", "cpu_core_seconds", 60, 0, 60));
  Append(Entry("a-copy", 1, "genomics", "cpu_core_seconds", 60, 0, 60));  // same interval, other key
  const auto all = store_->LoadAllLedgerCharged();
  EXPECT_EQ(all.at({1, 1}).duplicated_entries, 1);
}

// Whole hours come from the hourly rollup, the window's edges from the
// entries: for random windows (on and off hour boundaries, open at either
// end) the sums equal a plain sum over the entries in (from, to].
TEST_P(LedgerStoreTest, RollupAndEdgesSumExactlyTheWindow) {
  std::mt19937 rng(7);
  std::vector<LedgerEntry> entries;
  const std::vector<std::string> projects = {"genomics", "climate"};
  // Whole-number quantities: the sums are exact in any order.
  for (int i = 0; i < 400; ++i) {
    const int64_t end_s = std::uniform_int_distribution<int64_t>(0, 6 * 3600)(rng);
    entries.push_back(Entry("k" + std::to_string(i), i + 1, projects[i % 2], i % 3 ? "cpu_core_seconds" : "gpu_seconds",
                            std::uniform_int_distribution<int>(-5, 100)(rng), end_s - 60, end_s));
  }
  // Entries exactly on an hour boundary and one millisecond around it.
  entries.push_back(Entry("edge-a", 900, "genomics", "cpu_core_seconds", 1000, 3540, 3600));
  LedgerEntry before = Entry("edge-b", 901, "genomics", "cpu_core_seconds", 2000, 3540, 3600);
  before.end -= std::chrono::milliseconds(1);
  entries.push_back(before);
  for (const auto& e : entries) Append(e);

  auto expected = [&](std::optional<Timestamp> from, std::optional<Timestamp> to, const std::string& project) {
    double sum = 0;
    for (const auto& e : entries) {
      if (e.project == project && e.metric == "cpu_core_seconds" && (!from || e.end > *from) && (!to || e.end <= *to)) {
        sum += e.quantity;
      }
    }
    return sum;
  };
  // kT0 is not on an hour boundary; these are.
  const Timestamp hour0 = FromUnixMillis(ToUnixMillis(kT0) / 3'600'000 * 3'600'000);
  std::vector<std::optional<Timestamp>> bounds = {std::nullopt,
                                                  kT0 + std::chrono::seconds(3600),
                                                  kT0 + std::chrono::seconds(3600) - std::chrono::milliseconds(1),
                                                  hour0 + std::chrono::hours(2),
                                                  hour0 + std::chrono::hours(2) - std::chrono::milliseconds(1),
                                                  hour0 + std::chrono::hours(3) + std::chrono::milliseconds(1)};
  for (int i = 0; i < 30; ++i) {
    bounds.push_back(kT0 + std::chrono::milliseconds(std::uniform_int_distribution<int64_t>(0, 6 * 3'600'000)(rng)));
  }
  int checked = 0;
  for (const auto& from : bounds) {
    for (const auto& to : bounds) {
      if (from && to && *to < *from) continue;
      UsageQuery q;
      q.from = from;
      q.to = to;
      q.group_by = {"project"};
      std::map<std::string, double> got;
      for (const auto& row : store_->QueryUsage(q)) {
        auto it = row.metrics.find("cpu_core_seconds");
        if (it != row.metrics.end()) got[row.group.at("project")] = it->second;
      }
      for (const auto& project : projects) {
        EXPECT_DOUBLE_EQ(got[project], expected(from, to, project)) << project << " window #" << checked;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 500);
}

}  // namespace
}  // namespace unisched::store
