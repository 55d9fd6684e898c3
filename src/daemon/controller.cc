#include "daemon/controller.h"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <utility>

#include "unisched/model/words.h"
#include "unisched/service/step_json.h"

namespace unisched::daemon {
namespace {

using model::Job;
using model::JobState;

constexpr std::chrono::hours kRetentionSweepEvery{1};

}  // namespace

Controller::Controller(const config::LiveConfig& live, store::Store& store, metrics::Metrics& metrics,
                       const Clock& clock)
    : live_(live),
      store_(store),
      metrics_(metrics),
      clock_(clock),
      scheduler_(scheduler::SchedulerConfig::From(live.Current().cluster)),
      scheduler_built_from_(&live.Current()),
      node_book_(live.Current(), clock),
      accounting_(live, store, metrics, clock),
      jobs_(live, store, metrics, clock, node_book_, accounting_,
            [this](executor::RunResult result) { OnRunResult(std::move(result)); }),
      alerts_(live, metrics) {
  view_ = std::make_shared<service::ClusterView>();
}

Controller::~Controller() {
  Stop();
}

void Controller::Start() {
  const Timestamp started = clock_.Now();
  node_book_.Load(store_.LoadNodeStates(), store_.LoadNodeIdleSince(), started);
  alerts_.Load(store_.ListAlerts(true, 100000));
  // Usage is charged from now on: the time the daemon was down is not
  // charged (running jobs' records come with the accounting ledger).
  accounting_.RestoreFairshare(store_.LoadFairshareUsage(), clock_.Now());
  // Attempts to recover, with their backends (read before the loop owns the jobs).
  const JobLifecycle::Restart restart = jobs_.Load(store_.LoadActiveJobs(), store_.CountJobs(), clock_.Now());
  if (steps_) {
    std::vector<service::StepView> steps;
    for (const store::StepRecord& record : store_.LoadActiveSteps()) {
      auto view = service::StepFromDocument(record.doc);
      if (view.ok()) {
        steps.push_back(std::move(*view));
      } else {
        spdlog::warn("job {} step {}: {}", record.job_id, record.step, view.error().message);
      }
    }
    steps_->Restore(std::move(steps));
  }
  spdlog::info("controller: {} active jobs loaded, {} running attempts to recover", jobs_.active().size(),
               restart.recover.size());
  for (const auto& pool : current_config().cluster.pools) {
    if (pool.sandbox && ::geteuid() != 0) {
      spdlog::warn("pool {} has sandbox: true, but the daemon is not root: its jobs run without isolation", pool.name);
    }
  }
  // Control files of attempts whose end the store already holds: a daemon
  // killed between a result's commit and its Release left them. They go
  // before the loop may launch anything (a new attempt's files are not
  // leftovers) and before Recover, which collects the running ones.
  std::set<std::pair<model::JobId, int>> running_attempts;
  for (const auto& r : restart.recover) running_attempts.emplace(r.launch.spec.job_id, r.launch.spec.attempt);
  for (backend::PoolBackend* b : jobs_.backends().Distinct()) b->ReleaseAllExcept(running_attempts);
  Publish();
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "us-control");
    Loop();
  });
  // Results of recovered attempts arrive through OnRunResult, after the loop runs.
  for (const auto& r : restart.recover) r.backend->Recover(r.launch);
  for (const auto& [backend, id, attempt, preempt] : restart.stop) backend->Cancel(id, attempt, preempt);
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
    accounting_.AccrueFairshare(jobs_.active(), batch, clock_.Now(), /*force=*/true);
    node_book_.SaveIdleTimes(batch);
    Commit(batch);
  }
}

bool Controller::AnyRunning() const {
  const auto& active = jobs_.active();
  return std::any_of(active.begin(), active.end(),
                     [](const auto& entry) { return entry.second.state == model::JobState::kRunning; });
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
  Post([this, job = std::move(job)](Batch&) mutable { jobs_.Admit(std::move(job)); });
}

