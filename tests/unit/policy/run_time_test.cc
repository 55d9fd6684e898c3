// Predicted run times (policy/run_time.h): EASY++'s mean of the latest runs,
// per (user, name) then per user, and the correction of an outlived one.

#include "unisched/policy/run_time.h"

#include <gtest/gtest.h>

namespace unisched::policy {
namespace {

TEST(RunTimePredictorTest, TheMeanOfTheLatestRunsPerNameThenPerUserNeverAboveTheRequest) {
  RunTimePredictor predictor;  // the last two runs
  EXPECT_EQ(predictor.Predict("alice", "", 3600), 0) << "no run yet: plan with the request";
  predictor.Record("alice", "sim", 100);
  EXPECT_EQ(predictor.Predict("alice", "sim", 3600), 100) << "one run is the mean of one";
  predictor.Record("alice", "sim", 301);
  EXPECT_EQ(predictor.Predict("alice", "sim", 3600), 200) << "(100 + 301) / 2, rounded down";
  predictor.Record("alice", "sim", 500);
  EXPECT_EQ(predictor.Predict("alice", "sim", 3600), 400) << "only the last two: (301 + 500) / 2";
  EXPECT_EQ(predictor.Predict("alice", "sim", 300), 300) << "never above the request";
  EXPECT_EQ(predictor.Predict("alice", "sim", 0), 400) << "no request: no bound";

  predictor.Record("alice", "post", 20);
  EXPECT_EQ(predictor.Predict("alice", "post", 3600), 20) << "a name has its own history";
  EXPECT_EQ(predictor.Predict("alice", "", 3600), 260) << "the user's last two, whatever their names: (500 + 20) / 2";
  EXPECT_EQ(predictor.Predict("alice", "unseen", 3600), 260) << "an unknown name falls back to the user";
  EXPECT_EQ(predictor.Predict("bob", "sim", 3600), 0) << "another user's runs say nothing";

  predictor.Record("bob", "", 0);
  predictor.Record("bob", "", -5);
  EXPECT_EQ(predictor.Predict("bob", "", 3600), 0) << "runs that are not positive are ignored";
}

TEST(RunTimePredictorTest, HistoryIsAParameter) {
  RunTimePredictor last_only(1);
  last_only.Record("u", "", 10);
  last_only.Record("u", "", 1000);
  EXPECT_EQ(last_only.Predict("u", "", 0), 1000);
  RunTimePredictor three(3);
  for (int64_t run : {10, 20, 30, 40}) three.Record("u", "", run);
  EXPECT_EQ(three.Predict("u", "", 0), 30);
}

TEST(CorrectedPredictionTest, LengthenedByEasyPlusPlusStepsUntilBeyondWhatRan) {
  struct Case {
    int64_t predicted, elapsed, request, want;
  };
  const Case cases[] = {
      {600, 0, 3600, 600},           // not reached: unchanged
      {600, 599, 3600, 600},         // a second before its end
      {600, 600, 3600, 660},         // reached: + 1 min
      {600, 659, 3600, 660},         //
      {600, 660, 3600, 900},         // + 5 min
      {600, 900, 3600, 1500},        // + 15 min
      {600, 1500, 3600, 2400},       // + 30 min
      {600, 2400, 3600, 3600},       // + 1 h = 4200, bounded by the request
      {600, 2400, 0, 4200},          // no request: no bound
      {600, 4200, 0, 7800},          // + 2 h
      {100, 360'100, 0, 720'100},    // past + 100 h: + 200 h
      {100, 720'100, 0, 1'080'100},  // then + 300 h
      {0, 0, 0, 1},                  // a prediction is at least a second
  };
  for (const Case& c : cases) {
    EXPECT_EQ(CorrectedPrediction(c.predicted, c.elapsed, c.request), c.want)
        << c.predicted << " predicted, " << c.elapsed << " elapsed, request " << c.request;
  }
}

}  // namespace
}  // namespace unisched::policy
