#include "daemon/node_book.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "unisched/model/words.h"

namespace unisched::daemon {
namespace {

using model::Cat;

// Reasons of agent nodes the daemon set down itself: a heartbeat brings such
// a node up again (a node an admin drained stays drained).
constexpr const char* kAwaitingAgent = "waiting for its agent to register";
constexpr const char* kNoHeartbeat = "no heartbeat from its agent for ";

bool Busy(const model::NodeUsage& node) {
  return node.cpus_used > 0 || node.memory_used_mb > 0;
}

}  // namespace

NodeBook::NodeBook(const config::Config& config, const Clock& clock)
    : config_(config),
      clock_(clock),
      black_holes_(config.health.black_hole_failures, std::chrono::seconds(config.health.black_hole_window_seconds)) {
  for (const auto& spec : config_.cluster.nodes) {
    model::NodeUsage n;
    n.spec = spec;
    n.gpu_busy = model::BusySet(spec.gpus.size());
    node_index_.emplace(spec.name, nodes_.size());
    nodes_.push_back(std::move(n));
  }
}

void NodeBook::Load(const std::vector<store::NodeStateRecord>& stored,
                    const std::map<std::string, Timestamp>& stored_idle, Timestamp now) {
  // Idle since the start at the latest; recovered attempts take theirs back.
  for (const auto& n : nodes_) {
    if (Busy(n)) continue;
    auto kept = stored_idle.find(n.spec.name);
    if (kept != stored_idle.end() && kept->second <= now) {
      idle_since_.try_emplace(n.spec.name, kept->second);
    } else if (idle_since_.try_emplace(n.spec.name, now).second) {
      idle_unsaved_.insert(n.spec.name);
    }
  }
  // Nodes gone from the config: their rows go.
  for (const auto& [name, since] : stored_idle) {
    if (!node_index_.count(name)) idle_unsaved_.insert(name);
  }
  for (auto& n : nodes_) {
    if (!n.spec.agent) continue;
    n.state = model::NodeState::kDown;
    reasons_[n.spec.name] = kAwaitingAgent;
    last_heartbeat_[n.spec.name] = now;
  }
  for (const auto& record : stored) {
    if (auto* n = Find(record.name)) {
      n->state = record.state;
      reasons_[record.name] = record.reason;
    }
  }
}

model::NodeUsage* NodeBook::Find(const std::string& name) {
  auto it = node_index_.find(name);
  return it == node_index_.end() ? nullptr : &nodes_[it->second];
}

void NodeBook::Apply(const model::Allocation& allocation, int sign) {
  for (const auto& share : allocation) {
    model::NodeUsage* n = Find(share.node);
    if (!n) continue;
    n->Apply(share, sign);
    if (sign < 0 && n->state == model::NodeState::kDraining && !Busy(*n)) n->state = model::NodeState::kDrained;
    const bool changed =
        Busy(*n) ? idle_since_.erase(share.node) > 0 : idle_since_.try_emplace(share.node, clock_.Now()).second;
    if (changed) idle_unsaved_.insert(share.node);
  }
}

void NodeBook::SaveIdleTimes(Batch& batch) {
  if (idle_unsaved_.empty()) return;
  std::vector<std::pair<std::string, std::optional<Timestamp>>> changes;
  changes.reserve(idle_unsaved_.size());
  for (const std::string& name : idle_unsaved_) {
    auto idle = idle_since_.find(name);
    changes.emplace_back(name, idle == idle_since_.end() ? std::nullopt : std::optional<Timestamp>(idle->second));
  }
  idle_unsaved_.clear();
  batch.writes.push_back([changes = std::move(changes)](store::Transaction& t) -> Status {
    for (const auto& [name, since] : changes) {
      if (Status s = t.SetNodeIdleSince(name, since); !s) return s;
    }
    return Status::Ok();
  });
}

void NodeBook::Change(Batch& batch, model::NodeUsage& node, model::NodeState to, const std::string& reason,
                      const std::string& event_kind, const std::string& severity, const std::string& message) {
  const std::string& name = node.spec.name;
  node.state = to;
  reasons_[name] = reason;
  batch.writes.push_back([record = store::NodeStateRecord{name, to, reason},
                          event = store::ClusterEvent{clock_.Now(), event_kind, "node/" + name, severity, message}](
                             store::Transaction& t) -> Status {
    if (Status s = t.SetNodeState(record); !s) return s;
    return t.AppendClusterEvent(event);
  });
}

service::ClusterView::Node NodeBook::DrainOrResume(Batch& batch, model::NodeUsage& node, bool drain,
                                                   const std::string& reason, const std::string& actor) {
  std::string message = drain ? "drained by " : "resumed by ";
  message += actor;
  if (drain && !reason.empty()) message += ": " + reason;
  Change(batch, node,
         drain ? (Busy(node) ? model::NodeState::kDraining : model::NodeState::kDrained) : model::NodeState::kUp,
         drain ? reason : "", drain ? "drain" : "resume", "info", message);
  return {node, reasons_[node.spec.name], std::nullopt};
}

std::string NodeBook::AddressOf(const std::string& node) const {
  if (auto it = addresses_.find(node); it != addresses_.end()) return it->second;
  const size_t index = node_index_.count(node) != 0 ? node_index_.at(node) : nodes_.size();
  // A local node is this machine; an agent node not heard from yet goes by
  // its name (the agent's next heartbeat says its address).
  return index < nodes_.size() && !nodes_[index].spec.agent ? "127.0.0.1" : node;
}

bool NodeBook::Heard(Batch& batch, const executor::Heartbeat& hb, Timestamp now) {
  model::NodeUsage* node = Find(hb.node);
  if (!node) return false;  // the hub checked it against the config
  bool changed = false;
  last_heartbeat_[hb.node] = now;
  if (!hb.address.empty()) addresses_[hb.node] = hb.address;
  const std::string reason = reasons_[hb.node];
  const model::NodeSpec& spec = node->spec;
  // Registration: a node the daemon set down itself comes up. Like slurmd,
  // an agent that finds less than the config declares gets its node drained
  // (jobs sized by the config would not fit).
  std::string short_of;
  auto lacks = [&short_of](int64_t has, int64_t declared, const char* what) {
    if (has >= declared) return;
    short_of +=
        Cat(short_of.empty() ? "" : ", ", std::to_string(has), what, " (config: ", std::to_string(declared), ")");
  };
  lacks(hb.cpus, spec.cpus, " cpus");
  lacks(hb.memory_mb, spec.memory_mb, " MB memory");
  lacks(static_cast<int64_t>(hb.gpus.size()), static_cast<int64_t>(spec.gpus.size()), " GPUs");
  if (node->state == model::NodeState::kDown && (reason == kAwaitingAgent || reason.rfind(kNoHeartbeat, 0) == 0)) {
    const bool first = reason == kAwaitingAgent;
    Change(batch, *node, model::NodeState::kUp, "", first ? "registered" : "up", "info",
           first ? Cat("its agent registered: ", std::to_string(hb.cpus), " cpus, ", std::to_string(hb.memory_mb),
                       " MB, ", std::to_string(hb.gpus.size()), " GPUs")
                 : std::string("its agent is back"));
    changed = true;
  }
  // Labels the agent reports (`--labels`) add to the node's; where both name
  // a key the config's value wins (the config is what admins review).
  model::Labels labels = hb.labels;
  for (const auto& [key, value] : config_.cluster.nodes[node_index_.at(hb.node)].labels) labels[key] = value;
  if (labels != node->spec.labels) {
    node->spec.labels = std::move(labels);
    changed = true;
  }
  const bool up = node->state == model::NodeState::kUp;
  if (up && !short_of.empty()) {
    Change(batch, *node, model::NodeState::kDrained, "agent reports less than configured: " + short_of, "drain",
           "warning", "drained: its agent reports less than configured: " + short_of);
    changed = true;
  } else if (up && !hb.healthy) {
    Change(batch, *node, Busy(*node) ? model::NodeState::kDraining : model::NodeState::kDrained,
           "health check failed: " + hb.health_message, "drain", "warning",
           "drained: health check failed: " + hb.health_message);
    changed = true;
  }
  return changed;
}

std::vector<std::pair<std::string, std::string>> NodeBook::DownSilent(Batch& batch, Timestamp now) {
  std::vector<std::pair<std::string, std::string>> down;
  const auto timeout = std::chrono::seconds(config_.health.heartbeat_timeout_seconds);
  for (auto& node : nodes_) {
    if (!node.spec.agent || node.state == model::NodeState::kDown) continue;
    const Timestamp last = last_heartbeat_[node.spec.name];
    if (now - last <= timeout) continue;
    const auto silent = std::chrono::duration_cast<std::chrono::seconds>(now - last).count();
    const std::string why = Cat(kNoHeartbeat, std::to_string(silent), " s");
    spdlog::warn("node {} down: {}", node.spec.name, why);
    Change(batch, node, model::NodeState::kDown, why, "down", "critical", "down: " + why);
    down.emplace_back(node.spec.name, why);
  }
  return down;
}

bool NodeBook::CountFailure(Batch& batch, const model::Allocation& allocation, Timestamp now) {
  bool drained = false;
  for (const auto& share : allocation) {
    const std::optional<std::string> why = black_holes_.RecordFailure(share.node, now);
    model::NodeUsage* node = Find(share.node);
    if (!why || !node || node->state != model::NodeState::kUp) continue;
    spdlog::warn("node {} drained: {}", share.node, *why);
    Change(batch, *node, Busy(*node) ? model::NodeState::kDraining : model::NodeState::kDrained, *why, "drain",
           "warning", "drained automatically: " + *why);
    black_holes_.Forget(share.node);
    drained = true;
  }
  return drained;
}

std::vector<service::ClusterView::Node> NodeBook::Views() const {
  std::vector<service::ClusterView::Node> views;
  views.reserve(nodes_.size());
  for (const auto& n : nodes_) {
    auto reason = reasons_.find(n.spec.name);
    auto heard = last_heartbeat_.find(n.spec.name);
    const bool awaiting = reason != reasons_.end() && reason->second == kAwaitingAgent;
    views.push_back({n, reason == reasons_.end() ? "" : reason->second, std::nullopt});
    if (auto idle = idle_since_.find(n.spec.name); idle != idle_since_.end()) views.back().idle_since = idle->second;
    // The daemon's start counts for the timeout, not as a heartbeat seen.
    if (heard != last_heartbeat_.end() && !awaiting) views.back().last_heartbeat = heard->second;
  }
  return views;
}

std::map<std::pair<std::string, std::string>, int> NodeBook::CountsByStateAndPool() const {
  std::map<std::pair<std::string, std::string>, int> counts;
  for (const auto& pool : config_.cluster.pools) {
    for (auto s :
         {model::NodeState::kUp, model::NodeState::kDraining, model::NodeState::kDrained, model::NodeState::kDown}) {
      counts[{std::string(model::ToString(s)), pool.name}] = 0;
    }
  }
  for (const auto& n : nodes_) ++counts[{std::string(model::ToString(n.state)), n.spec.pool}];
  return counts;
}

void NodeBook::PublishGauges(metrics::Metrics& metrics) {
  auto counts = CountsByStateAndPool();
  if (counts == published_counts_) return;
  for (const auto& [key, count] : counts) metrics.SetNodes(key.first, key.second, count);
  published_counts_ = std::move(counts);
}

}  // namespace unisched::daemon
