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
    // the order the snapshot happened to list nodes in. (Usually it is in
    // that order already: checking is one comparison per node.)
    auto by_name = [](const model::NodeUsage& a, const model::NodeUsage& b) { return a.spec.name < b.spec.name; };
    if (!std::is_sorted(nodes_.begin(), nodes_.end(), by_name)) {
      std::stable_sort(nodes_.begin(), nodes_.end(), by_name);
    }
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
  std::unordered_map<std::string_view, size_t> index_;  // views of nodes_' names
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

using ReasonList = std::shared_ptr<const std::vector<model::PendingReason>>;

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
  struct ScopeInfo;
  // A pending job in priority order. Carries what the walk needs for most
  // jobs so that it rarely touches the job itself (100,000 jobs visited in
  // priority order are scattered in memory: each touch is a cache miss).
  struct Ranked {
    const PendingJob* job;
    const ScopeInfo* scope;
    int64_t priority;
    Timestamp submitted_at;
    model::JobId id;
    uint32_t shape;  // index into shapes, or kNoShape
    uint32_t index;  // into factors
  };
  static constexpr uint32_t kNoShape = UINT32_MAX;

  // What a cycle needs to know about a (queue, project, user): looked up once
  // per cycle, not once per job (100,000 jobs come from a few hundred scopes).
  struct ScopeInfo {
    const model::QueueSpec* queue_spec;
    const model::QueuePolicy* policy;
    model::PriorityWeights weights;
    const model::ProjectPolicy* project;
    double fairshare;
    bool has_limits;  // a quota or concurrency cap applies
  };
  struct ScopeKey {
    std::string_view queue, project, user;
    bool operator==(const ScopeKey&) const = default;
  };
  struct ScopeKeyHash {
    // Looked up for every pending job: a cheap hash of the length and the
    // first and last eight bytes is enough for a few hundred short names
    // (equal keys are still compared in full).
    static uint64_t Cheap(std::string_view s) {
      uint64_t head = 0, tail = 0;
      std::memcpy(&head, s.data(), std::min<size_t>(8, s.size()));
      if (s.size() > 8)
        std::memcpy(&tail, s.data() + s.size() - std::min<size_t>(8, s.size() - 8), std::min<size_t>(8, s.size() - 8));
      return (head * 0x9E3779B97F4A7C15ULL) ^ (tail * 0xC2B2AE3D27D4EB4FULL) ^ s.size();
    }
    size_t operator()(const ScopeKey& k) const {
      return static_cast<size_t>(Cheap(k.queue) * 31 + Cheap(k.project) * 1000003 + Cheap(k.user) * 998244353);
    }
  };
  const ScopeInfo& Scope(const std::string& queue, const std::string& project, const std::string& user);
  model::PriorityFactors PriorityOf(const ScopeInfo& scope, Timestamp submitted_at, const model::ResourceRequest& r,
                                    int adjustment) const;
  void BuildProfile(const std::vector<const RunningJob*>& running);
  // Pool nodes where a job may start now for its whole wall time without
  // touching a reservation.
  std::vector<const model::NodeUsage*> StartableNodes(const model::ResourceRequest& r, Timestamp end) const;
  void Hold(const model::Allocation& allocation, Timestamp from, Timestamp to, bool is_reservation);
  // Earliest start and nodes for a job that cannot start now, if any.
  std::optional<std::pair<Timestamp, std::vector<size_t>>> EarliestStart(const PendingJob& job);
  std::optional<std::pair<Timestamp, std::vector<size_t>>> EarliestSingleNodeStart(const PendingJob& job);
  // Pool nodes (indices) that could ever hold one node's share of the job.
  std::vector<size_t> Eligible(const PendingJob& job) const;
  void RecordReservation(model::JobId job, Timestamp start, const std::vector<size_t>& node_indices);
  // The job whose reservation holds one of these nodes, if any.
  std::optional<model::JobId> HolderOf(const model::Allocation& allocation) const;
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
  std::unordered_map<std::string_view, size_t> node_index_;  // views of the pool nodes' names
  std::vector<NodeTimeline> timelines_;
  std::vector<bool> has_future_hold_;     // a reservation holds room on this node (from now or later)
  std::vector<uint64_t> node_version_;    // bumped whenever a node's timeline changes
  std::vector<size_t> roomy_;             // up nodes with something free when the cycle began
  std::vector<model::JobId> hold_owner_;  // the last job reserved on each node (0: none)
  // Per request shape, each eligible node's earliest window, valid while the
  // node's version is unchanged. Within a cycle profiles only fill up, so a
  // node untouched since keeps its answer: with conservative backfill and
  // many jobs of few shapes, each reservation re-examines only the nodes the
  // previous ones changed.
  struct ShapeEarliest {
    const PendingJob* job;  // the representative: its resources and constraints
    std::vector<size_t> eligible;
    std::vector<std::optional<Timestamp>> earliest;
    std::vector<uint64_t> computed_at;
  };
  std::vector<ShapeEarliest> earliest_cache_;
  bool any_future_hold_ = false;
  int64_t pool_cpus_ = 0;
  int max_tier_ = 0;
  std::unordered_set<model::JobId> being_preempted_;
  // Keys view the snapshot's strings, which outlive the cycle.
  std::unordered_map<ScopeKey, ScopeInfo, ScopeKeyHash> scopes_;
};

