// The gang book (unisched/backend/gang.h): the tasks of a gang attempt end
// as one result, all or nothing.

#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "unisched/backend/gang.h"

namespace unisched::backend {
namespace {

using executor::RunOutcome;
using executor::RunResult;

RunResult TaskEnded(int task, RunOutcome outcome, std::optional<int> exit_code, std::string reason = {},
                    int64_t started_ms = 1000, int64_t ended_ms = 2000) {
  RunResult r;
  r.job_id = 7;
  r.attempt = 1;
  r.task = task;
  r.outcome = outcome;
  r.exit_code = exit_code;
  r.reason = std::move(reason);
  r.started_at = FromUnixMillis(started_ms);
  r.ended_at = FromUnixMillis(ended_ms);
  r.usage.wall_seconds = static_cast<double>(ended_ms - started_ms) / 1000;
  r.usage.user_cpu_seconds = 1.5;
  r.usage.max_rss_kb = 1000 * (task + 1);
  return r;
}

class GangBookTest : public ::testing::Test {
 protected:
  GangBookTest() {
    book_.SetCanceller([this](model::JobId job, int attempt, const std::vector<int>& tasks) {
      cancelled_.emplace_back(job, attempt);
      cancelled_tasks_.push_back(tasks);
    });
    book_.SetStepSink([this](int step, RunResult r) { steps_.emplace_back(step, std::move(r)); });
  }
  GangBook book_{[this](RunResult r) { delivered_.push_back(std::move(r)); }};
  std::vector<RunResult> delivered_;
  std::vector<std::pair<model::JobId, int>> cancelled_;
  std::vector<std::vector<int>> cancelled_tasks_;  // empty: all the attempt's
  std::vector<std::pair<int, RunResult>> steps_;
  const std::vector<std::string> nodes_{"n1", "n1", "n2", "n2"};
};

TEST_F(GangBookTest, AllTasksCompletedMakeOneCompletedResultOnlyOnceAllReported) {
  book_.Expect(7, 1, nodes_);
  for (int task : {2, 0, 3}) book_.OnTaskResult(TaskEnded(task, RunOutcome::kCompleted, 0));
  EXPECT_TRUE(delivered_.empty());
  EXPECT_EQ(book_.Waiting(), 1u);
  book_.OnTaskResult(TaskEnded(1, RunOutcome::kCompleted, 0, {}, 500, 4000));
  ASSERT_EQ(delivered_.size(), 1u);
  const RunResult& r = delivered_[0];
  EXPECT_EQ(r.outcome, RunOutcome::kCompleted);
  EXPECT_EQ(r.task, 0);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.reason, "");
  EXPECT_EQ(r.started_at, FromUnixMillis(500));     // the first task's start
  EXPECT_EQ(r.ended_at, FromUnixMillis(4000));      // the last task's end
  EXPECT_DOUBLE_EQ(r.usage.wall_seconds, 3.5);      // the longest task
  EXPECT_DOUBLE_EQ(r.usage.user_cpu_seconds, 6.0);  // summed over the tasks
  EXPECT_EQ(r.usage.max_rss_kb, 4000);              // the largest task's
  ASSERT_EQ(r.tasks.size(), 4u);
  EXPECT_EQ(r.tasks[2].node, "n2");
  EXPECT_TRUE(cancelled_.empty());
  EXPECT_EQ(book_.Waiting(), 0u);
}

TEST_F(GangBookTest, TheFirstFailureStopsTheRestAndNamesItsRankAndNode) {
  book_.Expect(7, 1, nodes_);
  book_.OnTaskResult(TaskEnded(0, RunOutcome::kCompleted, 0));
  book_.OnTaskResult(TaskEnded(2, RunOutcome::kFailed, 3, "exit status 3"));
  ASSERT_EQ(cancelled_.size(), 1u);  // all or nothing: the attempt is stopped on every node
  EXPECT_EQ(cancelled_[0], (std::pair<model::JobId, int>{7, 1}));
  EXPECT_TRUE(delivered_.empty());  // until the stopped tasks have ended too
  book_.OnTaskResult(TaskEnded(1, RunOutcome::kCancelled, 143, "cancelled"));
  book_.OnTaskResult(TaskEnded(3, RunOutcome::kCancelled, 143, "cancelled"));
  EXPECT_EQ(cancelled_.size(), 1u);  // stopped once
  ASSERT_EQ(delivered_.size(), 1u);
  const RunResult& r = delivered_[0];
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_EQ(r.reason, "rank 2 on node n2: exit status 3; the gang's other tasks were stopped");
  EXPECT_EQ(r.exit_code, 143);  // the highest of the tasks', as Slurm reports a job's
  ASSERT_EQ(r.tasks.size(), 4u);
  EXPECT_EQ(r.tasks[2].exit_code, 3);  // each task's own is kept
  EXPECT_EQ(r.tasks[2].outcome, RunOutcome::kFailed);
  EXPECT_EQ(r.tasks[0].outcome, RunOutcome::kCompleted);
}

TEST_F(GangBookTest, ACancelOfTheWholeGangEndsItCancelled) {
  book_.Expect(7, 1, {"n1", "n2"});
  book_.OnTaskResult(TaskEnded(1, RunOutcome::kCancelled, 143, "cancelled"));
  book_.OnTaskResult(TaskEnded(0, RunOutcome::kCancelled, 143, "cancelled"));
  ASSERT_EQ(delivered_.size(), 1u);
  EXPECT_EQ(delivered_[0].outcome, RunOutcome::kCancelled);
  EXPECT_EQ(delivered_[0].reason, "rank 1 on node n2: cancelled");
  // The first cancelled task asked for the rest to stop: harmless, they are stopping.
  EXPECT_EQ(cancelled_.size(), 1u);
}

TEST_F(GangBookTest, ATransientLaunchFailureOfOneRankMakesTheAttemptATransientLaunchFailure) {
  book_.Expect(7, 1, {"n1", "n2"});
  RunResult failed = TaskEnded(1, RunOutcome::kLaunchFailed, std::nullopt, "cannot create pipes: Too many open files");
  failed.transient = true;
  book_.OnTaskResult(failed);
  book_.OnTaskResult(TaskEnded(0, RunOutcome::kCancelled, 143, "cancelled"));
  ASSERT_EQ(delivered_.size(), 1u);
  EXPECT_EQ(delivered_[0].outcome, RunOutcome::kLaunchFailed);
  EXPECT_TRUE(delivered_[0].transient);
}

TEST_F(GangBookTest, AttemptsThatAreNotGangsPassStraightThroughAndLateTaskResultsAreDropped) {
  book_.OnTaskResult(TaskEnded(0, RunOutcome::kCompleted, 0));
  ASSERT_EQ(delivered_.size(), 1u);
  EXPECT_TRUE(delivered_[0].tasks.empty());
  book_.OnTaskResult(TaskEnded(3, RunOutcome::kCompleted, 0));  // no gang waits for it
  EXPECT_EQ(delivered_.size(), 1u);
}

TEST_F(GangBookTest, ARepeatedTaskResultCountsOnceAndForgetDropsTheGang) {
  book_.Expect(7, 1, {"n1", "n2"});
  book_.OnTaskResult(TaskEnded(0, RunOutcome::kCompleted, 0));
  book_.OnTaskResult(TaskEnded(0, RunOutcome::kCompleted, 0));
  EXPECT_TRUE(delivered_.empty());
  EXPECT_EQ(book_.Waiting(), 1u);
  book_.Forget(7, 0);
  EXPECT_EQ(book_.Waiting(), 0u);
}

TEST_F(GangBookTest, AStepsFailureStopsThatStepOnlyAndItsResultGoesToTheStepSink) {
  // The attempt is a batch script (task 0, no gang); step 1 has two ranks.
  const int stride = book_.step_stride();
  book_.ExpectStep(7, 1, 1, {"n1", "n2"});
  book_.OnTaskResult(TaskEnded(stride + 1, RunOutcome::kFailed, 2, "exit status 2"));
  ASSERT_EQ(cancelled_tasks_.size(), 1u);
  EXPECT_EQ(cancelled_tasks_[0], (std::vector<int>{stride, stride + 1}));  // the step's tasks, not the script
  book_.OnTaskResult(TaskEnded(stride, RunOutcome::kCancelled, 143, "cancelled"));
  EXPECT_TRUE(delivered_.empty());  // the attempt runs on
  ASSERT_EQ(steps_.size(), 1u);
  EXPECT_EQ(steps_[0].first, 1);
  EXPECT_EQ(steps_[0].second.outcome, RunOutcome::kFailed);
  EXPECT_EQ(steps_[0].second.reason, "rank 1 on node n2: exit status 2; the gang's other tasks were stopped");
}

TEST_F(GangBookTest, TheAttemptsEndStopsItsStepsStillRunning) {
  const int stride = book_.step_stride();
  book_.ExpectStep(7, 1, 2, {"n1"});
  book_.OnTaskResult(TaskEnded(0, RunOutcome::kCompleted, 0));  // the batch script ended
  ASSERT_EQ(delivered_.size(), 1u);
  ASSERT_EQ(cancelled_tasks_.size(), 1u);
  EXPECT_TRUE(cancelled_tasks_[0].empty());  // everything of the attempt
  book_.OnTaskResult(TaskEnded(2 * stride, RunOutcome::kCancelled, 143, "cancelled"));
  ASSERT_EQ(steps_.size(), 1u);
  EXPECT_EQ(steps_[0].first, 2);
  EXPECT_EQ(steps_[0].second.outcome, RunOutcome::kCancelled);
}

}  // namespace
}  // namespace unisched::backend
