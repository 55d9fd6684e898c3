// Fitting a request onto nodes: the per-node check, the all-or-nothing
// placement, and, when placement fails, one explanation for the whole pool
// (users read "at most 2 GPUs free on any node", not twenty node messages).

#include "unisched/model/fit.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstddef>
#include <set>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "unisched/model/words.h"

namespace unisched::model {
namespace {

bool ModelMatches(const GpuDevice& device, const std::string& model) {
  return GpuModelMatches(device.model, model);
}

// gpu_busy may be shorter than spec.gpus in a hand-built snapshot; a missing
// entry means free.
bool GpuBusy(const NodeUsage& node, size_t position) {
  return node.gpu_busy.Busy(position);
}

// The first constraint the node does not satisfy, as a message, or "".
std::string LabelMismatch(const NodeSpec& spec, const Labels& constraints) {
  for (const auto& [key, value] : constraints) {
    const std::string* found = ConstraintValue(spec, key);
    if (found == nullptr) return "requires " + key + "=" + value + "; node has no label " + key;
    if (*found != value) return "requires " + key + "=" + value + "; node has " + key + "=" + *found;
  }
  return {};
}

// Everything the fitter needs to know about one node for one request,
// evaluated in full so the pool-wide explanation can count each condition
// separately.
struct NodeEval {
  const NodeUsage* node = nullptr;
  bool up = true;
  std::string label_mismatch;  // empty: constraints hold
  bool model_ok = true;        // the node has devices of the requested model
  int free_cpus = 0;
  int64_t free_memory_mb = 0;
  int free_gpus = 0;  // of the requested model
  bool cpus_ok = true;
  bool memory_ok = true;
  bool gpus_ok = true;

