#pragma once
// The controller's nodes part: every node's usage, state and the reason for
// it, and when each agent was last heard from. State changes are stored
// (with an event on node/NAME) in the controller's batch; registration,
// drains for agents short of what the config declares or failing their
// health check, and silent agents going down are decided here. What that
// means for the jobs on a node (NODE_FAIL, requeue) is the controller's.
// Control thread only.

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon/batch.h"
#include "daemon/node_health.h"
#include "unisched/common/time.h"
#include "unisched/config/config.h"
#include "unisched/executor/wire.h"
#include "unisched/metrics/metrics.h"
#include "unisched/model/cluster.h"
#include "unisched/service/planes.h"
#include "unisched/store/nodes.h"

namespace unisched::daemon {

class NodeBook {
 public:
  NodeBook(const config::Config& config, const Clock& clock);

  // At start: agent nodes are down until their agent registers (the start
  // counts as a heartbeat, so agents have a timeout's grace); a stored
  // state (a drain) wins. A node runs nothing since its stored idle time,
  // else since the start (recovered attempts take it back).
  void Load(const std::vector<store::NodeStateRecord>& stored, const std::map<std::string, Timestamp>& stored_idle,
            Timestamp now);

  std::vector<model::NodeUsage>& nodes() { return nodes_; }
  const std::vector<model::NodeUsage>& nodes() const { return nodes_; }
  const std::map<std::string, std::string>& reasons() const { return reasons_; }
  model::NodeUsage* Find(const std::string& name);

  // An allocation taken (+1) or given back (-1). A draining node becomes
  // drained when its last job leaves.
  void Apply(const model::Allocation& allocation, int sign);

  // Sets a node's state and reason, stored with an event on node/NAME.
  void Change(Batch& batch, model::NodeUsage& node, model::NodeState to, const std::string& reason,
              const std::string& event_kind, const std::string& severity, const std::string& message);
  // drain: draining while jobs run there, else drained; or up again.
  // The node as the API shows it, after the change.
  service::ClusterView::Node DrainOrResume(Batch& batch, model::NodeUsage& node, bool drain, const std::string& reason,
                                           const std::string& actor);

  // An agent's heartbeat: a node the daemon set down itself comes up; its
  // labels join the config's; one short of its declared resources, or
  // failing its health check, is drained. True when the scheduler must
  // look again.
  bool Heard(Batch& batch, const executor::Heartbeat& heartbeat, Timestamp now);
  // Agent nodes silent past health.heartbeat_timeout_seconds go down:
  // (node, why) for each, so the controller ends their attempts.
  std::vector<std::pair<std::string, std::string>> DownSilent(Batch& batch, Timestamp now);

  // How a node's peers reach it (a gang's MASTER_ADDR): the address its
  // agent reports, 127.0.0.1 for a local node, else its name.
  std::string AddressOf(const std::string& node) const;

  // An attempt on `allocation` failed: a node where too many jobs failed
  // within the window (health.black_hole_*) is drained. True when one was.
  bool CountFailure(Batch& batch, const model::Allocation& allocation, Timestamp now);

  // Stores the idle times that changed since the last call (one write in
  // the batch). Called once a tick, not per allocation: a kill -9 loses at
  // most a tick of idle times, which then count from the restart.
  void SaveIdleTimes(Batch& batch);

  // The nodes as the API shows them: reason, and the last heartbeat seen.
  std::vector<service::ClusterView::Node> Views() const;
  // Nodes by (state, pool), every state of every pool present (0 too).
  std::map<std::pair<std::string, std::string>, int> CountsByStateAndPool() const;
  // unisched_nodes{state,pool}, set only when a count changed.
  void PublishGauges(metrics::Metrics& metrics);

 private:
  const config::Config& config_;
  const Clock& clock_;
  std::vector<model::NodeUsage> nodes_;                 // in config order; fixed after construction
  std::unordered_map<std::string, size_t> node_index_;  // name -> position in nodes_ and config nodes
  std::map<std::string, std::string> reasons_;
  std::map<std::string, Timestamp> last_heartbeat_;  // agent nodes
  // Nodes running nothing, since when: the end of their last allocation, or
  // the daemon's start (GET /v1/reports/capacity's idle nodes).
  std::map<std::string, Timestamp> idle_since_;
  std::set<std::string> idle_unsaved_;            // nodes whose idle_since_ entry changed since SaveIdleTimes
  std::map<std::string, std::string> addresses_;  // agent nodes, as their agents report them
  BlackHoleDetector black_holes_;
  std::map<std::pair<std::string, std::string>, int> published_counts_;  // what PublishGauges last set
};

}  // namespace unisched::daemon
