// The scheduling cycle (see scheduler.h, docs/scheduling-cycle.md and
// docs/policy/). Works on private copies of the nodes and of each pool's
// availability profile, so every start and reservation decided in a cycle is
// seen by the decisions after it.

#include "unisched/scheduler/scheduler.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "unisched/policy/priority.h"
#include "unisched/policy/profile.h"
#include "unisched/policy/quota.h"

namespace unisched::scheduler {
namespace {

using SteadyClock = std::chrono::steady_clock;
using policy::Capacity;
using policy::NodeTimeline;

const model::QueuePolicy& DefaultQueuePolicy() {
  static const model::QueuePolicy kPolicy;
  return kPolicy;
}

// The cycle's view of the nodes: a copy of the snapshot's, updated with each
// start as it is decided.
class WorkingNodes {
 public:
  explicit WorkingNodes(const std::vector<model::NodeUsage>& nodes) : nodes_(nodes) {
    for (auto& node : nodes_) {
      // A snapshot built by hand may leave gpu_busy short; missing means free.
      node.gpu_busy.resize(node.spec.gpus.size(), false);
    }
    // Name order, so the candidate list (and so the plan) does not depend on
    // the order the snapshot happened to list nodes in.
    std::stable_sort(nodes_.begin(), nodes_.end(),
                     [](const model::NodeUsage& a, const model::NodeUsage& b) { return a.spec.name < b.spec.name; });
    for (size_t i = 0; i < nodes_.size(); ++i) {
      by_pool_[nodes_[i].spec.pool].push_back(&nodes_[i]);
      index_.emplace(nodes_[i].spec.name, i);  // first wins, as in Fit
    }
  }
  // by_pool_ points into nodes_.
  WorkingNodes(const WorkingNodes&) = delete;
  WorkingNodes& operator=(const WorkingNodes&) = delete;

  const std::vector<const model::NodeUsage*>& Pool(const std::string& pool) const {
    static const std::vector<const model::NodeUsage*> kNone;
    auto it = by_pool_.find(pool);
    return it == by_pool_.end() ? kNone : it->second;
  }

  void Apply(const model::Allocation& allocation, int sign) {
    for (const auto& share : allocation) {
      auto it = index_.find(share.node);
      if (it != index_.end()) nodes_[it->second].Apply(share, sign);
    }
  }

 private:
  std::vector<model::NodeUsage> nodes_;
  std::map<std::string, std::vector<const model::NodeUsage*>> by_pool_;
  std::map<std::string, size_t> index_;
};

Capacity ShareCapacity(const model::NodeAllocation& share) {
  return {share.cpus, share.memory_mb, static_cast<int64_t>(share.gpu_indices.size())};
}

std::chrono::milliseconds Walltime(const model::ResourceRequest& r) {
  return std::chrono::seconds(r.walltime_seconds);
}

// Whether an empty node could ever hold one node's share of the request: the
// cheap test first, labels and GPU model only when asked for.
bool CouldEverHold(const model::NodeUsage& node, const model::ResourceRequest& r, const model::Labels& constraints) {
  if (node.state != model::NodeState::kUp) return false;
  if (node.spec.cpus < r.cpus || node.spec.memory_mb < r.memory_mb ||
      static_cast<int>(node.spec.gpus.size()) < r.gpus) {
    return false;
  }
  if (constraints.empty() && r.gpu_model.empty()) return true;
  return !model::CheckNode(node, r, constraints, /*ignore_usage=*/true).has_value();
}

std::string JobsAhead(int n, const std::string& pool) {
  return std::to_string(n) + (n == 1 ? " job ahead in " : " jobs ahead in ") + pool;
}

std::string JoinIds(const std::vector<model::JobId>& ids) {
  std::string text;
  for (model::JobId id : ids) text += (text.empty() ? "" : ", ") + std::to_string(id);
  return text;
}

// Lookups shared by every pool of a cycle.
struct SchedulerState {
  const Snapshot& snapshot;
  const std::map<std::string, const model::QueueSpec*, std::less<>>& queues;
  const std::map<std::string, const model::PoolSpec*, std::less<>>& pools;
  const std::map<std::string, const model::ProjectPolicy*, std::less<>>& projects;

