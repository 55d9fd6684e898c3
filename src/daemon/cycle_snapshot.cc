#include "daemon/cycle_snapshot.h"

#include <algorithm>
#include <chrono>

namespace unisched::daemon {

using model::Job;
using model::JobState;

scheduler::RunningJob SnapshotOfRunning(const config::Config& config, const Job& job, Timestamp now,
                                        int64_t predicted_run_seconds) {
  const model::Attempt* a = job.CurrentAttempt();
  scheduler::JobFacts facts = scheduler::FactsOf(job);
  facts.predicted_run_seconds = predicted_run_seconds;
  scheduler::RunningJob r =
      scheduler::StartedJob(std::move(facts), a ? a->allocation : model::Allocation{}, job.started_at.value_or(now));
  if (job.cancel_requested || job.preempting_for) {
    const model::QueueSpec* queue = config.cluster.FindQueue(job.queue);
    const int grace =
        job.preempting_for && queue ? queue->policy.preempt_grace_seconds : config.executor.kill_grace_seconds;
    r.expected_end = std::min(r.expected_end, job.stop_requested_at.value_or(now) + std::chrono::seconds(grace));
  }
  r.preempting_for = job.preempting_for;
  r.stopping = job.cancel_requested;
  return r;
}

CycleSnapshot BuildCycleSnapshot(const config::Config& config, const CycleState& state, Timestamp now) {
  CycleSnapshot out;
  scheduler::Snapshot& snapshot = out.snapshot;
  snapshot.budget_use = state.budget_use;
  snapshot.nodes = state.nodes;
  // Fairshare factors only for the (project, user) pairs of jobs in queues
  // that weigh fairshare, each computed once.
  auto add_fairshare = [&](const Job& job) {
    const model::QueueSpec* queue = config.cluster.FindQueue(job.queue);
    if (!queue || queue->policy.Weights().fairshare <= 0) return;
    auto key = std::make_pair(job.project, job.user);
    if (snapshot.fairshare.count(key)) return;
    snapshot.fairshare.emplace(
        key, policy::FairshareFactor(state.fairshare_usage, config.cluster.projects, job.project, job.user));
  };
  // Sized once: with a deep backlog the vector holds 100,000 jobs and its
  // regrowth (copies and fresh pages) cost more than filling it.
  snapshot.pending.reserve(state.pending_hint);
  for (const auto& [id, job] : state.active) {
    if (job.state == JobState::kPending && job.eligible_at && *job.eligible_at > now) {
      model::PendingInfo info;
      const bool launch = job.state_reason == "LaunchRetry";
      info.own = std::make_shared<const std::vector<model::PendingReason>>(std::vector<model::PendingReason>{
          {launch ? "LaunchRetry" : "Retry",
           std::string(launch ? "waiting to retry the launch until " : "waiting to retry until ") +
               FormatRfc3339(*job.eligible_at) + " (" + job.state_reason + ")"}});
      info.pool = std::make_shared<const std::string>(job.pool);
      out.backing_off.emplace_back(id, std::move(info));
      continue;
    }
    if (job.state == JobState::kPending) {
      scheduler::PendingJob& p = snapshot.pending.emplace_back();
      static_cast<scheduler::JobFacts&>(p) = scheduler::FactsOf(job);
      if (state.run_times) p.predicted_run_seconds = state.run_times->PredictionFor(job);
      p.constraints = job.constraints;
      p.preempted_by = job.preempted_by;
      if (auto r = state.reservations.find(job.id); r != state.reservations.end()) {
        p.reserved_start = r->second.start;
        p.reserved_nodes = r->second.nodes;
      }
      add_fairshare(job);
    } else if (job.state == JobState::kRunning) {
      snapshot.running.push_back(
          SnapshotOfRunning(config, job, now, state.run_times ? state.run_times->PredictionFor(job) : 0));
      add_fairshare(job);  // a running job's priority decides whether it may be preempted
    }
  }
  for (const auto& [scope, amount] : state.sandbox_holds) {
    snapshot.quota_holders.push_back({std::get<0>(scope), std::get<1>(scope), std::get<2>(scope), amount});
  }
  return out;
}

}  // namespace unisched::daemon
