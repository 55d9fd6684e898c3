// Multi-node jobs as gangs (launch per_node, docs/execution.md "Multi-node
// jobs") through real processes: a daemon whose pool has two local nodes,
// and a daemon with two `unisched agent` processes. Every rank runs on its
// node with its place in its environment; the first rank that fails stops
// the others on every node; a cancel stops every rank; the job's exit code
// is the highest of its ranks' and each rank's end is kept.

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <thread>

#include "testing/agent_process.h"
#include "testing/daemon.h"
#include "testing/follower.h"

namespace unisched::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kLocalConfig = R"yaml(
server:
  scheduler_tick_seconds: 0.1
pools:
  - name: cpu
    kind: cpu
    nodes: [x86-c4m4-hpc-01, x86-c4m4-hpc-02]
nodes:
  - {name: x86-c4m4-hpc-01, cpus: 4, memory_mb: 4096}
  - {name: x86-c4m4-hpc-02, cpus: 4, memory_mb: 4096}
queues:
  - name: batch
    pool: cpu
projects:
  - name: default
)yaml";

// Each rank prints where it stands: rank, node, world size, local rank,
// node rank, the Slurm names, the rendezvous address and its CPU set.
constexpr const char* kWhereAmI =
    "echo \"rank=$UNISCHED_RANK node=$UNISCHED_NODE world=$WORLD_SIZE local=$SLURM_LOCALID "
    "node_rank=$SLURM_NODEID procid=$SLURM_PROCID ntasks=$SLURM_NTASKS master=$MASTER_ADDR:$MASTER_PORT "
    "cpus=$UNISCHED_CPU_SET\"";

json Gang(const std::string& script, int tasks_per_node = 1) {
  return {{"queue", "batch"},
          {"workload", {{"kind", "hpc"}}},
          {"launch", "per_node"},
          {"resources", {{"nodes", 2}, {"cpus", 2}, {"memory_mb", 256}, {"tasks_per_node", tasks_per_node}}},
          {"command", {"/bin/sh", "-c", script}}};
}

// Every rank has started: each wrote its marker file.
bool AllStarted(const std::string& dir, int ranks) {
  for (int r = 0; r < ranks; ++r) {
    if (!fs::exists(dir + "/started-" + std::to_string(r))) return false;
  }
  return true;
}

class LocalGangTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shared_ = daemon_.state_dir() + "/shared";
    fs::create_directories(shared_);
    fs::permissions(shared_, fs::perms::all);
    daemon_.UseConfigText(kLocalConfig);
    daemon_.Start();
  }
  TestDaemon daemon_;
  std::string shared_;
};

TEST_F(LocalGangTest, EveryRankRunsOnItsNodeWithItsPlaceAndItsOwnOutput) {
  const std::string id = daemon_.Submit(Gang(kWhereAmI, 2));
  const json job = daemon_.WaitTerminal(id);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump(2);
  EXPECT_EQ(job["launch"], "per_node");
  EXPECT_EQ(job["resources"]["tasks_per_node"], 2);
  const json& attempt = job["attempts"][0];
  ASSERT_EQ(attempt["tasks"].size(), 4u) << attempt.dump(2);
  const std::vector<std::string> allocated = job["nodes"];
  ASSERT_EQ(allocated.size(), 2u);
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const json& task = attempt["tasks"][rank];
    const std::string on = allocated[static_cast<size_t>(rank / 2)];
    EXPECT_EQ(task["rank"], rank);
    EXPECT_EQ(task["node"], on);
    EXPECT_EQ(task["state"], "COMPLETED");
    EXPECT_EQ(task["exit_code"], 0);
    const Reply log = daemon_.Call("GET", "/v1/jobs/" + id + "/log?rank=" + std::to_string(rank));
    ASSERT_EQ(log.status, 200);
    EXPECT_EQ(log.body, "rank=" + std::to_string(rank) + " node=" + on + " world=4 local=" + std::to_string(rank % 2) +
                            " node_rank=" + std::to_string(rank / 2) + " procid=" + std::to_string(rank) +
                            " ntasks=4 master=127.0.0.1:" + std::to_string(12000 + std::stoll(id) % 20000) +
                            // One of its node's two CPU ids each, the lowest free: the nodes were empty.
                            " cpus=" + std::to_string(rank % 2) + "\n");
  }
  // ?node=: the first rank on that node.
  const Reply second = daemon_.Call("GET", "/v1/jobs/" + id + "/log?node=" + allocated[1]);
  EXPECT_EQ(second.body.rfind("rank=2 ", 0), 0u) << second.body;
  // Unknown ranks and nodes are named, not silently empty.
  const Reply no_rank = daemon_.Call("GET", "/v1/jobs/" + id + "/log?rank=4");
  EXPECT_EQ(no_rank.status, 404);
  EXPECT_NE(no_rank.body.find("its ranks are 0 to 3"), std::string::npos) << no_rank.body;
  EXPECT_EQ(daemon_.Call("GET", "/v1/jobs/" + id + "/log?node=x86-nowhere-01").status, 404);
  EXPECT_EQ(daemon_.Call("GET", "/v1/jobs/" + id + "/log?stream=stdin").status, 422);
}

