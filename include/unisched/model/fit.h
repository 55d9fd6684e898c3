#pragma once
// Fitting a resource request onto nodes: pure, shared by the router (can this
// job ever fit in a pool?) and the scheduler (where does it fit now?).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "unisched/model/cluster.h"
#include "unisched/model/job.h"
#include "unisched/model/resources.h"

namespace unisched::model {

// Which of a node's CPUs (by id) or GPUs (by position in spec.gpus) are
// taken, 64 to a word: every start looks for the lowest free CPU ids
// (PickCpus in fit.cc) and every fit counts free GPUs, a word at a time
// rather than an entry at a time (a replay's one node has 640 GPUs). An
// entry at or past size() is free.
class BusySet {
 public:
  BusySet() = default;
  // `size` entries, all free.
  explicit BusySet(size_t size) { Grow(size); }
  size_t size() const { return size_; }
  bool Busy(size_t i) const { return i < size_ && ((words_[i / 64] >> (i % 64)) & 1) != 0; }
  // How many of the entries below `limit` are taken.
  int CountBelow(size_t limit) const;
  // Grows to `size` entries, the new ones free (never shrinks).
  void Grow(size_t size);
  // Marks entry `i` (below size()) taken or free.
  void Set(size_t i, bool busy);
  // Appends to `ids` the lowest free entries below `limit`, until it holds `want`.
  void LowestFree(int limit, int want, std::vector<int>& ids) const;

 private:
  std::vector<uint64_t> words_;  // bits past size_ stay clear
  size_t size_ = 0;
};

// A node as the fitter sees it: its spec, its state and what is already
// allocated on it. gpu_busy.Busy(i) tells whether spec.gpus[i] is taken, and
// cpu_busy.Busy(c) whether logical CPU c is.
struct NodeUsage {
  NodeSpec spec;
  NodeState state = NodeState::kUp;
  int cpus_used = 0;
  int64_t memory_used_mb = 0;
  BusySet gpu_busy;  // as long as spec.gpus (shorter in a hand-built snapshot: the rest free)
  // By logical CPU id; shorter than spec.cpus until an allocation with CPU
  // ids is applied (a missing entry is free).
  BusySet cpu_busy{};

  int FreeCpus() const { return spec.cpus - cpus_used; }
  int64_t FreeMemoryMb() const { return spec.memory_mb - memory_used_mb; }
  // Free GPUs of the given model ("" = any model).
  int FreeGpus(const std::string& model) const;
  // Adds (sign=+1) or removes (sign=-1) one node's share of an allocation.
  void Apply(const NodeAllocation& alloc, int sign);
};

// Why a node cannot take a request, or nothing if it can.
struct Shortfall {
  std::string code;     // "Resources" or "NodeLabelsMismatch"
  std::string message;  // e.g. "needs 4 cpus, 2 free"
};

// Whether `node` could take one node's share of `request` with `constraints`
// given what is allocated (ignore_usage: as if empty, for "could it ever fit").
std::optional<Shortfall> CheckNode(const NodeUsage& node, const ResourceRequest& request, const Labels& constraints,
                                   bool ignore_usage);

// Places `request` on `request.nodes` distinct up nodes among `nodes`,
// all-or-nothing. Picks best fit (fewest free cpus left, then the order of
// `nodes`, which callers give in name order) so large
// holes stay open for large jobs, and the lowest free GPU indices. On success
// returns the allocation; on failure the reasons why, most useful first.
struct FitResult {
  std::optional<Allocation> allocation;
  std::vector<PendingReason> reasons;
};
// explain=false skips the reasons (the simulator does not read them).
FitResult Fit(const std::vector<const NodeUsage*>& nodes, const ResourceRequest& request, const Labels& constraints,
              const std::string& pool_name, bool explain = true);

}  // namespace unisched::model
