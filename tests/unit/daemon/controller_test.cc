// The controller's logic on an in-memory store and a fake executor
// (tests/testing): what it launches, how results, cancels, holds,
// preemption, retries, silent agent nodes and a restart change jobs. The
// fake executor runs nothing; each test plays the results back itself.

#include "daemon/controller.h"

#include <gtest/gtest.h>

#include <future>

#include "testing/fake_executor.h"
#include "testing/load_config.h"
#include "testing/memory_store.h"

namespace unisched::daemon {
namespace {

using model::Job;
using model::JobId;
using model::JobState;
using testing::Eventually;
using testing::FakeExecutor;
using testing::MemoryStore;

// Two pools: `p` with one 2-CPU local node, where a low tier may be
// preempted by a high one and a retry queue retries once; `a`, one node
// run by an agent.
constexpr const char* kConfig = R"yaml(
server:
  scheduler_tick_seconds: 0.02
health:
  heartbeat_timeout_seconds: 30
pools:
  - name: p
    kind: cpu
    backfill: easy
    nodes: [x86-c2m4-local-01]
  - name: a
    kind: cpu
    nodes: [x86-c2m4-agent-01]
nodes:
  - name: x86-c2m4-local-01
    cpus: 2
    memory_mb: 4096
  - name: x86-c2m4-agent-01
    cpus: 2
    memory_mb: 4096
    agent: true
queues:
  - name: low
    pool: p
    workload_kinds: [hpc]
    policy:
      type: fifo
      preemptible: true
      preempt_action: requeue
      preempt_grace_seconds: 5
  - name: high
    pool: p
    priority_tier: 1
    policy:
      type: fifo
      can_preempt: true
      preemptible: false
  - name: retry
    pool: p
    policy:
      type: fifo
      max_retries: 1
      preemptible: false
  - name: remote
    pool: a
    policy:
      type: fifo
      max_retries: 0
projects:
  - name: default
)yaml";

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartController(); }
  void TearDown() override {
    if (controller_) controller_->Stop();
  }

  void StartController() {
    live_config_ = std::make_unique<config::LiveConfig>(config_);
    controller_ = std::make_unique<Controller>(*live_config_, *store_, metrics_, clock_);
    backend::BackendSet backends;
    backends.Serve("p", &backend_);
    backends.Serve("a", &backend_);
    ASSERT_TRUE(controller_->SetBackends(backends).ok());
    controller_->Start();
  }

  // A restart: the controller stops, the store is reopened over the same
  // data, and a new controller starts from it.
  void Restart() {
    controller_->Stop();
    controller_.reset();
    store_->Close();
    store_ = store_->Reopen();
    StartController();
  }

  // A job as the job service commits it: routed, stored, then handed over.
  JobId Submit(const std::string& queue, int cpus, const std::string& pool = "p") {
    Job job;
    job.id = *store_->ReserveJobId();
    job.name = queue + "-job";
    job.user = "alice";
    job.project = "default";
    job.queue = queue;
    job.pool = pool;
    job.resources.cpus = cpus;
    job.resources.memory_mb = 256;
    job.resources.walltime_seconds = 3600;
    job.command = {"/bin/true"};
    job.routing = {pool, queue, "explicit queue"};
    job.submitted_at = clock_.Now();
    Status s = store_->WriteSync([&](store::Transaction& t) -> Status {
      auto id = t.InsertJob(job, "");
      return id.ok() ? Status::Ok() : Status(id.error());
    });
    EXPECT_TRUE(s.ok());
    controller_->JobCommitted(job);
    return job.id;
  }

  Job Stored(JobId id) const { return *store_->GetJob(id); }

  // Waits until the stored job satisfies `condition`; the job as it is then.
  Job WaitFor(JobId id, const std::function<bool(const Job&)>& condition) {
    EXPECT_TRUE(Eventually([&] {
      auto job = store_->GetJob(id);
      return job.ok() && condition(*job);
    })) << "job "
        << id << " is " << model::ToString(Stored(id).state);
    return Stored(id);
  }
  Job WaitForState(JobId id, JobState state) {
    return WaitFor(id, [&](const Job& j) { return j.state == state; });
  }
  executor::LaunchSpec WaitForLaunch(JobId id, int attempt) {
    EXPECT_TRUE(Eventually([&] { return executor_.LaunchOf(id, attempt).has_value(); }))
        << "job " << id << " attempt " << attempt << " was never launched";
    return executor_.LaunchOf(id, attempt).value_or(executor::LaunchSpec{});
  }

  void Finish(JobId id, int attempt, executor::RunOutcome outcome, std::optional<int> exit_code = 0,
              std::string reported_by = "") {
    executor::RunResult r;
    r.job_id = id;
    r.attempt = attempt;
    r.outcome = outcome;
    r.exit_code = exit_code;
    // As a supervisor records it: from the launch until now.
    r.started_at = Stored(id).started_at;
    r.ended_at = clock_.Now();
    r.reported_by = std::move(reported_by);
    controller_->OnRunResult(r);
  }

  bool CancelledWith(JobId id, int attempt, bool preempt) const {
    for (const auto& c : executor_.Cancelled()) {
      if (c.job == id && c.attempt == attempt && c.preempt == preempt) return true;
    }
    return false;
  }

  std::vector<std::string> EventKinds(JobId id) const {
    std::vector<std::string> kinds;
    for (const auto& e : store_->ListEvents(id)) kinds.push_back(e.kind);
    return kinds;
  }

  config::Config config_ = testing::LoadConfigOrFail(kConfig);
  std::unique_ptr<config::LiveConfig> live_config_;  // config_ as the controller sees it
  std::unique_ptr<MemoryStore> store_ = std::make_unique<MemoryStore>();
  metrics::Metrics metrics_;
  FakeClock clock_;
  FakeExecutor executor_;
  // Both pools' backend: the fake executor behind the port, as the daemon
  // puts its local executor and its agent hub.
  // Gangs' task results would come through it; these tests finish attempts
  // at the controller itself.
  backend::GangBook gangs_{[](executor::RunResult) {}};
  backend::ExecutorBackend backend_{executor_, gangs_};
  std::unique_ptr<Controller> controller_;
};

