// Baseline runs in the store (unisched/store/baselines.h): what every
// implementation of Store must do.

#include <gtest/gtest.h>

#include "store_test_util.h"
#include "unisched/store/store.h"

namespace unisched::store {
namespace {

class BaselinesTest : public testing::StoreContract {
 protected:
  int64_t Insert(const std::string& pools, const std::string& record, int64_t at_ms) {
    auto id = store_->InsertBaseline({0, pools, "admin", FromUnixMillis(at_ms), record});
    EXPECT_TRUE(id.ok()) << id.error().message;
    return id.ok() ? *id : 0;
  }
  std::vector<BaselineRecord> List(const std::string& pools, int limit) {
    auto list = store_->ListBaselines(pools, limit);
    EXPECT_TRUE(list.ok()) << list.error().message;
    return list.ok() ? *list : std::vector<BaselineRecord>{};
  }
};

INSTANTIATE_TEST_SUITE_P(Implementations, BaselinesTest, ::testing::ValuesIn(testing::StoreImplementations()),
                         [](const auto& info) { return info.param; });

TEST_P(BaselinesTest, RunsAreNumberedInOrderKeptWholeAndOutliveARestart) {
  EXPECT_TRUE(List("", 10).empty());
  auto none = store_->GetBaseline(1);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  EXPECT_EQ(Insert("cpu-hpc-pool", R"({"figures":[1]})", 1'700'000'000'123), 1);
  EXPECT_EQ(Insert("cpu-hpc-pool,gpu-train-pool", R"({"figures":[2]})", 1'700'000'001'000), 2);
  Reopen();
  auto first = store_->GetBaseline(1);
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ((*first)->id, 1);
  EXPECT_EQ((*first)->pools, "cpu-hpc-pool");
  EXPECT_EQ((*first)->created_by, "admin");
  EXPECT_EQ(ToUnixMillis((*first)->created_at), 1'700'000'000'123);
  EXPECT_EQ((*first)->record, R"({"figures":[1]})");
  EXPECT_EQ(Insert("cpu-hpc-pool", "{}", 1'700'000'002'000), 3) << "numbering goes on after a restart";
}

TEST_P(BaselinesTest, ListsNewestFirstAndFiltersByExactlyThePools) {
  Insert("a", "{}", 1000);
  Insert("a,b", "{}", 2000);
  Insert("a", "{}", 3000);
  const auto all = List("", 10);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id, 3);
  EXPECT_EQ(all[2].id, 1);
  const auto of_a = List("a", 10);
  ASSERT_EQ(of_a.size(), 2u) << "a run of a and b is not a run of a";
  EXPECT_EQ(of_a[0].id, 3);
  EXPECT_EQ(of_a[1].id, 1);
  EXPECT_EQ(List("a", 1).size(), 1u);
  EXPECT_TRUE(List("b", 10).empty());
}

}  // namespace
}  // namespace unisched::store