const PoolCycle::ScopeInfo& PoolCycle::Scope(const std::string& queue, const std::string& project,
                                             const std::string& user) {
  auto [it, inserted] = scopes_.try_emplace(ScopeKey{queue, project, user});
  if (inserted) {
    ScopeInfo& info = it->second;
    info.queue_spec = state_.Queue(queue);
    info.policy = &state_.PolicyOf(queue);
    info.weights = info.policy->Weights();
    info.project = state_.Project(project);
    info.fairshare = info.weights.fairshare > 0 ? state_.Fairshare(project, user) : 1.0;
    info.has_limits = info.policy->max_concurrency || !info.policy->project_quota.Empty() ||
                      !info.policy->user_quota.Empty() ||
                      (info.project && (!info.project->quota.Empty() || !info.project->budget.Empty()));
  }
  return it->second;
}

model::PriorityFactors PoolCycle::PriorityOf(const ScopeInfo& scope, Timestamp submitted_at,
                                             const model::ResourceRequest& r, int adjustment) const {
  const model::PriorityWeights& weights = scope.weights;
  policy::PriorityInputs in;
  in.fairshare_factor = scope.fairshare;
  in.submitted_at = submitted_at;
  in.tier = scope.queue_spec ? scope.queue_spec->priority_tier : 0;
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
  node_version_.assign(nodes.size(), 0);
  hold_owner_.assign(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const model::NodeUsage& n = *nodes[i];
    if (n.state == model::NodeState::kUp && (n.FreeCpus() > 0 || n.FreeMemoryMb() > 0 || n.FreeGpus("") > 0)) {
      roomy_.push_back(i);
    }
  }
}

std::vector<const model::NodeUsage*> PoolCycle::StartableNodes(const model::ResourceRequest& r, Timestamp end) const {
  const auto& nodes = *pool_nodes_;
  // Only nodes that had room when the cycle began can have room now
  // (a cycle only takes room); on a busy cluster that is a few percent.
  const bool needs_nothing = r.cpus <= 0 && r.memory_mb <= 0 && r.gpus <= 0;
  const Capacity need = policy::PerNode(r);
  std::vector<const model::NodeUsage*> out;
  out.reserve(needs_nothing ? nodes.size() : roomy_.size());
  auto consider = [&](size_t i) {
    // A node held for a reservation must keep the room over the whole window.
    if (any_future_hold_ && has_future_hold_[i] && !timelines_[i].MinFree(now_, end).Covers(need)) return;
    out.push_back(nodes[i]);
  };
  if (needs_nothing) {
    for (size_t i = 0; i < nodes.size(); ++i) consider(i);
  } else {
    for (size_t i : roomy_) consider(i);
  }
  return out;
}