TEST_F(ControllerTest, ACommittedJobIsLaunchedOnItsPoolAndItsResultEndsIt) {
  const JobId id = Submit("low", 1);
  const executor::LaunchSpec spec = WaitForLaunch(id, 1);
  EXPECT_EQ(spec.node, "x86-c2m4-local-01");
  EXPECT_EQ(spec.argv, (std::vector<std::string>{"/bin/true"}));
  EXPECT_EQ(spec.limits.cpu_millis, 1000);
  EXPECT_EQ(spec.limits.memory_bytes, 256LL << 20);
  const Job running = WaitForState(id, JobState::kRunning);
  ASSERT_EQ(running.attempts.size(), 1u);
  EXPECT_EQ(running.attempts[0].allocation[0].node, "x86-c2m4-local-01");

  clock_.Advance(std::chrono::seconds(60));
  Finish(id, 1, executor::RunOutcome::kCompleted);
  const Job done = WaitForState(id, JobState::kCompleted);
  EXPECT_EQ(done.exit_code, 0);
  EXPECT_EQ(done.attempts[0].state, JobState::kCompleted);
  const auto kinds = EventKinds(id);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "started"), kinds.end());
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "completed"), kinds.end());
  // The ledger holds its run: one CPU for 60 s (interim charges while it
  // ran, and the final correction committed with its end).
  double core_seconds = 0;
  for (const auto& [key, quantity] : store_->LoadLedgerCharged(id, 1).sums) {
    if (std::get<0>(key) == ledger::kCpuCoreSeconds) core_seconds += quantity;
  }
  EXPECT_DOUBLE_EQ(core_seconds, 60);
  EXPECT_TRUE(Eventually([&] { return !executor_.Released().empty(); }));
}

TEST_F(ControllerTest, AJobThatDoesNotFitWaitsAndStartsWhenTheNodeFrees) {
  const JobId first = Submit("low", 2);
  WaitForLaunch(first, 1);
  const JobId second = Submit("low", 2);
  const Job waiting = WaitFor(second, [](const Job& j) { return j.state == JobState::kPending; });
  EXPECT_TRUE(waiting.attempts.empty());
  EXPECT_FALSE(executor_.LaunchOf(second, 1).has_value());
  Finish(first, 1, executor::RunOutcome::kCompleted);
  WaitForLaunch(second, 1);
  WaitForState(second, JobState::kRunning);
}

