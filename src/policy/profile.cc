// Per-node availability step functions (profile.h, docs/policy/backfill.md).

#include "unisched/policy/profile.h"

#include <algorithm>

namespace unisched::policy {

Capacity& Capacity::operator+=(const Capacity& o) {
  cpus += o.cpus;
  memory_mb += o.memory_mb;
  gpus += o.gpus;
  return *this;
}

Capacity& Capacity::operator-=(const Capacity& o) {
  cpus -= o.cpus;
  memory_mb -= o.memory_mb;
  gpus -= o.gpus;
  return *this;
}

Capacity Capacity::Min(const Capacity& a, const Capacity& b) {
  return {std::min(a.cpus, b.cpus), std::min(a.memory_mb, b.memory_mb), std::min(a.gpus, b.gpus)};
}

Capacity PerNode(const model::ResourceRequest& request) {
  return {request.cpus, request.memory_mb, request.gpus};
}

Timestamp WindowEnd(Timestamp start, std::chrono::milliseconds duration) {
  if (duration.count() <= 0) return kForever;
  if (start >= kForever - duration) return kForever;
  return start + duration;
}

NodeTimeline::NodeTimeline(Timestamp origin, Capacity free_now, std::vector<std::pair<Timestamp, Capacity>> releases) {
  std::sort(releases.begin(), releases.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  steps_.reserve(releases.size() + 1);
  steps_.emplace_back(origin, free_now);
  for (const auto& [at, amount] : releases) {
    if (at == kForever) continue;  // never released within any horizon
    Capacity next = steps_.back().second;
    next += amount;
    if (at <= steps_.back().first) {
      steps_.back().second = next;  // already free (at origin) or same time as the last step
    } else {
      steps_.emplace_back(at, next);
    }
  }
}

NodeTimeline NodeTimeline::From(Timestamp t) const {
  // Steps equal to the one before them are left out: holds given back
  // leave such seams, and a timeline handed from pass to pass would keep
  // every one (each search walks them). No answer changes: free room only
  // changes where the amount does.
  NodeTimeline later;
  const size_t first = t <= Origin() ? 0 : StepAt(t);
  later.steps_.reserve(steps_.size() - first);
  later.steps_.emplace_back(std::max(t, Origin()), steps_[first].second);
  for (size_t i = first + 1; i < steps_.size(); ++i) {
    if (!(steps_[i].second == later.steps_.back().second)) later.steps_.push_back(steps_[i]);
  }
  return later;
}

size_t NodeTimeline::StepAt(Timestamp t, size_t from) const {
  // The last step starting at or before t, searched from step `from` on.
  // Most searches are for now (a job's earliest start) or just past
  // `from`: the next step is looked at first.
  if (from + 1 >= steps_.size() || t < steps_[from + 1].first) return from;
  auto it = std::upper_bound(steps_.begin() + static_cast<std::ptrdiff_t>(from), steps_.end(), t,
                             [](Timestamp value, const auto& step) { return value < step.first; });
  return it == steps_.begin() ? 0 : static_cast<size_t>(it - steps_.begin()) - 1;
}

size_t NodeTimeline::SplitAt(Timestamp t, size_t from) {
  const size_t i = StepAt(t, from);
  if (steps_[i].first == t) return i;
  steps_.insert(steps_.begin() + static_cast<std::ptrdiff_t>(i) + 1, {t, steps_[i].second});
  return i + 1;
}

void NodeTimeline::Reserve(Timestamp from, Timestamp to, const Capacity& amount) {
  from = std::max(from, Origin());
  if (to <= from) return;
  const size_t first = SplitAt(from);
  // The window's end is after its start: searched for only past it.
  const size_t last = to == kForever ? steps_.size() : SplitAt(to, first);
  for (size_t i = first; i < last; ++i) steps_[i].second -= amount;
}

void NodeTimeline::Release(Timestamp from, Timestamp to, const Capacity& amount) {
  Reserve(from, to, Capacity{-amount.cpus, -amount.memory_mb, -amount.gpus});
}

std::optional<NodeTimeline> NodeTimeline::WithHolds(std::span<const Hold> holds) const {
  // Each hold takes its amount from `from` and gives it back at `to`: as
  // (time, change) events in time order, merged with the steps, the free
  // room at any time is the step's then plus the changes up to then.
  std::vector<std::pair<Timestamp, Capacity>> changes;
  changes.reserve(holds.size() * 2);
  for (const Hold& hold : holds) {
    const Timestamp from = std::max(hold.from, Origin());
    if (hold.to <= from) continue;
    changes.emplace_back(from, Capacity{-hold.amount.cpus, -hold.amount.memory_mb, -hold.amount.gpus});
    if (hold.to != kForever) changes.emplace_back(hold.to, hold.amount);
  }
  std::sort(changes.begin(), changes.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  NodeTimeline merged;
  merged.steps_.reserve(steps_.size() + changes.size());
  Capacity changed;  // the sum of the changes so far
  size_t step = 0, change = 0;
  while (step < steps_.size() || change < changes.size()) {
    const Timestamp at = std::min(step < steps_.size() ? steps_[step].first : kForever,
                                  change < changes.size() ? changes[change].first : kForever);
    if (step < steps_.size() && steps_[step].first == at) ++step;
    for (; change < changes.size() && changes[change].first == at; ++change) changed += changes[change].second;
    // Every change is at or after the origin, the first step's time, so a
    // step is in force at `at`: the last one passed.
    Capacity free = steps_[step - 1].second;
    free += changed;
    if (free.cpus < 0 || free.memory_mb < 0 || free.gpus < 0) return std::nullopt;
    merged.steps_.emplace_back(at, free);
  }
  return merged;
}

Capacity NodeTimeline::MinFree(Timestamp from, Timestamp to) const {
  from = std::max(from, Origin());
  size_t i = StepAt(from);
  Capacity least = steps_[i].second;
  for (++i; i < steps_.size() && steps_[i].first < to; ++i) least = Capacity::Min(least, steps_[i].second);
  return least;
}

std::optional<Timestamp> NodeTimeline::EarliestFit(Timestamp from, std::chrono::milliseconds duration,
                                                   const Capacity& need) const {
  from = std::max(from, Origin());
  // Candidate starts: `from`, then every later step (free space only changes
  // there). For a candidate, scan forward while the window holds; the first
  // step that is too small moves the next candidate past it.
  size_t i = StepAt(from);
  Timestamp start = from;
  while (true) {
    const Timestamp end = WindowEnd(start, duration);
    size_t j = i;
    bool ok = true;
    for (; j < steps_.size() && (j == i || steps_[j].first < end); ++j) {
      if (!steps_[j].second.Covers(need)) {
        ok = false;
        break;
      }
    }
    if (ok) return start;
    // steps_[j] is too small: no window starting before its end can hold.
    if (j + 1 >= steps_.size()) return std::nullopt;  // the last step lasts forever
    i = j + 1;
    start = steps_[i].first;
  }
}

Timestamp NodeTimeline::NextChangeAfter(Timestamp t) const {
  auto it = std::upper_bound(steps_.begin(), steps_.end(), t,
                             [](Timestamp value, const auto& step) { return value < step.first; });
  return it == steps_.end() ? kForever : it->first;
}

}  // namespace unisched::policy
