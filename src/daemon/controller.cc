#include "daemon/controller.h"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>

#include "unisched/model/words.h"

namespace unisched::daemon {
namespace {

using model::Job;
using model::JobState;

constexpr std::chrono::hours kRetentionSweepEvery{1};

// How an attempt's outcome maps onto the job's state.
JobState StateOf(executor::RunOutcome outcome) {
  switch (outcome) {
    case executor::RunOutcome::kCompleted:
      return JobState::kCompleted;
    case executor::RunOutcome::kTimeout:
      return JobState::kTimeout;
    case executor::RunOutcome::kCancelled:
      return JobState::kCancelled;
    case executor::RunOutcome::kFailed:
    case executor::RunOutcome::kLaunchFailed:
    case executor::RunOutcome::kLost:
      break;
  }
  return JobState::kFailed;
}

}  // namespace

Controller::Controller(const config::Config& config, store::Store& store, metrics::Metrics& metrics, const Clock& clock)
    : config_(config),
      store_(store),
      metrics_(metrics),
      clock_(clock),
      scheduler_(scheduler::SchedulerConfig::From(config.cluster)),
      node_book_(config, clock),
      accounting_(config, store, metrics, clock),
      alerts_(config, metrics) {
  view_ = std::make_shared<service::ClusterView>();
}

Controller::~Controller() {
  Stop();
}

void Controller::Start() {
  const Timestamp started = clock_.Now();
  node_book_.Load(store_.LoadNodeStates(), started);
  job_counts_ = store_.CountJobs();
  alerts_.Load(store_.ListAlerts(true, 100000));
  // Usage is charged from now on: the time the daemon was down is not
  // charged (running jobs' records come with the accounting ledger).
  accounting_.RestoreFairshare(store_.LoadFairshareUsage(), clock_.Now());
  // Attempts to recover, with their backends (read before the loop owns active_).
  struct Recovery {
    backend::PoolBackend* backend;
    backend::AttemptLaunch launch;
  };
  std::vector<Recovery> to_recover;
  // Stops asked for before a restart, sent again once the attempts are adopted.
  std::vector<std::tuple<backend::PoolBackend*, model::JobId, int, bool>> to_stop;
  for (auto& job : store_.LoadActiveJobs()) {
    if (job.state == JobState::kRunning) {
      if (const model::Attempt* a = job.CurrentAttempt()) {
        node_book_.Apply(a->allocation, +1);
        TallyRunning(job, +1);
        accounting_.ResumeCharging(job, *a, store_.LoadLedgerCharged(job.id, a->number), clock_.Now());
        to_recover.push_back({&BackendOf(job), AttemptLaunchOf(job)});
        if (job.cancel_requested || job.preempting_for) {
          to_stop.emplace_back(&BackendOf(job), job.id, a->number,
                               !job.cancel_requested && job.preempting_for.has_value());
        }
      }
    }
    active_.emplace(job.id, std::move(job));
  }
  spdlog::info("controller: {} active jobs loaded, {} running attempts to recover", active_.size(), to_recover.size());
  for (const auto& pool : config_.cluster.pools) {
    if (pool.sandbox && ::geteuid() != 0) {
      spdlog::warn("pool {} has sandbox: true, but the daemon is not root: its jobs run without isolation", pool.name);
    }
  }
  // Control files of attempts whose end the store already holds: a daemon
  // killed between a result's commit and its Release left them. They go
  // before the loop may launch anything (a new attempt's files are not
  // leftovers) and before Recover, which collects the running ones.
  std::set<std::pair<model::JobId, int>> running_attempts;
  for (const auto& r : to_recover) running_attempts.emplace(r.launch.spec.job_id, r.launch.spec.attempt);
  for (backend::PoolBackend* b : backends_.Distinct()) b->ReleaseAllExcept(running_attempts);
  Publish();
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "us-control");
    Loop();
  });
  // Results of recovered attempts arrive through OnRunResult, after the loop runs.
  for (const auto& r : to_recover) r.backend->Recover(r.launch);
  for (const auto& [backend, id, attempt, preempt] : to_stop) backend->Cancel(id, attempt, preempt);
  ready_ = true;
}