TEST_F(ControllerTest, CancellingARunningJobStopsItsAttemptAndItsResultEndsItCancelled) {
  const JobId id = Submit("low", 1);
  WaitForLaunch(id, 1);
  WaitForState(id, JobState::kRunning);
  std::promise<Result<Job>> answer;
  controller_->ControlJob(id, service::ControlPlane::JobAction::kCancel, "alice",
                          [&](Result<Job> job) { answer.set_value(std::move(job)); });
  auto answered = answer.get_future().get();
  ASSERT_TRUE(answered.ok()) << answered.error().message;
  EXPECT_TRUE(answered->cancel_requested);
  EXPECT_TRUE(Eventually([&] { return CancelledWith(id, 1, false); }));
  Finish(id, 1, executor::RunOutcome::kCancelled, 143);
  const Job cancelled = WaitForState(id, JobState::kCancelled);
  EXPECT_EQ(cancelled.attempts[0].state, JobState::kCancelled);
}

TEST_F(ControllerTest, AHeldJobDoesNotStartUntilReleased) {
  const JobId blocker = Submit("low", 2);
  WaitForLaunch(blocker, 1);
  const JobId id = Submit("low", 1);
  WaitForState(id, JobState::kPending);
  std::promise<Result<Job>> held;
  controller_->ControlJob(id, service::ControlPlane::JobAction::kHold, "alice",
                          [&](Result<Job> job) { held.set_value(std::move(job)); });
  ASSERT_TRUE(held.get_future().get().ok());
  WaitForState(id, JobState::kHeld);
  Finish(blocker, 1, executor::RunOutcome::kCompleted);
  WaitForState(blocker, JobState::kCompleted);
  // The node is free, and the held job stays where it is for a few cycles.
  clock_.Advance(std::chrono::seconds(5));
  EXPECT_FALSE(Eventually([&] { return executor_.LaunchOf(id, 1).has_value(); }, 0.3));
  EXPECT_EQ(Stored(id).state, JobState::kHeld);

  std::promise<Result<Job>> released;
  controller_->ControlJob(id, service::ControlPlane::JobAction::kRelease, "alice",
                          [&](Result<Job> job) { released.set_value(std::move(job)); });
  ASSERT_TRUE(released.get_future().get().ok());
  WaitForLaunch(id, 1);
}

TEST_F(ControllerTest, AHigherTierJobPreemptsAndTheVictimIsRequeuedToRunAgain) {
  const JobId victim = Submit("low", 2);
  WaitForLaunch(victim, 1);
  WaitForState(victim, JobState::kRunning);
  const JobId urgent = Submit("high", 2);
  ASSERT_TRUE(Eventually([&] { return CancelledWith(victim, 1, true); })) << "the victim was never asked to stop";
  EXPECT_EQ(Stored(victim).preempting_for, urgent);
  EXPECT_FALSE(executor_.LaunchOf(urgent, 1).has_value()) << "the urgent job waits for the room";

  Finish(victim, 1, executor::RunOutcome::kCancelled, 143);
  const Job requeued = WaitFor(victim, [](const Job& j) { return j.state == JobState::kPending; });
  EXPECT_EQ(requeued.state_reason, "Preempted");
  EXPECT_EQ(requeued.attempts[0].state, JobState::kCancelled);
  EXPECT_EQ(requeued.preempted_by, std::vector<JobId>{urgent});
  WaitForLaunch(urgent, 1);

  Finish(urgent, 1, executor::RunOutcome::kCompleted);
  WaitForLaunch(victim, 2);  // the victim runs again, as attempt 2
  WaitForState(victim, JobState::kRunning);
}

