// The steps' book (daemon/step_book.h): numbering after a restore, ends
// that replace an attempt's blanket end, and the JSON the store keeps.

#include "daemon/step_book.h"

#include <gtest/gtest.h>

#include "unisched/service/step_json.h"

namespace unisched::daemon {
namespace {

using model::JobState;

const Timestamp kT0 = FromUnixMillis(1'800'000'000'000);

service::StepView Step(model::JobId job, int attempt, int step, JobState state) {
  service::StepView view;
  view.job_id = job;
  view.attempt = attempt;
  view.step = step;
  view.state = state;
  view.nodes = {"n1", "n2"};
  view.tasks_per_node = 2;
  view.started_at = kT0;
  if (state != JobState::kRunning) view.ended_at = kT0 + std::chrono::seconds(5);
  return view;
}

TEST(StepBookTest, NumberingGoesOnAfterTheRestoredSteps) {
  StepBook book;
  book.Restore(
      {Step(7, 1, 1, JobState::kCompleted), Step(7, 1, 3, JobState::kRunning), Step(8, 2, 1, JobState::kFailed)});
  EXPECT_EQ(book.Next(7), 4);
  EXPECT_EQ(book.Next(8), 2);
  EXPECT_EQ(book.Next(9), 1);
  ASSERT_TRUE(book.Get(7, 3).ok());
  EXPECT_EQ(book.Get(7, 3)->state, JobState::kRunning);
  EXPECT_EQ(book.Get(7, 2).error().kind, ErrorKind::kNotFound);
}

TEST(StepBookTest, AnAttemptsEndEndsItsRunningStepsAndTheirOwnEndWins) {
  StepBook book;
  book.Started(Step(7, 1, 1, JobState::kRunning));
  book.Started(Step(7, 1, 2, JobState::kCompleted));
  book.Started(Step(7, 2, 3, JobState::kRunning));  // another attempt's
  const auto ended = book.EndRunning(7, 1, "its attempt ended", kT0 + std::chrono::seconds(9));
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].step, 1);
  EXPECT_EQ(ended[0].state, JobState::kCancelled);
  EXPECT_EQ(ended[0].reason, "its attempt ended");
  EXPECT_EQ(book.Get(7, 3)->state, JobState::kRunning);
  EXPECT_TRUE(book.EndRunning(7, 1, "again", kT0).empty());

  executor::RunResult result;
  result.job_id = 7;
  result.outcome = executor::RunOutcome::kCompleted;
  result.exit_code = 0;
  result.ended_at = kT0 + std::chrono::seconds(8);
  const auto own = book.Ended(7, 1, result);
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ(own->state, JobState::kCompleted);
  EXPECT_EQ(book.Get(7, 1)->exit_code, 0);
  EXPECT_FALSE(book.Ended(7, 99, result).has_value());

  const auto failed = book.Failed(7, 3, "could not be launched: no agent", kT0);
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->state, JobState::kFailed);
  EXPECT_FALSE(book.Failed(7, 3, "twice", kT0).has_value());
}

TEST(StepJsonTest, WhatTheStoreKeepsReadsBackTheSame) {
  service::StepView step = Step(7, 1, 2, JobState::kFailed);
  step.exit_code = 3;
  step.reason = "rank 1 failed";
  step.tasks = {{0, "n1", JobState::kCompleted, 0, ""}, {1, "n1", JobState::kFailed, 3, "exit 3"}};
  auto back = service::StepFromJson(service::StepToJson(step));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(service::StepToJson(*back), service::StepToJson(step));
  EXPECT_EQ(back->tasks, step.tasks);
  EXPECT_EQ(back->ended_at, step.ended_at);

  nlohmann::json broken = service::StepToJson(step);
  broken["state"] = "SIDEWAYS";
  EXPECT_FALSE(service::StepFromJson(broken).ok());
  broken.erase("state");
  EXPECT_FALSE(service::StepFromJson(broken).ok());
  // A stored document reads back through its text too; text that is not JSON is an error, not a throw.
  auto stored = service::StepFromDocument(service::StepToJson(step).dump());
  ASSERT_TRUE(stored.ok()) << stored.error().message;
  EXPECT_EQ(stored->tasks, step.tasks);
  EXPECT_FALSE(service::StepFromDocument("{\"job_id\":").ok());
}

}  // namespace
}  // namespace unisched::daemon