void PoolCycle::Hold(const model::Allocation& allocation, Timestamp from, Timestamp to, bool is_reservation) {
  for (const auto& share : allocation) {
    auto it = node_index_.find(share.node);
    if (it == node_index_.end()) continue;
    timelines_[it->second].Reserve(from, to, ShareCapacity(share));
    ++node_version_[it->second];
    if (is_reservation && from > now_) {
      has_future_hold_[it->second] = true;
      any_future_hold_ = true;
    }
  }
}

void PoolCycle::RecordReservation(model::JobId job, Timestamp start, const std::vector<size_t>& node_indices) {
  Reservation r{job, start, {}};
  for (size_t i : node_indices) r.nodes.push_back((*pool_nodes_)[i]->spec.name);
  plan_.reservations.push_back(std::move(r));
  ++plan_.report.reservations;
}

std::optional<model::JobId> PoolCycle::HolderOf(const model::Allocation& allocation) const {
  for (const auto& share : allocation) {
    auto it = node_index_.find(share.node);
    if (it != node_index_.end() && hold_owner_[it->second] != 0) return hold_owner_[it->second];
  }
  return std::nullopt;
}

std::vector<size_t> PoolCycle::Eligible(const PendingJob& job) const {
  std::vector<size_t> eligible;
  for (size_t i = 0; i < pool_nodes_->size(); ++i) {
    if (CouldEverHold(*(*pool_nodes_)[i], job.resources, job.constraints)) eligible.push_back(i);
  }
  return eligible;
}

std::optional<std::pair<Timestamp, std::vector<size_t>>> PoolCycle::EarliestSingleNodeStart(const PendingJob& job) {
  constexpr size_t kMaxCachedShapes = 64;
  ShapeEarliest* cache = nullptr;
  for (auto& c : earliest_cache_) {
    if (c.job->resources == job.resources && c.job->constraints == job.constraints) cache = &c;
  }
  ShapeEarliest scratch;
  if (!cache) {
    cache = earliest_cache_.size() < kMaxCachedShapes ? &earliest_cache_.emplace_back() : &scratch;
    cache->job = &job;
    cache->eligible = Eligible(job);
    cache->earliest.assign(cache->eligible.size(), std::nullopt);
    cache->computed_at.assign(cache->eligible.size(), UINT64_MAX);
  }
  const Capacity need = policy::PerNode(job.resources);
  const auto duration = Walltime(job.resources);
  std::optional<std::pair<Timestamp, size_t>> best;
  for (size_t k = 0; k < cache->eligible.size(); ++k) {
    const size_t i = cache->eligible[k];
    if (cache->computed_at[k] != node_version_[i]) {
      cache->earliest[k] = timelines_[i].EarliestFit(now_, duration, need);
      cache->computed_at[k] = node_version_[i];
    }
    // The earliest; among equals the first in name order.
    if (cache->earliest[k] && (!best || *cache->earliest[k] < best->first))
      best = std::make_pair(*cache->earliest[k], i);
  }
  if (!best) return std::nullopt;
  return std::make_pair(best->first, std::vector<size_t>{best->second});
}