void Controller::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
    // A clean stop keeps the fairshare usage charged since the last save.
    Batch batch;
    accounting_.AccrueFairshare(active_, batch, clock_.Now(), /*force=*/true);
    Commit(batch);
  }
}

void Controller::Post(Command command) {
  {
    std::lock_guard lock(mu_);
    inbox_.push_back(std::move(command));
  }
  wake_.notify_one();
}

std::shared_ptr<const service::ClusterView> Controller::View() const {
  std::lock_guard lock(view_mu_);
  return view_;
}

void Controller::OnAgentHeartbeat(executor::Heartbeat heartbeat, std::function<void(HeartbeatAnswer)> done) {
  Post([this, heartbeat = std::move(heartbeat), done = std::move(done)](Batch& batch) {
    ApplyHeartbeat(batch, heartbeat, done);
  });
}

void Controller::JobCommitted(Job job) {
  Post([this, job = std::move(job)](Batch&) mutable {
    ++job_counts_[{job.state, job.queue, job.pool}];
    const model::JobId id = job.id;
    active_.emplace(id, std::move(job));
    need_cycle_ = true;
  });
}

void Controller::OnRunResult(executor::RunResult result) {
  Post([this, result = std::move(result)](Batch& batch) { ApplyResult(batch, result); });
}

void Controller::ControlJob(model::JobId id, JobAction action, std::string actor,
                            std::function<void(Result<Job>)> done) {
  Post([this, id, action, actor = std::move(actor), done = std::move(done)](Batch& batch) {
    ApplyControl(batch, id, action, actor, done);
  });
}

void Controller::SetNodeState(std::string node, bool drain, std::string reason, std::string actor,
                              std::function<void(Result<service::ClusterView::Node>)> done) {
  Post([this, node = std::move(node), drain, reason = std::move(reason), actor = std::move(actor),
        done = std::move(done)](Batch& batch) {
    spdlog::info("node {}: {} by {}", node, drain ? "drain" : "resume", actor);
    ApplyNodeState(batch, node, drain, reason, actor, done);
  });
}

void Controller::Loop() {
  using SteadyClock = std::chrono::steady_clock;
  const auto tick = std::chrono::milliseconds(static_cast<int64_t>(config_.server.scheduler_tick_seconds * 1000));
  auto next_tick = SteadyClock::now() + tick;
  // A cycle costs time linear in the pending jobs. To keep the control thread
  // responsive with a deep backlog, a cycle may start only once the time since
  // the previous one is at least kCycleSpacing times that cycle's duration: at
  // most 1/(1+kCycleSpacing) of the thread goes to cycles. A short queue
  // (cycles of microseconds) is never delayed noticeably.
  constexpr int kCycleSpacing = 3;
  SteadyClock::time_point next_cycle_allowed = SteadyClock::now();
  while (true) {
    std::deque<Command> commands;
    {
      std::unique_lock lock(mu_);
      const auto deadline = need_cycle_ ? std::min(next_tick, next_cycle_allowed) : next_tick;
      wake_.wait_until(lock, deadline, [this] { return stopping_ || !inbox_.empty(); });
      if (stopping_) break;
      commands.swap(inbox_);
    }
    Batch batch;
    for (auto& command : commands) command(batch);
    const Timestamp now = clock_.Now();
    if (SteadyClock::now() >= next_tick) {
      next_tick = SteadyClock::now() + tick;
      need_cycle_ = true;  // refresh pending reasons even when nothing happened
      if (now >= next_retention_sweep_) SweepRetention(batch, now);
      CheckHeartbeats(batch, now);
      alerts_.Evaluate(
          batch,
          {&node_book_.nodes(), &node_book_.reasons(), &active_, ledger_discrepancies_.load(), last_store_error_}, now);
    }
    accounting_.ChargeRunningIfDue(active_, batch, now);
    if (need_cycle_ && SteadyClock::now() >= next_cycle_allowed) {
      const auto started = SteadyClock::now();
      RunCycle(batch, now);
      const auto finished = SteadyClock::now();
      next_cycle_allowed = finished + kCycleSpacing * (finished - started);
    }
    // The view goes out before the commit makes the batch visible in the
    // store and answers its callers: a client that reads a job as RUNNING,
    // or got the answer to a cancel, must find that in the view admission
    // checks quotas against (published after the commit, a submission could
    // slip in over a quota in between). Until the commit the view is only
    // ahead of the store by what the batch is about to write.
    Publish();
    Commit(batch);
  }
}

