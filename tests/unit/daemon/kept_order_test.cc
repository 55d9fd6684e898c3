// What an event pass offers (daemon/kept_order.h): the head of each pool's
// order as the last full pass left it, the jobs changed since, and nothing
// that left PENDING.

#include "daemon/kept_order.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "unisched/common/time.h"

namespace unisched::daemon {
namespace {

using model::Job;
using model::JobState;

Job MakeJob(model::JobId id, const std::string& pool, JobState state = JobState::kPending) {
  Job job;
  job.id = id;
  job.pool = pool;
  job.state = state;
  return job;
}

std::vector<model::JobId> Ids(const std::vector<const Job*>& jobs) {
  std::vector<model::JobId> ids;
  for (const Job* job : jobs) ids.push_back(job->id);
  return ids;
}

class KeptOrderTest : public ::testing::Test {
 protected:
  void Add(Job job) { active_.emplace(job.id, std::move(job)); }
  // A full pass offered `offered` (in this order) and left them pending in `order`.
  void Rebuild(const std::vector<model::JobId>& offered, const std::vector<uint32_t>& order) {
    std::vector<const Job*> from;
    for (model::JobId id : offered) from.push_back(&active_.at(id));
    kept_.Rebuild(from, order);
  }
  KeptOrder::ActiveJobs active_;
  KeptOrder kept_;
};

TEST_F(KeptOrderTest, OffersTheFirstOfEachPoolInTheFullPassOrder) {
  for (model::JobId id = 1; id <= 6; ++id) Add(MakeJob(id, id % 2 ? "a" : "b"));
  EXPECT_FALSE(kept_.built());
  // Offered in id order; the full pass ranked them 5 3 1 in a, 6 2 4 in b.
  Rebuild({1, 2, 3, 4, 5, 6}, {4, 2, 0, 5, 1, 3});
  EXPECT_TRUE(kept_.built());
  EXPECT_EQ(Ids(kept_.Candidates(active_, 2)), (std::vector<model::JobId>{5, 3, 6, 2}));
  EXPECT_EQ(Ids(kept_.Candidates(active_, 10)), (std::vector<model::JobId>{5, 3, 1, 6, 2, 4}));
}

TEST_F(KeptOrderTest, PassesOverJobsThatLeftPendingAndTakesTheNext) {
  for (model::JobId id = 1; id <= 4; ++id) Add(MakeJob(id, "a"));
  Rebuild({1, 2, 3, 4}, {0, 1, 2, 3});
  active_.at(1).state = JobState::kRunning;  // started by an event pass
  active_.erase(2);                          // cancelled
  active_.at(3).state = JobState::kHeld;
  EXPECT_EQ(Ids(kept_.Candidates(active_, 1)), (std::vector<model::JobId>{4}));
}

TEST_F(KeptOrderTest, AddsChangedAndReservedJobsOnceAndOnlyWhilePending) {
  for (model::JobId id = 1; id <= 3; ++id) Add(MakeJob(id, "a"));
  Rebuild({1, 2, 3}, {0, 1, 2});
  Add(MakeJob(7, "a"));  // submitted after the full pass
  Add(MakeJob(8, "a", JobState::kHeld));
  kept_.NoteChanged(7);
  kept_.NoteChanged(7);
  kept_.NoteChanged(1);  // updated, and already at the head
  kept_.NoteChanged(8);
  kept_.NoteChanged(9);  // gone
  EXPECT_EQ(kept_.changed(), 5u);
  EXPECT_EQ(Ids(kept_.Candidates(active_, 1, {3, 1})), (std::vector<model::JobId>{1, 7, 3}));
  // A full pass forgets what changed before it.
  Rebuild({1, 2, 3, 7}, {3, 0, 1, 2});
  EXPECT_EQ(kept_.changed(), 0u);
  EXPECT_EQ(Ids(kept_.Candidates(active_, 1)), (std::vector<model::JobId>{7}));
}

TEST_F(KeptOrderTest, KeepsAnArrayOnceWhereItsFirstTaskRanked) {
  Job array = MakeJob(10, "a");
  array.array = model::JobArray{};
  Add(array);
  Add(MakeJob(20, "a"));
  // Three tasks of 10 offered, then 20; ranked task, task, 20, task.
  Rebuild({10, 10, 10, 20}, {0, 1, 3, 2});
  EXPECT_EQ(Ids(kept_.Candidates(active_, 10)), (std::vector<model::JobId>{10, 20}));
}

Job Running(model::JobId id, int64_t started_ms) {
  Job job = MakeJob(id, "a", JobState::kRunning);
  job.started_at = FromUnixMillis(started_ms);
  return job;
}

// How the test shows a running job: its id and start, and whether it stops.
scheduler::RunningJob Show(const Job& job) {
  scheduler::RunningJob r;
  r.id = job.id;
  r.started_at = *job.started_at;
  r.stopping = job.cancel_requested;
  return r;
}

TEST_F(KeptOrderTest, LendsTheRunningJobsThatStillRunAsTheyDidAndThoseStartedSince) {
  for (model::JobId id = 1; id <= 4; ++id) Add(Running(id, 1000 * id));
  Add(MakeJob(5, "a"));
  // A full pass showed jobs 1-4 running, with their fair-share factors.
  scheduler::Snapshot full;
  for (model::JobId id = 1; id <= 4; ++id) full.running.push_back(Show(active_.at(id)));
  full.fairshare[{"p", "u"}] = 0.5;
  Rebuild({5}, {0});
  kept_.TakeBack(full);
  EXPECT_TRUE(full.running.empty());

  // Since: 2 ended, 3 was requeued and runs again (another start), 4 is
  // being cancelled, 5 started.
  active_.erase(2);
  active_.at(3).started_at = FromUnixMillis(9000);
  active_.at(4).cancel_requested = true;
  active_.at(5) = Running(5, 5000);
  kept_.NoteStarted(5);
  kept_.NoteStarted(5);

  scheduler::Snapshot event;
  event.fairshare[{"q", "v"}] = 0.25;
  kept_.Lend(event, active_, Show);
  std::vector<model::JobId> ids;
  for (const auto& r : event.running) ids.push_back(r.id);
  EXPECT_EQ(ids, (std::vector<model::JobId>{1, 4, 5}));
  EXPECT_FALSE(event.running[0].stopping);
  EXPECT_TRUE(event.running[1].stopping) << "a stop asked since is shown";
  EXPECT_EQ(event.fairshare.size(), 2u);

  // Taken back, and lent again: nothing converted twice, nothing lost.
  kept_.TakeBack(event);
  scheduler::Snapshot next;
  kept_.Lend(next, active_, Show);
  EXPECT_EQ(next.running.size(), 3u);
  EXPECT_EQ(next.fairshare.size(), 2u);
}

}  // namespace
}  // namespace unisched::daemon
