// The controller's jobs part (daemon/job_lifecycle.h) on its own: what
// cancel, hold and release do to a job in each state, what each commits,
// and what its backend is told once the batch is in (the fake executor
// behind the port records it). The controller's tests drive the same part
// through the loop.

#include "daemon/job_lifecycle.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "testing/fake_executor.h"
#include "testing/load_config.h"
#include "testing/memory_store.h"

namespace unisched::daemon {
namespace {

using model::Job;
using model::JobId;
using model::JobState;
using Action = JobLifecycle::JobAction;

constexpr const char* kConfig = R"yaml(
pools:
  - {name: p, kind: cpu, nodes: [x86-c2m4-local-01]}
nodes:
  - {name: x86-c2m4-local-01, cpus: 2, memory_mb: 4096}
queues:
  - {name: q, pool: p}
projects:
  - name: default
)yaml";

class JobLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend::BackendSet backends;
    backends.Serve("p", &backend_);
    jobs_.SetBackends(backends);
    jobs_.Load({}, {}, clock_.Now());
  }

  // A job in `state`: admitted and stored; RUNNING ones started on the node.
  JobId JobIn(JobState state, model::Dependency dependency = {}) {
    Job job;
    job.dependency = std::move(dependency);
    job.id = *store_.ReserveJobId();
    job.user = "alice";
    job.project = "default";
    job.queue = "q";
    job.pool = "p";
    job.resources.cpus = 1;
    job.resources.memory_mb = 256;
    job.command = {"/bin/true"};
    job.submitted_at = clock_.Now();
    EXPECT_TRUE(store_
                    .WriteSync([&](store::Transaction& t) -> Status {
                      auto id = t.InsertJob(job, "");
                      return id.ok() ? Status::Ok() : Status(id.error());
                    })
                    .ok());
    jobs_.Admit(job);
    Batch batch;
    if (state == JobState::kRunning) {
      jobs_.StartAttempt(batch, job.id, {{"x86-c2m4-local-01", 1, 256, {}}}, clock_.Now());
    } else if (state == JobState::kHeld) {
      jobs_.ApplyControl(batch, job.id, Action::kHold, "admin", [](const Result<Job>&) {});
    }
    Commit(batch);
    return job.id;
  }

  // As the controller commits a batch: the writes in one transaction, then the actions.
  void Commit(Batch& batch) {
    ASSERT_TRUE(store_
                    .WriteSync([&](store::Transaction& t) -> Status {
                      for (auto& w : batch.writes) {
                        if (Status s = w(t); !s.ok()) return s;
                      }
                      return Status::Ok();
                    })
                    .ok());
    for (auto& action : batch.after_commit) action();
  }

  // The action's answer, once its batch is committed.
  Result<Job> Apply(JobId id, Action action) {
    std::optional<Result<Job>> answer;
    Batch batch;
    jobs_.ApplyControl(batch, id, action, "admin", [&](Result<Job> r) { answer = std::move(r); });
    Commit(batch);
    EXPECT_TRUE(answer.has_value());
    return answer.value_or(Result<Job>(Error::Internal("no answer")));
  }

  config::Config config_ = testing::LoadConfigOrFail(kConfig);
  const config::LiveConfig live_config_{config_};
  testing::MemoryStore store_;
  metrics::Metrics metrics_;
  FakeClock clock_;
  NodeBook nodes_{config_, clock_};
  Accounting accounting_{live_config_, store_, metrics_, clock_};
  std::vector<executor::RunResult> launch_failures_;
  JobLifecycle jobs_{live_config_, store_, metrics_, clock_, nodes_, accounting_, [this](executor::RunResult r) {
                       launch_failures_.push_back(std::move(r));
                     }};
  testing::FakeExecutor executor_;
  // Gangs' task results would come through it; these tests finish attempts
  // at the controller itself.
  backend::GangBook gangs_{[](executor::RunResult) {}};
  backend::ExecutorBackend backend_{executor_, gangs_};
};