void Controller::Transition(Batch& batch, Job& job, JobState to, std::string reason, const std::string& event_kind,
                            const std::string& message) {
  if (job.state != to) {
    --job_counts_[{job.state, job.queue, job.pool}];
    ++job_counts_[{to, job.queue, job.pool}];
    if (model::IsTerminal(to)) metrics_.CountFinish(std::string(model::ToString(to)), job.pool);
  }
  job.state = to;
  job.state_reason = std::move(reason);
  batch.writes.push_back(
      [copy = job, event = store::JobEvent{clock_.Now(), event_kind, message}](store::Transaction& t) -> Status {
        if (auto s = t.UpdateJob(copy); !s.ok()) return s;
        return t.AppendEvent(copy.id, event);
      });
}

void Controller::RunCycle(Batch& batch, Timestamp now) {
  need_cycle_ = false;
  accounting_.AccrueFairshare(active_, batch, now);
  accounting_.RefreshBudgets(now);
  size_t pending_jobs = 0;
  for (const auto& [key, count] : job_counts_) {
    if (std::get<0>(key) == JobState::kPending) pending_jobs += static_cast<size_t>(std::max<int64_t>(count, 0));
  }
  CycleSnapshot built = BuildCycleSnapshot(config_,
                                           {active_, node_book_.nodes(), accounting_.fairshare(),
                                            accounting_.BudgetUse(), sandbox_holds_, reservations_, pending_jobs},
                                           now);
  scheduler::Snapshot& snapshot = built.snapshot;
  auto& backing_off = built.backing_off;
  if (snapshot.pending.empty()) {
    if (!pending_->empty() || !backing_off.empty()) {
      auto infos = std::make_shared<service::PendingInfoMap>();
      for (auto& [id, info] : backing_off) infos->emplace(id, std::move(info));
      infos->Seal();
      pending_ = std::move(infos);
    }
    reservations_.clear();
    return;
  }
  const auto started = std::chrono::steady_clock::now();
  scheduler::Plan plan = scheduler_.Decide(snapshot, now);
  metrics_.ObserveCycle(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());

  for (auto& start : plan.starts) {
    auto it = active_.find(start.job);
    if (it == active_.end() || it->second.state != JobState::kPending) continue;
    Job& job = it->second;
    node_book_.Apply(start.allocation, +1);
    model::Attempt attempt;
    attempt.number = static_cast<int>(job.attempts.size()) + 1;
    attempt.allocation = start.allocation;
    attempt.state = JobState::kRunning;
    job.attempts.push_back(attempt);
    job.started_at = now;
    job.eligible_at.reset();
    TallyRunning(job, +1);
    accounting_.BeginCharging(job.id, attempt.number, now);
    const std::string where = attempt.allocation.empty()
                                  ? "handed to backend " + BackendNameOf(job) + " of pool " + job.pool
                                  : "on " + model::Join(job.NodeNames(), ',');
    Transition(batch, job, JobState::kRunning, "", "started",
               "attempt " + std::to_string(attempt.number) + " " + where);
    metrics_.CountStart(job.pool);
    // Launch only after the RUNNING state is durable: a crash in between is
    // recovered by launching the attempt then (it never claimed its directory).
    batch.after_commit.push_back([this, backend = &BackendOf(job), launch = AttemptLaunchOf(job)] {
      if (Status s = backend->Launch(launch); !s.ok()) {
        executor::RunResult failed = executor::LaunchFailure(launch.spec.job_id, launch.spec.attempt, s.error());
        failed.ended_at = clock_.Now();
        OnRunResult(std::move(failed));
      }
    });
  }
  for (const auto& preemption : plan.preemptions) ApplyPreemption(batch, preemption);
  reservations_.clear();
  for (auto& r : plan.reservations) reservations_.emplace(r.job, std::move(r));
  // Pending jobs by pool and first reason: what an alert on "GPU jobs stuck
  // on quota" reads. Series of a (pool, code) no job has any more go to 0.
  std::map<std::pair<std::string, std::string>, int> by_reason;
  for (auto& [key, count] : pending_by_reason_) by_reason[key] = 0;
  for (const auto& [id, info] : plan.pending) {
    auto job = active_.find(id);
    if (job == active_.end()) continue;
    const std::string code = info.own && !info.own->empty() ? info.own->front().code
                             : info.jobs_ahead > 0          ? "Priority"
                                                            : "None";
    ++by_reason[{job->second.pool, code}];
  }
  for (const auto& [key, count] : by_reason) metrics_.SetPendingByReason(key.first, key.second, count);
  pending_by_reason_ = std::move(by_reason);
  if (!backing_off.empty()) {
    for (auto& [id, info] : backing_off) plan.pending.emplace(id, std::move(info));
    plan.pending.Seal();
  }
  pending_ = std::make_shared<const service::PendingInfoMap>(std::move(plan.pending));
}