// Local nodes share one machine's /tmp: each job gets a TMPDIR per node
// in its work directory, private to its account, shared by its ranks on
// that node (as Slurm's per-job /tmp); one the job sets is kept.
TEST_F(LocalGangTest, EachNodeOfAJobHasATmpdirOfItsOwn) {
  const std::string id =
      daemon_.Submit(Gang("touch \"$TMPDIR/rank-$UNISCHED_RANK\" && echo \"$TMPDIR\" && "
                          "stat -c %a \"$TMPDIR\"",
                          2));
  const json job = daemon_.WaitTerminal(id);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump(2);
  const std::vector<std::string> allocated = job["nodes"];
  std::set<std::string> dirs;
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::string out = daemon_.Call("GET", "/v1/jobs/" + id + "/log?rank=" + std::to_string(rank)).body;
    const std::string dir = out.substr(0, out.find('\n'));
    EXPECT_TRUE(dir.size() > 0 && dir[0] == '/') << out;
    EXPECT_NE(dir.find("/" + id + "/tmp." + allocated[static_cast<size_t>(rank / 2)]), std::string::npos) << out;
    EXPECT_NE(out.find("\n700\n"), std::string::npos) << out;
    dirs.insert(dir);
  }
  EXPECT_EQ(dirs.size(), 2u) << "one per node, shared by the node's two ranks";

  json own = Gang("echo \"$TMPDIR\"");
  own["env"] = {{"TMPDIR", "/var/tmp"}};
  const std::string kept = daemon_.Submit(own);
  ASSERT_EQ(daemon_.WaitTerminal(kept)["state"], "COMPLETED");
  EXPECT_EQ(daemon_.Call("GET", "/v1/jobs/" + kept + "/log?rank=1").body, "/var/tmp\n");
}

TEST_F(LocalGangTest, TheFirstRankThatFailsStopsTheOthersOnEveryNode) {
  // Ranks 0-2 would run for a minute; rank 3 fails once all have started.
  const std::string script = "touch " + shared_ +
                             "/started-$UNISCHED_RANK; if [ $UNISCHED_RANK = 3 ]; then while [ $(ls " + shared_ +
                             " | wc -l) -lt 4 ]; do sleep 0.05; done; exit 3; fi; exec sleep 60";
  const auto submitted = std::chrono::steady_clock::now();
  const std::string id = daemon_.Submit(Gang(script, 2));
  const json job = daemon_.WaitTerminal(id);
  EXPECT_LT(std::chrono::steady_clock::now() - submitted, 40s) << "the other ranks were not stopped";
  ASSERT_EQ(job["state"], "FAILED") << job.dump(2);
  const json& attempt = job["attempts"][0];
  const std::string reason = attempt["reason"];
  EXPECT_EQ(reason.rfind("rank 3 on node " + job["attempts"][0]["nodes"][1].get<std::string>() + ": exit status 3", 0),
            0u)
      << reason;
  EXPECT_NE(reason.find("the gang's other tasks were stopped"), std::string::npos) << reason;
  ASSERT_EQ(attempt["tasks"].size(), 4u);
  EXPECT_EQ(attempt["tasks"][3]["exit_code"], 3);
  EXPECT_EQ(attempt["tasks"][3]["state"], "FAILED");
  for (int rank = 0; rank < 3; ++rank) EXPECT_EQ(attempt["tasks"][rank]["state"], "CANCELLED") << rank;
  // The highest of the ranks' exit codes, as Slurm reports a job's: the
  // stopped ranks' SIGTERM (143) over rank 3's 3.
  EXPECT_EQ(job["exit_code"], 143);
}