namespace {

// Stores a step as it is now (in the loop's batch).
std::function<Status(store::Transaction&)> StepWrite(const service::StepView& view) {
  return [record = store::StepRecord{view.job_id, view.step, service::StepToJson(view).dump()}](
             store::Transaction& t) -> Status {
    Status s = t.PutStep(record);
    // A step of a job no longer stored (deleted by retention) has nothing
    // to update; the rest of the batch must still commit.
    if (!s.ok() && s.error().kind == ErrorKind::kNotFound) return Status::Ok();
    return s;
  };
}

}  // namespace

void Controller::OnRunResult(executor::RunResult result) {
  Post([this, result = std::move(result)](Batch& batch) {
    jobs_.ApplyResult(batch, result);
    // Its steps end with it; those whose own end is reported later get it then.
    if (steps_) {
      for (const service::StepView& step :
           steps_->EndRunning(result.job_id, result.attempt, "its attempt ended", clock_.Now())) {
        batch.writes.push_back(StepWrite(step));
      }
    }
  });
}

void Controller::OnStepEnded(int step, executor::RunResult result) {
  Post([this, step, result = std::move(result)](Batch& batch) {
    if (!steps_) return;
    if (auto view = steps_->Ended(result.job_id, step, result)) batch.writes.push_back(StepWrite(*view));
  });
}

std::optional<service::ControlPlane::Staging> Controller::StagingOf(model::JobId id) const {
  std::optional<Staging> out;
  for (const executor::Executor* executor : staging_executors_) {
    for (const executor::StagingProgress& p : executor->Staging()) {
      if (p.job_id != id) continue;
      if (!out) out = Staging{p.phase, 0, 0};
      out->bytes_done += p.bytes_done;
      out->bytes_total += p.bytes_total;
    }
  }
  return out;
}

void Controller::SetSecretVault(const service::SecretVault* vault, std::string problem) {
  jobs_.SetSecretVault(vault, std::move(problem));
}

void Controller::SetJobAccess(std::string token_secret, std::string url) {
  Post([this, token_secret = std::move(token_secret), url = std::move(url)](Batch&) mutable {
    jobs_.SetJobAccess(std::move(token_secret), std::move(url));
  });
}

void Controller::StartStep(model::JobId job, int attempt, service::StepRequest request,
                           std::function<void(Result<service::StepView>)> done) {
  Post([this, job, attempt, request = std::move(request), done = std::move(done)](Batch& batch) {
    if (!steps_) {
      done(Error::Unavailable("this daemon runs no steps"));
      return;
    }
    auto planned = jobs_.PlanStep(
        job, attempt, request, [this, job] { return steps_->Next(job); }, clock_.Now());
    if (!planned.ok()) {
      done(planned.error());
      return;
    }
    steps_->Started(planned->view);
    // Stored before it runs and before its 201: a restart neither loses it
    // nor numbers another step the same.
    batch.writes.push_back(StepWrite(planned->view));
    for (auto& audit : planned->audits) batch.writes.push_back(std::move(audit));
    planned->audits.clear();
    batch.after_commit.push_back([this, planned = std::move(*planned), done]() {
      const service::StepView& view = planned.view;
      if (Status s = planned.backend->LaunchStep(view.job_id, view.attempt, view.step, planned.tasks); !s.ok()) {
        Post([this, view, reason = "could not be launched: " + s.error().message](Batch& later) {
          if (auto failed = steps_->Failed(view.job_id, view.step, reason, clock_.Now())) {
            later.writes.push_back(StepWrite(*failed));
          }
        });
        done(s.error());
        return;
      }
      done(view);
    });
  });
}

Result<service::StepView> Controller::GetStep(model::JobId job, int step) const {
  if (!steps_) return Error::NotFound("this daemon runs no steps");
  auto found = steps_->Get(job, step);
  if (found.ok() || found.error().kind != ErrorKind::kNotFound) return found;
  // Ended a while ago (the book keeps the latest ended ones): the store has it.
  auto stored = store_.GetStep(job, step);
  if (!stored.ok()) return stored.error();
  return service::StepFromDocument(stored->doc);
}