void Controller::ApplyPreemption(Batch& batch, const scheduler::Preemption& p) {
  auto it = active_.find(p.victim);
  if (it == active_.end() || it->second.state != JobState::kRunning || it->second.preempting_for ||
      it->second.cancel_requested) {
    return;
  }
  Job& victim = it->second;
  victim.preempting_for = p.preemptor;
  victim.stop_requested_at = clock_.Now();
  const std::string then = p.requeue ? "then back to PENDING" : "then CANCELLED";
  const std::string message = "preempted by job " + std::to_string(p.preemptor) + ": SIGTERM, SIGKILL after " +
                              std::to_string(p.grace_seconds) + " s, " + then;
  batch.writes.push_back(
      [copy = victim, victim_event = store::JobEvent{clock_.Now(), "preempted", message}, preemptor = p.preemptor,
       preemptor_event =
           store::JobEvent{clock_.Now(), "preempting", "preempting job " + std::to_string(p.victim) + " to make room"}](
          store::Transaction& t) -> Status {
        if (auto s = t.UpdateJob(copy); !s.ok()) return s;
        if (auto s = t.AppendEvent(copy.id, victim_event); !s.ok()) return s;
        return t.AppendEvent(preemptor, preemptor_event);
      });
  batch.after_commit.push_back([backend = &BackendOf(victim), id = victim.id,
                                attempt = victim.CurrentAttempt()->number] { backend->Cancel(id, attempt, true); });
  metrics_.CountPreemption(victim.pool, victim.queue);
  spdlog::info("job {} preempted by job {}", p.victim, p.preemptor);
}

void Controller::FinishPreemption(Batch& batch, Job& job, model::Attempt& attempt) {
  const model::JobId preemptor = *job.preempting_for;
  const model::QueueSpec* queue = config_.cluster.FindQueue(job.queue);
  const bool requeue = !queue || queue->policy.preempt_action == model::PreemptAction::kRequeue;
  attempt.state = JobState::kCancelled;
  attempt.reason = "preempted by job " + std::to_string(preemptor);
  job.preempting_for.reset();
  job.stop_requested_at.reset();
  job.preempted_by.push_back(preemptor);
  need_cycle_ = true;
  if (requeue) {
    job.exit_code.reset();
    job.started_at.reset();
    job.ended_at.reset();
    Transition(batch, job, JobState::kPending, "Preempted", "requeued",
               "preempted by job " + std::to_string(preemptor) + "; back to PENDING for attempt " +
                   std::to_string(attempt.number + 1));
    return;
  }
  Transition(batch, job, JobState::kCancelled, "Preempted", "cancelled",
             "preempted by job " + std::to_string(preemptor) + "; its queue cancels preempted jobs");
  active_.erase(job.id);
}