  const model::QueueSpec* Queue(const std::string& name) const {
    auto it = queues.find(name);
    return it == queues.end() ? nullptr : it->second;
  }
  const model::QueuePolicy& PolicyOf(const std::string& queue) const {
    const model::QueueSpec* q = Queue(queue);
    return q ? q->policy : DefaultQueuePolicy();
  }
  const model::ProjectPolicy* Project(const std::string& name) const {
    auto it = projects.find(name);
    return it == projects.end() ? nullptr : it->second;
  }
  double Fairshare(const std::string& project, const std::string& user) const {
    if (snapshot.fairshare.empty()) return 1.0;
    auto it = snapshot.fairshare.find({project, user});
    return it == snapshot.fairshare.end() ? 1.0 : it->second;
  }
};

// One pool's part of a cycle.
class PoolCycle {
 public:
  PoolCycle(const SchedulerState& state, WorkingNodes& nodes, policy::QuotaTally& tally, Plan& plan, Timestamp now)
      : state_(state), nodes_(nodes), tally_(tally), plan_(plan), now_(now) {}

  void Run(const std::string& pool_name, std::vector<const PendingJob*>& jobs,
           const std::vector<const RunningJob*>& running);

 private:
  struct Ranked {
    const PendingJob* job;
    model::PriorityFactors factors;
    int64_t priority;
  };

  model::PriorityFactors PriorityOf(const std::string& queue, const std::string& project, const std::string& user,
                                    Timestamp submitted_at, const model::ResourceRequest& r, int adjustment) const;
  void BuildProfile(const std::vector<const RunningJob*>& running);
  // Pool nodes where a job may start now for its whole wall time without
  // touching a reservation.
  std::vector<const model::NodeUsage*> StartableNodes(const model::ResourceRequest& r, Timestamp end) const;
  void Hold(const model::Allocation& allocation, Timestamp from, Timestamp to, bool is_reservation);
  // Earliest start and nodes for a job that cannot start now, if any.
  std::optional<std::pair<Timestamp, std::vector<size_t>>> EarliestStart(const PendingJob& job) const;
  // Victims whose removal lets `job` start, fewest and lowest first, or empty.
  std::vector<const RunningJob*> ChooseVictims(const PendingJob& job, int64_t priority,
                                               const std::vector<const RunningJob*>& running);

  const SchedulerState& state_;
  WorkingNodes& nodes_;
  policy::QuotaTally& tally_;
  Plan& plan_;
  Timestamp now_;

  std::string pool_name_;
  const model::PoolSpec* pool_ = nullptr;
  const std::vector<const model::NodeUsage*>* pool_nodes_ = nullptr;
  std::map<std::string, size_t, std::less<>> node_index_;
  std::vector<NodeTimeline> timelines_;
  std::vector<bool> has_future_hold_;  // a reservation starts later than now on this node
  bool any_future_hold_ = false;
  int64_t pool_cpus_ = 0;
  int max_tier_ = 0;
  std::unordered_set<model::JobId> being_preempted_;
};

model::PriorityFactors PoolCycle::PriorityOf(const std::string& queue, const std::string& project,
                                             const std::string& user, Timestamp submitted_at,
                                             const model::ResourceRequest& r, int adjustment) const {
  const model::QueueSpec* spec = state_.Queue(queue);
  const model::PriorityWeights weights = spec ? spec->policy.Weights() : DefaultQueuePolicy().Weights();
  policy::PriorityInputs in;
  in.fairshare_factor = weights.fairshare > 0 ? state_.Fairshare(project, user) : 1.0;
  in.submitted_at = submitted_at;
  in.tier = spec ? spec->priority_tier : 0;
  in.max_tier_in_pool = max_tier_;
  in.job_cpus = int64_t{r.nodes} * r.cpus;
  in.pool_cpus = pool_cpus_;
  in.adjustment = adjustment;
  return policy::ComputePriority(weights, in, now_);
}

void PoolCycle::BuildProfile(const std::vector<const RunningJob*>& running) {
  const auto& nodes = *pool_nodes_;
  std::vector<std::vector<std::pair<Timestamp, Capacity>>> releases(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) node_index_.emplace(nodes[i]->spec.name, i);
  for (const RunningJob* job : running) {
    // A job past its end (in its kill grace) is about to free its room.
    const Timestamp end = std::max(job->expected_end, now_);
    for (const auto& share : job->allocation) {
      auto it = node_index_.find(share.node);
      if (it != node_index_.end()) releases[it->second].emplace_back(end, ShareCapacity(share));
    }
  }
  timelines_.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const model::NodeUsage& n = *nodes[i];
    if (n.state == model::NodeState::kUp) {
      timelines_.emplace_back(now_, Capacity{n.FreeCpus(), n.FreeMemoryMb(), n.FreeGpus("")}, std::move(releases[i]));
    } else {
      // Nothing new starts on a node that is not up, now or later.
      timelines_.emplace_back(now_, Capacity{0, 0, 0});
    }
  }
  has_future_hold_.assign(nodes.size(), false);
}

std::vector<const model::NodeUsage*> PoolCycle::StartableNodes(const model::ResourceRequest& r, Timestamp end) const {
  const auto& nodes = *pool_nodes_;
  if (!any_future_hold_) return nodes;  // free now = free for the whole window
  const Capacity need = policy::PerNode(r);
  std::vector<const model::NodeUsage*> out;
  out.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (has_future_hold_[i] && !timelines_[i].MinFree(now_, end).Covers(need)) continue;
    out.push_back(nodes[i]);
  }
  return out;
}

