// The availability profile of a pool and the reservations made on it: each
// node's timeline from running jobs' ends, earliest starts for blocked jobs
// (single- and multi-node), and conservative backfill's previous
// reservations held again (docs/policy/backfill.md).

#include <algorithm>
#include <cmath>

#include "scheduler/pool_cycle.h"
#include "unisched/policy/run_time.h"

namespace unisched::scheduler::internal {

int64_t PoolCycle::PlannedSeconds(const JobFacts& job) const {
  if (!predicts_ || job.predicted_run_seconds <= 0) return 0;
  const double share = pool_->planned_share > 0 ? pool_->planned_share : 1.0;
  int64_t planned = std::max<int64_t>(1, std::llround(static_cast<double>(job.predicted_run_seconds) * share));
  if (job.resources.walltime_seconds > 0) planned = std::min(planned, job.resources.walltime_seconds);
  return planned;
}

std::chrono::milliseconds PoolCycle::Planned(const JobFacts& job) const {
  if (const int64_t planned = PlannedSeconds(job); planned > 0) return std::chrono::seconds(planned);
  return Walltime(job.resources);
}

Timestamp PoolCycle::PlannedEnd(const RunningJob& job) const {
  Timestamp end = job.expected_end;
  if (const int64_t planned = PlannedSeconds(job); planned > 0) {
    // Whole seconds run so far, rounded down: a plan of p seconds holds
    // until start + p, and is lengthened from then on.
    const int64_t elapsed = std::chrono::duration_cast<std::chrono::seconds>(now_ - job.started_at).count();
    const int64_t corrected = policy::CorrectedPrediction(planned, elapsed, job.resources.walltime_seconds);
    end = std::min(end, policy::WindowEnd(job.started_at, std::chrono::seconds(corrected)));
  }
  // A job past its end (in its kill grace) is about to free its room.
  return std::max(end, now_);
}

const PoolProfile* PoolCycle::AdoptableProfile(model::BackfillMode mode, bool in_callers_order,
                                               const std::vector<Ranked>& ranked) const {
  const PoolProfile* previous = state_.snapshot.previous_profile.get();
  if (previous == nullptr || mode == model::BackfillMode::kFcfs || !in_callers_order || state_.snapshot.explain ||
      predicts_) {
    return nullptr;
  }
  if (previous->pool != pool_name_ || previous->made_at > now_ || previous->timelines.size() != pool_nodes_->size()) {
    return nullptr;
  }
  if (mode != model::BackfillMode::kConservative) return previous;  // EASY holds no previous reservation
  for (const Ranked& entry : ranked) {
    const PendingJob& job = *entry.job;
    if (job.reserved_start && !job.reserved_nodes.empty() && *job.reserved_start < now_) return nullptr;
  }
  return previous;
}

void PoolCycle::BuildProfile(const std::vector<const RunningJob*>& running, bool plans_ahead,
                             const PoolProfile* adopted) {
  const auto& nodes = *pool_nodes_;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const model::NodeUsage& n = *nodes[i];
    if (n.state == model::NodeState::kUp && (n.FreeCpus() > 0 || n.FreeMemoryMb() > 0 || n.FreeGpus("") > 0)) {
      roomy_.push_back(i);
    }
  }
  // Without reservations nothing asks when room frees up: no timelines,
  // and no node holds anything ahead (has_future_hold_ stays unread).
  if (!plans_ahead) return;
  for (size_t i = 0; i < nodes.size(); ++i) node_index_.emplace(nodes[i]->spec.name, i);
  has_future_hold_.assign(nodes.size(), false);
  node_version_.assign(nodes.size(), 0);
  hold_owner_.assign(nodes.size(), 0);
  if (adopted) {
    // What the previous pass left: its running jobs' releases, its starts
    // and its reservations, from now on. A job gone since at its expected
    // end freed its room then, so at or before now; one gone before it
    // frees its room from now.
    timelines_.reserve(nodes.size());
    for (const NodeTimeline& timeline : adopted->timelines) timelines_.push_back(timeline.From(now_));
    for (const RunningJob& job : state_.snapshot.ended_early) {
      const Timestamp end = std::max(job.expected_end, now_);
      for (const auto& share : job.allocation) {
        if (const std::optional<size_t> i = NodeIndex(share.node))
          timelines_[*i].Release(now_, end, ShareCapacity(share));
      }
    }
    return;
  }
  // Every running job's release, grouped by node (counted, then placed): a
  // list per node, grown job by job, cost an allocation per doubling.
  struct Release {
    size_t node;
    std::pair<Timestamp, Capacity> release;
  };
  std::vector<Release> found;
  found.reserve(running.size());
  for (const RunningJob* job : running) {
    const Timestamp end = PlannedEnd(*job);
    for (const auto& share : job->allocation) {
      if (auto i = NodeIndex(share.node)) found.push_back({*i, {end, ShareCapacity(share)}});
    }
  }
  std::vector<size_t> first(nodes.size() + 1, 0);  // node i's are [first[i], first[i + 1])
  for (const Release& r : found) ++first[r.node + 1];
  for (size_t i = 0; i < nodes.size(); ++i) first[i + 1] += first[i];
  std::vector<std::pair<Timestamp, Capacity>> by_node(found.size());
  {
    std::vector<size_t> next(first.begin(), first.end() - 1);
    for (const Release& r : found) by_node[next[r.node]++] = r.release;
  }
  timelines_.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const model::NodeUsage& n = *nodes[i];
    if (n.state == model::NodeState::kUp) {
      const auto from = by_node.begin() + static_cast<std::ptrdiff_t>(first[i]);
      const auto to = by_node.begin() + static_cast<std::ptrdiff_t>(first[i + 1]);
      timelines_.emplace_back(now_, Capacity{n.FreeCpus(), n.FreeMemoryMb(), n.FreeGpus("")},
                              std::vector<std::pair<Timestamp, Capacity>>(from, to));
    } else {
      // Nothing new starts on a node that is not up, now or later.
      timelines_.emplace_back(now_, Capacity{0, 0, 0});
    }
  }
}