void Controller::CountSandbox(const std::string& queue, const std::string& project, const std::string& user,
                              const policy::Amount& amount, int sign) {
  // An API sandbox holds a slot of its queue like a running job: the
  // scheduler's max_concurrency and quota checks count it (docs/sandboxes.md).
  Post([this, queue, project, user, amount, sign](Batch&) {
    const policy::JobScope scope{queue, project, user};
    policy::Amount& held = sandbox_holds_[{queue, project, user}];
    if (sign > 0) {
      running_usage_.Add(scope, amount);
      held += amount;
    } else {
      running_usage_.Remove(scope, amount);
      held -= amount;
      if (held.jobs <= 0) sandbox_holds_.erase({queue, project, user});
    }
    published_sandbox_holds_ = std::make_shared<const service::SandboxHolds>(sandbox_holds_);
  });
}

void Controller::TallyRunning(const Job& job, int sign) {
  const policy::JobScope scope{job.queue, job.project, job.user};
  const policy::Amount amount = policy::AmountOf(job.resources);
  if (sign > 0) {
    running_usage_.Add(scope, amount);
  } else {
    running_usage_.Remove(scope, amount);
  }
}

void Controller::ReleaseAllocation(const model::Attempt& attempt) {
  node_book_.Apply(attempt.allocation, -1);
}

void Controller::ApplyResult(Batch& batch, const executor::RunResult& result) {
  auto it = active_.find(result.job_id);
  model::Attempt* attempt = it == active_.end() ? nullptr : it->second.CurrentAttempt();
  if (!attempt || attempt->number != result.attempt || it->second.state != JobState::kRunning) {
    spdlog::info("ignoring report of stale attempt {}.{}", result.job_id, result.attempt);
    // The store holds how this attempt ended (or its job is gone): its
    // control files have no more work to do once this batch is in too.
    // Which backend held it is not known here: each ignores what it does not hold.
    batch.after_commit.push_back([this, id = result.job_id, number = result.attempt] {
      for (backend::PoolBackend* b : backends_.Distinct()) b->Release(id, number);
    });
    return;
  }
  // An agent's report counts only for an attempt on its own node (the hub
  // checks this too; this is the authority's own check).
  if (!result.reported_by.empty() &&
      std::none_of(attempt->allocation.begin(), attempt->allocation.end(),
                   [&](const model::NodeAllocation& a) { return a.node == result.reported_by; })) {
    spdlog::warn("ignoring report of attempt {}.{} from node {}: the attempt does not run there", result.job_id,
                 result.attempt, result.reported_by);
    return;
  }
  Job& job = it->second;
  const Timestamp now = clock_.Now();
  const JobState to = StateOf(result.outcome);
  // Once this batch is committed the store has the result, so the attempt's
  // control files (on a tmpfs, counted per attempt) have done their work.
  batch.after_commit.push_back(
      [backend = &BackendOf(job), id = result.job_id, number = result.attempt] { backend->Release(id, number); });
  TallyRunning(job, -1);
  // A backend that places jobs says where it ran them; no other report may.
  if (attempt->allocation.empty() && !result.placed_on.empty()) attempt->placed_on = result.placed_on;
  if (job.preempting_for && result.outcome == executor::RunOutcome::kCancelled && !job.cancel_requested) {
    attempt->started_at = result.started_at;
    attempt->ended_at = result.ended_at.value_or(now);
    attempt->exit_code = result.exit_code;
    attempt->usage = result.usage;
    ReleaseAllocation(*attempt);
    accounting_.CloseCharging(batch, job, *attempt);
    FinishPreemption(batch, job, *attempt);
    return;
  }
  // It ended on its own (or was cancelled by a person) while being preempted.
  job.preempting_for.reset();
  attempt->state = to;
  attempt->started_at = result.started_at;
  attempt->ended_at = result.ended_at.value_or(now);
  attempt->exit_code = result.exit_code;
  attempt->reason = result.reason;
  attempt->usage = result.usage;
  attempt->transient = result.outcome == executor::RunOutcome::kLaunchFailed && result.transient;
  job.exit_code = result.exit_code;
  job.ended_at = attempt->ended_at;
  if (result.started_at) job.started_at = result.started_at;
  ReleaseAllocation(*attempt);
  accounting_.CloseCharging(batch, job, *attempt);
  if (to == JobState::kFailed && !job.cancel_requested) {
    // A node short of descriptors for a moment is no black hole: draining
    // it would turn a squeeze into an outage (its launches are retried).
    if (!attempt->transient && node_book_.CountFailure(batch, attempt->allocation, now)) need_cycle_ = true;
    if (RequeueForRetry(batch, job, to, now)) return;
  }
  std::string reason = result.reason;
  if (to == JobState::kCancelled && reason.empty()) reason = "cancelled";
  std::string message = std::string(executor::ToString(result.outcome));
  if (result.exit_code) message += ", exit code " + std::to_string(*result.exit_code);
  if (!result.reason.empty()) message += ": " + result.reason;
  Transition(batch, job, to, reason, std::string(executor::ToString(result.outcome)), message);
  active_.erase(it);
  need_cycle_ = true;
}

