// What a scheduling cycle is shown (daemon/cycle_snapshot.h): a table of
// live jobs at a fixed time, and what the snapshot holds for each.

#include "daemon/cycle_snapshot.h"

#include <gtest/gtest.h>

#include "testing/load_config.h"

namespace unisched::daemon {
namespace {

using model::Job;
using model::JobState;

constexpr const char* kConfig = R"yaml(
executor:
  kill_grace_seconds: 10
pools:
  - name: p
    kind: cpu
    nodes: [x86-c8m16-hpc-01]
nodes:
  - name: x86-c8m16-hpc-01
    cpus: 8
    memory_mb: 16384
queues:
  - name: fair
    pool: p
    policy:
      type: fairshare
  - name: plain
    pool: p
    policy:
      type: fifo
      preemptible: true
      preempt_grace_seconds: 30
projects:
  - name: genomics
)yaml";

const Timestamp kNow = FromUnixMillis(1'800'000'000'000);

Job MakeJob(model::JobId id, const std::string& queue, JobState state) {
  Job job;
  job.id = id;
  job.queue = queue;
  job.pool = "p";
  job.project = "genomics";
  job.user = "u" + std::to_string(id);
  job.state = state;
  job.priority = static_cast<int>(id);
  job.resources.cpus = 2;
  job.resources.memory_mb = 1024;
  job.resources.walltime_seconds = 600;
  job.submitted_at = kNow - std::chrono::minutes(10);
  if (state == JobState::kRunning) {
    job.started_at = kNow - std::chrono::minutes(1);
    model::Attempt a;
    a.allocation = {{"x86-c8m16-hpc-01", 2, 1024, {}}};
    job.attempts.push_back(a);
  }
  return job;
}

class CycleSnapshotTest : public ::testing::Test {
 protected:
  CycleSnapshot Build(RunTimeBook* run_times = nullptr) {
    return BuildCycleSnapshot(config_, {active_, nodes_, usage_, {}, holds_, reservations_, active_.size(), run_times},
                              kNow);
  }
  void Add(Job job) { active_.emplace(job.id, std::move(job)); }