PoolCycle::PreviousHolds PoolCycle::HoldPreviousReservations(const std::vector<Ranked>& ranked, bool already_held) {
  // Conservative: previous reservations hold their room while the jobs
  // before them are placed, so each job only ever moves earlier. One that no
  // longer fits where it was (its node went down) is placed afresh.
  //
  // First each job's nodes, where it could still ever run on them.
  PreviousHolds candidates;
  candidates.first.reserve(ranked.size() + 1);
  candidates.nodes.reserve(ranked.size());  // most hold one node
  candidates.first.push_back(0);
  for (const Ranked& entry : ranked) {
    const PendingJob& job = *entry.job;
    const size_t mark = candidates.nodes.size();
    if (job.reserved_start && !job.reserved_nodes.empty()) {
      for (const auto& name : job.reserved_nodes) {
        const std::optional<size_t> i = NodeIndex(name);
        if (!i || !CouldEverHold(*(*pool_nodes_)[*i], job.resources, job.constraints)) {
          candidates.nodes.resize(mark);
          break;
        }
        candidates.nodes.push_back(*i);
      }
    }
    candidates.first.push_back(static_cast<uint32_t>(candidates.nodes.size()));
  }
  auto window = [&](const PendingJob& job) {
    const Timestamp from = std::max(*job.reserved_start, now_);
    return std::make_pair(from, policy::WindowEnd(from, Planned(job)));
  };
  auto note_held = [&](model::JobId job, std::span<const size_t> nodes) {
    for (size_t i : nodes) {
      ++node_version_[i];
      has_future_hold_[i] = true;
      any_future_hold_ = true;
      hold_owner_[i] = job;  // the last job in rank order holding the node
    }
  };

  if (already_held) {
    for (size_t k = 0; k < ranked.size(); ++k) note_held(ranked[k].job->id, candidates.Of(k));
    return candidates;
  }

  // Taken in rank order, each is held if its window still has room once
  // the ones before it are held. When all of them fit together (no step of
  // any node short of room with every one held), each fits in its turn: the
  // room over its window before its turn is at least what is left with all
  // held, plus its own need, for holds only take room. Then they are held
  // in one merge per node; with a deep queue that is most of the cycle's
  // profile work saved.
  std::vector<std::pair<size_t, NodeTimeline::Hold>> holds;  // by node
  holds.reserve(candidates.nodes.size());
  for (size_t k = 0; k < ranked.size(); ++k) {
    const std::span<const size_t> nodes = candidates.Of(k);
    if (nodes.empty()) continue;  // no previous reservation (or not where it could run)
    const PendingJob& job = *ranked[k].job;
    const auto [from, to] = window(job);
    for (size_t i : nodes) holds.push_back({i, {from, to, policy::PerNode(job.resources)}});
  }
  // By node (a merge sums a node's holds, in any order). A small pool's
  // are often in node order already.
  auto by_node = [](const auto& a, const auto& b) { return a.first < b.first; };
  if (!std::is_sorted(holds.begin(), holds.end(), by_node)) std::sort(holds.begin(), holds.end(), by_node);
  std::vector<std::pair<size_t, NodeTimeline>> merged;
  std::vector<NodeTimeline::Hold> on_node;
  on_node.reserve(holds.size());
  bool all_fit = true;
  for (size_t at = 0; at < holds.size() && all_fit;) {
    const size_t node = holds[at].first;
    on_node.clear();
    for (; at < holds.size() && holds[at].first == node; ++at) on_node.push_back(holds[at].second);
    std::optional<NodeTimeline> with = timelines_[node].WithHolds(on_node);
    if (with) {
      merged.emplace_back(node, std::move(*with));
    } else {
      all_fit = false;
    }
  }
  if (all_fit) {
    for (auto& [i, timeline] : merged) timelines_[i] = std::move(timeline);
    for (size_t k = 0; k < ranked.size(); ++k) note_held(ranked[k].job->id, candidates.Of(k));
    return candidates;
  }

  // Some do not fit: one at a time, in rank order.
  PreviousHolds held;
  held.first.reserve(ranked.size() + 1);
  held.first.push_back(0);
  for (size_t k = 0; k < ranked.size(); ++k) {
    const PendingJob& job = *ranked[k].job;
    const std::span<const size_t> nodes = candidates.Of(k);
    if (!nodes.empty()) {
      // (Not a structured binding: clang 14, the fuzz build's, cannot capture one.)
      const std::pair<Timestamp, Timestamp> held_window = window(job);
      const Timestamp from = held_window.first, to = held_window.second;
      const Capacity need = policy::PerNode(job.resources);
      const bool fits = std::all_of(nodes.begin(), nodes.end(),
                                    [&](size_t i) { return timelines_[i].MinFree(from, to).Covers(need); });
      if (fits) {
        for (size_t i : nodes) timelines_[i].Reserve(from, to, need);
        note_held(job.id, nodes);
        held.nodes.insert(held.nodes.end(), nodes.begin(), nodes.end());
      }
    }
    held.first.push_back(static_cast<uint32_t>(held.nodes.size()));
  }
  return held;
}

