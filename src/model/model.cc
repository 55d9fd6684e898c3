#include <algorithm>
#include <array>
#include <cstdint>
#include <stdexcept>
#include <utility>

#include "unisched/model/cluster.h"
#include "unisched/model/job.h"

namespace unisched::model {
namespace {

template <class E, size_t N>
std::optional<E> Lookup(const std::array<std::pair<E, std::string_view>, N>& table, std::string_view text) {
  for (const auto& [value, name] : table) {
    if (name == text) return value;
  }
  return std::nullopt;
}
template <class E, size_t N>
std::string_view Name(const std::array<std::pair<E, std::string_view>, N>& table, E value) {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return "unknown";
}

constexpr std::array<std::pair<WorkloadKind, std::string_view>, 4> kWorkloadKinds{{
    {WorkloadKind::kHpc, "hpc"},
    {WorkloadKind::kAiTraining, "ai-training"},
    {WorkloadKind::kAiInference, "ai-inference"},
    {WorkloadKind::kAgent, "agent"},
}};
constexpr std::array<std::pair<PoolKind, std::string_view>, 3> kPoolKinds{{
    {PoolKind::kCpu, "cpu"},
    {PoolKind::kGpu, "gpu"},
    {PoolKind::kElastic, "elastic"},
}};
constexpr std::array<std::pair<NodeState, std::string_view>, 4> kNodeStates{{
    {NodeState::kUp, "up"},
    {NodeState::kDraining, "draining"},
    {NodeState::kDrained, "drained"},
    {NodeState::kDown, "down"},
}};
constexpr std::array<std::pair<JobState, std::string_view>, 8> kJobStates{{
    {JobState::kPending, "PENDING"},
    {JobState::kHeld, "HELD"},
    {JobState::kRunning, "RUNNING"},
    {JobState::kCompleted, "COMPLETED"},
    {JobState::kFailed, "FAILED"},
    {JobState::kCancelled, "CANCELLED"},
    {JobState::kTimeout, "TIMEOUT"},
    {JobState::kNodeFail, "NODE_FAIL"},
}};
constexpr std::array<std::pair<LaunchMode, std::string_view>, 2> kLaunchModes{{
    {LaunchMode::kBatch, "batch"},
    {LaunchMode::kPerNode, "per_node"},
}};
constexpr std::array<std::pair<BackfillMode, std::string_view>, 3> kBackfillModes{{
    {BackfillMode::kFcfs, "fcfs"},
    {BackfillMode::kEasy, "easy"},
    {BackfillMode::kConservative, "conservative"},
}};

}  // namespace

std::string_view ToString(WorkloadKind kind) {
  return Name(kWorkloadKinds, kind);
}
std::optional<WorkloadKind> ParseWorkloadKind(std::string_view text) {
  return Lookup(kWorkloadKinds, text);
}
std::string_view ToString(PoolKind kind) {
  return Name(kPoolKinds, kind);
}
std::optional<PoolKind> ParsePoolKind(std::string_view text) {
  return Lookup(kPoolKinds, text);
}
std::string_view ToString(BackfillMode mode) {
  return Name(kBackfillModes, mode);
}
std::optional<BackfillMode> ParseBackfillMode(std::string_view text) {
  return Lookup(kBackfillModes, text);
}

namespace {
constexpr std::string_view kPredictedSuffix = "-predicted";
}  // namespace

std::optional<BackfillChoice> ParseBackfillChoice(std::string_view text) {
  BackfillChoice choice;
  if (text.size() > kPredictedSuffix.size() && text.ends_with(kPredictedSuffix)) {
    text.remove_suffix(kPredictedSuffix.size());
    choice.predicted = true;
  }
  auto mode = ParseBackfillMode(text);
  if (!mode || (choice.predicted && *mode == BackfillMode::kFcfs)) return std::nullopt;
  choice.mode = *mode;
  return choice;
}

std::string BackfillChoiceName(BackfillChoice choice) {
  return std::string(ToString(choice.mode)) + (choice.predicted ? std::string(kPredictedSuffix) : "");
}

PriorityWeights QueuePolicy::Weights() const {
  if (priority_weights) return *priority_weights;
  // Defaults per policy type (docs/policy/priority.md). The tier term is
  // present everywhere so queue tiers order queues sharing a pool.
  PriorityWeights w;
  w.tier = 10000;
  if (type == "fairshare") {
    w.fairshare = 10000;
    w.age = 1000;
    w.size = 100;
  } else if (type == "priority-with-quota") {
    w.age = 1000;
  }
  return w;
}

std::string_view ToString(NodeState state) {
  return Name(kNodeStates, state);
}
std::optional<NodeState> ParseNodeState(std::string_view text) {
  return Lookup(kNodeStates, text);
}
std::string CheckSecretName(std::string_view name) {
  if (name.empty() || name.size() > 128) return "must be 1 to 128 characters";
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front())) return "must start with a letter or digit";
  for (char c : name) {
    if (!alnum(c) && c != '.' && c != '_' && c != '-') return "may hold only letters, digits, '.', '_' and '-'";
  }
  return "";
}

std::string_view ToString(JobState state) {
  return Name(kJobStates, state);
}
std::optional<JobState> ParseJobState(std::string_view text) {
  return Lookup(kJobStates, text);
}

