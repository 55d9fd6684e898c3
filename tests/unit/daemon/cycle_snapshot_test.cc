// What a scheduling cycle is shown (daemon/cycle_snapshot.h): a table of
// live jobs at a fixed time, and what the snapshot holds for each.

#include "daemon/cycle_snapshot.h"

#include <gtest/gtest.h>

#include <algorithm>

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
    CycleState state{active_, nodes_, usage_, {}, holds_, reservations_, active_.size(), run_times};
    state.ended_state = [this](model::JobId id) -> std::optional<JobState> {
      auto it = ended_.find(id);
      return it == ended_.end() ? std::nullopt : std::optional<JobState>(it->second);
    };
    state.ended_array = [this](model::JobId id) -> std::optional<model::JobArray> {
      auto it = ended_arrays_.find(id);
      return it == ended_arrays_.end() ? std::nullopt : std::optional<model::JobArray>(it->second);
    };
    return BuildCycleSnapshot(config_, state, kNow);
  }
  void Add(Job job) { active_.emplace(job.id, std::move(job)); }

  config::Config config_ = testing::LoadConfigOrFail(kConfig);
  std::map<model::JobId, Job> active_;
  std::map<model::JobId, JobState> ended_;  // jobs no longer active, as the dependency book knows them
  std::map<model::JobId, model::JobArray> ended_arrays_;
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
    size_t pending, running, held_back;
    std::string reason_code;
  };
  const std::vector<Case> cases = {
      {"pending", JobState::kPending, std::nullopt, "", 1, 0, 0, ""},
      {"pending, its backoff over", JobState::kPending, kNow - std::chrono::seconds(1), "Retry", 1, 0, 0, ""},
      {"pending, in its retry backoff", JobState::kPending, kNow + std::chrono::seconds(20), "Retry", 0, 0, 1, "Retry"},
      {"pending, in a launch-retry backoff", JobState::kPending, kNow + std::chrono::seconds(2), "LaunchRetry", 0, 0, 1,
       "LaunchRetry"},
      {"pending, before its begin_at", JobState::kPending, kNow + std::chrono::hours(1), "BeginTime", 0, 0, 1,
       "BeginTime"},
      {"pending, released before its begin_at", JobState::kPending, kNow + std::chrono::hours(1), "released by alice",
       0, 0, 1, "BeginTime"},
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
    ASSERT_EQ(got.held_back.size(), c.held_back);
    if (c.held_back > 0) {
      const model::PendingInfo& info = got.held_back[0].second;
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

// Jobs 1 (RUNNING) and 2 (PENDING) are active; 3 ended COMPLETED, 4 ended
// FAILED, 5 never existed. Job 9 (PENDING) depends as the case says.
TEST_F(CycleSnapshotTest, ADependentJobIsOfferedOnlyOnceItsDependencyHolds) {
  struct Case {
    const char* dependency;
    const char* where;  // offered | waiting | never
    const char* why;    // in the reason (waiting) or the never-satisfied note
  };
  const std::vector<Case> cases = {
      {"afterok:3", "offered", ""},
      {"afterok:1", "waiting", "job 1 to end COMPLETED (afterok; it is RUNNING)"},
      {"afterok:4", "never", "job 4 ended FAILED; afterok needs COMPLETED"},
      {"afternotok:4", "offered", ""},
      {"afternotok:3", "never", "job 3 ended COMPLETED"},
      {"afterany:3:4", "offered", ""},
      {"afterany:1", "waiting", "job 1 to end (afterany"},
      {"after:1", "offered", ""},
      {"after:2", "waiting", "job 2 to start (after; it is PENDING)"},
      {"afterok:5", "never", "job 5 does not exist"},
      {"afterok:3,afterok:1", "waiting", "job 1 to end COMPLETED"},
      {"afterok:3,afterok:4", "never", "job 4 ended FAILED"},
      {"afterok:4?afterok:3", "offered", ""},
      {"afterok:4?afterok:1", "waiting", "one of: job 1 to end COMPLETED"},
      {"afterok:4?afterok:5", "never", "job 4 ended FAILED; afterok needs COMPLETED; job 5 does not exist"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.dependency);
    active_.clear();
    ended_ = {{3, JobState::kCompleted}, {4, JobState::kFailed}};
    Add(MakeJob(1, "plain", JobState::kRunning));
    Add(MakeJob(2, "plain", JobState::kPending));
    Job job = MakeJob(9, "plain", JobState::kPending);
    job.dependency = model::ParseDependency(c.dependency).value();
    Add(job);
    const CycleSnapshot got = Build();
    const bool offered = std::any_of(got.snapshot.pending.begin(), got.snapshot.pending.end(),
                                     [](const scheduler::PendingJob& p) { return p.id == 9; });
    EXPECT_EQ(offered, std::string(c.where) == "offered");
    if (std::string(c.where) == "waiting") {
      ASSERT_EQ(got.held_back.size(), 1u);
      EXPECT_EQ(got.held_back[0].first, 9);
      const model::PendingReason& reason = got.held_back[0].second.own->front();
      EXPECT_EQ(reason.code, "Dependency");
      EXPECT_NE(reason.message.find(c.why), std::string::npos) << reason.message;
    } else {
      EXPECT_TRUE(got.held_back.empty());
    }
    if (std::string(c.where) == "never") {
      ASSERT_EQ(got.never_satisfied.size(), 1u);
      EXPECT_EQ(got.never_satisfied[0].first, 9);
      EXPECT_NE(got.never_satisfied[0].second.find(c.why), std::string::npos) << got.never_satisfied[0].second;
    } else {
      EXPECT_TRUE(got.never_satisfied.empty());
    }
  }
}

TEST_F(CycleSnapshotTest, ASingletonWaitsForTheEarliestActiveJobOfItsUserAndName) {
  auto named = [](model::JobId id, JobState state, const std::string& user, const std::string& name) {
    Job job = MakeJob(id, "plain", state);
    job.user = user;
    job.name = name;
    job.dependency = model::ParseDependency("singleton").value();
    return job;
  };
  Add(named(1, JobState::kRunning, "ana", "nightly"));
  Add(named(2, JobState::kPending, "ana", "nightly"));  // waits for 1
  Add(named(3, JobState::kPending, "ana", "nightly"));  // waits for 1 too (the earliest)
  Add(named(4, JobState::kPending, "bo", "nightly"));   // another user: free
  Add(named(5, JobState::kPending, "ana", "weekly"));   // another name: free
  const CycleSnapshot got = Build();
  std::vector<model::JobId> offered;
  for (const auto& p : got.snapshot.pending) offered.push_back(p.id);
  EXPECT_EQ(offered, (std::vector<model::JobId>{4, 5}));
  ASSERT_EQ(got.held_back.size(), 2u);
  EXPECT_NE(got.held_back[0].second.own->front().message.find("job 1 of the same user and name to end (singleton)"),
            std::string::npos);

  // Once 1 has ended, only 2 goes: 3 waits for it.
  active_.erase(1);
  const CycleSnapshot next = Build();
  offered.clear();
  for (const auto& p : next.snapshot.pending) offered.push_back(p.id);
  EXPECT_EQ(offered, (std::vector<model::JobId>{2, 4, 5}));
  ASSERT_EQ(next.held_back.size(), 1u);
  EXPECT_EQ(next.held_back[0].first, 3);
}

TEST_F(CycleSnapshotTest, ARequeuedJobIsNotHeldBackByItsDependencyAgain) {
  Add(MakeJob(1, "plain", JobState::kRunning));
  Job job = MakeJob(9, "plain", JobState::kPending);
  job.dependency = model::ParseDependency("afterok:1").value();
  job.attempts.emplace_back();  // it started once: its dependency held then
  Add(job);
  const CycleSnapshot got = Build();
  ASSERT_EQ(got.snapshot.pending.size(), 1u);
  EXPECT_EQ(got.snapshot.pending[0].id, 9);
  EXPECT_TRUE(got.held_back.empty());
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

namespace unisched::daemon {
namespace {

// An array (docs/arrays.md) is offered as its waiting tasks, each with its
// own id, at most max_running minus its active tasks; the rest wait with
// JobArrayTaskLimit (the controller gives the array the reason of an
// offered task that still waits instead). A RUNNING parent (every task started) is not a running
// job: it holds nothing.
TEST_F(CycleSnapshotTest, AnArrayIsOfferedAsItsWaitingTasksUpToItsCap) {
  struct Case {
    const char* what;
    const char* indices;
    const char* waiting;
    int64_t max_running;
    int64_t completed;
    std::vector<model::JobId> offered;
    bool limited;
  };
  // first_task_id 100: the task at ordinal k has id 100 + k.
  const std::vector<Case> cases = {
      {"no cap", "1-7:2", "1-7:2", 0, 0, {100, 101, 102, 103}, false},
      {"capped, none started", "1-7:2", "1-7:2", 2, 0, {100, 101}, true},
      {"capped, two active", "1-7:2", "5-7:2", 2, 0, {}, true},
      {"capped, one active one done", "1-7:2", "5-7:2", 2, 1, {102}, true},
      {"capped, room for all left", "1-7:2", "7", 3, 1, {103}, false},
      {"a list", "0,10,20", "10,20", 0, 1, {101, 102}, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    active_.clear();
    Job parent = MakeJob(7, "plain", JobState::kPending);
    model::JobArray array;
    array.indices = model::IndexSet::Parse(c.indices, "x").value();
    array.waiting = model::IndexSet::Parse(c.waiting, "x").value();
    array.max_running = c.max_running;
    array.first_task_id = 100;
    array.tasks_completed = c.completed;
    parent.array = array;
    Add(parent);
    const CycleSnapshot got = Build();
    std::vector<model::JobId> offered;
    for (const auto& p : got.snapshot.pending) {
      offered.push_back(p.id);
      EXPECT_EQ(p.resources, parent.resources);
      EXPECT_EQ(p.submitted_at, parent.submitted_at);
    }
    EXPECT_EQ(offered, c.offered);
    ASSERT_EQ(got.held_back.size(), c.limited ? 1u : 0u);
    if (c.limited) {
      EXPECT_EQ(got.held_back[0].first, 7);
      EXPECT_EQ(got.held_back[0].second.own->front().code, "JobArrayTaskLimit");
    }
  }
  active_.clear();
  Job running = MakeJob(7, "plain", JobState::kRunning);
  running.attempts.clear();
  model::JobArray all_started;
  all_started.indices = model::IndexSet::Parse("0-3", "x").value();
  all_started.first_task_id = 100;
  running.array = all_started;
  Add(running);
  const CycleSnapshot got = Build();
  EXPECT_TRUE(got.snapshot.running.empty());
  EXPECT_TRUE(got.snapshot.pending.empty());
}

// aftercorr: task i of array 8 waits for task i of array 7 (ids 100 + i)
// to end COMPLETED. Of 7's tasks, 0 completed, 1 runs, 2 failed, 3 has not
// started; 7 has no task 4. So 8 offers tasks 0 and 4 (ids 200, 204), holds
// 1 and 3 back, and task 2 (id 202) can never start; the same when 7 has
// ended and its array comes from the book.
TEST_F(CycleSnapshotTest, AftercorrOffersATaskOnceItsCorrespondingTaskCompleted) {
  for (bool seven_ended : {false, true}) {
    SCOPED_TRACE(seven_ended ? "array 7 ended" : "array 7 active");
    active_.clear();
    ended_.clear();
    model::JobArray seven;
    seven.indices = model::IndexSet::Parse("0-3", "x").value();
    if (!seven_ended) seven.waiting = model::IndexSet::Parse("3", "x").value();
    seven.first_task_id = 100;
    Job parent7 = MakeJob(7, "plain", JobState::kRunning);
    parent7.attempts.clear();
    parent7.array = seven;
    ended_[100] = JobState::kCompleted;
    ended_[102] = JobState::kFailed;
    if (seven_ended) {
      ended_[101] = JobState::kCompleted;  // 1 completed too; 3 never ran
      ended_arrays_[7] = seven;
    } else {
      Add(parent7);
      Job running = MakeJob(101, "plain", JobState::kRunning);
      running.array_task = model::ArrayTask{7, 1};
      Add(running);
    }
    Job eight = MakeJob(8, "plain", JobState::kPending);
    model::JobArray tasks;
    tasks.indices = model::IndexSet::Parse("0-4", "x").value();
    tasks.waiting = tasks.indices;
    tasks.first_task_id = 200;
    eight.array = tasks;
    eight.dependency = model::ParseDependency("aftercorr:7").value();
    Add(eight);
    const CycleSnapshot got = Build();
    std::vector<model::JobId> offered;
    for (const auto& p : got.snapshot.pending) offered.push_back(p.id);
    std::vector<model::JobId> never;
    for (const auto& [id, why] : got.never_satisfied) never.push_back(id);
    if (seven_ended) {
      EXPECT_EQ(offered, (std::vector<model::JobId>{200, 201, 204}));
      EXPECT_EQ(never, (std::vector<model::JobId>{202, 203}));  // 3 never ran
      EXPECT_TRUE(got.held_back.empty());
    } else {
      EXPECT_EQ(offered, (std::vector<model::JobId>{200, 204}));
      EXPECT_EQ(never, (std::vector<model::JobId>{202}));
      ASSERT_EQ(got.held_back.size(), 1u);
      EXPECT_EQ(got.held_back[0].first, 8);
      EXPECT_EQ(got.held_back[0].second.own->front().code, "Dependency");
      EXPECT_NE(got.held_back[0].second.own->front().message.find("2 tasks wait, the first for task 7_1"),
                std::string::npos)
          << got.held_back[0].second.own->front().message;
    }
    EXPECT_NE(got.never_satisfied[0].second.find("task 7_2 ended FAILED"), std::string::npos)
        << got.never_satisfied[0].second;
  }
}

}  // namespace
}  // namespace unisched::daemon