void PoolCycle::Hold(const model::Allocation& allocation, Timestamp from, Timestamp to, bool is_reservation) {
  for (const auto& share : allocation) {
    auto it = node_index_.find(share.node);
    if (it == node_index_.end()) continue;
    timelines_[it->second].Reserve(from, to, ShareCapacity(share));
    if (is_reservation && from > now_) {
      has_future_hold_[it->second] = true;
      any_future_hold_ = true;
    }
  }
}

std::optional<std::pair<Timestamp, std::vector<size_t>>> PoolCycle::EarliestStart(const PendingJob& job) const {
  const auto& nodes = *pool_nodes_;
  const model::ResourceRequest& r = job.resources;
  const Capacity need = policy::PerNode(r);
  const auto duration = Walltime(r);
  std::vector<size_t> eligible;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (CouldEverHold(*nodes[i], r, job.constraints)) eligible.push_back(i);
  }
  const size_t wanted = static_cast<size_t>(std::max(1, r.nodes));
  if (eligible.size() < wanted) return std::nullopt;

  // Each node's earliest window at or after `from`; the k-th smallest is a
  // candidate start, confirmed when k nodes hold the window from exactly
  // then. Otherwise move on to the next change in any profile. Single-node
  // jobs (the common case) finish in one round.
  Timestamp from = now_;
  constexpr int kMaxRounds = 256;  // bounded: give up (no reservation) rather than stall a cycle
  for (int round = 0; round < kMaxRounds; ++round) {
    std::vector<std::pair<Timestamp, size_t>> starts;
    for (size_t i : eligible) {
      if (auto t = timelines_[i].EarliestFit(from, duration, need)) starts.emplace_back(*t, i);
    }
    if (starts.size() < wanted) return std::nullopt;
    std::nth_element(starts.begin(), starts.begin() + static_cast<std::ptrdiff_t>(wanted - 1), starts.end());
    const Timestamp candidate = starts[wanted - 1].first;
    if (wanted == 1) return std::make_pair(candidate, std::vector<size_t>{starts[0].second});
    std::vector<size_t> chosen;
    const Timestamp end = policy::WindowEnd(candidate, duration);
    for (size_t i : eligible) {
      if (timelines_[i].MinFree(candidate, end).Covers(need)) {
        chosen.push_back(i);
        if (chosen.size() == wanted) return std::make_pair(candidate, chosen);
      }
    }
    Timestamp next = policy::kForever;
    for (size_t i : eligible) next = std::min(next, timelines_[i].NextChangeAfter(candidate));
    if (next == policy::kForever) return std::nullopt;
    from = next;
  }
  return std::nullopt;
}