bool Controller::RequeueForRetry(Batch& batch, Job& job, JobState ended, Timestamp now) {
  const model::QueueSpec* queue = config_.cluster.FindQueue(job.queue);
  if (!queue) return false;
  const policy::RetryDecision retry = policy::DecideRetry(queue->policy, job, ended, now);
  if (!retry.requeue) return false;
  job.exit_code.reset();
  job.started_at.reset();
  job.ended_at.reset();
  job.cancel_requested = false;
  job.stop_requested_at.reset();
  job.eligible_at.reset();
  if (retry.eligible_at > now) job.eligible_at = retry.eligible_at;
  Transition(batch, job, JobState::kPending, retry.state_reason, "requeued", retry.message);
  spdlog::info("job {}: {}", job.id, retry.message);
  need_cycle_ = true;
  return true;
}

void Controller::ApplyControl(Batch& batch, model::JobId id, JobAction action, const std::string& actor,
                              const std::function<void(Result<Job>)>& done) {
  auto it = active_.find(id);
  if (it == active_.end()) {
    auto stored = store_.GetJob(id);
    if (!stored.ok()) {
      done(stored.error());
      return;
    }
    done(Error::Conflict(
        "job_finished", "job " + std::to_string(id) + " already ended " + std::string(model::ToString(stored->state))));
    return;
  }
  Job& job = it->second;
  auto reply_after_commit = [&batch, &done](const Job& copy) {
    batch.after_commit.push_back([done, copy] { done(copy); });
  };
  switch (action) {
    case JobAction::kCancel:
      if (job.state == JobState::kRunning) {
        if (!job.cancel_requested) {
          job.cancel_requested = true;
          job.stop_requested_at = clock_.Now();
          batch.writes.push_back(
              [copy = job, event = store::JobEvent{clock_.Now(), "cancel_requested", "cancel requested by " + actor}](
                  store::Transaction& t) -> Status {
                if (auto s = t.UpdateJob(copy); !s.ok()) return s;
                return t.AppendEvent(copy.id, event);
              });
          batch.after_commit.push_back([backend = &BackendOf(job), id, attempt = job.CurrentAttempt()->number] {
            backend->Cancel(id, attempt, false);
          });
        }
        reply_after_commit(job);
        return;
      }
      job.ended_at = clock_.Now();
      Transition(batch, job, JobState::kCancelled, "cancelled by " + actor, "cancelled", "cancelled by " + actor);
      reply_after_commit(job);
      active_.erase(it);
      need_cycle_ = true;
      return;
    case JobAction::kHold:
      if (job.state != JobState::kPending) {
        done(Error::Conflict("invalid_state", "only PENDING jobs can be held; job " + std::to_string(id) + " is " +
                                                  std::string(model::ToString(job.state))));
        return;
      }
      Transition(batch, job, JobState::kHeld, "held by " + actor, "held", "held by " + actor);
      reply_after_commit(job);
      need_cycle_ = true;
      return;
    case JobAction::kRelease:
      if (job.state != JobState::kHeld) {
        done(Error::Conflict("invalid_state", "only HELD jobs can be released; job " + std::to_string(id) + " is " +
                                                  std::string(model::ToString(job.state))));
        return;
      }
      Transition(batch, job, JobState::kPending, "", "released", "released by " + actor);
      reply_after_commit(job);
      need_cycle_ = true;
      return;
  }
}

