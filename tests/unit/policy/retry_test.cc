// DecideRetry as a table: the queue's policy, the job's history, how the
// last attempt ended -> requeue or not, when, and why.

#include "unisched/policy/retry.h"

#include <gtest/gtest.h>

namespace unisched::policy {
namespace {

using model::JobState;

const Timestamp kNow = FromUnixMillis(1'700'000'000'000);

// A job whose attempts ended in `history` (the last is the one that just ended).
model::Job WithHistory(std::vector<JobState> history, std::optional<int> job_limit = std::nullopt) {
  model::Job job;
  job.id = 1;
  job.max_retries = job_limit;
  for (size_t i = 0; i < history.size(); ++i) {
    model::Attempt a;
    a.number = static_cast<int>(i) + 1;
    a.state = history[i];
    job.attempts.push_back(a);
  }
  return job;
}

struct Case {
  const char* name;
  int queue_retries;
  int backoff;
  bool requeue_on_node_fail;
  std::vector<JobState> history;
  std::optional<int> job_limit;
  bool requeue;
  const char* reason;
  int wait_seconds;
  int retry;
};

TEST(DecideRetryTest, Table) {
  using S = JobState;
  const std::vector<Case> cases = {
      {"no retries by default", 0, 10, true, {S::kFailed}, std::nullopt, false, "", 0, 1},
      {"first failure, 3 allowed", 3, 10, true, {S::kFailed}, std::nullopt, true, "Retry", 10, 1},
      {"second failure doubles the backoff", 3, 10, true, {S::kFailed, S::kFailed}, std::nullopt, true, "Retry", 20, 2},
      {"third failure", 3, 10, true, {S::kFailed, S::kFailed, S::kFailed}, std::nullopt, true, "Retry", 40, 3},
      {"fourth failure: out of retries",
       3,
       10,
       true,
       {S::kFailed, S::kFailed, S::kFailed, S::kFailed},
       std::nullopt,
       false,
       "",
       0,
       4},
      {"backoff capped at 600 s", 20, 10, true, std::vector<S>(10, S::kFailed), std::nullopt, true, "Retry", 600, 10},
      {"a base above the cap stays", 5, 900, true, {S::kFailed, S::kFailed}, std::nullopt, true, "Retry", 900, 2},
      {"the job's own limit wins", 0, 10, true, {S::kFailed}, 2, true, "Retry", 10, 1},
      {"the job may allow fewer", 5, 10, true, {S::kFailed}, 0, false, "", 0, 1},
      {"preemptions do not count",
       1,
       10,
       true,
       {S::kCancelled, S::kCancelled, S::kFailed},
       std::nullopt,
       true,
       "Retry",
       10,
       1},
      {"node failure: requeued at once", 0, 10, true, {S::kNodeFail}, std::nullopt, true, "NodeFail", 0, 1},
      {"node failures counted apart from failures",
       1,
       10,
       true,
       {S::kFailed, S::kNodeFail},
       std::nullopt,
       true,
       "NodeFail",
       0,
       1},
      {"fourth node failure: not requeued",
       0,
       10,
       true,
       {S::kNodeFail, S::kNodeFail, S::kNodeFail, S::kNodeFail},
       std::nullopt,
       false,
       "",
       0,
       4},
      {"queue does not requeue on node failure", 3, 10, false, {S::kNodeFail}, std::nullopt, false, "", 0, 0},
      {"completed: nothing to retry", 3, 10, true, {S::kCompleted}, std::nullopt, false, "", 0, 0},
      {"timeout: not retried (the wall time would hit again)",
       3,
       10,
       true,
       {S::kTimeout},
       std::nullopt,
       false,
       "",
       0,
       0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    model::QueuePolicy queue;
    queue.max_retries = c.queue_retries;
    queue.retry_backoff_seconds = c.backoff;
    queue.requeue_on_node_fail = c.requeue_on_node_fail;
    const model::Job job = WithHistory(c.history, c.job_limit);
    const RetryDecision d = DecideRetry(queue, job, job.attempts.back().state, kNow);
    EXPECT_EQ(d.requeue, c.requeue);
    EXPECT_EQ(d.retry, c.retry);
    if (!c.requeue) continue;
    EXPECT_EQ(d.state_reason, c.reason);
    EXPECT_EQ(d.eligible_at, kNow + std::chrono::seconds(c.wait_seconds));
    EXPECT_FALSE(d.message.empty());
  }
}

// An attempt of the history: how it ended, and whether as a transient
// launch failure (the command never ran; model::Attempt::transient).
struct Past {
  JobState state;
  bool transient = false;
};

model::Job WithPast(const std::vector<Past>& history, std::optional<int> job_limit = std::nullopt) {
  model::Job job = WithHistory({}, job_limit);
  for (size_t i = 0; i < history.size(); ++i) {
    model::Attempt a;
    a.number = static_cast<int>(i) + 1;
    a.state = history[i].state;
    a.transient = history[i].transient;
    job.attempts.push_back(a);
  }
  return job;
}

TEST(DecideRetryTest, TransientLaunchFailuresAreRetriedWithoutCounting) {
  using S = JobState;
  const Past launch{S::kFailed, true};  // e.g. "cannot look up user: Too many open files"
  const Past failed{S::kFailed, false};
  struct TransientCase {
    const char* name;
    int queue_retries;
    std::vector<Past> history;
    std::optional<int> job_limit;
    bool requeue;
    const char* reason;
    int wait_seconds;
    int retry;
  };
  const std::vector<TransientCase> cases = {
      {"requeued even with no retries allowed", 0, {launch}, std::nullopt, true, "LaunchRetry", 1, 1},
      {"the job's limit of 0 does not stop it", 5, {launch}, 0, true, "LaunchRetry", 1, 1},
      {"1 s doubling while they come in a row", 0, {launch, launch, launch}, std::nullopt, true, "LaunchRetry", 4, 3},
      {"capped at a minute", 0, std::vector<Past>(12, launch), std::nullopt, true, "LaunchRetry", 60, 12},
      {"the doubling starts over after a launch got through",
       3,
       {launch, launch, launch, failed, launch},
       std::nullopt,
       true,
       "LaunchRetry",
       1,
       1},
      {"earlier ones do not use up max_retries", 1, {launch, launch, failed}, std::nullopt, true, "Retry", 10, 1},
      {"nor the job's own limit", 5, {launch, failed}, 1, true, "Retry", 10, 1},
      {"permanent failures still count", 1, {failed, launch, failed}, std::nullopt, false, "", 0, 2},
      {"permanent failure: no retries by default", 0, {launch, failed}, std::nullopt, false, "", 0, 1},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    model::QueuePolicy queue;
    queue.max_retries = c.queue_retries;
    queue.retry_backoff_seconds = 10;
    const model::Job job = WithPast(c.history, c.job_limit);
    const RetryDecision d = DecideRetry(queue, job, job.attempts.back().state, kNow);
    EXPECT_EQ(d.requeue, c.requeue);
    EXPECT_EQ(d.retry, c.retry);
    if (!c.requeue) continue;
    EXPECT_EQ(d.state_reason, c.reason);
    EXPECT_EQ(d.eligible_at, kNow + std::chrono::seconds(c.wait_seconds));
  }
  // A transient flag on a node failure changes nothing: NodeFail rules.
  model::QueuePolicy queue;
  EXPECT_EQ(DecideRetry(queue, WithPast({{S::kNodeFail, true}}), S::kNodeFail, kNow).state_reason, "NodeFail");
}

TEST(DecideRetryTest, ALaunchRetryMessageSaysWhyAndThatItIsNotCounted) {
  model::QueuePolicy queue;
  model::Job job = WithPast({{JobState::kFailed, true}});
  job.attempts.back().reason = "cannot look up user 'unisched-job': Too many open files";
  EXPECT_EQ(DecideRetry(queue, job, JobState::kFailed, kNow).message,
            "attempt 1 could not be launched (cannot look up user 'unisched-job': Too many open files); launch retry 1 "
            "after 1 s (at 2023-11-14T22:13:21.000Z), not counted against max_retries");
}

TEST(DecideRetryTest, MessageSaysWhichRetryAndWhen) {
  model::QueuePolicy queue;
  queue.max_retries = 2;
  const RetryDecision d = DecideRetry(queue, WithHistory({JobState::kFailed}), JobState::kFailed, kNow);
  EXPECT_EQ(d.message, "attempt 1 failed; retry 1 of 2 after 10 s (at 2023-11-14T22:13:30.000Z)");
}

}  // namespace
}  // namespace unisched::policy
