#pragma once
// Availability over time (docs/policy/backfill.md): for each node, how much is
// free from `now` on, given that running jobs end by their wall-time limit and
// reservations hold room from their start for their wall time. Backfill asks
// two questions of it: may a job start now without touching a reservation
// (MinFree over [now, now + walltime)), and when is the earliest a blocked job
// could start (EarliestFit).

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "unisched/common/time.h"
#include "unisched/model/resources.h"

namespace unisched::policy {

// Free amounts on one node (GPUs counted, not indexed: which devices is
// decided by the fitter when a job actually starts).
struct Capacity {
  int64_t cpus = 0;
  int64_t memory_mb = 0;
  int64_t gpus = 0;
  bool Covers(const Capacity& need) const {
    return cpus >= need.cpus && memory_mb >= need.memory_mb && gpus >= need.gpus;
  }
  Capacity& operator+=(const Capacity& o);
  Capacity& operator-=(const Capacity& o);
  static Capacity Min(const Capacity& a, const Capacity& b);
  bool operator==(const Capacity&) const = default;
};
// One node's share of a request.
Capacity PerNode(const model::ResourceRequest& request);

// The end of [start, start + duration), saturating: a zero duration means no
// wall-time limit, i.e. forever.
Timestamp WindowEnd(Timestamp start, std::chrono::milliseconds duration);
inline constexpr Timestamp kForever = Timestamp::max();

// A step function: free capacity from steps[i].first until steps[i+1].first.
class NodeTimeline {
 public:
  // `releases`: (time, amount) freed then by running jobs; times <= origin
  // count as free at origin already.
  NodeTimeline(Timestamp origin, Capacity free_now, std::vector<std::pair<Timestamp, Capacity>> releases = {});

  // Holds `amount` over [from, to).
  void Reserve(Timestamp from, Timestamp to, const Capacity& amount);
  // Gives back what Reserve(from, to, amount) held.
  void Release(Timestamp from, Timestamp to, const Capacity& amount);
  // A hold of `amount` over [from, to), as Reserve takes it.
  struct Hold {
    Timestamp from;
    Timestamp to;
    Capacity amount;
  };
  // This timeline with every one of `holds` reserved, when no step of it is
  // then short of room (nothing negative); nullopt otherwise. The steps are
  // those of Reserve called for each hold in turn, found in one merge
  // instead of one insertion per hold.
  std::optional<NodeTimeline> WithHolds(std::span<const Hold> holds) const;
  // The least free over [from, to).
  Capacity MinFree(Timestamp from, Timestamp to) const;
  // The earliest t >= from with `need` free over [t, t + duration); nullopt if
  // never (the node can never hold it over that long).
  std::optional<Timestamp> EarliestFit(Timestamp from, std::chrono::milliseconds duration, const Capacity& need) const;
  // The first step time strictly after t, or kForever.
  Timestamp NextChangeAfter(Timestamp t) const;
  Timestamp Origin() const { return steps_.front().first; }
  // The same function from t on: the steps before the one in force at t are
  // dropped and that one starts at t, as a timeline built at t would; a
  // step the same as the one before it is merged into it. (t before the
  // origin: from the origin.)
  NodeTimeline From(Timestamp t) const;

 private:
  NodeTimeline() = default;
  // Index of the step in force at t, searched from step `from` on (step
  // `from` starts at or before t; for 0, t >= origin).
  size_t StepAt(Timestamp t, size_t from = 0) const;
  // Makes sure a step starts exactly at t (as StepAt); returns its index.
  size_t SplitAt(Timestamp t, size_t from = 0);

  std::vector<std::pair<Timestamp, Capacity>> steps_;
};

}  // namespace unisched::policy
