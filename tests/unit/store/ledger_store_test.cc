// The ledger table: idempotent appends, append-only, sums per attempt,
// usage grouped and filtered by time and visibility.

#include <gtest/gtest.h>

#include "store_test_util.h"
#include "unisched/store/store.h"

namespace unisched::store {
namespace {

using testing::Options;
using testing::TempDir;

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

class LedgerStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::Open(Options(dir_.File("unisched.db")));
    ASSERT_TRUE(store.ok()) << store.error().message;
    store_ = std::move(*store);
  }
  void Append(const LedgerEntry& e) {
    Status s = store_->WriteSync([&](Transaction& t) { return t.AppendLedger(e); });
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  TempDir dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(LedgerStoreTest, RepeatedKeysAddNothing) {
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

TEST_F(LedgerStoreTest, UsageGroupsFiltersAndHidesOtherProjects) {
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

TEST_F(LedgerStoreTest, DuplicatedRowsAreCounted) {
  Append(Entry("a", 1, "genomics", "cpu_core_seconds", 60, 0, 60));
  Append(Entry("a-copy", 1, "genomics", "cpu_core_seconds", 60, 0, 60));  // same interval, other key
  const auto all = store_->LoadAllLedgerCharged();
  EXPECT_EQ(all.at({1, 1}).duplicated_entries, 1);
}

}  // namespace
}  // namespace unisched::store