std::vector<const RunningJob*> PoolCycle::ChooseVictims(const PendingJob& job, int64_t priority,
                                                        const std::vector<const RunningJob*>& running) {
  struct Candidate {
    const RunningJob* job;
    int64_t priority;
  };
  std::vector<Candidate> candidates;
  for (const RunningJob* r : running) {
    if (r->preempting_for || being_preempted_.count(r->id)) continue;
    if (!state_.PolicyOf(r->queue).preemptible) continue;
    if (std::find(job.preempted_by.begin(), job.preempted_by.end(), r->id) != job.preempted_by.end()) continue;
    const int64_t p = PriorityOf(r->queue, r->project, r->user, r->submitted_at, r->resources, r->adjustment).Total();
    if (p >= priority) continue;
    candidates.push_back({r, p});
  }
  if (candidates.empty()) return {};
  // Lowest priority first; among equals the most recently started (it has
  // lost the least work), then the highest id.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.priority != b.priority) return a.priority < b.priority;
    if (a.job->started_at != b.job->started_at) return a.job->started_at > b.job->started_at;
    return a.job->id > b.job->id;
  });

  // Hypothetical nodes: the pool as it is now, then release victims in order
  // until the job fits.
  std::vector<model::NodeUsage> scratch;
  scratch.reserve(pool_nodes_->size());
  for (const auto* n : *pool_nodes_) scratch.push_back(*n);
  std::map<std::string, size_t, std::less<>> index;
  for (size_t i = 0; i < scratch.size(); ++i) index.emplace(scratch[i].spec.name, i);
  auto apply = [&](const RunningJob& victim, int sign) {
    for (const auto& share : victim.allocation) {
      auto it = index.find(share.node);
      if (it != index.end()) scratch[it->second].Apply(share, sign);
    }
  };
  auto fits = [&] {
    std::vector<const model::NodeUsage*> ptrs;
    ptrs.reserve(scratch.size());
    for (const auto& n : scratch) ptrs.push_back(&n);
    return model::Fit(ptrs, job.resources, job.constraints, pool_name_).allocation.has_value();
  };
  std::vector<const RunningJob*> victims;
  bool enough = false;
  for (const auto& c : candidates) {
    apply(*c.job, -1);
    victims.push_back(c.job);
    if (fits()) {
      enough = true;
      break;
    }
  }
  if (!enough) return {};
  // Reprieve (as Kubernetes does): give back every victim, highest priority
  // first, whose room turns out not to be needed.
  for (size_t i = victims.size(); i-- > 0;) {
    apply(*victims[i], +1);
    if (fits()) {
      victims.erase(victims.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      apply(*victims[i], -1);
    }
  }
  return victims;
}