TEST_F(LocalGangTest, ACancelStopsEveryRank) {
  const std::string id = daemon_.Submit(Gang("touch " + shared_ + "/started-$UNISCHED_RANK; exec sleep 60"));
  const json running =
      daemon_.WaitJob(id, [&](const json& j) { return j["state"] == "RUNNING" && AllStarted(shared_, 2); });
  ASSERT_EQ(running["state"], "RUNNING") << running.dump(2);
  ASSERT_EQ(daemon_.Call("DELETE", "/v1/jobs/" + id).status, 200);
  const json job = daemon_.WaitTerminal(id);
  ASSERT_EQ(job["state"], "CANCELLED") << job.dump(2);
  const json& tasks = job["attempts"][0]["tasks"];
  ASSERT_EQ(tasks.size(), 2u);
  for (const json& t : tasks) EXPECT_EQ(t["state"], "CANCELLED") << t.dump();
}

TEST_F(LocalGangTest, ABadShapeIsRefusedWithTheFieldAndAFix) {
  json job = Gang("true", 3);  // 3 tasks on 2 cpus per node
  Reply r = daemon_.Call("POST", "/v1/jobs", job);
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(r.json["error"]["field"], "resources.tasks_per_node") << r.body;
  job = Gang("true");
  job["launch"] = "everywhere";
  r = daemon_.Call("POST", "/v1/jobs", job);
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(r.json["error"]["field"], "launch") << r.body;
}

// A batch script on its first node starts steps on the job's nodes with
// `unisched step`, as with srun: each rank's output comes back in rank
// order, and the step's exit code is the script's to test.
TEST_F(LocalGangTest, ABatchScriptStartsStepsOnAllItsNodesWithUnischedStep) {
  const std::string step = std::string(UNISCHED_BINARY) + " step";
  const std::string script = step +
                             " --tasks-per-node 2 -- /bin/sh -c 'echo $SLURM_PROCID of $SLURM_NTASKS on $UNISCHED_NODE "
                             "step $SLURM_STEP_ID'; " +
                             step + " --nodes 1 -- /bin/sh -c 'exit 7'; echo \"step exit $?\"; " + step +
                             " --nodelist x86-c4m4-hpc-02 -- hostname > /dev/null; echo \"named $?\"";
  json job = Gang(script);
  job["launch"] = "batch";
  const std::string id = daemon_.Submit(job);
  const json ended = daemon_.WaitTerminal(id);
  ASSERT_EQ(ended["state"], "COMPLETED") << ended.dump(2)
                                         << daemon_.Call("GET", "/v1/jobs/" + id + "/log?stream=stderr").body;
  const std::vector<std::string> nodes = ended["nodes"];
  const std::string log = daemon_.Call("GET", "/v1/jobs/" + id + "/log").body;
  EXPECT_EQ(log, "0 of 4 on " + nodes[0] + " step 1\n1 of 4 on " + nodes[0] + " step 1\n2 of 4 on " + nodes[1] +
                     " step 1\n3 of 4 on " + nodes[1] + " step 1\nstep exit 7\nnamed 0\n")
      << daemon_.Call("GET", "/v1/jobs/" + id + "/log?stream=stderr").body;
  // Each step's ranks are kept, with their output.
  const Reply step1 = daemon_.Call("GET", "/v1/jobs/" + id + "/steps/1");
  ASSERT_EQ(step1.status, 200) << step1.body;
  EXPECT_EQ(step1.json["state"], "COMPLETED");
  EXPECT_EQ(step1.json["tasks"].size(), 4u);
  EXPECT_EQ(daemon_.Call("GET", "/v1/jobs/" + id + "/log?step=1&rank=3").body, "3 of 4 on " + nodes[1] + " step 1\n");
  const Reply step2 = daemon_.Call("GET", "/v1/jobs/" + id + "/steps/2");
  EXPECT_EQ(step2.json["state"], "FAILED") << step2.body;
  EXPECT_EQ(step2.json["exit_code"], 7);
  EXPECT_EQ(daemon_.Call("GET", "/v1/jobs/" + id + "/steps/9").status, 404);
}

