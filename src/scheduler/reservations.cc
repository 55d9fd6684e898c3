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

void PoolCycle::BuildProfile(const std::vector<const RunningJob*>& running) {
  const auto& nodes = *pool_nodes_;
  std::vector<std::vector<std::pair<Timestamp, Capacity>>> releases(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) node_index_.emplace(nodes[i]->spec.name, i);
  for (const RunningJob* job : running) {
    const Timestamp end = PlannedEnd(*job);
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

std::unordered_map<model::JobId, std::vector<size_t>> PoolCycle::HoldPreviousReservations(
    const std::vector<Ranked>& ranked) {
  // Conservative: previous reservations hold their room while the jobs
  // before them are placed, so each job only ever moves earlier. One that no
  // longer fits where it was (its node went down) is placed afresh.
  std::unordered_map<model::JobId, std::vector<size_t>> previous_holds;
  previous_holds.reserve(ranked.size());  // most waiting jobs hold one: no rehashing as they are added
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
    const Timestamp to = policy::WindowEnd(from, Planned(job));
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
  return previous_holds;
}

void PoolCycle::RecordReservation(model::JobId job, Timestamp start, const std::vector<size_t>& node_indices) {
  Reservation r{job, start, {}};
  r.nodes.reserve(node_indices.size());
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
    if (SameShape(*c.job, job)) cache = &c;
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
  const auto duration = Planned(job);
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
  const auto duration = Planned(job);
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

}  // namespace unisched::scheduler::internal