void Controller::ApplyNodeState(Batch& batch, const std::string& name, bool drain, const std::string& reason,
                                const std::string& actor,
                                const std::function<void(Result<service::ClusterView::Node>)>& done) {
  model::NodeUsage* node = node_book_.Find(name);
  if (!node) {
    done(Error::NotFound("no node " + name));
    return;
  }
  service::ClusterView::Node view = node_book_.DrainOrResume(batch, *node, drain, reason, actor);
  need_cycle_ = true;
  batch.after_commit.push_back([done, view = std::move(view)] { done(view); });
}

void Controller::SweepRetention(Batch& batch, Timestamp now) {
  next_retention_sweep_ = now + kRetentionSweepEvery;
  const Timestamp cutoff = now - std::chrono::hours(24) * config_.store.job_retention_days;
  auto deleted = std::make_shared<std::vector<model::JobId>>();
  batch.writes.push_back([cutoff, deleted](store::Transaction& t) -> Status {
    auto ids = t.DeleteJobsEndedBefore(cutoff);
    if (!ids.ok()) return ids.error();
    *deleted = std::move(ids.value());
    return Status::Ok();
  });
  batch.after_commit.push_back([this, deleted] {
    for (model::JobId id : *deleted) {
      for (backend::PoolBackend* b : backends_.Distinct()) b->Forget(id, 0);
    }
    if (!deleted->empty()) spdlog::info("retention: removed {} finished jobs", deleted->size());
  });
}

void Controller::Commit(Batch& batch) {
  if (!batch.writes.empty()) {
    auto writes = std::move(batch.writes);
    Status s = store_.WriteSync([&writes](store::Transaction& t) -> Status {
      for (auto& w : writes) {
        if (Status ws = w(t); !ws.ok()) return ws;
      }
      return Status::Ok();
    });
    if (!s.ok()) {
      // The live state is ahead of the store; nothing is launched or answered
      // for it. A restart reloads the store's (consistent) view.
      spdlog::critical("store commit failed: {}; restart the daemon once the store is writable", s.error().message);
      last_store_error_ = clock_.Now();
      return;
    }
  }
  for (auto& action : batch.after_commit) action();
}

void Controller::Publish() {
  auto view = std::make_shared<service::ClusterView>();
  view->nodes = node_book_.Views();
  for (const auto& [key, count] : job_counts_) {
    const auto& [state, queue, pool] = key;
    if (state == JobState::kPending || state == JobState::kHeld) view->pending_by_queue[queue] += count;
    if (state == JobState::kRunning) view->running_by_queue[queue] += count;
  }
  // Reasons of jobs that ended since the cycle are never looked up: the API
  // shows reasons only for jobs whose stored state is PENDING.
  view->pending = pending_;
  view->budget_use = accounting_.BudgetUse();
  view->running_usage = running_usage_;
  view->sandbox_holds = published_sandbox_holds_;
  // Gauges are set only when their value changed: this runs after every
  // batch of commands (thousands a second under a submission load), and
  // each set looks its series up by a label map.
  for (const auto& [key, count] : job_counts_) {
    auto [it, added] = published_job_counts_.try_emplace(key, count);
    if (!added && it->second == count) continue;
    it->second = count;
    metrics_.SetJobs(std::string(model::ToString(std::get<0>(key))), std::get<1>(key), std::get<2>(key),
                     static_cast<double>(count));
  }
  node_book_.PublishGauges(metrics_);
  std::lock_guard lock(view_mu_);
  view_ = std::move(view);
}

void Controller::ApplyHeartbeat(Batch& batch, const executor::Heartbeat& hb,
                                const std::function<void(HeartbeatAnswer)>& done) {
  model::NodeUsage* node = node_book_.Find(hb.node);
  if (!node) return;  // the hub checked it against the config
  if (node_book_.Heard(batch, hb, clock_.Now())) need_cycle_ = true;
  // What the agent runs that is not the current attempt of a running job on
  // this node is stale (requeued elsewhere after a node failure, cancelled,
  // ...): it is stopped there, and its late reports are ignored.
  HeartbeatAnswer answer;
  answer.node_state = std::string(model::ToString(node->state));
  for (const auto& ref : hb.running) {
    auto it = active_.find(ref.job);
    const model::Attempt* current = it == active_.end() ? nullptr : it->second.CurrentAttempt();
    const bool here = current && current->number == ref.attempt && it->second.state == JobState::kRunning &&
                      std::any_of(current->allocation.begin(), current->allocation.end(),
                                  [&](const model::NodeAllocation& a) { return a.node == hb.node; });
    if (!here) answer.stale.push_back({ref.job, ref.attempt, false, true});
  }
  batch.after_commit.push_back([done, answer = std::move(answer)] { done(answer); });
}

