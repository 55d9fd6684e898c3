#pragma once
// Inside a scheduling cycle (scheduler.h): the cycle's working copy of the
// nodes, the lookups shared by its pools, and PoolCycle, one pool's part of
// the cycle. Its parts live by concern:
//   pool_cycle.cc    the walk: order, admission, start, then preempt or reserve
//   reservations.cc  the availability profile, earliest starts, reservations
//   preemption.cc    choosing victims
// Internal to the scheduler module.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <memory_resource>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "unisched/common/short_text.h"
#include "unisched/policy/priority.h"
#include "unisched/policy/profile.h"
#include "unisched/policy/quota.h"
#include "unisched/scheduler/scheduler.h"

namespace unisched::scheduler::internal {

using SteadyClock = std::chrono::steady_clock;
using policy::Capacity;
using policy::NodeTimeline;

const model::QueuePolicy& DefaultQueuePolicy();

// The cycle's view of the nodes: the snapshot's, updated with each start as
// it is decided. A node is copied when a start first changes it: most of a
// large pool's nodes see no start in a cycle, and a replay's passes are too
// many and too short to copy even one node each.
class WorkingNodes {
 public:
  explicit WorkingNodes(const std::vector<model::NodeUsage>& nodes) {
    // Name order, so the candidate list (and so the plan) does not depend on
    // the order the snapshot happened to list nodes in. (Usually it is in
    // that order already: checking is one comparison per node.)
    std::vector<const model::NodeUsage*> by_name;
    by_name.reserve(nodes.size());
    for (const auto& node : nodes) by_name.push_back(&node);
    auto name_order = [](const model::NodeUsage* a, const model::NodeUsage* b) { return a->spec.name < b->spec.name; };
    if (!std::is_sorted(by_name.begin(), by_name.end(), name_order)) {
      std::stable_sort(by_name.begin(), by_name.end(), name_order);
    }
    for (const model::NodeUsage* node : by_name) {
      std::vector<const model::NodeUsage*>& pool = by_pool_[node->spec.pool];
      index_.try_emplace(node->spec.name, Place{&pool, pool.size()});  // a name given twice: the first, as in Fit
      pool.push_back(node);
    }
  }
  // by_pool_ points into the snapshot and copies_.
  WorkingNodes(const WorkingNodes&) = delete;
  WorkingNodes& operator=(const WorkingNodes&) = delete;

  // A start changes a node by replacing its entry here: a pool's list stays
  // the same vector, so a reference to it sees every start.
  const std::vector<const model::NodeUsage*>& Pool(const std::string& pool) const {
    static const std::vector<const model::NodeUsage*> kNone;
    auto it = by_pool_.find(pool);
    return it == by_pool_.end() ? kNone : it->second;
  }

  void Apply(const model::Allocation& allocation, int sign) {
    for (const auto& share : allocation) {
      auto it = index_.find(share.node);
      if (it == index_.end()) continue;
      Place& place = it->second;
      if (!place.copy) {
        place.copy = &copies_.emplace_back(*(*place.pool)[place.position]);
        (*place.pool)[place.position] = place.copy;
      }
      place.copy->Apply(share, sign);
    }
  }

 private:
  struct Place {
    std::vector<const model::NodeUsage*>* pool;  // its pool's list in by_pool_
    size_t position;                             // in that list
    model::NodeUsage* copy = nullptr;            // in copies_, once a start changed it
  };
  std::map<std::string, std::vector<const model::NodeUsage*>, std::less<>> by_pool_;
  std::unordered_map<std::string_view, Place> index_;  // views of the snapshot's names
  std::deque<model::NodeUsage> copies_;                // stable addresses as it grows
};

inline Capacity ShareCapacity(const model::NodeAllocation& share) {
  return {share.cpus, share.memory_mb, static_cast<int64_t>(share.gpu_indices.size())};
}

inline std::chrono::milliseconds Walltime(const model::ResourceRequest& r) {
  return std::chrono::seconds(r.walltime_seconds);
}

// Whether an empty node could ever hold one node's share of the request: the
// cheap test first, labels and GPU model only when asked for.
inline bool CouldEverHold(const model::NodeUsage& node, const model::ResourceRequest& r,
                          const model::Labels& constraints) {
  if (node.state != model::NodeState::kUp) return false;
  if (node.spec.cpus < r.cpus || node.spec.memory_mb < r.memory_mb ||
      static_cast<int>(node.spec.gpus.size()) < r.gpus) {
    return false;
  }
  if (constraints.empty() && r.gpu_model.empty()) return true;
  return !model::CheckNode(node, r, constraints, /*ignore_usage=*/true).has_value();
}

using ReasonList = std::shared_ptr<const std::vector<model::PendingReason>>;

std::string JoinIds(const std::vector<model::JobId>& ids);

// Lookups shared by every pool of a cycle.
struct SchedulerState {
  const Snapshot& snapshot;
  const std::map<std::string, const model::QueueSpec*, std::less<>>& queues;
  const std::map<std::string, const model::PoolSpec*, std::less<>>& pools;
  const std::map<std::string, const model::ProjectPolicy*, std::less<>>& projects;
  // The queues and projects that set a quota, cap or budget. A job counts
  // toward what CheckLimits reads only through its queue's limits (the
  // queue, queue + project and queue + user entries) or its project's (the
  // project entry): the tally (QuotaTally) holds only such jobs, running or
  // started in the cycle.
  const std::set<std::string, std::less<>>& limited_queues;
  const std::set<std::string, std::less<>>& limited_projects;