void PoolCycle::Run(const std::string& pool_name, std::vector<const PendingJob*>& jobs,
                    const std::vector<const RunningJob*>& running) {
  const bool explain = state_.snapshot.explain;
  pool_name_ = pool_name;
  auto pool_it = state_.pools.find(pool_name);
  pool_ = pool_it == state_.pools.end() ? nullptr : pool_it->second;
  const model::BackfillMode mode = pool_ ? pool_->backfill : model::BackfillMode::kEasy;
  const int depth = !pool_                                         ? 1
                    : mode == model::BackfillMode::kConservative ? pool_->reservation_depth
                    : mode == model::BackfillMode::kEasy         ? 1
                                                                 : 0;
  pool_nodes_ = &nodes_.Pool(pool_name);
  for (const auto* n : *pool_nodes_) pool_cpus_ += int64_t{n->spec.cpus};
  for (const auto& [name, queue] : state_.queues) {
    if (queue->pool == pool_name) max_tier_ = std::max(max_tier_, queue->priority_tier);
  }

  // 1. Priorities and order.
  auto t = SteadyClock::now();
  std::vector<Ranked> ranked;
  ranked.reserve(jobs.size());
  for (const PendingJob* job : jobs) {
    model::PriorityFactors f =
        PriorityOf(job->queue, job->project, job->user, job->submitted_at, job->resources, job->adjustment);
    ranked.push_back({job, f, f.Total()});
  }
  std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.job->submitted_at != b.job->submitted_at) return a.job->submitted_at < b.job->submitted_at;
    return a.job->id < b.job->id;
  });
  plan_.report.order += SteadyClock::now() - t;

  // 2. Profile.
  t = SteadyClock::now();
  BuildProfile(running);
  std::map<model::JobId, std::vector<model::JobId>> victims_in_flight;
  for (const RunningJob* r : running) {
    if (r->preempting_for) victims_in_flight[*r->preempting_for].push_back(r->id);
  }
  plan_.report.reserve += SteadyClock::now() - t;

  // Requests known not to start now: capacity only shrinks during a cycle,
  // so an identical request cannot start later in it either, and its
  // reasons (which quote free amounts) stay the same. With thousands of
  // identical agent jobs waiting, this keeps a saturated pool's cycle cheap.
  struct FailedShape {
    const PendingJob* job;
    std::vector<model::PendingReason> reasons;
  };
  std::vector<FailedShape> failed_shapes;
  constexpr size_t kMaxFailedShapes = 64;

  int waiting_ahead = 0;  // jobs of this pool ordered before the current one that stay pending
  bool pool_blocked = false;  // fcfs: a job ahead could not start
  int reservations = 0;
  std::optional<model::JobId> first_reservation;

  for (const Ranked& entry : ranked) {
    const PendingJob& job = *entry.job;
    ++plan_.report.considered;
    model::PendingInfo info;
    if (explain) info.priority = entry.factors;
    auto keep_pending = [&](model::PendingInfo& pending) {
      if (explain) {
        if (waiting_ahead > 0) pending.reasons.push_back({"Priority", JobsAhead(waiting_ahead, pool_name_)});
        plan_.pending.emplace(job.id, std::move(pending));
      }
      ++waiting_ahead;
    };

    // Admission: quotas and concurrency. An over-limit job waits without
    // holding anything up (it gets no reservation).
    t = SteadyClock::now();
    const policy::JobScope scope{job.queue, job.project, job.user};
    const model::QueuePolicy& queue_policy = state_.PolicyOf(job.queue);
    std::optional<model::PendingReason> limit =
        policy::CheckLimits(tally_, scope, job.resources, queue_policy, state_.Project(job.project));
    plan_.report.admit += SteadyClock::now() - t;
    if (limit) {
      if (explain) info.reasons.push_back(std::move(*limit));
      keep_pending(info);
      continue;
    }
    if (pool_blocked) {
      keep_pending(info);  // strict FCFS: nothing passes a blocked job
      continue;
    }

    // Start now, if it fits for its whole wall time without touching a reservation.
    const Timestamp end = policy::WindowEnd(now_, Walltime(job.resources));
    const FailedShape* known_failure = nullptr;
    for (const auto& f : failed_shapes) {
      if (f.job->resources == job.resources && f.job->constraints == job.constraints) {
        known_failure = &f;
        break;
      }
    }
    if (!known_failure) {
      t = SteadyClock::now();
      model::FitResult fit = model::Fit(StartableNodes(job.resources, end), job.resources, job.constraints, pool_name_);
      plan_.report.fit += SteadyClock::now() - t;
      if (fit.allocation) {
        nodes_.Apply(*fit.allocation, +1);
        Hold(*fit.allocation, now_, end, /*is_reservation=*/false);
        tally_.Add(scope, policy::AmountOf(job.resources));
        plan_.starts.push_back({job.id, std::move(*fit.allocation)});
        ++plan_.report.started;
        failed_shapes.clear();  // what is free has changed
        continue;
      }
      std::vector<model::PendingReason> reasons;
      if (explain) {
        reasons = std::move(fit.reasons);
        // Room that is free now but held for a reservation: say so.
        if (any_future_hold_ && first_reservation &&
            model::Fit(*pool_nodes_, job.resources, job.constraints, pool_name_).allocation) {
          reasons = {{"ReservedForJob", "the room it fits in now is reserved from its start for job " +
                                            std::to_string(*first_reservation) +
                                            " (a higher-priority job); it would not end before that start"}};
        }
      }
      if (failed_shapes.size() < kMaxFailedShapes) failed_shapes.push_back({&job, reasons});
      if (explain) info.reasons = std::move(reasons);
    } else if (explain) {
      info.reasons = known_failure->reasons;
    }

    // Preemption: its queue may preempt, and no victims are already stopping for it.
    if (queue_policy.can_preempt) {
      auto in_flight = victims_in_flight.find(job.id);
      if (in_flight != victims_in_flight.end()) {
        if (explain) {
          info.reasons.insert(info.reasons.begin(),
                              {"Preempting", "waiting for preempted job(s) " + JoinIds(in_flight->second) + " to stop"});
        }
      } else {
        std::vector<const RunningJob*> victims = ChooseVictims(job, entry.priority, running);
        if (!victims.empty()) {
          std::vector<model::JobId> ids;
          for (const RunningJob* v : victims) {
            const model::QueuePolicy& vp = state_.PolicyOf(v->queue);
            plan_.preemptions.push_back(
                {v->id, job.id, vp.preempt_grace_seconds, vp.preempt_action == model::PreemptAction::kRequeue});
            being_preempted_.insert(v->id);
            ids.push_back(v->id);
            ++plan_.report.preempted;
          }
          if (explain) {
            info.reasons.insert(info.reasons.begin(),
                                {"Preempting", "preempting job(s) " + JoinIds(ids) + " to make room"});
          }
        }
      }
    }

    // Reservation, per the pool's backfill mode.
    if (mode == model::BackfillMode::kFcfs) {
      pool_blocked = true;
    } else if (depth == 0 || reservations < depth) {
      t = SteadyClock::now();
      if (auto earliest = EarliestStart(job)) {
        const auto& [start, chosen] = *earliest;
        const Timestamp reserved_end = policy::WindowEnd(start, Walltime(job.resources));
        for (size_t i : chosen) {
          timelines_[i].Reserve(start, reserved_end, policy::PerNode(job.resources));
          if (start > now_) {
            has_future_hold_[i] = true;
            any_future_hold_ = true;
          }
        }
        ++reservations;
        ++plan_.report.reservations;
        if (!first_reservation) first_reservation = job.id;
        if (explain) info.estimated_start = start;
      }
      plan_.report.reserve += SteadyClock::now() - t;
    }
    keep_pending(info);
  }
}

}  // namespace