std::optional<std::pair<Timestamp, std::vector<size_t>>> PoolCycle::EarliestStart(const PendingJob& job) {
  const model::ResourceRequest& r = job.resources;
  const size_t wanted = static_cast<size_t>(std::max(1, r.nodes));
  if (wanted == 1) return EarliestSingleNodeStart(job);
  const Capacity need = policy::PerNode(r);
  const auto duration = Walltime(r);
  const std::vector<size_t> eligible = Eligible(job);
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
    if (r->preempting_for || r->stopping || being_preempted_.count(r->id)) continue;
    const ScopeInfo& scope = Scope(r->queue, r->project, r->user);
    if (!scope.policy->preemptible) continue;
    if (std::find(job.preempted_by.begin(), job.preempted_by.end(), r->id) != job.preempted_by.end()) continue;
    const int64_t p = PriorityOf(scope, r->submitted_at, r->resources, r->adjustment).Total();
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
    return model::Fit(ptrs, job.resources, job.constraints, pool_name_, /*explain=*/false).allocation.has_value();
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
  const int depth = !pool_                                       ? 1
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
  std::vector<model::PriorityFactors> factors;
  factors.reserve(jobs.size());
  // Distinct request shapes (resources and constraints), found while the
  // jobs are visited in memory order.
  std::vector<const PendingJob*> shapes;
  constexpr size_t kMaxShapes = 256;
  for (const PendingJob* job : jobs) {
    const ScopeInfo& scope = Scope(job->queue, job->project, job->user);
    factors.push_back(PriorityOf(scope, job->submitted_at, job->resources, job->adjustment));
    uint32_t shape = kNoShape;
    for (size_t k = 0; k < shapes.size(); ++k) {
      if (shapes[k]->resources == job->resources && shapes[k]->constraints == job->constraints) {
        shape = static_cast<uint32_t>(k);
        break;
      }
    }
    if (shape == kNoShape && shapes.size() < kMaxShapes) {
      shape = static_cast<uint32_t>(shapes.size());
      shapes.push_back(job);
    }
    ranked.push_back({job, &scope, factors.back().Total(), job->submitted_at, job->id, shape,
                      static_cast<uint32_t>(factors.size() - 1)});
  }
  std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.submitted_at != b.submitted_at) return a.submitted_at < b.submitted_at;
    return a.id < b.id;
  });
  plan_.report.order += SteadyClock::now() - t;

  // 2. Profile.
  t = SteadyClock::now();
  BuildProfile(running);
  std::map<model::JobId, std::vector<model::JobId>> victims_in_flight;
  for (const RunningJob* r : running) {
    if (r->preempting_for) victims_in_flight[*r->preempting_for].push_back(r->id);
  }
  // Conservative: previous reservations hold their room while the jobs
  // before them are placed, so each job only ever moves earlier. One that no
  // longer fits where it was (its node went down) is placed afresh.
  std::unordered_map<model::JobId, std::vector<size_t>> previous_holds;
  if (mode == model::BackfillMode::kConservative) {
    for (const Ranked& entry : ranked) {
      const PendingJob& job = *entry.job;
      if (!job.reserved_start || job.reserved_nodes.empty()) continue;
      std::vector<size_t> held;
      for (const auto& name : job.reserved_nodes) {
        auto it = node_index_.find(name);
        if (it == node_index_.end()) break;
        held.push_back(it->second);
      }
      if (held.size() != job.reserved_nodes.size()) continue;
      const Timestamp from = std::max(*job.reserved_start, now_);
      const Timestamp to = policy::WindowEnd(from, Walltime(job.resources));
      const Capacity need = policy::PerNode(job.resources);
      const bool fits = std::all_of(held.begin(), held.end(), [&](size_t i) {
        return CouldEverHold(*(*pool_nodes_)[i], job.resources, job.constraints) &&
               timelines_[i].MinFree(from, to).Covers(need);
      });
      if (!fits) continue;
      for (size_t i : held) {
        timelines_[i].Reserve(from, to, need);
        ++node_version_[i];
        has_future_hold_[i] = true;
        any_future_hold_ = true;
        hold_owner_[i] = job.id;
      }
      previous_holds.emplace(job.id, std::move(held));
    }
  }
  plan_.report.reserve += SteadyClock::now() - t;

  // Requests known not to start now: capacity only shrinks during a cycle,
  // so an identical request cannot start later in it either. Its reasons
  // are reused as first found in the cycle (free amounts they quote may have
  // shrunk since; the next cycle refreshes them). With thousands of
  // identical jobs waiting, this keeps a saturated pool's cycle cheap.
  std::vector<char> shape_failed(shapes.size(), 0);
  std::vector<ReasonList> shape_reasons(shapes.size());

  const auto pool_name_shared = std::make_shared<const std::string>(pool_name_);
  if (explain) plan_.pending.reserve(plan_.pending.size() + ranked.size());
  // The pool's backend places jobs itself (another cluster's scheduler): an
  // admitted job starts with no allocation here; where it runs is the
  // backend's choice, so there is nothing to fit, reserve or preempt.
  const bool backend_places = pool_ && pool_->PlacedByBackend();
  int waiting_ahead = 0;      // jobs of this pool ordered before the current one that stay pending
  bool pool_blocked = false;  // fcfs: a job ahead could not start
  int reservations = 0;

  for (const Ranked& entry : ranked) {
    const PendingJob& job = *entry.job;  // a reference: not read unless needed
    ++plan_.report.considered;
    model::PendingInfo info;
    if (explain) info.priority = factors[entry.index];
    auto keep_pending = [&](model::PendingInfo& pending) {
      if (explain) {
        pending.jobs_ahead = waiting_ahead;
        pending.pool = pool_name_shared;
        plan_.pending.emplace(entry.id, std::move(pending));
      }
      ++waiting_ahead;
    };
    // Puts a reason before the job's own (shared) ones.
    auto prepend = [&](model::PendingReason reason) {
      auto list = std::make_shared<std::vector<model::PendingReason>>();
      list->push_back(std::move(reason));
      if (info.own) list->insert(list->end(), info.own->begin(), info.own->end());
      info.own = std::move(list);
    };

    // Its previous reservation, if held: given back now, then either kept
    // as it was (not moving this cycle, start still ahead) or replaced by
    // one at least as early (or a start).
    if (!previous_holds.empty()) {
      if (auto held = previous_holds.find(entry.id); held != previous_holds.end()) {
        const Timestamp from = std::max(*job.reserved_start, now_);
        const Timestamp to = policy::WindowEnd(from, Walltime(job.resources));
        for (size_t i : held->second) {
          timelines_[i].Release(from, to, policy::PerNode(job.resources));
          ++node_version_[i];
        }
        if (!state_.snapshot.move_reservations && from > now_) {
          for (size_t i : held->second) {
            timelines_[i].Reserve(from, to, policy::PerNode(job.resources));
            ++node_version_[i];
          }
          RecordReservation(job.id, from, held->second);
          ++reservations;
          if (explain) {
            info.own = std::make_shared<const std::vector<model::PendingReason>>(
                std::vector<model::PendingReason>{{"Resources", "waits for its reservation (conservative backfill)"}});
            info.estimated_start = from;
          }
          keep_pending(info);
          continue;
        }
      }
    }

    // Admission: quotas and concurrency. An over-limit job waits without
    // holding anything up (it gets no reservation).
    const model::QueuePolicy& queue_policy = *entry.scope->policy;
    std::optional<model::PendingReason> limit;
    if (entry.scope->has_limits) {
      limit = policy::CheckLimits(tally_, {job.queue, job.project, job.user}, job.resources, queue_policy,
                                  entry.scope->project);
      if (!limit && entry.scope->project && !entry.scope->project->budget.Empty()) {
        auto use = state_.snapshot.budget_use.find(job.project);
        limit = policy::CheckBudget(job.project, entry.scope->project->budget,
                                    use == state_.snapshot.budget_use.end() ? policy::BudgetUse{} : use->second);
      }
    }
    if (limit) {
      if (explain) prepend(std::move(*limit));
      keep_pending(info);
      continue;
    }
    if (pool_blocked) {
      keep_pending(info);  // strict FCFS: nothing passes a blocked job
      continue;
    }
    if (backend_places) {
      tally_.Add({job.queue, job.project, job.user}, policy::AmountOf(job.resources));
      plan_.starts.push_back({job.id, {}});
      ++plan_.report.started;
      continue;
    }

    // Start now, if it fits for its whole wall time without touching a reservation.
    const bool known_failure = entry.shape != kNoShape && shape_failed[entry.shape];
    if (!known_failure) {
      const Timestamp end = policy::WindowEnd(now_, Walltime(job.resources));
      t = SteadyClock::now();
      model::FitResult fit =
          model::Fit(StartableNodes(job.resources, end), job.resources, job.constraints, pool_name_, explain);
      plan_.report.fit += SteadyClock::now() - t;
      if (fit.allocation) {
        nodes_.Apply(*fit.allocation, +1);
        Hold(*fit.allocation, now_, end, /*is_reservation=*/false);
        tally_.Add({job.queue, job.project, job.user}, policy::AmountOf(job.resources));
        plan_.starts.push_back({job.id, std::move(*fit.allocation)});
        ++plan_.report.started;
        continue;
      }
      ReasonList reasons;
      if (explain) {
        std::vector<model::PendingReason> list = std::move(fit.reasons);
        {
          // Full nodes and nodes held for a reservation were left out of the
          // fit above, so its reasons describe only the rest ("p has no
          // nodes" when that is none). Explain against the whole pool: if
          // the job fits there now, a reservation holds it back; else the
          // pool-wide shortfall says why. (Once per request shape and cycle.)
          model::FitResult whole = model::Fit(*pool_nodes_, job.resources, job.constraints, pool_name_);
          if (!whole.allocation) {
            list = std::move(whole.reasons);
          } else if (std::optional<model::JobId> holder = HolderOf(*whole.allocation)) {
            list = {{"ReservedForJob", "the room it fits in now is reserved from its start for job " +
                                           std::to_string(*holder) +
                                           " (a higher-priority job); it would not end before that start"}};
          }
        }
        reasons = std::make_shared<const std::vector<model::PendingReason>>(std::move(list));
      }
      if (entry.shape != kNoShape) {
        shape_failed[entry.shape] = 1;
        shape_reasons[entry.shape] = reasons;
      }
      info.own = std::move(reasons);
    } else if (explain) {
      info.own = shape_reasons[entry.shape];
    }

    // Preemption: its queue may preempt, and no victims are already stopping for it.
    if (queue_policy.can_preempt) {
      auto in_flight = victims_in_flight.find(job.id);
      if (in_flight != victims_in_flight.end()) {
        if (explain) prepend({"Preempting", "waiting for preempted job(s) " + JoinIds(in_flight->second) + " to stop"});
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
          if (explain) prepend({"Preempting", "preempting job(s) " + JoinIds(ids) + " to make room"});
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
          ++node_version_[i];
          // Even a reservation from now holds room a later job must not take:
          // the job did not fit now, yet the profile has it fit (a job past
          // its end still holds the room it frees "now"; GPUs are counted,
          // not matched by model).
          has_future_hold_[i] = true;
          any_future_hold_ = true;
          hold_owner_[i] = job.id;
        }
        RecordReservation(job.id, start, chosen);
        ++reservations;
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
  const SchedulerState state{snapshot, queues_, pools_, projects_};

  // Grouped by pool name (views of the snapshot's strings: one hash per
  // job, not a string-keyed tree walk).
  policy::QuotaTally tally;
  std::unordered_map<std::string_view, std::vector<const RunningJob*>> running_by_pool;
  for (const auto& r : snapshot.running) {
    tally.Add({r.queue, r.project, r.user}, policy::AmountOf(r.resources));
    running_by_pool[r.pool].push_back(&r);
  }
  for (const auto& h : snapshot.quota_holders) tally.Add({h.queue, h.project, h.user}, h.amount);
  std::unordered_map<std::string_view, std::vector<const PendingJob*>> pending_by_pool;
  for (const auto& job : snapshot.pending) pending_by_pool[job.pool].push_back(&job);
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
  plan.pending.Seal();
  plan.report.total = SteadyClock::now() - cycle_start;
  return plan;
}

}  // namespace unisched::scheduler