TEST_F(JobLifecycleTest, CancelHoldAndReleaseInEachState) {
  struct Case {
    const char* name;
    JobState from;
    Action action;
    std::string error_code;  // empty: accepted
    JobState to;             // the stored state after (the same when refused)
  };
  const std::vector<Case> cases = {
      {"hold a pending job", JobState::kPending, Action::kHold, "", JobState::kHeld},
      {"release a held job", JobState::kHeld, Action::kRelease, "", JobState::kPending},
      {"cancel a pending job", JobState::kPending, Action::kCancel, "", JobState::kCancelled},
      {"cancel a held job", JobState::kHeld, Action::kCancel, "", JobState::kCancelled},
      // A running job is asked to stop; it ends when its result comes.
      {"cancel a running job", JobState::kRunning, Action::kCancel, "", JobState::kRunning},
      {"hold a held job", JobState::kHeld, Action::kHold, "invalid_state", JobState::kHeld},
      {"hold a running job", JobState::kRunning, Action::kHold, "invalid_state", JobState::kRunning},
      {"release a pending job", JobState::kPending, Action::kRelease, "invalid_state", JobState::kPending},
      {"release a running job", JobState::kRunning, Action::kRelease, "invalid_state", JobState::kRunning},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const JobId id = JobIn(c.from);
    ASSERT_EQ(store_.GetJob(id)->state, c.from);
    const Result<Job> answer = Apply(id, c.action);
    if (c.error_code.empty()) {
      ASSERT_TRUE(answer.ok()) << answer.error().message;
      EXPECT_EQ(answer->state, c.to);
    } else {
      ASSERT_FALSE(answer.ok());
      EXPECT_EQ(answer.error().code, c.error_code);
    }
    EXPECT_EQ(store_.GetJob(id)->state, c.to);
    EXPECT_EQ(jobs_.active().count(id) > 0, !model::IsTerminal(c.to));
  }
}

TEST_F(JobLifecycleTest, CancellingARunningJobStopsItsAttemptOnceAfterTheCommit) {
  const JobId id = JobIn(JobState::kRunning);
  ASSERT_EQ(executor_.Launched().size(), 1u);
  ASSERT_TRUE(Apply(id, Action::kCancel).ok());
  EXPECT_TRUE(store_.GetJob(id)->cancel_requested);
  ASSERT_EQ(executor_.Cancelled().size(), 1u);
  EXPECT_EQ(executor_.Cancelled()[0].job, id);
  EXPECT_FALSE(executor_.Cancelled()[0].preempt);
  // Asked again while it stops: nothing more is sent.
  ASSERT_TRUE(Apply(id, Action::kCancel).ok());
  EXPECT_EQ(executor_.Cancelled().size(), 1u);
}

TEST_F(JobLifecycleTest, AnEndedJobCannotBeChangedAndAnUnknownOneIsNotFound) {
  const JobId id = JobIn(JobState::kPending);
  ASSERT_TRUE(Apply(id, Action::kCancel).ok());
  const Result<Job> again = Apply(id, Action::kRelease);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, "job_finished");
  const Result<Job> unknown = Apply(999999, Action::kCancel);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().kind, ErrorKind::kNotFound);
}