  const model::QueueSpec* Queue(const std::string& name) const {
    auto it = queues.find(name);
    return it == queues.end() ? nullptr : it->second;
  }
  const model::QueuePolicy& PolicyOf(const std::string& queue) const {
    const model::QueueSpec* q = Queue(queue);
    return q ? q->policy : DefaultQueuePolicy();
  }
  bool CountsLimits() const { return !limited_queues.empty() || !limited_projects.empty(); }
  bool Tallied(const std::string& queue, const std::string& project) const {
    return Among(limited_queues, queue) || Among(limited_projects, project);
  }
  // Asked once per running job (tens of thousands a cycle) of sets that
  // hold a few names: a scan of those compares in place, where the tree's
  // walk called memcmp at each node.
  static bool Among(const std::set<std::string, std::less<>>& names, const std::string& name) {
    if (names.size() > 8) return names.count(name) > 0;
    return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return SameShortText(n, name); });
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

  // `jobs`: the pool's pending jobs, ranked here; or, with `order`
  // (Snapshot::pending_order), none: the snapshot's jobs in that order,
  // taken as the walk needs them.
  void Run(const std::string& pool_name, std::vector<const PendingJob*>& jobs,
           const std::vector<const RunningJob*>& running, const std::vector<uint32_t>* order = nullptr);

 private:
  struct ScopeInfo;
  // A pending job in priority order. Carries what the walk needs for most
  // jobs so that it rarely touches the job itself (100,000 jobs visited in
  // priority order are scattered in memory: each touch is a cache miss).
  struct Ranked {
    const PendingJob* job;
    const ScopeInfo* scope;  // nullptr until described (see Run: a reservation likely kept)
    int64_t priority;
    Timestamp submitted_at;
    model::JobId id;
    uint32_t shape;  // index into shapes, or kNoShape
    uint32_t index;  // into factors
  };
  static constexpr uint32_t kNoShape = UINT32_MAX;

