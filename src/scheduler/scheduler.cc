// The scheduling cycle (see scheduler.h, docs/scheduling-cycle.md and
// docs/policy/). Works on private copies of the nodes and of each pool's
// availability profile, so every start and reservation decided in a cycle is
// seen by the decisions after it.

#include "unisched/scheduler/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "scheduler/pool_cycle.h"
#include "unisched/common/short_text.h"

namespace unisched::scheduler {

namespace {

// Jobs grouped by pool name (views of the snapshot's strings: a hash, not a
// string-keyed tree walk). Neighbours are often of one pool (a centre runs a
// handful), so the last job's group is tried first: a compare, not a hash.
template <class Job>
std::unordered_map<std::string_view, std::vector<const Job*>> ByPool(const std::vector<Job>& jobs) {
  std::unordered_map<std::string_view, std::vector<const Job*>> groups;
  std::string_view last_pool;
  std::vector<const Job*>* last = nullptr;  // the map's nodes stay put as it grows
  for (const auto& job : jobs) {
    if (!last || !SameShortText(job.pool, last_pool)) {
      last_pool = job.pool;
      last = &groups[last_pool];
    }
    last->push_back(&job);
  }
  return groups;
}

}  // namespace

using internal::PoolCycle;
using internal::SchedulerState;
using internal::SteadyClock;
using internal::WorkingNodes;

SchedulerConfig SchedulerConfig::From(const model::ClusterSpec& cluster) {
  return {cluster.queues, cluster.pools, cluster.projects};
}

Scheduler::Scheduler(SchedulerConfig config) : config_(std::move(config)) {
  for (const auto& q : config_.queues) {
    queues_.emplace(q.name, &q);
    if (q.policy.SetsLimits()) limited_queues_.insert(q.name);
  }
  for (const auto& p : config_.pools) pools_.emplace(p.name, &p);
  for (const auto& p : config_.projects) {
    projects_.emplace(p.name, &p);
    if (p.SetsLimits()) limited_projects_.insert(p.name);
  }
}

JobFacts FactsOf(const model::Job& job) {
  JobFacts facts;
  facts.id = job.id;
  facts.queue = job.queue;
  facts.pool = job.pool;
  facts.project = job.project;
  facts.user = job.user;
  facts.adjustment = job.priority;
  facts.submitted_at = job.submitted_at;
  facts.resources = job.resources;
  return facts;
}

RunningJob StartedJob(JobFacts facts, model::Allocation allocation, Timestamp started_at) {
  RunningJob running;
  static_cast<JobFacts&>(running) = std::move(facts);
  running.allocation = std::move(allocation);
  running.started_at = started_at;
  if (running.resources.walltime_seconds > 0) {
    running.expected_end = started_at + std::chrono::seconds(running.resources.walltime_seconds);
  }
  return running;
}

Plan Scheduler::Decide(const Snapshot& snapshot, Timestamp now) const {
  const auto cycle_start = SteadyClock::now();
  Plan plan;
  WorkingNodes nodes(snapshot.nodes);
  const SchedulerState state{snapshot, queues_, pools_, projects_, limited_queues_, limited_projects_};

  // What running jobs and sandboxes hold per quota scope: read only where
  // a limit is checked.
  policy::QuotaTally tally;
  if (state.CountsLimits()) {
    for (const auto& r : snapshot.running) {
      if (state.Tallied(r.queue, r.project)) tally.Add({r.queue, r.project, r.user}, policy::AmountOf(r.resources));
    }
    for (const auto& h : snapshot.quota_holders) {
      if (state.Tallied(h.queue, h.project)) tally.Add({h.queue, h.project, h.user}, h.amount);
    }
  }
  if (!snapshot.pending_order.empty()) {
    // The caller's order, one pool (Snapshot::pending_order): nothing to
    // group or rank here.
    const std::string& pool = snapshot.pending[snapshot.pending_order.front()].pool;
    std::vector<const RunningJob*> running;
    running.reserve(snapshot.running.size());
    for (const auto& r : snapshot.running) {
      if (r.pool == pool) running.push_back(&r);
    }
    std::vector<const PendingJob*> none;
    PoolCycle cycle(state, nodes, tally, plan, now);
    cycle.Run(pool, none, running, &snapshot.pending_order);
  } else {
    const auto running_by_pool = ByPool(snapshot.running);
    auto pending_by_pool = ByPool(snapshot.pending);
    // Pools in name order; within a pool the snapshot's order is irrelevant
    // (the sort is total).
    std::vector<std::string_view> pools;
    for (const auto& [pool, jobs] : pending_by_pool) pools.push_back(pool);
    std::sort(pools.begin(), pools.end());
    static const std::vector<const RunningJob*> kNoneRunning;
    for (std::string_view pool : pools) {
      auto running = running_by_pool.find(pool);
      PoolCycle cycle(state, nodes, tally, plan, now);
      cycle.Run(std::string(pool), pending_by_pool[pool],
                running == running_by_pool.end() ? kNoneRunning : running->second);
    }
  }
  plan.pending.Seal();
  plan.report.total = SteadyClock::now() - cycle_start;
  return plan;
}

}  // namespace unisched::scheduler