TEST_F(JobLifecycleTest, CountsAndQuotaTalliesFollowTheStates) {
  const JobId running = JobIn(JobState::kRunning);
  JobIn(JobState::kPending);
  EXPECT_EQ(jobs_.counts().at({JobState::kRunning, "q", "p"}), 1);
  EXPECT_EQ(jobs_.counts().at({JobState::kPending, "q", "p"}), 1);
  EXPECT_EQ(jobs_.running_usage().QueueUser("q", "alice").jobs, 1);

  executor::RunResult done;
  done.job_id = running;
  done.attempt = 1;
  done.outcome = executor::RunOutcome::kCompleted;
  done.exit_code = 0;
  done.started_at = clock_.Now();
  done.ended_at = clock_.Now();
  Batch batch;
  jobs_.ApplyResult(batch, done);
  Commit(batch);
  EXPECT_EQ(store_.GetJob(running)->state, JobState::kCompleted);
  EXPECT_EQ(jobs_.counts().at({JobState::kRunning, "q", "p"}), 0);
  EXPECT_EQ(jobs_.counts().at({JobState::kCompleted, "q", "p"}), 1);
  EXPECT_EQ(jobs_.running_usage().QueueUser("q", "alice").jobs, 0);
  EXPECT_TRUE(jobs_.TakeWantsCycle());  // its room is free
  EXPECT_FALSE(jobs_.TakeWantsCycle());
  EXPECT_TRUE(launch_failures_.empty());
}

// started_at is the daemon's start of the attempt, shown from the moment it
// runs and never changed: the supervisor's own record of when the processes
// started (on the node's clock) is the attempt's process_started_at.
TEST_F(JobLifecycleTest, StartedAtIsSetWhenTheAttemptStartsAndNeverChanges) {
  const Timestamp launched = clock_.Now();
  const JobId id = JobIn(JobState::kRunning);
  const Job running = *store_.GetJob(id);
  ASSERT_EQ(running.attempts.size(), 1u);
  EXPECT_EQ(running.started_at, launched);
  EXPECT_EQ(running.attempts[0].started_at, launched);  // while it runs, not null
  EXPECT_FALSE(running.attempts[0].process_started_at.has_value());

  clock_.Advance(std::chrono::seconds(5));
  executor::RunResult done;
  done.job_id = id;
  done.attempt = 1;
  done.outcome = executor::RunOutcome::kCompleted;
  done.exit_code = 0;
  done.started_at = launched + std::chrono::milliseconds(40);  // the node's record
  done.ended_at = clock_.Now();
  Batch batch;
  jobs_.ApplyResult(batch, done);
  Commit(batch);
  const Job ended = *store_.GetJob(id);
  EXPECT_EQ(ended.started_at, launched);
  EXPECT_EQ(ended.attempts[0].started_at, launched);
  EXPECT_EQ(ended.attempts[0].process_started_at, done.started_at);
  EXPECT_EQ(ended.attempts[0].RunStart(), done.started_at);  // what the ledger charges from
}

// A deep queue's passes between ticks offer only the jobs changed since
// the last full pass (daemon/kept_order.h): a job waiting on another is
// among them once that one starts (after:) and once it ends (afterok, ...).
TEST_F(JobLifecycleTest, TheDependantsOfAJobThatStartsOrEndsAreChanged) {
  const JobId first = JobIn(JobState::kPending);
  const JobId after_ok = JobIn(JobState::kPending, {{{model::DependencyType::kAfterOk, {first}}}});
  const JobId after_start = JobIn(JobState::kPending, {{{model::DependencyType::kAfter, {first}}}});
  const JobId unrelated = JobIn(JobState::kPending);
  auto changed = [&] {
    std::vector<JobId> ids = jobs_.TakeChanged();
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
  };
  EXPECT_EQ(changed(), (std::vector<JobId>{first, after_ok, after_start, unrelated}));  // submitted

  Batch start;
  jobs_.StartAttempt(start, first, {{"x86-c2m4-local-01", 1, 256, {}}}, clock_.Now());
  Commit(start);
  EXPECT_EQ(changed(), (std::vector<JobId>{after_ok, after_start}));

  executor::RunResult done;
  done.job_id = first;
  done.attempt = 1;
  done.outcome = executor::RunOutcome::kCompleted;
  done.exit_code = 0;
  done.ended_at = clock_.Now();
  Batch end;
  jobs_.ApplyResult(end, done);
  Commit(end);
  EXPECT_EQ(changed(), (std::vector<JobId>{after_ok, after_start}));
  EXPECT_EQ(changed(), (std::vector<JobId>{}));
}

}  // namespace
}  // namespace unisched::daemon
