#pragma once
// The store's node states: what an admin or the daemon set (drain, down)
// that must outlive a restart, and since when each idle node has run
// nothing (the capacity report's idle nodes). Live usage is never stored.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/model/cluster.h"

namespace unisched::store {

struct NodeStateRecord {
  std::string name;
  model::NodeState state = model::NodeState::kUp;
  std::string reason;
};

class NodeWrites {
 public:
  virtual ~NodeWrites() = default;
  // Inserts or replaces the node's state. Idempotent.
  virtual Status SetNodeState(const NodeStateRecord& node) = 0;
  // The node runs nothing since `since`; nullopt: it runs something now.
  virtual Status SetNodeIdleSince(const std::string& node, std::optional<Timestamp> since) = 0;
};

class NodeReads {
 public:
  virtual ~NodeReads() = default;
  // By name; a state this binary does not know is left out.
  virtual std::vector<NodeStateRecord> LoadNodeStates() const = 0;
  // Idle nodes by name, with since when (what SetNodeIdleSince left).
  virtual std::map<std::string, Timestamp> LoadNodeIdleSince() const = 0;
};

}  // namespace unisched::store