TEST_F(ControllerTest, AFailedAttemptIsRetriedAfterItsBackoffThenTheJobEndsFailed) {
  const JobId id = Submit("retry", 1);
  WaitForLaunch(id, 1);
  WaitForState(id, JobState::kRunning);
  Finish(id, 1, executor::RunOutcome::kFailed, 3);
  const Job waiting = WaitFor(id, [](const Job& j) { return j.state == JobState::kPending; });
  EXPECT_EQ(waiting.state_reason, "Retry");
  ASSERT_TRUE(waiting.eligible_at.has_value());
  EXPECT_FALSE(Eventually([&] { return executor_.LaunchOf(id, 2).has_value(); }, 0.3))
      << "started before its backoff ended";

  clock_.Set(*waiting.eligible_at + std::chrono::seconds(1));
  WaitForLaunch(id, 2);
  Finish(id, 2, executor::RunOutcome::kFailed, 3);
  const Job failed = WaitForState(id, JobState::kFailed);  // max_retries 1: no third attempt
  EXPECT_EQ(failed.attempts.size(), 2u);
  EXPECT_EQ(failed.exit_code, 3);
}

TEST_F(ControllerTest, ALaunchThatFailsEndsTheAttemptAndTheJobFails) {
  executor_.FailNextLaunch(Error::Unprocessable("launch_failed", "no such user"));
  const JobId id = Submit("low", 1);
  const Job failed = WaitForState(id, JobState::kFailed);
  ASSERT_EQ(failed.attempts.size(), 1u);
  EXPECT_NE(failed.attempts[0].reason.find("no such user"), std::string::npos) << failed.attempts[0].reason;
}

TEST_F(ControllerTest, AnAgentNodeSilentPastTheTimeoutGoesDownAndItsJobIsRequeued) {
  executor::Heartbeat hb;
  hb.node = "x86-c2m4-agent-01";
  hb.pool = "a";
  hb.cpus = 2;
  hb.memory_mb = 4096;
  std::promise<void> answered;
  controller_->OnAgentHeartbeat(hb, [&](HeartbeatAnswer) { answered.set_value(); });
  answered.get_future().get();

  const JobId id = Submit("remote", 1, "a");
  EXPECT_EQ(WaitForLaunch(id, 1).node, "x86-c2m4-agent-01");
  WaitForState(id, JobState::kRunning);

  clock_.Advance(std::chrono::seconds(31));  // past heartbeat_timeout_seconds
  // The attempt ended NODE_FAIL; the job is requeued (node failures are
  // retried) and waits, its only node being down.
  const Job requeued = WaitFor(id, [](const Job& j) { return j.attempts[0].state == JobState::kNodeFail; });
  EXPECT_EQ(requeued.state, JobState::kPending);
  EXPECT_TRUE(Eventually([&] {
    for (const auto& n : controller_->View()->nodes) {
      if (n.usage.spec.name == "x86-c2m4-agent-01") return n.usage.state == model::NodeState::kDown;
    }
    return false;
  }));
  EXPECT_TRUE(Eventually([&] { return CancelledWith(id, 1, false); })) << "stopped there in case it still runs";
  // A late report of the attempt from the node changes nothing.
  Finish(id, 1, executor::RunOutcome::kCompleted, 0, "x86-c2m4-agent-01");
  EXPECT_FALSE(Eventually([&] { return Stored(id).attempts[0].state != JobState::kNodeFail; }, 0.3));
  EXPECT_EQ(Stored(id).state, JobState::kPending);
  EXPECT_EQ(Stored(id).attempts.size(), 1u);
}

TEST_F(ControllerTest, AfterARestartTheRunningAttemptIsRecoveredNotLaunchedAgain) {
  const JobId id = Submit("low", 1);
  WaitForLaunch(id, 1);
  WaitForState(id, JobState::kRunning);
  Restart();
  ASSERT_TRUE(Eventually([&] { return !executor_.Recovered().empty(); }));
  const executor::LaunchSpec recovered = executor_.Recovered().front();
  EXPECT_EQ(recovered.job_id, id);
  EXPECT_EQ(recovered.attempt, 1);
  EXPECT_EQ(executor_.Launched().size(), 1u) << "no second launch of the attempt";
  // The recovered attempt still holds its node: a job needing it all waits.
  const JobId other = Submit("low", 2);
  EXPECT_FALSE(Eventually([&] { return executor_.LaunchOf(other, 1).has_value(); }, 0.3));
  Finish(id, 1, executor::RunOutcome::kCompleted);
  WaitForState(id, JobState::kCompleted);
  WaitForLaunch(other, 1);
}

}  // namespace
}  // namespace unisched::daemon