// Steps are stored when they start (before their 201) and when they end: a
// daemon restart keeps them and numbers the next step after them, and a
// step whose end it did not see ends with its attempt.
TEST_F(LocalGangTest, StepsOutliveARestartAndTheirNumberingGoesOn) {
  const std::string id = daemon_.Submit(Gang("exec sleep 60"));
  ASSERT_EQ(daemon_.WaitJob(id, [](const json& j) { return j["state"] == "RUNNING"; })["state"], "RUNNING");
  const std::string steps = "/v1/jobs/" + id + "/steps";
  Reply first = daemon_.Call("POST", steps, json{{"command", {"true"}}});
  ASSERT_EQ(first.status, 201) << first.body;
  EXPECT_EQ(first.json["step"], 1);
  auto step_state = [&](int step) { return daemon_.Call("GET", steps + "/" + std::to_string(step)).json["state"]; };
  for (int i = 0; i < 200 && step_state(1) == "RUNNING"; ++i) std::this_thread::sleep_for(50ms);
  EXPECT_EQ(step_state(1), "COMPLETED");
  Reply second = daemon_.Call("POST", steps, json{{"command", {"sleep", "20"}}});
  ASSERT_EQ(second.status, 201) << second.body;
  EXPECT_EQ(second.json["step"], 2);

  daemon_.Stop();
  daemon_.Start();
  const Reply kept = daemon_.Call("GET", steps + "/1");
  ASSERT_EQ(kept.status, 200) << kept.body;
  EXPECT_EQ(kept.json["state"], "COMPLETED");
  EXPECT_EQ(kept.json["tasks"].size(), 2u) << kept.body;
  EXPECT_EQ(daemon_.Call("GET", steps + "/2").json["state"], "RUNNING");
  Reply third = daemon_.Call("POST", steps, json{{"command", {"true"}}});
  ASSERT_EQ(third.status, 201) << third.body;
  EXPECT_EQ(third.json["step"], 3);  // not 1 again

  ASSERT_EQ(daemon_.Call("DELETE", "/v1/jobs/" + id).status, 200);
  daemon_.WaitTerminal(id);
  for (int i = 0; i < 200 && step_state(2) == "RUNNING"; ++i) std::this_thread::sleep_for(50ms);
  const Reply ended = daemon_.Call("GET", steps + "/2");
  EXPECT_NE(ended.json["state"], "RUNNING") << ended.body;
  EXPECT_FALSE(ended.json["ended_at"].is_null()) << ended.body;
}

