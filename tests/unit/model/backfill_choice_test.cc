// Backfill modes with and without predicted run times, by name.

#include <gtest/gtest.h>

#include "unisched/model/cluster.h"

namespace unisched::model {
namespace {

TEST(BackfillChoiceTest, NamesRoundTripAndFcfsNeverPredicts) {
  for (const BackfillChoice choice :
       {BackfillChoice{BackfillMode::kFcfs}, BackfillChoice{BackfillMode::kEasy},
        BackfillChoice{BackfillMode::kConservative}, BackfillChoice{BackfillMode::kEasy, true},
        BackfillChoice{BackfillMode::kConservative, true}}) {
    EXPECT_EQ(ParseBackfillChoice(BackfillChoiceName(choice)), choice) << BackfillChoiceName(choice);
  }
  EXPECT_EQ(BackfillChoiceName({BackfillMode::kConservative, true}), "conservative-predicted");
  for (const char* bad :
       {"fcfs-predicted", "-predicted", "predicted", "easy-", "easy-predicted-predicted", "EASY", ""}) {
    EXPECT_FALSE(ParseBackfillChoice(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace unisched::model
