// The daemon's predicted run times (daemon/run_time_book.h): what a job's
// run is, what its runs are remembered by, and that learning from the
// store's latest ended jobs leaves the predictor as the whole history would.

#include "daemon/run_time_book.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "testing/memory_store.h"

namespace unisched::daemon {
namespace {

using model::Job;
using model::JobState;

const Timestamp kT0 = FromUnixMillis(1'800'000'000'000);

// A job of `user` named `name` that ran `run_ms` and ended `end_s` seconds after kT0.
Job Ended(model::JobId id, const std::string& user, const std::string& name, int64_t run_ms, int64_t end_s) {
  Job job;
  job.id = id;
  job.user = user;
  job.name = name;
  job.command = {"/bin/sh", "run.sh"};
  job.state = JobState::kCompleted;
  job.resources.walltime_seconds = 3600;
  job.ended_at = kT0 + std::chrono::seconds(end_s);
  if (run_ms > 0) {
    model::Attempt a;
    a.ended_at = job.ended_at;
    a.started_at = *a.ended_at - std::chrono::milliseconds(run_ms);
    job.attempts.push_back(a);
  }
  return job;
}

TEST(RunTimeBookTest, ARunIsTheLastAttemptsOnTheNodesClockRoundedUp) {
  Job job = Ended(1, "u", "n", 1500, 100);
  EXPECT_EQ(RunSecondsOf(job), 2);
  // The supervisor's own start wins over the daemon's.
  job.attempts.back().process_started_at = *job.attempts.back().ended_at - std::chrono::seconds(1);
  EXPECT_EQ(RunSecondsOf(job), 1);
  // A requeued job: only its last attempt counts.
  model::Attempt last;
  last.started_at = kT0;
  last.ended_at = kT0 + std::chrono::seconds(42);
  job.attempts.push_back(last);
  EXPECT_EQ(RunSecondsOf(job), 42);
  EXPECT_EQ(RunSecondsOf(Ended(2, "u", "n", 0, 100)), 0);  // cancelled before it started
  Job running = Ended(3, "u", "n", 1000, 100);
  running.attempts.back().ended_at.reset();
  EXPECT_EQ(RunSecondsOf(running), 0);
}

TEST(RunTimeBookTest, RunsAreRememberedByNameElseByCommandLine) {
  Job named = Ended(1, "u", "train-resnet", 1000, 1);
  EXPECT_EQ(RunTimeKey(named), "train-resnet");
  named.name.clear();
  EXPECT_EQ(RunTimeKey(named), "/bin/sh run.sh");
}

TEST(RunTimeBookTest, APredictionIsMadeOnceAndForgottenWhenItsJobEnds) {
  RunTimeBook book;
  book.Learn({Ended(1, "u", "a", 100'000, 10), Ended(2, "u", "a", 300'000, 20)});
  Job next = Ended(3, "u", "a", 0, 0);
  next.state = JobState::kPending;
  EXPECT_EQ(book.PredictionFor(next), 200);
  book.Ended(Ended(4, "u", "a", 900'000, 30));
  EXPECT_EQ(book.PredictionFor(next), 200);  // kept while the job is active
  next.state = JobState::kCancelled;
  book.Ended(next);  // never ran: teaches nothing, its prediction goes
  EXPECT_EQ(book.predictions(), 0u);
  EXPECT_EQ(book.PredictionFor(next), 600);  // asked again: made anew, (300 + 900) / 2
  // Never above the request.
  Job short_request = next;
  short_request.id = 5;
  short_request.resources.walltime_seconds = 60;
  EXPECT_EQ(book.PredictionFor(short_request), 60);
}

TEST(RunTimeBookTest, BeforeItHasLearnedAnEndTeachesNothingTheStoreWillNotReplay) {
  RunTimeBook book;
  book.Ended(Ended(1, "u", "a", 100'000, 10));
  Job next = Ended(2, "u", "a", 0, 0);
  EXPECT_EQ(book.PredictionFor(next), 0);
  EXPECT_FALSE(book.learned());
}

TEST(RunTimeBookTest, LearningFromTheStoresLatestEndsEqualsReplayingEveryEnd) {
  // Three users, names reused and not, jobs cancelled before they ran, and
  // more history than the store is asked for.
  std::vector<Job> history;
  model::JobId id = 0;
  const std::vector<std::string> users = {"ann", "ben", "cy"};
  const std::vector<std::string> names = {"a", "b", "", "c"};
  for (int i = 0; i < 120; ++i) {
    const std::string& user = users[static_cast<size_t>(i * 7 % 3)];
    const std::string& name = names[static_cast<size_t>(i * 5 % 4)];
    const int64_t run_ms = (i % 9 == 0) ? 0 : 1000 * (1 + (i * 37) % 500);
    history.push_back(Ended(++id, user, name, run_ms, i / 2));  // pairs share an end time
  }
  RunTimeBook everything;
  everything.Learn(history);

  auto store = std::make_unique<testing::MemoryStore>();
  for (const Job& job : history) {
    ASSERT_TRUE(store
                    ->WriteSync([&](store::Transaction& t) -> Status {
                      auto inserted = t.InsertJob(job, "");
                      return inserted.ok() ? Status::Ok() : Status(inserted.error());
                    })
                    .ok());
  }
  RunTimeBook from_store;
  from_store.Learn(store->LoadLatestEndedJobs(RunTimeBook::kLatestPerKey));

  for (const std::string& user : users) {
    for (const std::string& name : names) {
      Job probe = Ended(1000 + id++, user, name, 0, 0);
      SCOPED_TRACE(user + "/" + name);
      EXPECT_EQ(from_store.PredictionFor(probe), everything.PredictionFor(probe));
      EXPECT_GT(everything.PredictionFor(probe), 0);
    }
  }
}

}  // namespace
}  // namespace unisched::daemon