// A job's token (UNISCHED_JOB_TOKEN) starts steps of its own running
// attempt and nothing else; a forged one is refused.
TEST_F(LocalGangTest, AJobsTokenStartsItsOwnStepsOnly) {
  const std::string token_file = shared_ + "/token";
  const std::string id = daemon_.Submit(
      Gang("if [ $UNISCHED_RANK = 0 ]; then echo $UNISCHED_JOB_TOKEN > " + token_file + "; fi; exec sleep 60"));
  const json running =
      daemon_.WaitJob(id, [&](const json& j) { return j["state"] == "RUNNING" && fs::exists(token_file); });
  ASSERT_EQ(running["state"], "RUNNING");
  std::this_thread::sleep_for(100ms);  // the write's end
  std::string token;
  std::ifstream(token_file) >> token;
  ASSERT_EQ(token.rfind("usj_" + id + ".1.", 0), 0u) << token;
  const std::string other = daemon_.Submit(Gang("true"));
  const json step = {{"command", {"true"}}};
  EXPECT_EQ(daemon_.Call("GET", "/v1/jobs", "", {}, &token).status, 403);
  EXPECT_EQ(daemon_.Call("DELETE", "/v1/jobs/" + id, "", {}, &token).status, 403);
  EXPECT_EQ(daemon_.Call("POST", "/v1/jobs/" + other + "/steps", step.dump(), {}, &token).status, 404);
  EXPECT_EQ(daemon_.Call("GET", "/v1/jobs/" + id, "", {}, &token).status, 403);  // not a step route
  const Reply started = daemon_.Call("POST", "/v1/jobs/" + id + "/steps", step.dump(), {}, &token);
  EXPECT_EQ(started.status, 201) << started.body;
  EXPECT_EQ(started.json["nodes"].size(), 2u) << started.body;
  std::string forged = token;
  forged.back() = forged.back() == 'A' ? 'B' : 'A';
  EXPECT_EQ(daemon_.Call("POST", "/v1/jobs/" + id + "/steps", step.dump(), {}, &forged).status, 401);
  // Bad requests name the field.
  Reply bad =
      daemon_.Call("POST", "/v1/jobs/" + id + "/steps", json{{"command", {"true"}}, {"nodes", 3}}.dump(), {}, &token);
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_EQ(bad.json["error"]["field"], "nodes") << bad.body;
  bad = daemon_.Call("POST", "/v1/jobs/" + id + "/steps",
                     json{{"command", {"true"}}, {"node_names", {"x86-nowhere-01"}}}.dump(), {}, &token);
  EXPECT_EQ(bad.json["error"]["field"], "node_names") << bad.body;
  // Once its attempt has ended, the token starts nothing.
  ASSERT_EQ(daemon_.Call("DELETE", "/v1/jobs/" + id).status, 200);
  daemon_.WaitTerminal(id);
  EXPECT_EQ(daemon_.Call("POST", "/v1/jobs/" + id + "/steps", step.dump(), {}, &token).status, 409);
}

// The same through two node agents: each rank on its own agent's node, and
// a failing rank on one node stops the rank on the other.
class AgentGangTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shared_ = daemon_.state_dir() + "/shared";
    fs::create_directories(shared_);
    fs::permissions(shared_, fs::perms::all);
    daemon_.UseConfigText(R"yaml(
server:
  scheduler_tick_seconds: 0.1
health:
  heartbeat_interval_seconds: 1
  heartbeat_timeout_seconds: 10
pools:
  - name: cpu
    kind: cpu
    nodes: [x86-c2m2-hpc-01, x86-c2m2-hpc-02]
nodes:
  - {name: x86-c2m2-hpc-01, cpus: 2, memory_mb: 1024, agent: true}
  - {name: x86-c2m2-hpc-02, cpus: 2, memory_mb: 1024, agent: true}
queues:
  - name: batch
    pool: cpu
projects:
  - name: default
)yaml");
    daemon_.Start();
    agents_ =
        std::make_unique<AgentFleet>(daemon_, "cpu", std::vector<std::string>{"x86-c2m2-hpc-01", "x86-c2m2-hpc-02"});
    ASSERT_TRUE(daemon_.WaitNodes("up")) << "the agents did not register: " << daemon_.Call("GET", "/v1/nodes").body;
  }
  std::string AgentDir(const std::string& node) const { return agents_->Dir(node); }

  TestDaemon daemon_;
  std::string shared_;
  std::unique_ptr<AgentFleet> agents_;
};

