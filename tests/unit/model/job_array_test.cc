// Array index sets: Slurm's --array syntax, normalised; the ordinal a task
// id is made from; removing the indices of started tasks.

#include "unisched/model/job_array.h"

#include <gtest/gtest.h>

namespace unisched::model {
namespace {

TEST(IndexSetTest, SlurmsFormsParseToOrderedRanges) {
  struct Case {
    const char* text;
    const char* canonical;
    int64_t count;
    int64_t min, max;
  };
  const std::vector<Case> cases = {
      {"0-15", "0-15", 16, 0, 15},
      {"1-1000:2", "1-999:2", 500, 1, 999},
      {"7", "7", 1, 7, 7},
      {"1,3,5-9", "1-5:2,6-9", 7, 1, 9},  // a run of step 2, then one of step 1
      {"9-12,0-3", "0-3,9-12", 8, 0, 12},
      {"1-5,3-7", "1-7", 7, 1, 7},  // repeats merged
      {"0-4000000:1000000", "0-4000000:1000000", 5, 0, 4'000'000},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto set = IndexSet::Parse(c.text, "array.indices");
    ASSERT_TRUE(set.ok()) << set.error().message;
    EXPECT_EQ(set->ToString(), c.canonical);
    EXPECT_EQ(set->Count(), c.count);
    EXPECT_EQ(set->Min(), c.min);
    EXPECT_EQ(set->Max(), c.max);
    EXPECT_EQ(IndexSet::Parse(set->ToString(), "x").value(), *set);
  }
}

TEST(IndexSetTest, BadTextIsA422NamingTheFieldAndWhatIsWrong) {
  struct Case {
    const char* text;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"", "at least one index"},
      {"1-", "whole numbers"},
      {"a-b", "whole numbers"},
      {"-3", "whole numbers"},
      {"5-1", "runs backwards"},
      {"1-9:0", "1 or more"},
      {"3:2", "a step needs a range"},
      {"1,,2", "an empty item"},
      {"1,", "an empty item"},
      {"0-4000001", "indices go up to 4000000"},
      {"0-999999,1000000-1000001", "at most 1000000 tasks"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto set = IndexSet::Parse(c.text, "array.indices");
    ASSERT_FALSE(set.ok());
    EXPECT_EQ(set.error().field, "array.indices");
    EXPECT_NE(set.error().message.find(c.says), std::string::npos) << set.error().message;
    EXPECT_NE(set.error().message.find("e.g."), std::string::npos) << set.error().message;
  }
}

TEST(IndexSetTest, OrdinalsAndIndicesAreInverse) {
  const IndexSet set = IndexSet::Parse("1-7:2,10,20-22", "x").value();
  const std::vector<int64_t> all = {1, 3, 5, 7, 10, 20, 21, 22};
  ASSERT_EQ(set.Count(), 8);
  for (size_t k = 0; k < all.size(); ++k) {
    EXPECT_EQ(set.At(static_cast<int64_t>(k)), all[k]);
    EXPECT_EQ(set.OrdinalOf(all[k]), static_cast<int64_t>(k));
  }
  for (int64_t missing : {0, 2, 8, 11, 23}) EXPECT_FALSE(set.OrdinalOf(missing).has_value()) << missing;
  EXPECT_EQ(set.First(3), (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(set.First(100), all);
}

TEST(IndexSetTest, RemovingStartedTasksSplitsRangesAndKeepsTheRest) {
  IndexSet waiting = IndexSet::Parse("1-9:2", "x").value();
  EXPECT_TRUE(waiting.Remove(1));  // the first: the range shrinks
  EXPECT_EQ(waiting.ToString(), "3-9:2");
  EXPECT_TRUE(waiting.Remove(5));  // the middle: it splits
  EXPECT_EQ(waiting.ToString(), "3,7-9:2");
  EXPECT_FALSE(waiting.Remove(5));  // gone already
  EXPECT_FALSE(waiting.Remove(4));  // never in it
  EXPECT_TRUE(waiting.Remove(9));
  EXPECT_EQ(waiting.ToString(), "3,7");
  // Stored and read back: the same indices (as one range of step 4).
  EXPECT_EQ(IndexSet::Parse(waiting.ToString(), "x").value().First(10), waiting.First(10));
  EXPECT_TRUE(waiting.Remove(3));
  EXPECT_TRUE(waiting.Remove(7));
  EXPECT_TRUE(waiting.empty());
  EXPECT_EQ(waiting.Count(), 0);
}

TEST(IndexSetTest, AHundredThousandTasksAreOneRange) {
  IndexSet set = IndexSet::Parse("0-99999", "x").value();
  EXPECT_EQ(set.ranges().size(), 1u);
  for (int64_t i = 0; i < 1000; ++i) ASSERT_TRUE(set.Remove(i));  // started in index order
  EXPECT_EQ(set.ToString(), "1000-99999");
  EXPECT_EQ(set.Count(), 99000);
}

// The whole --array text: indices and the %MAX cap, one reader for the
// CLI, #SBATCH lines and the API.
TEST(ParseArraySpecTest, ReadsTheIndicesAndTheCap) {
  auto capped = ParseArraySpec("1-1000:2%50", "array.indices");
  ASSERT_TRUE(capped.ok()) << capped.error().message;
  EXPECT_EQ(capped->indices.ToString(), "1-999:2");
  EXPECT_EQ(capped->max_running, 50);
  auto plain = ParseArraySpec("0-3", "array.indices");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->max_running, 0);
  for (const char* bad : {"1-4%0", "1-4%", "1-4%x", "1-4%1000001"}) {
    SCOPED_TRACE(bad);
    auto r = ParseArraySpec(bad, "array.indices");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().field, "array.indices");
    EXPECT_NE(r.error().message.find("the cap after '%' must be a whole number from 1 to 1000000"), std::string::npos)
        << r.error().message;
  }
  auto backwards = ParseArraySpec("5-1%2", "array.indices");
  ASSERT_FALSE(backwards.ok());
  EXPECT_NE(backwards.error().message.find("'5-1' is not an array: the range '5-1' runs backwards"), std::string::npos)
      << backwards.error().message;
}

TEST(ArrayTaskNameTest, IsSlurmsIdUnderscoreIndex) {
  EXPECT_EQ(ArrayTaskName(123, 7), "123_7");
}

}  // namespace
}  // namespace unisched::model