std::string_view ToString(LaunchMode mode) {
  return Name(kLaunchModes, mode);
}
std::optional<LaunchMode> ParseLaunchMode(std::string_view text) {
  return Lookup(kLaunchModes, text);
}

bool IsTerminal(JobState state) {
  switch (state) {
    case JobState::kPending:
    case JobState::kHeld:
    case JobState::kRunning:
      return false;
    default:
      return true;
  }
}

bool CanTransition(JobState from, JobState to) {
  if (IsTerminal(from) || from == to) return false;
  switch (from) {
    case JobState::kPending:
      // A pending job starts, is held, or is cancelled; it cannot complete,
      // fail or time out without having run.
      return to == JobState::kRunning || to == JobState::kHeld || to == JobState::kCancelled;
    case JobState::kHeld:
      return to == JobState::kPending || to == JobState::kCancelled;
    case JobState::kRunning:
      // Any ending, or back to PENDING when requeued with a new attempt.
      return to != JobState::kHeld;
    default:
      return false;
  }
}

std::vector<PendingReason> PendingInfo::Reasons() const {
  std::vector<PendingReason> out;
  if (own) out = *own;
  if (jobs_ahead > 0) {
    out.push_back({"Priority", std::to_string(jobs_ahead) + (jobs_ahead == 1 ? " job ahead in " : " jobs ahead in ") +
                                   (pool ? *pool : std::string())});
  }
  return out;
}

void PendingInfos::Seal() {
  if (sorted_) return;
  // (id, position) pairs ordered by id with a least-significant-digit radix
  // sort on the id's offset from the smallest (two 16-bit passes cover a
  // span of 2^32 ids; wider spans fall back to std::sort), then each entry is
  // moved once. A cycle seals 100,000 entries: this keeps it to a few ms.
  std::vector<std::pair<JobId, size_t>> order(items_.size());
  JobId low = items_.empty() ? 0 : items_[0].first, high = low;
  for (size_t i = 0; i < items_.size(); ++i) {
    order[i] = {items_[i].first, i};
    low = std::min(low, items_[i].first);
    high = std::max(high, items_[i].first);
  }
  const uint64_t span = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  if (span < (uint64_t{1} << 32)) {
    std::vector<std::pair<JobId, size_t>> buffer(order.size());
    for (int shift : {0, 16}) {
      std::vector<size_t> count((1 << 16) + 1, 0);
      auto digit = [&](const std::pair<JobId, size_t>& v) {
        return ((static_cast<uint64_t>(v.first) - static_cast<uint64_t>(low)) >> shift) & 0xFFFF;
      };
      for (const auto& v : order) ++count[digit(v) + 1];
      for (size_t d = 1; d < count.size(); ++d) count[d] += count[d - 1];
      for (const auto& v : order) buffer[count[digit(v)]++] = v;
      order.swap(buffer);
    }
  } else {
    std::sort(order.begin(), order.end());
  }
  std::vector<value_type> sorted;
  sorted.reserve(items_.size());
  for (const auto& [id, i] : order) sorted.push_back(std::move(items_[i]));
  items_ = std::move(sorted);
  sorted_ = true;
}

PendingInfos::const_iterator PendingInfos::find(JobId id) const {
  if (!sorted_) {
    return std::find_if(items_.begin(), items_.end(), [id](const value_type& v) { return v.first == id; });
  }
  auto it = std::lower_bound(items_.begin(), items_.end(), id,
                             [](const value_type& v, JobId want) { return v.first < want; });
  return it != items_.end() && it->first == id ? it : items_.end();
}

const PendingInfo& PendingInfos::at(JobId id) const {
  auto it = find(id);
  if (it == end()) throw std::out_of_range("no pending information for job " + std::to_string(id));
  return it->second;
}

std::vector<std::string> Job::NodeNames() const {
  std::vector<std::string> names;
  if (const Attempt* a = CurrentAttempt()) {
    if (a->allocation.empty()) return a->placed_on;  // placed by the pool's backend
    for (const auto& n : a->allocation) names.push_back(n.node);
  }
  return names;
}

const std::string* ConstraintValue(const NodeSpec& node, const std::string& key) {
  if (key == kNodeNameConstraint) return &node.name;
  auto it = node.labels.find(key);
  return it == node.labels.end() ? nullptr : &it->second;
}

const PoolSpec* ClusterSpec::FindPool(std::string_view name) const {
  for (const auto& p : pools) {
    if (p.name == name) return &p;
  }
  return nullptr;
}
const QueueSpec* ClusterSpec::FindQueue(std::string_view name) const {
  for (const auto& q : queues) {
    if (q.name == name) return &q;
  }
  return nullptr;
}
const NodeSpec* ClusterSpec::FindNode(std::string_view name) const {
  for (const auto& n : nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}
const ProjectPolicy* ClusterSpec::FindProject(std::string_view name) const {
  for (const auto& p : projects) {
    if (p.name == name) return &p;
  }
  return nullptr;
}
const QueueSpec* ClusterSpec::DefaultQueueFor(WorkloadKind kind) const {
  for (const auto& q : queues) {
    for (WorkloadKind k : q.workload_kinds) {
      if (k == kind) return &q;
    }
  }
  return nullptr;
}

}  // namespace unisched::model