TEST_F(AgentGangTest, EachRankRunsOnItsOwnAgentsNodeAndAFailureStopsTheOtherNode) {
  // Each rank writes where it ran, from inside its agent's work directory.
  const std::string id = daemon_.Submit(
      Gang(std::string(kWhereAmI) + " > " + shared_ + "/rank-$UNISCHED_RANK; pwd >> " + shared_ +
           "/rank-$UNISCHED_RANK; echo hello from rank $UNISCHED_RANK on $UNISCHED_NODE; echo to stderr >&2"));
  json job = daemon_.WaitTerminal(id);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump(2);
  const std::vector<std::string> nodes = job["nodes"];
  ASSERT_EQ(nodes.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream in(shared_ + "/rank-" + std::to_string(rank));
    std::string where, cwd;
    std::getline(in, where);
    std::getline(in, cwd);
    EXPECT_EQ(where.rfind("rank=" + std::to_string(rank) + " node=" + nodes[static_cast<size_t>(rank)] + " world=2", 0),
              0u)
        << where;
    // Its agent's MASTER_ADDR: the address the first agent reaches the daemon from.
    EXPECT_NE(where.find(" master=127.0.0.1:"), std::string::npos) << where;
    // Its node's two CPU ids, carried to the agent with the launch.
    EXPECT_NE(where.find(" cpus=0-1"), std::string::npos) << where;
    EXPECT_EQ(cwd.rfind(AgentDir(nodes[static_cast<size_t>(rank)]), 0), 0u) << "rank " << rank << " ran in " << cwd;
    EXPECT_EQ(job["attempts"][0]["tasks"][rank]["node"], nodes[static_cast<size_t>(rank)]);
    // Each rank's output, shipped to the daemon by its own agent before its result.
    const std::string r = std::to_string(rank);
    EXPECT_EQ(daemon_.Call("GET", "/v1/jobs/" + id + "/log?rank=" + r).body,
              "hello from rank " + r + " on " + nodes[static_cast<size_t>(rank)] + "\n");
    EXPECT_EQ(daemon_.Call("GET", "/v1/jobs/" + id + "/log?stream=stderr&rank=" + r).body, "to stderr\n");
  }

  // Rank 1 fails on the second node: rank 0 on the first is stopped.
  const std::string failing = daemon_.Submit(
      Gang("touch " + shared_ + "/started-$UNISCHED_RANK; if [ $UNISCHED_RANK = 1 ]; then while [ ! -e " + shared_ +
           "/started-0 ]; do sleep 0.05; done; exit 5; fi; exec sleep 60"));
  const auto submitted = std::chrono::steady_clock::now();
  job = daemon_.WaitTerminal(failing);
  EXPECT_LT(std::chrono::steady_clock::now() - submitted, 40s) << "rank 0 was not stopped";
  ASSERT_EQ(job["state"], "FAILED") << job.dump(2);
  const std::string reason = job["attempts"][0]["reason"];
  EXPECT_EQ(reason.rfind("rank 1 on node " + job["nodes"][1].get<std::string>() + ": exit status 5", 0), 0u) << reason;
  EXPECT_EQ(job["attempts"][0]["tasks"][0]["state"], "CANCELLED");
  EXPECT_EQ(job["attempts"][0]["tasks"][1]["exit_code"], 5);
}

// Each rank's output is shipped to the daemon as it is written, so a rank on
// another machine is followed while it runs (?follow=true) as one on this one.
TEST_F(AgentGangTest, EachRanksOutputIsFollowedWhileItRuns) {
  const std::string gate = shared_ + "/go";
  const std::string id = daemon_.Submit(Gang(GatedScript(gate)));
  const json running = daemon_.WaitJob(id, [](const json& j) { return j["state"] == "RUNNING"; });
  ASSERT_EQ(running["state"], "RUNNING") << running.dump(2);
  const std::vector<std::string> nodes = running["nodes"];
  Follower rank1(daemon_, "/v1/jobs/" + id + "/log?follow=true&rank=1");
  Follower by_node(daemon_, "/v1/jobs/" + id + "/log?follow=true&node=" + nodes[0]);
  ASSERT_TRUE(rank1.WaitFor("first line")) << rank1.received();
  ASSERT_TRUE(by_node.WaitFor("first line")) << by_node.received();
  EXPECT_FALSE(rank1.ended());
  std::ofstream(gate).put('\n');
  rank1.Join();
  by_node.Join();
  EXPECT_EQ(rank1.received(), "first line from " + nodes[1] + " rank 1\nlast line\n");
  EXPECT_EQ(by_node.received(), "first line from " + nodes[0] + " rank 0\nlast line\n");
  EXPECT_EQ(daemon_.WaitTerminal(id)["state"], "COMPLETED");
}

}  // namespace
}  // namespace unisched::testing