  // What a cycle needs to know about a (queue, project, user): looked up once
  // per cycle, not once per job (100,000 jobs come from a few hundred scopes).
  // In a queue that does not weigh fair share, the user is left out (empty).
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
    bool operator==(const ScopeKey& other) const {
      return SameShortText(user, other.user) && SameShortText(project, other.project) &&
             SameShortText(queue, other.queue);
    }
  };
  struct ScopeKeyHash {
    // Looked up for every pending job: a cheap hash of the length and the
    // first and last eight bytes is enough for a few hundred short names
    // (equal keys are still compared in full).
    size_t operator()(const ScopeKey& k) const {
      return static_cast<size_t>(ShortTextHash(k.queue) * 31 + ShortTextHash(k.project) * 1000003 +
                                 ShortTextHash(k.user) * 998244353);
    }
  };
  // A scope found this cycle. In a deep queue its key views its own copy of
  // the names where they fit in `text` (else the first job's strings):
  // comparing with a key that views an old job's strings took a cache miss
  // into a snapshot of 100,000 jobs at nearly every lookup.
  struct ScopeEntry {
    ScopeEntry() {}     // `text` is left as it is: only its used part is written
    uint64_t hash = 0;  // ScopeKeyHash of key
    ScopeKey key;
    ScopeInfo info{};
    std::array<char, 64> text;
  };
  // A slot of the open-addressed table: the entry's hash beside its number,
  // so a probe that passes a slot does not touch the entry.
  struct ScopeSlotEntry {
    uint64_t hash = 0;            // ScopeKeyHash
    ScopeEntry* entry = nullptr;  // nullptr: empty
  };
  // The table's slot for a hash: its top bits after a multiply (Fibonacci
  // hashing), for ScopeKeyHash's low bits barely vary between names that
  // differ only after their first bytes ("user-17", "user-18").
  size_t ScopeSlot(uint64_t hash) const { return static_cast<size_t>((hash * 0x9E3779B97F4A7C15ULL) >> scope_shift_); }
  // Doubles the table (scope_slots_) and places every entry again.
  void GrowScopeTable();
  const ScopeInfo& Scope(const std::string& queue, const std::string& project, const std::string& user);
  model::PriorityFactors PriorityOf(const ScopeInfo& scope, Timestamp submitted_at, const model::ResourceRequest& r,
                                    int adjustment) const;
  // The nodes with room now (roomy_) and, where the pool `plans_ahead`
  // (it makes reservations), each node's timeline.
  // With `adopted` (AdoptableProfile), the timelines are its, from now on.
  void BuildProfile(const std::vector<const RunningJob*>& running, bool plans_ahead,
                    const PoolProfile* adopted = nullptr);
  // The previous pass's profile (Snapshot::previous_profile), where this
  // pass may start from it: an EASY or conservative pool's pass in the
  // caller's order that plans with wall times and explains nothing, the
  // profile of this pool, made no later than now, and (conservative) no
  // previous reservation's start past (the profile holds it from that
  // start; a new one would hold it from now). nullptr otherwise.
  const PoolProfile* AdoptableProfile(model::BackfillMode mode, bool in_callers_order,
                                      const std::vector<Ranked>& ranked) const;
  // How long a job's window is planned: its predicted run in a pool that
  // plans with predictions (and has one for it), else its wall time.
  std::chrono::milliseconds Planned(const JobFacts& job) const;
  // The planned share of its prediction, in seconds; 0: plan with its wall time.
  int64_t PlannedSeconds(const JobFacts& job) const;
  // When a running job is planned to free its room: its expected end, or,
  // in a pool that plans with predictions, its start plus its (corrected)
  // prediction, whichever is first; now for a job past it.
  Timestamp PlannedEnd(const RunningJob& job) const;
  // Equal for jobs of the same shape (SameShape): mixes what it compares
  // but the constraints' contents, so that a job is compared in full only
  // with the shapes whose hash it has.
  uint64_t ShapeHash(const PendingJob& job) const {
    const model::ResourceRequest& r = job.resources;
    uint64_t h = 0x9E3779B97F4A7C15ULL;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 0xBF58476D1CE4E5B9ULL + (h >> 29); };
    mix(static_cast<uint64_t>(r.nodes));
    mix(static_cast<uint64_t>(r.cpus));
    mix(static_cast<uint64_t>(r.memory_mb));
    mix(static_cast<uint64_t>(r.gpus));
    mix(r.gpu_model.size());
    mix(static_cast<uint64_t>(r.walltime_seconds));
    mix(static_cast<uint64_t>(r.tasks_per_node));
    mix(job.constraints.size());
    if (predicts_) mix(static_cast<uint64_t>(Planned(job).count()));
    return h;
  }
  // Same request shape: resources, constraints and, where it plans, the
  // planned length. Called for every pending job: forced inline (a call per
  // comparison cost a third of a FCFS replay), and the prediction only
  // looked at in a pool that plans with it.
  [[gnu::always_inline]] bool SameShape(const PendingJob& a, const PendingJob& b) const {
    return a.resources == b.resources && a.constraints == b.constraints &&
           (!predicts_ || a.predicted_run_seconds == b.predicted_run_seconds || Planned(a) == Planned(b));
  }
  // Pool nodes where a job may start now for its whole wall time without
  // touching a reservation.
  // (In a buffer kept for the cycle, valid until the next call.)
  const std::vector<const model::NodeUsage*>& StartableNodes(const model::ResourceRequest& r, Timestamp end);
  void Hold(const model::Allocation& allocation, Timestamp from, Timestamp to, bool is_reservation);
  // Earliest start for a job that cannot start now, if any, and its nodes
  // in chosen_ (valid until the next call). `shape`: its Ranked::shape,
  // which finds its shape's cached windows.
  std::optional<Timestamp> EarliestStart(const PendingJob& job, uint32_t shape);
  std::optional<Timestamp> EarliestSingleNodeStart(const PendingJob& job, uint32_t shape);
  // The pool node (index) of that name, when the pool plans ahead
  // (BuildProfile). The last answer is tried first: the jobs of a small
  // pool name the same few nodes over and over.
  std::optional<size_t> NodeIndex(std::string_view name) const {
    if (last_node_found_ < pool_nodes_->size() && (*pool_nodes_)[last_node_found_]->spec.name == name) {
      return last_node_found_;
    }
    auto it = node_index_.find(name);
    if (it == node_index_.end()) return std::nullopt;
    last_node_found_ = it->second;
    return it->second;
  }
  // Pool nodes (indices) that could ever hold one node's share of the job
  // (in a buffer kept for the cycle, valid until the next call).
  const std::vector<size_t>& Eligible(const PendingJob& job);
  void RecordReservation(model::JobId job, Timestamp start, std::span<const size_t> node_indices);
  // The job whose reservation holds one of these nodes, if any.
  std::optional<model::JobId> HolderOf(const model::Allocation& allocation) const;
  // The nodes (indices) each ranked job's previous reservation holds again,
  // by its position in the ranking; none for most jobs but in conservative
  // pools. Flat: one cycle of a deep queue looks up every job's.
  struct PreviousHolds {
    std::vector<uint32_t> first;  // per position, its first in `nodes`; the next position's first ends it
    std::vector<size_t> nodes;
    std::span<const size_t> Of(size_t position) const {
      if (position + 1 >= first.size()) return {};
      return {nodes.data() + first[position], first[position + 1] - first[position]};
    }
  };
  // Conservative pools: the reservations pending jobs held last cycle, held
  // again (before anything is placed) where they still fit.
  // `already_held`: the profile was adopted with them in it; they are
  // only noted.
  PreviousHolds HoldPreviousReservations(const std::vector<Ranked>& ranked, bool already_held = false);
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
  bool predicts_ = false;  // the pool plans with predicted run times
  const std::vector<const model::NodeUsage*>* pool_nodes_ = nullptr;
  std::unordered_map<std::string_view, size_t> node_index_;  // views of the pool nodes' names
  mutable size_t last_node_found_ = SIZE_MAX;                // NodeIndex's last answer
  std::vector<NodeTimeline> timelines_;
  std::vector<bool> has_future_hold_;               // a reservation holds room on this node (from now or later)
  std::vector<uint64_t> node_version_;              // bumped whenever a node's timeline changes
  std::vector<size_t> roomy_;                       // up nodes with something free when the cycle began
  std::vector<const model::NodeUsage*> startable_;  // StartableNodes' answer
  std::vector<size_t> chosen_;                      // EarliestStart's nodes
  std::vector<size_t> eligible_;                    // Eligible's answer
  std::vector<model::JobId> hold_owner_;            // the last job reserved on each node (0: none)
  // Per request shape, each eligible node's earliest window, valid while the
  // node's version is unchanged. Within a cycle profiles only fill up, so a
  // node untouched since keeps its answer: with conservative backfill and
  // many jobs of few shapes, each reservation re-examines only the nodes the
  // previous ones changed.
  struct NodeEarliest {
    size_t node;                        // an eligible node (index)
    std::optional<Timestamp> earliest;  // its earliest window
    uint64_t computed_at = UINT64_MAX;  // the node's version then
  };
  struct ShapeEarliest {
    const PendingJob* job;  // the representative: its resources and constraints
    std::vector<NodeEarliest> nodes;
  };
  std::vector<ShapeEarliest> earliest_cache_;
  std::vector<uint32_t> earliest_of_shape_;  // per ranked shape, its entry in earliest_cache_ (kNoShape: none)
  bool any_future_hold_ = false;
  // An EASY pass's reservations (node, hold), given back before its profile
  // is handed on (Snapshot::keep_profile only).
  std::vector<std::pair<size_t, NodeTimeline::Hold>> easy_holds_;
  int64_t pool_cpus_ = 0;
  int max_tier_ = 0;
  std::unordered_set<model::JobId> being_preempted_;
  // The scopes, taken from an arena freed with the cycle: a replay's passes
  // are many and short, and finding a pass's few scopes cost more in
  // allocations than in lookups.
  std::array<std::byte, 4096> scope_memory_;
  std::pmr::monotonic_buffer_resource scope_arena_{scope_memory_.data(), scope_memory_.size()};
  // Found by probing a power-of-two table kept at most half full: with
  // 100,000 jobs from thousands of scopes, an unordered_map's lookups (a
  // division for the bucket, then a node elsewhere in memory) were most of
  // ranking's time. Each entry stays put in the arena (Ranked points into
  // it) and is never destroyed (nothing in it needs to be). A replay's pass
  // finds a few scopes: the table is made for the second.
  size_t scope_count_ = 0;
  bool copy_scope_names_ = false;  // into ScopeEntry::text (Run says when)
  ScopeEntry* first_scope_ = nullptr;
  std::pmr::vector<ScopeSlotEntry> scope_slots_{&scope_arena_};
  int scope_shift_ = 64;  // 64 - log2(scope_slots_.size())
  // The queue of the last scope looked up.
  struct QueueFacts {
    std::string_view name;
    const model::QueueSpec* spec = nullptr;      // nullptr: no such queue
    const model::QueuePolicy* policy = nullptr;  // nullptr: none looked up yet
    model::PriorityWeights weights;
  };
  QueueFacts last_queue_;
  // The last scope looked up: jobs next to each other in a queue are often
  // one user's (a burst of submissions), so many lookups end here.
  ScopeKey last_scope_key_{};
  const ScopeInfo* last_scope_ = nullptr;
};

}  // namespace unisched::scheduler::internal