  bool LabelsOk() const { return label_mismatch.empty(); }
  bool Fits() const { return up && LabelsOk() && model_ok && cpus_ok && memory_ok && gpus_ok; }
};

NodeEval Evaluate(const NodeUsage& node, const ResourceRequest& request, const Labels& constraints, bool ignore_usage) {
  NodeEval e;
  e.node = &node;
  e.up = node.state == NodeState::kUp;
  e.label_mismatch = LabelMismatch(node.spec, constraints);
  const bool wants_gpus = request.gpus > 0;
  if (wants_gpus && !request.gpu_model.empty()) e.model_ok = DevicesOfModel(node.spec, request.gpu_model) > 0;
  e.free_cpus = ignore_usage ? node.spec.cpus : node.FreeCpus();
  e.free_memory_mb = ignore_usage ? node.spec.memory_mb : node.FreeMemoryMb();
  e.free_gpus = ignore_usage ? DevicesOfModel(node.spec, request.gpu_model) : node.FreeGpus(request.gpu_model);
  e.cpus_ok = e.free_cpus >= request.cpus;
  e.memory_ok = e.free_memory_mb >= request.memory_mb;
  e.gpus_ok = !wants_gpus || e.free_gpus >= request.gpus;
  return e;
}

// The lowest free device indices of the requested model, with each one's model.
void PickGpus(const NodeUsage& node, int count, const std::string& model, NodeAllocation& share) {
  std::vector<const GpuDevice*> free;
  for (size_t i = 0; i < node.spec.gpus.size(); ++i) {
    if (!GpuBusy(node, i) && ModelMatches(node.spec.gpus[i], model)) free.push_back(&node.spec.gpus[i]);
  }
  std::sort(free.begin(), free.end(), [](const GpuDevice* a, const GpuDevice* b) { return a->index < b->index; });
  if (count < 0) count = 0;
  free.resize(std::min(free.size(), static_cast<size_t>(count)));
  for (const GpuDevice* device : free) {
    share.gpu_indices.push_back(device->index);
    share.gpu_models.push_back(device->model);
  }
}

// The lowest free logical CPU ids, as many as the share's cpus. Apply marks
// at most cpus_used ids, so a share that fits finds enough; an attempt
// stored before shares had ids marks none (its tasks run unpinned, so a new
// share's ids overlap nothing pinned). Should ids run short all the same,
// the share gets none rather than ids another share holds.
void PickCpus(const NodeUsage& node, NodeAllocation& share) {
  std::vector<int> free;
  free.reserve(static_cast<size_t>(std::max(0, share.cpus)));  // grown id by id, it was reallocated ~log2(cpus) times
  node.cpu_busy.LowestFree(node.spec.cpus, share.cpus, free);
  if (static_cast<int>(free.size()) == share.cpus) share.cpu_ids = std::move(free);
}

std::string NamesWithState(const std::vector<const NodeEval*>& evals) {
  constexpr size_t kMaxListed = 5;  // a message, not an inventory
  std::string text;
  for (size_t i = 0; i < evals.size() && i < kMaxListed; ++i) {
    if (!text.empty()) text += ", ";
    text += evals[i]->node->spec.name + " " + std::string(ToString(evals[i]->node->state));
  }
  if (evals.size() > kMaxListed) text += ", and " + std::to_string(evals.size() - kMaxListed) + " more";
  return text;
}

// Why no label-matching set of N nodes exists.
std::string NoLabelsMessage(const std::vector<NodeEval>& evals, const Labels& constraints, const std::string& pool) {
  // Name the first label no node has at all: that is the one to change.
  for (const auto& [key, value] : constraints) {
    std::set<std::string> seen_values;
    bool any = false;
    for (const auto& e : evals) {
      const std::string* found = ConstraintValue(e.node->spec, key);
      if (found == nullptr) continue;
      if (*found == value) any = true;
      seen_values.insert(*found);
    }
    if (any) continue;
    std::string text = "requires " + key + "=" + value + "; ";
    if (seen_values.empty()) return text + "no node of " + pool + " has label " + key;
    text += "no node of " + pool + " has it (found";
    for (const auto& v : seen_values) text += " " + key + "=" + v;
    return text + ")";
  }
  return "requires " + JoinLabels(constraints) + "; no node of " + pool + " has all of them";
}

struct ResourceShort {
  int ok_count = 0;
  std::string message;
};

std::vector<PendingReason> Explain(const std::vector<NodeEval>& evals, const ResourceRequest& request,
                                   const Labels& constraints, const std::string& pool) {
  const int n = request.nodes;
  const std::string nodes_word = Count(n, "node", "nodes");
  // " of gpu-train-pool" or " of gpu-train-pool with interconnect=ib", after "node" or "nodes".
  const std::string of_pool = " of " + pool + (constraints.empty() ? "" : " with " + JoinLabels(constraints));
  auto nodes_of_pool = [&](size_t count) { return Count(static_cast<int64_t>(count), "node", "nodes") + of_pool; };

  std::vector<const NodeEval*> matching;
  for (const auto& e : evals) {
    if (e.LabelsOk()) matching.push_back(&e);
  }
  if (static_cast<int>(matching.size()) < n) {
    if (constraints.empty()) {
      return {{"Resources", "needs " + nodes_word + ", " + pool + " has " + std::to_string(evals.size())}};
    }
    if (matching.empty()) return {{"NodeLabelsMismatch", NoLabelsMessage(evals, constraints, pool)}};
    return {{"NodeLabelsMismatch", "needs " + nodes_word + " with " + JoinLabels(constraints) + ", " +
                                       std::to_string(matching.size()) + " in " + pool}};
  }

  std::vector<const NodeEval*> up, not_up;
  for (const NodeEval* e : matching) (e->up ? up : not_up).push_back(e);
  if (static_cast<int>(up.size()) < n) {
    return {{"Resources", "needs " + nodes_word + ", " + std::to_string(up.size()) + " of " +
                              nodes_of_pool(matching.size()) + " up (" + NamesWithState(not_up) + ")"}};
  }

  std::vector<const NodeEval*> candidates;
  for (const NodeEval* e : up) {
    if (e->model_ok) candidates.push_back(e);
  }
  if (static_cast<int>(candidates.size()) < n) {
    const std::string& model = request.gpu_model;
    if (candidates.empty()) {
      return {{"Resources", "needs " + GpuPhrase(request.gpus, model) + " on " + nodes_word + ", no up node" + of_pool +
                                " has " + model + " GPUs"}};
    }
    return {{"Resources", "needs " + nodes_word + " with " + model + " GPUs, " + std::to_string(candidates.size()) +
                              " available in " + pool}};
  }

  // Each resource on its own: how many candidates have enough of it free.
  auto shortage = [&](auto ok, auto free, const std::string& what, const std::string& unit) -> ResourceShort {
    ResourceShort s;
    int64_t most_free = 0;
    for (const NodeEval* e : candidates) {
      if (ok(*e)) ++s.ok_count;
      most_free = std::max<int64_t>(most_free, free(*e));
    }
    if (n == 1) {
      s.message =
          "needs " + what + " on 1 node, at most " + std::to_string(most_free) + unit + " free on any node" + of_pool;
    } else {
      s.message =
          "needs " + nodes_word + " with " + what + " free, " + std::to_string(s.ok_count) + " available in " + pool;
    }
    return s;
  };
  std::vector<ResourceShort> shorts;
  if (request.gpus > 0) {
    shorts.push_back(shortage([](const NodeEval& e) { return e.gpus_ok; },
                              [](const NodeEval& e) { return static_cast<int64_t>(e.free_gpus); },
                              GpuPhrase(request.gpus, request.gpu_model), ""));
  }
  shorts.push_back(shortage([](const NodeEval& e) { return e.cpus_ok; },
                            [](const NodeEval& e) { return static_cast<int64_t>(e.free_cpus); },
                            Count(request.cpus, "cpu", "cpus"), ""));
  shorts.push_back(shortage([](const NodeEval& e) { return e.memory_ok; },
                            [](const NodeEval& e) { return e.free_memory_mb; },
                            std::to_string(request.memory_mb) + " MB memory", " MB"));
  // Most restrictive resource first; GPUs before cpus before memory on ties.
  std::stable_sort(shorts.begin(), shorts.end(),
                   [](const ResourceShort& a, const ResourceShort& b) { return a.ok_count < b.ok_count; });

  std::vector<PendingReason> reasons;
  for (const auto& s : shorts) {
    if (s.ok_count < n) reasons.push_back({"Resources", s.message});
  }
  if (reasons.empty()) {
    // Enough nodes for each resource alone, but not for all of them at once.
    int together = 0;
    for (const NodeEval* e : candidates) {
      if (e->Fits()) ++together;
    }
    std::string all = Count(request.cpus, "cpu", "cpus") + (request.gpus > 0 ? ", " : " and ") +
                      std::to_string(request.memory_mb) + " MB memory";
    if (request.gpus > 0) all += " and " + GpuPhrase(request.gpus, request.gpu_model);
    reasons.push_back({"Resources", "needs " + nodes_word + " with " + all + " free at once, " +
                                        std::to_string(together) + " available in " + pool});
  }
  if (!not_up.empty()) {
    reasons.push_back({"Resources", nodes_of_pool(not_up.size()) + " not up (" + NamesWithState(not_up) + ")"});
  }
  return reasons;
}

}  // namespace

int NodeUsage::FreeGpus(const std::string& model) const {
  // Any model: the devices less the busy ones, counted a word at a time.
  if (model.empty()) return static_cast<int>(spec.gpus.size()) - gpu_busy.CountBelow(spec.gpus.size());
  int n = 0;
  for (size_t i = 0; i < spec.gpus.size(); ++i) {
    if (!GpuBusy(*this, i) && ModelMatches(spec.gpus[i], model)) ++n;
  }
  return n;
}

void NodeUsage::Apply(const NodeAllocation& alloc, int sign) {
  cpus_used += sign * alloc.cpus;
  memory_used_mb += sign * alloc.memory_mb;
  gpu_busy.Grow(spec.gpus.size());
  for (int index : alloc.gpu_indices) {
    // Device indices are mostly their positions; otherwise (a node that
    // exposes 4..7 only) every device with the index is found.
    const auto position = static_cast<size_t>(index);
    if (index >= 0 && position < spec.gpus.size() && spec.gpus[position].index == index) {
      gpu_busy.Set(position, sign > 0);
      continue;
    }
    for (size_t i = 0; i < spec.gpus.size(); ++i) {
      if (spec.gpus[i].index == index) gpu_busy.Set(i, sign > 0);
    }
  }
  if (!alloc.cpu_ids.empty()) cpu_busy.Grow(static_cast<size_t>(std::max(spec.cpus, 0)));
  for (int cpu : alloc.cpu_ids) {
    // An id past the node's CPUs (its spec shrank since) marks nothing.
    if (cpu >= 0 && static_cast<size_t>(cpu) < cpu_busy.size()) cpu_busy.Set(static_cast<size_t>(cpu), sign > 0);
  }
}

void BusySet::Grow(size_t size) {
  if (size <= size_) return;
  size_ = size;
  words_.resize((size + 63) / 64, 0);
}

int BusySet::CountBelow(size_t limit) const {
  limit = std::min(limit, size_);
  int n = 0;
  for (size_t w = 0; w < limit / 64; ++w) n += std::popcount(words_[w]);
  if (limit % 64 != 0) n += std::popcount(words_[limit / 64] & ((uint64_t{1} << (limit % 64)) - 1));
  return n;
}

void BusySet::Set(size_t i, bool busy) {
  const uint64_t bit = uint64_t{1} << (i % 64);
  if (busy) {
    words_[i / 64] |= bit;
  } else {
    words_[i / 64] &= ~bit;
  }
}

void BusySet::LowestFree(int limit, int want, std::vector<int>& ids) const {
  if (limit <= 0) return;
  const auto end = static_cast<size_t>(limit);
  for (size_t base = 0; base < end && static_cast<int>(ids.size()) < want; base += 64) {
    // The word's free ids: its clear bits (a word past the set is all
    // free), cut at `end` in the last word.
    uint64_t free = base / 64 < words_.size() ? ~words_[base / 64] : ~uint64_t{0};
    if (end - base < 64) free &= (uint64_t{1} << (end - base)) - 1;
    while (free != 0 && static_cast<int>(ids.size()) < want) {
      ids.push_back(static_cast<int>(base) + std::countr_zero(free));
      free &= free - 1;  // the lowest set bit cleared
    }
  }
}

std::optional<Shortfall> CheckNode(const NodeUsage& node, const ResourceRequest& request, const Labels& constraints,
                                   bool ignore_usage) {
  const NodeEval e = Evaluate(node, request, constraints, ignore_usage);
  // "Could it ever fit" also looks past the node's state: a drained node may
  // be resumed, a down node may come back.
  if (!ignore_usage && !e.up) {
    return Shortfall{"Resources", "node " + node.spec.name + " is " + std::string(ToString(node.state))};
  }
  if (!e.LabelsOk()) return Shortfall{"NodeLabelsMismatch", e.label_mismatch};
  if (!e.model_ok) {
    std::string text =
        "needs " + GpuPhrase(request.gpus, request.gpu_model) + "; node has no " + request.gpu_model + " GPUs";
    if (!node.spec.gpus.empty()) {
      std::set<std::string> models;
      for (const auto& d : node.spec.gpus) models.insert(d.model);
      std::string list;
      for (const auto& m : models) list += (list.empty() ? "" : ", ") + m;
      text += " (has " + list + ")";
    }
    return Shortfall{"Resources", text};
  }
  const std::string have = ignore_usage ? ", node has " : ", ";
  const std::string free = ignore_usage ? "" : " free";
  if (!e.cpus_ok) {
    return Shortfall{"Resources",
                     "needs " + Count(request.cpus, "cpu", "cpus") + have + std::to_string(e.free_cpus) + free};
  }
  if (!e.memory_ok) {
    return Shortfall{"Resources", "needs " + std::to_string(request.memory_mb) + " MB memory" + have +
                                      std::to_string(e.free_memory_mb) + " MB" + free};
  }
  if (!e.gpus_ok) {
    return Shortfall{"Resources",
                     "needs " + GpuPhrase(request.gpus, request.gpu_model) + have + std::to_string(e.free_gpus) + free};
  }
  return std::nullopt;
}

FitResult Fit(const std::vector<const NodeUsage*>& nodes, const ResourceRequest& request, const Labels& constraints,
              const std::string& pool_name, bool explain) {
  FitResult result;
  // The API rejects these before a job exists; a hand-built snapshot must
  // still not produce a negative allocation.
  if (request.nodes < 1 || request.cpus < 0 || request.memory_mb < 0 || request.gpus < 0) {
    result.reasons.push_back({"Resources",
                              "invalid request: nodes must be at least 1 and cpus, memory_mb, gpus "
                              "not negative"});
    return result;
  }

  // Fast path, run for every job of every cycle: numeric checks first, labels
  // only for nodes with room, no strings. The full evaluation (for the
  // explanation) runs only when the job does not fit.
  struct Candidate {
    const NodeUsage* node;
    int free_cpus;
    size_t position;  // in `nodes`
  };
  std::vector<Candidate> fitting;
  for (size_t position = 0; position < nodes.size(); ++position) {
    const NodeUsage* node = nodes[position];
    if (node == nullptr || node->state != NodeState::kUp) continue;
    if (node->FreeCpus() < request.cpus || node->FreeMemoryMb() < request.memory_mb) continue;
    if (request.gpus > 0 && node->FreeGpus(request.gpu_model) < request.gpus) continue;
    if (!constraints.empty() && !LabelMismatch(node->spec, constraints).empty()) continue;
    fitting.push_back({node, node->FreeCpus(), position});
  }
  // Best fit: the tightest nodes first keep the large holes for large jobs;
  // among equals the first given (the scheduler gives nodes in name order).
  auto tighter = [](const Candidate& a, const Candidate& b) {
    if (a.free_cpus != b.free_cpus) return a.free_cpus < b.free_cpus;
    return a.position < b.position;
  };
  std::vector<const NodeUsage*> chosen;
  if (request.nodes == 1 && !fitting.empty()) {
    chosen.push_back(std::min_element(fitting.begin(), fitting.end(), tighter)->node);
  } else if (static_cast<int>(fitting.size()) >= request.nodes) {
    std::sort(fitting.begin(), fitting.end(), tighter);
    for (const Candidate& c : fitting) {
      // Distinct nodes only (a hand-built list may name a node twice).
      const bool taken = std::any_of(chosen.begin(), chosen.end(),
                                     [&](const NodeUsage* n) { return n->spec.name == c.node->spec.name; });
      if (!taken) chosen.push_back(c.node);
      if (static_cast<int>(chosen.size()) == request.nodes) break;
    }
  }
  if (static_cast<int>(chosen.size()) < request.nodes) {
    if (!explain) return result;
    std::vector<NodeEval> evals;
    evals.reserve(nodes.size());
    // Distinct nodes only (a hand-built list may name one twice). The
    // scheduler gives its nodes in name order: names strictly increasing
    // are distinct, one comparison per node. Otherwise a hash set of them
    // (a pool of thousands of nodes is explained once per request shape and
    // cycle; an ordered set of their names cost more than the rest).
    const bool names_increase =
        std::adjacent_find(nodes.begin(), nodes.end(), [](const NodeUsage* a, const NodeUsage* b) {
          return a == nullptr || b == nullptr || !(a->spec.name < b->spec.name);
        }) == nodes.end();
    std::unordered_set<std::string_view> seen;
    if (!names_increase) seen.reserve(nodes.size());
    for (const NodeUsage* node : nodes) {
      if (node == nullptr || (!names_increase && !seen.insert(node->spec.name).second)) continue;
      evals.push_back(Evaluate(*node, request, constraints, /*ignore_usage=*/false));
    }
    if (evals.empty()) {
      result.reasons.push_back(
          {"Resources", "needs " + Count(request.nodes, "node", "nodes") + ", " + pool_name + " has no nodes"});
    } else {
      result.reasons = Explain(evals, request, constraints, pool_name);
    }
    return result;
  }

  Allocation allocation;
  for (const NodeUsage* node : chosen) {
    NodeAllocation& share =
        allocation.emplace_back(NodeAllocation{node->spec.name, request.cpus, request.memory_mb, {}});
    if (request.gpus > 0) PickGpus(*node, request.gpus, request.gpu_model, share);
    PickCpus(*node, share);
  }
  result.allocation = std::move(allocation);
  return result;
}

}  // namespace unisched::model
