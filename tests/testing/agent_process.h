#pragma once
// `unisched agent` processes for integration tests: started as children
// against a daemon's URL (or several replicas' URLs), and killed with
// everything they started, as when their machine dies.

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "testing/daemon.h"

namespace unisched::testing {

// Starts `unisched agent` for `node` with its state in `dir` (its output in
// dir.log), declaring 2 cpus and 1024 MB. `server` is the --server value (a
// URL, or several separated by commas); `extra` are more flags, `path` the
// PATH it sees when not empty.
// `netns` (a name `ip netns add` made): the agent runs in that network
// namespace and in a UTS namespace of its own whose hostname is the node's
// name, as on a machine of its own.
pid_t SpawnAgent(const std::string& server, const std::string& token_file, const std::string& node,
                 const std::string& pool, const std::string& dir, const std::vector<std::string>& extra = {},
                 const std::string& path = {}, const std::string& netns = {});

// SIGKILL to every process whose command line or working directory is
// under `dir` (an agent's supervisors and its jobs), and removal of the
// attempt cgroups of the supervisors killed.
void KillEverythingUnder(const std::string& dir);

// One `unisched agent` per node of `pool` against `daemon` (a node token
// made for the pool), each with its state in <state-dir>/agent-NODE, in
// netns[i] when given; killed with everything they started when it goes.
class AgentFleet {
 public:
  AgentFleet(TestDaemon& daemon, const std::string& pool, const std::vector<std::string>& nodes,
             const std::vector<std::string>& netns = {}, const std::string& server = {});
  ~AgentFleet();
  AgentFleet(const AgentFleet&) = delete;
  AgentFleet& operator=(const AgentFleet&) = delete;
  std::string Dir(const std::string& node) const { return state_dir_ + "/agent-" + node; }
  // SIGKILL to the agent alone (its supervisors and jobs run on), then a new
  // agent for the node with the same state directory, as after a crash.
  void Restart(const std::string& node);

 private:
  std::string state_dir_;
  std::string server_, token_file_, pool_;
  std::map<std::string, pid_t> agents_;
  std::map<std::string, std::string> netns_;
};

}  // namespace unisched::testing