  config::Config config_ = testing::LoadConfigOrFail(kConfig);
  std::map<model::JobId, Job> active_;
  std::vector<model::NodeUsage> nodes_;
  policy::DecayedUsage usage_{3600.0};
  service::SandboxHolds holds_;
  std::unordered_map<model::JobId, scheduler::Reservation> reservations_;
};

TEST_F(CycleSnapshotTest, EachLiveStateGoesWhereTheSchedulerExpectsIt) {
  struct Case {
    const char* what;
    JobState state;
    std::optional<Timestamp> eligible_at;
    std::string state_reason;
    size_t pending, running, backing_off;
    std::string reason_code;
  };
  const std::vector<Case> cases = {
      {"pending", JobState::kPending, std::nullopt, "", 1, 0, 0, ""},
      {"pending, its backoff over", JobState::kPending, kNow - std::chrono::seconds(1), "Retry", 1, 0, 0, ""},
      {"pending, in its retry backoff", JobState::kPending, kNow + std::chrono::seconds(20), "Retry", 0, 0, 1, "Retry"},
      {"pending, in a launch-retry backoff", JobState::kPending, kNow + std::chrono::seconds(2), "LaunchRetry", 0, 0, 1,
       "LaunchRetry"},
      {"held", JobState::kHeld, std::nullopt, "", 0, 0, 0, ""},
      {"running", JobState::kRunning, std::nullopt, "", 0, 1, 0, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    active_.clear();
    Job job = MakeJob(7, "plain", c.state);
    job.eligible_at = c.eligible_at;
    job.state_reason = c.state_reason;
    Add(job);
    const CycleSnapshot got = Build();
    EXPECT_EQ(got.snapshot.pending.size(), c.pending);
    EXPECT_EQ(got.snapshot.running.size(), c.running);
    ASSERT_EQ(got.backing_off.size(), c.backing_off);
    if (c.backing_off > 0) {
      const model::PendingInfo& info = got.backing_off[0].second;
      ASSERT_TRUE(info.own && !info.own->empty());
      EXPECT_EQ(info.own->front().code, c.reason_code);
      EXPECT_NE(info.own->front().message.find(FormatRfc3339(*c.eligible_at)), std::string::npos)
          << info.own->front().message;
      EXPECT_EQ(*info.pool, "p");
    }
    if (c.pending > 0) {
      const scheduler::PendingJob& p = got.snapshot.pending[0];
      EXPECT_EQ(p.id, 7);
      EXPECT_EQ(p.adjustment, 7);  // the job's own priority
      EXPECT_EQ(p.resources, job.resources);
    }
  }
}

TEST_F(CycleSnapshotTest, ARunningJobsRoomIsFreeAtItsWalltimeOrWhenItsStopGraceEnds) {
  struct Case {
    const char* what;
    bool cancel_requested;
    std::optional<model::JobId> preempting_for;
    int64_t walltime_seconds;
    Timestamp expected_end;
  };
  const Timestamp started = kNow - std::chrono::minutes(1);
  const Timestamp stop_asked = kNow - std::chrono::seconds(5);
  const std::vector<Case> cases = {
      {"running", false, std::nullopt, 600, started + std::chrono::seconds(600)},
      {"no wall time", false, std::nullopt, 0, Timestamp::max()},
      {"being cancelled: the kill grace", true, std::nullopt, 600, stop_asked + std::chrono::seconds(10)},
      {"being preempted: the queue's preempt grace", false, 99, 600, stop_asked + std::chrono::seconds(30)},
      {"being preempted, wall time sooner", false, 99, 62, started + std::chrono::seconds(62)},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    Job job = MakeJob(3, "plain", JobState::kRunning);
    job.resources.walltime_seconds = c.walltime_seconds;
    job.cancel_requested = c.cancel_requested;
    job.preempting_for = c.preempting_for;
    job.stop_requested_at = stop_asked;
    const scheduler::RunningJob r = SnapshotOfRunning(config_, job, kNow);
    EXPECT_EQ(r.expected_end, c.expected_end);
    EXPECT_EQ(r.started_at, started);
    EXPECT_EQ(r.stopping, c.cancel_requested);
    EXPECT_EQ(r.preempting_for, c.preempting_for);
    ASSERT_EQ(r.allocation.size(), 1u);
    EXPECT_EQ(r.allocation[0].node, "x86-c8m16-hpc-01");
  }
}

TEST_F(CycleSnapshotTest, FairshareFactorsOnlyForFairshareQueuesAndReservationsAndHoldsComeBack) {
  Add(MakeJob(1, "fair", JobState::kPending));
  Add(MakeJob(2, "plain", JobState::kPending));
  Add(MakeJob(3, "fair", JobState::kRunning));
  reservations_[2] = {2, kNow + std::chrono::hours(1), {"x86-c8m16-hpc-01"}};
  holds_[{"plain", "genomics", "u9"}] = policy::Amount{};
  const CycleSnapshot got = Build();
  EXPECT_EQ(got.snapshot.fairshare.size(), 2u);  // u1 (pending) and u3 (running), not u2
  EXPECT_TRUE(got.snapshot.fairshare.count({"genomics", "u1"}));
  EXPECT_TRUE(got.snapshot.fairshare.count({"genomics", "u3"}));
  ASSERT_EQ(got.snapshot.pending.size(), 2u);
  const auto& second = got.snapshot.pending[1];
  ASSERT_EQ(second.id, 2);
  EXPECT_EQ(second.reserved_start, kNow + std::chrono::hours(1));
  EXPECT_EQ(second.reserved_nodes, std::vector<std::string>{"x86-c8m16-hpc-01"});
  EXPECT_FALSE(got.snapshot.pending[0].reserved_start.has_value());
  ASSERT_EQ(got.snapshot.quota_holders.size(), 1u);
  EXPECT_EQ(got.snapshot.quota_holders[0].user, "u9");
}

TEST_F(CycleSnapshotTest, WithPredictionsEveryPendingAndRunningJobCarriesItsOwnOnce) {
  // u1 ran 100 s and 300 s; u3 never ran. Every request is 600 s.
  RunTimeBook run_times;
  std::vector<Job> ended;
  for (int64_t run : {100, 300}) {
    Job done = MakeJob(50 + run, "plain", JobState::kRunning);
    done.user = "u1";
    done.state = JobState::kCompleted;
    done.attempts.back().started_at = kNow - std::chrono::hours(1);
    done.attempts.back().ended_at = *done.attempts.back().started_at + std::chrono::seconds(run);
    ended.push_back(done);
  }
  run_times.Learn(ended);
  Job waiting = MakeJob(1, "plain", JobState::kPending);
  waiting.user = "u1";
  Job running = MakeJob(2, "plain", JobState::kRunning);
  running.user = "u1";
  Add(waiting);
  Add(running);
  Add(MakeJob(3, "plain", JobState::kPending));  // u3: no history

  EXPECT_EQ(Build().snapshot.pending[0].predicted_run_seconds, 0);  // no book: not planned with predictions
  const CycleSnapshot got = Build(&run_times);
  ASSERT_EQ(got.snapshot.pending.size(), 2u);
  EXPECT_EQ(got.snapshot.pending[0].predicted_run_seconds, 200);  // the mean of u1's last two
  EXPECT_EQ(got.snapshot.pending[1].predicted_run_seconds, 0);
  ASSERT_EQ(got.snapshot.running.size(), 1u);
  EXPECT_EQ(got.snapshot.running[0].predicted_run_seconds, 200);

  // A later end of u1 changes the predictor, not the predictions made.
  Job later = ended[0];
  later.id = 99;
  later.attempts.back().ended_at = *later.attempts.back().started_at + std::chrono::seconds(500);
  run_times.Ended(later);
  EXPECT_EQ(Build(&run_times).snapshot.pending[0].predicted_run_seconds, 200);
  Job fresh = MakeJob(4, "plain", JobState::kPending);
  fresh.user = "u1";
  EXPECT_EQ(run_times.PredictionFor(fresh), 400);  // (300 + 500) / 2
}

}  // namespace
}  // namespace unisched::daemon
