#pragma once
// The store's node states: what an admin or the daemon set (drain, down)
// that must outlive a restart. Live usage is never stored.

#include <string>
#include <vector>

#include "unisched/common/status.h"
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
};

class NodeReads {
 public:
  virtual ~NodeReads() = default;
  // By name; a state this binary does not know is left out.
  virtual std::vector<NodeStateRecord> LoadNodeStates() const = 0;
};

}  // namespace unisched::store