void Controller::ControlJob(model::JobId id, JobAction action, std::string actor,
                            std::function<void(Result<Job>)> done) {
  Post([this, id, action, actor = std::move(actor), done = std::move(done)](Batch& batch) {
    jobs_.ApplyControl(batch, id, action, actor, done);
  });
}

void Controller::UpdateJob(model::JobId id, JobChange change, std::string actor,
                           std::function<void(Result<Job>)> done) {
  Post([this, id, change = std::move(change), actor = std::move(actor), done = std::move(done)](Batch& batch) {
    // A reservation made in its old queue or pool is not its own any more.
    reservations_.erase(id);
    jobs_.ApplyUpdate(batch, id, change, actor, done);
  });
}

void Controller::SetNodeState(std::string node, bool drain, std::string reason, std::string actor,
                              std::function<void(Result<service::ClusterView::Node>)> done) {
  Post([this, node = std::move(node), drain, reason = std::move(reason), actor = std::move(actor),
        done = std::move(done)](Batch& batch) { ApplyNodeState(batch, node, drain, reason, actor, done); });
}

void Controller::Loop() {
  using SteadyClock = std::chrono::steady_clock;
  const auto tick =
      std::chrono::milliseconds(static_cast<int64_t>(current_config().server.scheduler_tick_seconds * 1000));
  auto next_tick = SteadyClock::now() + tick;
  // A full pass costs time linear in the pending jobs (an event pass does
  // not: kept_order.h). To keep the control thread responsive with a deep
  // backlog, a cycle may start only once the time since the previous one is
  // at least kCycleSpacing times that cycle's duration: at most
  // 1/(1+kCycleSpacing) of the thread goes to cycles. A short queue (cycles
  // of microseconds) is never delayed noticeably.
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
      need_full_pass_ = true;
      if (now >= next_retention_sweep_) SweepRetention(batch, now);
      CheckHeartbeats(batch, now);
      node_book_.SaveIdleTimes(batch);
      alerts_.Evaluate(batch,
                       {&node_book_.nodes(), &node_book_.reasons(), &jobs_.active(), ledger_discrepancies_.load(),
                        last_store_error_},
                       now);
    }
    accounting_.ChargeRunningIfDue(jobs_.active(), batch, now);
    if (jobs_.TakeWantsCycle()) need_cycle_ = true;
    if (need_cycle_ && SteadyClock::now() >= next_cycle_allowed) {
      const auto started = SteadyClock::now();
      RunCycle(batch, now, need_full_pass_);
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

void Controller::RunCycle(Batch& batch, Timestamp now, bool full) {
  need_cycle_ = false;
  for (model::JobId id : jobs_.TakeChanged()) kept_order_.NoteChanged(id);
  size_t pending_jobs = 0;
  for (const auto& [key, count] : jobs_.counts()) {
    if (std::get<0>(key) == JobState::kPending) pending_jobs += static_cast<size_t>(std::max<int64_t>(count, 0));
  }
  // One version of the config for the whole cycle; a new one (a live
  // change, docs/config-versions.md) takes effect from the next cycle on.
  const config::Config& config = current_config();
  if (&config != scheduler_built_from_) {
    scheduler_ = scheduler::Scheduler(scheduler::SchedulerConfig::From(config.cluster));
    scheduler_built_from_ = &config;
  }
  // An event pass (kept_order.h) needs a full pass's order under this
  // config, a queue deeper than it looks, and fewer changes since that
  // full pass than a few depths (a burst of submissions is ranked whole).
  const auto depth = static_cast<size_t>(std::max(0, config.cluster.event_pass_depth));
  const bool keeps_order = depth > 0;  // event passes are on
  const bool event_pass = !full && keeps_order && kept_order_.built() && kept_order_for_ == &config &&
                          pending_jobs > depth && kept_order_.changed() <= 4 * depth;
  if (!event_pass) {
    need_full_pass_ = false;
    // Fair-share usage accrues by the time since the last accrual, so
    // leaving it to the full passes loses nothing.
    accounting_.AccrueFairshare(jobs_.active(), batch, now);
  }
  accounting_.RefreshBudgets(now);
  CycleState state{jobs_.active(), node_book_.nodes(), accounting_.fairshare(), accounting_.BudgetUse(), sandbox_holds_,
                   reservations_,  pending_jobs};
  std::vector<const model::Job*> candidates;
  if (event_pass) {
    std::vector<model::JobId> reserved;
    reserved.reserve(reservations_.size());
    for (const auto& [id, r] : reservations_) reserved.push_back(id);
    candidates = kept_order_.Candidates(jobs_.active(), depth, reserved);
    state.candidates = &candidates;
    state.most_tasks = static_cast<int64_t>(depth);
  }
  if (std::any_of(config.cluster.pools.begin(), config.cluster.pools.end(),
                  [](const model::PoolSpec& pool) { return pool.predict_run_times; })) {
    RunTimeBook& run_times = jobs_.run_times();
    // The first cycle that plans with predictions (at start, or after a
    // config change turned them on) learns from the stored history.
    if (!run_times.learned()) {
      try {
        run_times.Learn(store_.LoadLatestEndedJobs(RunTimeBook::kLatestPerKey));
      } catch (const store::StoreFailure& e) {
        // Planned with the requests until the store answers (a later cycle retries).
        spdlog::warn("predicted run times: cannot read the ended jobs yet: {}", e.what());
      }
    }
    if (run_times.learned()) state.run_times = &run_times;
  }
  DependencyBook& dependencies = jobs_.dependencies();
  state.ended_state = [&dependencies](model::JobId id) { return dependencies.EndedState(id); };
  state.ended_array = [&dependencies](model::JobId id) { return dependencies.EndedArray(id); };
  CycleSnapshot built = BuildCycleSnapshot(config, state, now);
  // What the book keeps is what the last full pass asked for.
  if (!event_pass) {
    dependencies.Prune();
    jobs_.PruneDependants();
  }
  scheduler::Snapshot& snapshot = built.snapshot;
  if (event_pass) {
    // The running jobs are those the last full pass showed, lent (kept_order.h).
    kept_order_.Lend(snapshot, jobs_.active(), [&](const model::Job& job) {
      return SnapshotOfRunning(config, job, now, state.run_times ? state.run_times->PredictionFor(job) : 0);
    });
  }
  snapshot.explain = !event_pass;
  snapshot.max_considered = event_pass ? static_cast<int>(depth) : 0;
  snapshot.return_order = !event_pass && keeps_order;
  auto& held_back = built.held_back;
  for (auto& [id, why] : built.never_satisfied) {
    if (config.cluster.kill_invalid_dependency) {
      jobs_.CancelUnsatisfiable(batch, id, why);
    } else {
      auto job = jobs_.active().find(id);
      held_back.emplace_back(id, HeldBackInfo(job == jobs_.active().end() ? "" : job->second.pool,
                                              "DependencyNeverSatisfied", "can never start: " + why));
    }
  }
  scheduler::Plan plan;
  if (!snapshot.pending.empty()) {
    const auto started = std::chrono::steady_clock::now();
    plan = scheduler_.Decide(snapshot, now);
    metrics_.ObserveCycle(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
                          !event_pass);
  }
  if (keeps_order) {
    if (!event_pass) {
      kept_order_.Rebuild(built.offered_from, plan.order);
      kept_order_for_ = &config;
    }
    kept_order_.TakeBack(snapshot);
  }
  for (const auto& start : plan.starts) {
    jobs_.StartAttempt(batch, start.job, start.allocation, now);
    kept_order_.NoteStarted(start.job);
  }
  for (const auto& preemption : plan.preemptions) jobs_.Preempt(batch, preemption);
  if (event_pass) {
    // It looked at the head of the queue only: the reservations of jobs
    // behind it stand (conservative pools hold them), those it made
    // replace theirs, and the jobs it started hold none. The views keep
    // the last full pass's reasons until the next one.
    for (auto& r : plan.reservations) reservations_.insert_or_assign(r.job, std::move(r));
    for (const auto& start : plan.starts) reservations_.erase(start.job);
    return;
  }
  reservations_.clear();
  for (auto& r : plan.reservations) reservations_.emplace(r.job, std::move(r));
  // An array's reason is its first offered task's while that task waits
  // (Resources, a quota, ...); else what held the array back (its cap).
  if (!built.first_offered_task.empty()) {
    std::unordered_map<model::JobId, size_t> held_at;
    for (size_t i = 0; i < held_back.size(); ++i) held_at.emplace(held_back[i].first, i);
    for (const auto& [array, task] : built.first_offered_task) {
      auto info = plan.pending.find(task);
      if (info == plan.pending.end()) continue;
      if (auto held = held_at.find(array); held != held_at.end()) {
        // Held back for the rest (its cap, aftercorr tasks that wait): the
        // task it offered is the nearer reason.
        held_back[held->second].second = info->second;
      } else {
        held_back.emplace_back(array, info->second);
      }
    }
  }
  if (!held_back.empty()) {
    for (auto& [id, info] : held_back) plan.pending.emplace(id, std::move(info));
    plan.pending.Seal();
  }
  // Nothing waits now and nothing did: the published view stays as it is.
  if (plan.pending.empty() && pending_->empty()) return;
  // Pending jobs by pool and first reason (held back ones too): what an
  // alert on "GPU jobs stuck on quota" reads. Series of a (pool, code) no
  // job has any more go to 0.
  std::map<std::pair<std::string, std::string>, int> by_reason;
  for (auto& [key, count] : pending_by_reason_) by_reason[key] = 0;
  for (const auto& [id, info] : plan.pending) {
    auto job = jobs_.active().find(id);
    if (job == jobs_.active().end()) continue;
    const std::string code = info.own && !info.own->empty() ? info.own->front().code
                             : info.jobs_ahead > 0          ? "Priority"
                                                            : "None";
    ++by_reason[{job->second.pool, code}];
  }
  for (const auto& [key, count] : by_reason) metrics_.SetPendingByReason(key.first, key.second, count);
  pending_by_reason_ = std::move(by_reason);
  pending_ = std::make_shared<const service::PendingInfoMap>(std::move(plan.pending));
}

void Controller::CountSandbox(const std::string& queue, const std::string& project, const std::string& user,
                              const policy::Amount& amount, int sign) {
  // An API sandbox holds a slot of its queue like a running job: the
  // scheduler's max_concurrency and quota checks count it (docs/sandboxes.md).
  Post([this, queue, project, user, amount, sign](Batch&) {
    const policy::JobScope scope{queue, project, user};
    policy::Amount& held = sandbox_holds_[{queue, project, user}];
    jobs_.TallyHolder(scope, amount, sign);
    if (sign > 0) {
      held += amount;
    } else {
      held -= amount;
      if (held.jobs <= 0) sandbox_holds_.erase({queue, project, user});
    }
    published_sandbox_holds_ = std::make_shared<const service::SandboxHolds>(sandbox_holds_);
  });
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
  // Logged once it holds: a call for an unknown node (404) changed nothing.
  batch.after_commit.push_back([done, view = std::move(view), name, drain, actor] {
    spdlog::info("node {}: {} by {}", name, drain ? "drain" : "resume", actor);
    done(view);
  });
}

void Controller::SweepRetention(Batch& batch, Timestamp now) {
  next_retention_sweep_ = now + kRetentionSweepEvery;
  const Timestamp cutoff = now - std::chrono::hours(24) * current_config().store.job_retention_days;
  auto deleted = std::make_shared<std::vector<model::JobId>>();
  batch.writes.push_back([cutoff, deleted](store::Transaction& t) -> Status {
    auto ids = t.DeleteJobsEndedBefore(cutoff);
    if (!ids.ok()) return ids.error();
    *deleted = std::move(ids.value());
    return Status::Ok();
  });
  batch.after_commit.push_back([this, deleted] {
    for (model::JobId id : *deleted) {
      for (backend::PoolBackend* b : jobs_.backends().Distinct()) b->Forget(id, 0);
    }
    if (!deleted->empty()) spdlog::info("retention: removed {} finished jobs", deleted->size());
  });
}

void Controller::Commit(Batch& batch) {
  // Writes the store refused while unreachable go first: the store must
  // take the batches in the order the live state did.
  const bool retrying = !unwritten_.writes.empty() || !unwritten_.after_commit.empty();
  if (retrying) {
    for (auto& w : batch.writes) unwritten_.writes.push_back(std::move(w));
    for (auto& a : batch.after_commit) unwritten_.after_commit.push_back(std::move(a));
    batch = std::exchange(unwritten_, Batch{});
  }
  if (!batch.writes.empty()) {
    const auto& writes = batch.writes;
    Status s = store_.WriteSync([&writes](store::Transaction& t) -> Status {
      for (const auto& w : writes) {
        if (Status ws = w(t); !ws.ok()) return ws;
      }
      return Status::Ok();
    });
    if (!s.ok()) {
      last_store_error_ = clock_.Now();
      if (s.error().kind == ErrorKind::kUnavailable) {
        // The database is unreachable (a PostgreSQL server stopped or
        // failing over): keep the writes and what waits for them, and try
        // again with the next batch (every loop, at least every tick).
        // Nothing is launched or answered before its state is stored.
        if (!retrying)
          spdlog::error("store unreachable, {} writes kept until it is back: {}", batch.writes.size(),
                        s.error().message);
        unwritten_ = std::move(batch);
        return;
      }
      // The live state is ahead of the store; nothing is launched or answered
      // for it. A restart reloads the store's (consistent) view.
      spdlog::critical("store commit failed: {}; restart the daemon once the store is writable", s.error().message);
      return;
    }
    if (retrying) spdlog::info("store reachable again: {} writes kept meanwhile committed", batch.writes.size());
  }
  for (auto& action : batch.after_commit) action();
}

void Controller::Publish() {
  auto view = std::make_shared<service::ClusterView>();
  view->nodes = node_book_.Views();
  for (const auto& [key, count] : jobs_.counts()) {
    const auto& [state, queue, pool] = key;
    if (state == JobState::kPending || state == JobState::kHeld) view->pending_by_queue[queue] += count;
    if (state == JobState::kRunning) view->running_by_queue[queue] += count;
  }
  // Reasons of jobs that ended since the cycle are never looked up: the API
  // shows reasons only for jobs whose stored state is PENDING.
  view->pending = pending_;
  view->budget_use = accounting_.BudgetUse();
  view->running_usage = jobs_.running_usage();
  view->sandbox_holds = published_sandbox_holds_;
  if (published_array_changes_ != jobs_.array_parents_changes()) {
    published_array_changes_ = jobs_.array_parents_changes();
    published_array_parents_ = std::make_shared<std::map<model::JobId, model::JobId>>(jobs_.array_parents());
  }
  view->array_parents = published_array_parents_;
  // Gauges are set only when their value changed: this runs after every
  // batch of commands (thousands a second under a submission load), and
  // each set looks its series up by a label map.
  for (const auto& [key, count] : jobs_.counts()) {
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
  answer.stale = jobs_.StaleOn(hb.node, hb.running);
  batch.after_commit.push_back([done, answer = std::move(answer)] { done(answer); });
}

void Controller::CheckHeartbeats(Batch& batch, Timestamp now) {
  for (const auto& [node, why] : node_book_.DownSilent(batch, now)) {
    need_cycle_ = true;
    jobs_.FailJobsOnNode(batch, node, "node " + node + " down: " + why, now);
  }
}

Status Controller::SetBackends(backend::BackendSet backends) {
  for (const auto& pool : current_config().cluster.pools) {
    const backend::PoolBackend* b = backends.For(pool.name);
    if (!b) return Error::Internal("pool " + pool.name + ": no backend serves it (backend " + pool.backend + ")");
    const auto wanted = pool.PlacedByBackend() ? backend::Placement::kBackend : backend::Placement::kDaemon;
    if (b->placement() != wanted) {
      return Error::Internal(
          "pool " + pool.name + ": backend " + pool.backend +
          (pool.PlacedByBackend() ? " must place jobs itself" : " must run jobs where the daemon places them"));
    }
  }
  jobs_.SetBackends(std::move(backends));
  return Status::Ok();
}

}  // namespace unisched::daemon