void Controller::CheckHeartbeats(Batch& batch, Timestamp now) {
  for (const auto& [node, why] : node_book_.DownSilent(batch, now)) {
    need_cycle_ = true;
    FailJobsOnNode(batch, node, "node " + node + " down: " + why, now);
  }
}

void Controller::FailJobsOnNode(Batch& batch, const std::string& node, const std::string& why, Timestamp now) {
  std::vector<model::JobId> on_node;
  for (const auto& [id, job] : active_) {
    const model::Attempt* a = job.CurrentAttempt();
    if (job.state != JobState::kRunning || !a) continue;
    for (const auto& alloc : a->allocation) {
      if (alloc.node == node) on_node.push_back(id);
    }
  }
  for (model::JobId id : on_node) {
    Job& job = active_.at(id);
    model::Attempt& attempt = *job.CurrentAttempt();
    TallyRunning(job, -1);
    // The run as the daemon saw it: from its start until the node was lost.
    if (!attempt.started_at) attempt.started_at = job.started_at.value_or(now);
    attempt.ended_at = now;
    attempt.state = JobState::kNodeFail;
    attempt.reason = why;
    job.preempting_for.reset();
    ReleaseAllocation(attempt);
    accounting_.CloseCharging(batch, job, attempt);
    // Stopped on the node if it still runs there (a partition, not a dead
    // machine); its late report is ignored (the attempt is not current).
    batch.after_commit.push_back(
        [backend = &BackendOf(job), id, number = attempt.number] { backend->Cancel(id, number, false); });
    if (!job.cancel_requested && RequeueForRetry(batch, job, JobState::kNodeFail, now)) continue;
    job.exit_code.reset();
    job.ended_at = now;
    Transition(batch, job, JobState::kNodeFail, "NodeFail", "node_fail", why);
    active_.erase(id);
  }
  need_cycle_ = true;
}

Status Controller::SetBackends(backend::BackendSet backends) {
  for (const auto& pool : config_.cluster.pools) {
    const backend::PoolBackend* b = backends.For(pool.name);
    if (!b) return Error::Internal("pool " + pool.name + ": no backend serves it (backend " + pool.backend + ")");
    const auto wanted = pool.PlacedByBackend() ? backend::Placement::kBackend : backend::Placement::kDaemon;
    if (b->placement() != wanted) {
      return Error::Internal(
          "pool " + pool.name + ": backend " + pool.backend +
          (pool.PlacedByBackend() ? " must place jobs itself" : " must run jobs where the daemon places them"));
    }
  }
  backends_ = std::move(backends);
  return Status::Ok();
}

backend::PoolBackend& Controller::BackendOf(const Job& job) const {
  // SetBackends checked that every pool of the config has one.
  return *backends_.For(job.pool);
}

std::string Controller::BackendNameOf(const Job& job) const {
  const model::PoolSpec* pool = config_.cluster.FindPool(job.pool);
  return pool ? pool->backend : std::string("?");
}

backend::AttemptLaunch Controller::AttemptLaunchOf(const Job& job) const {
  return {MakeLaunchSpec(job), job.CurrentAttempt()->allocation, job.resources, job.constraints};
}

executor::LaunchSpec Controller::MakeLaunchSpec(const Job& job) const {
  // A daemon running as root runs each job as its user's mapped account (the
  // dedicated unisched-job by default). A daemon started by an ordinary user
  // (development) cannot switch accounts: jobs run as that user.
  const bool as_root = ::geteuid() == 0;
  std::string unix_user;
  if (as_root) {
    unix_user = config_.executor.default_unix_user;
    if (auto user = store_.GetUser(job.user); user && !user->unix_user.empty()) unix_user = user->unix_user;
  }
  return BuildLaunchSpec(config_, job, unix_user, as_root);
}

}  // namespace unisched::daemon