void PoolCycle::RecordReservation(model::JobId job, Timestamp start, std::span<const size_t> node_indices) {
  Reservation r{job, start, {}};
  r.nodes.reserve(node_indices.size());
  for (size_t i : node_indices) r.nodes.push_back((*pool_nodes_)[i]->spec.name);
  plan_.reservations.push_back(std::move(r));
  ++plan_.report.reservations;
}

std::optional<model::JobId> PoolCycle::HolderOf(const model::Allocation& allocation) const {
  for (const auto& share : allocation) {
    if (auto i = NodeIndex(share.node); i && hold_owner_[*i] != 0) return hold_owner_[*i];
  }
  return std::nullopt;
}

const std::vector<size_t>& PoolCycle::Eligible(const PendingJob& job) {
  eligible_.clear();
  for (size_t i = 0; i < pool_nodes_->size(); ++i) {
    if (CouldEverHold(*(*pool_nodes_)[i], job.resources, job.constraints)) eligible_.push_back(i);
  }
  return eligible_;
}

std::optional<Timestamp> PoolCycle::EarliestSingleNodeStart(const PendingJob& job, uint32_t shape) {
  constexpr size_t kMaxCachedShapes = 64;
  ShapeEarliest* cache = nullptr;
  if (shape == kNoShape) {
    // Beyond the ranking's shapes: compared with each cached one.
    for (auto& c : earliest_cache_) {
      if (SameShape(*c.job, job)) cache = &c;
    }
  } else if (shape < earliest_of_shape_.size() && earliest_of_shape_[shape] != kNoShape) {
    cache = &earliest_cache_[earliest_of_shape_[shape]];
  }
  ShapeEarliest scratch;
  if (!cache) {
    if (earliest_cache_.size() < kMaxCachedShapes) {
      if (shape != kNoShape) {
        if (shape >= earliest_of_shape_.size()) earliest_of_shape_.resize(shape + 1, kNoShape);
        earliest_of_shape_[shape] = static_cast<uint32_t>(earliest_cache_.size());
      }
      cache = &earliest_cache_.emplace_back();
    } else {
      cache = &scratch;
    }
    cache->job = &job;
    const std::vector<size_t>& eligible = Eligible(job);
    cache->nodes.reserve(eligible.size());
    for (size_t i : eligible) cache->nodes.push_back({i, std::nullopt});
  }
  const Capacity need = policy::PerNode(job.resources);
  const auto duration = Planned(job);
  std::optional<std::pair<Timestamp, size_t>> best;
  for (NodeEarliest& node : cache->nodes) {
    const size_t i = node.node;
    if (node.computed_at != node_version_[i]) {
      node.earliest = timelines_[i].EarliestFit(now_, duration, need);
      node.computed_at = node_version_[i];
    }
    // The earliest; among equals the first in name order.
    if (node.earliest && (!best || *node.earliest < best->first)) best = std::make_pair(*node.earliest, i);
  }
  if (!best) return std::nullopt;
  chosen_.assign(1, best->second);
  return best->first;
}

std::optional<Timestamp> PoolCycle::EarliestStart(const PendingJob& job, uint32_t shape) {
  const model::ResourceRequest& r = job.resources;
  const size_t wanted = static_cast<size_t>(std::max(1, r.nodes));
  if (wanted == 1) return EarliestSingleNodeStart(job, shape);
  const Capacity need = policy::PerNode(r);
  const auto duration = Planned(job);
  const std::vector<size_t>& eligible = Eligible(job);
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
    chosen_.clear();
    const Timestamp end = policy::WindowEnd(candidate, duration);
    for (size_t i : eligible) {
      if (timelines_[i].MinFree(candidate, end).Covers(need)) {
        chosen_.push_back(i);
        if (chosen_.size() == wanted) return candidate;
      }
    }
    Timestamp next = policy::kForever;
    for (size_t i : eligible) next = std::min(next, timelines_[i].NextChangeAfter(candidate));
    if (next == policy::kForever) return std::nullopt;
    from = next;
  }
  return std::nullopt;
}

}  // namespace unisched::scheduler::internal