SchedulerConfig SchedulerConfig::From(const model::ClusterSpec& cluster) {
  return {cluster.queues, cluster.pools, cluster.projects};
}

Scheduler::Scheduler(SchedulerConfig config) : config_(std::move(config)) {
  for (const auto& q : config_.queues) queues_.emplace(q.name, &q);
  for (const auto& p : config_.pools) pools_.emplace(p.name, &p);
  for (const auto& p : config_.projects) projects_.emplace(p.name, &p);
}

Plan Scheduler::Decide(const Snapshot& snapshot, Timestamp now) const {
  const auto cycle_start = SteadyClock::now();
  Plan plan;
  WorkingNodes nodes(snapshot.nodes);
  const SchedulerState state{snapshot, queues_, pools_, projects_};

  policy::QuotaTally tally;
  std::map<std::string, std::vector<const RunningJob*>> running_by_pool;
  for (const auto& r : snapshot.running) {
    tally.Add({r.queue, r.project, r.user}, policy::AmountOf(r.resources));
    running_by_pool[r.pool].push_back(&r);
  }
  // Pools in name order; within a pool the snapshot's order is irrelevant
  // (the sort is total).
  std::map<std::string, std::vector<const PendingJob*>> pending_by_pool;
  for (const auto& job : snapshot.pending) pending_by_pool[job.pool].push_back(&job);
  static const std::vector<const RunningJob*> kNoneRunning;
  for (auto& [pool, jobs] : pending_by_pool) {
    auto running = running_by_pool.find(pool);
    PoolCycle cycle(state, nodes, tally, plan, now);
    cycle.Run(pool, jobs, running == running_by_pool.end() ? kNoneRunning : running->second);
  }
  plan.report.total = SteadyClock::now() - cycle_start;
  return plan;
}

}  // namespace unisched::scheduler
