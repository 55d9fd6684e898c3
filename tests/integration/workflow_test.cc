// Workflows through the real daemon (docs/workflows.md): tasks released as
// real jobs when their inputs succeed, scatter and gather, retries with more
// memory, a switch to the alternative tool, fail/resume without re-running
// what succeeded, cancel, a restart in the middle, bad input refused by field.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/daemon.h"
#include "testing/workflow_json.h"

namespace unisched::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kConfig = R"yaml(
server:
  scheduler_tick_seconds: 0.1
pools:
  - name: cpu
    kind: cpu
    nodes: [x86-c8m16-hpc-01]
nodes:
  - name: x86-c8m16-hpc-01
    cpus: 8
    memory_mb: 16384
queues:
  - name: batch
    pool: cpu
projects:
  - name: default
)yaml";

class WorkflowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_.UseConfigText(kConfig);
    daemon_.Start();
    // Written by the jobs' accounts.
    marks_ = daemon_.state_dir() + "/marks";
    std::filesystem::create_directories(marks_);
    std::filesystem::permissions(marks_, std::filesystem::perms::all);
  }
  TestDaemon& d() { return daemon_; }

  // A task whose job appends its name (and scatter item) to marks/<name>.
  json Task(const std::string& name, const std::string& script, std::vector<std::string> after = {}) {
    json job = ShellJob("batch", "echo \"${UNISCHED_SCATTER_ITEM:-one}\" >> " + marks_ + "/" + name + " && " + script);
    return {{"name", name}, {"job", job}, {"after", after}};
  }
  std::string Submit(const json& body) {
    const Reply r = d().Call("POST", "/v1/workflows", body);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.json.value("id", "");
  }
  json Get(const std::string& id) { return d().Call("GET", "/v1/workflows/" + id).json; }
  json WaitState(const std::string& id, const std::vector<std::string>& states, std::chrono::seconds limit = 60s) {
    json w;
    for (auto end = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < end;) {
      w = Get(id);
      if (std::find(states.begin(), states.end(), w.value("state", "")) != states.end()) return w;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "workflow " << id << " never reached " << states.front() << ": " << w.dump(2);
    return w;
  }
  // Lines of marks/<name>, sorted.
  std::vector<std::string> Marks(const std::string& name) {
    std::vector<std::string> lines;
    std::istringstream in(ReadFile(marks_ + "/" + name));
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    std::sort(lines.begin(), lines.end());
    return lines;
  }

  TestDaemon daemon_;
  std::string marks_;
};

TEST_F(WorkflowTest, TasksRunAsJobsInTheirTurnScatteredThenGathered) {
  json align = Task("align", "test \"$UNISCHED_WORKFLOW_TASK\" = align", {"index"});
  align["scatter"] = {{"over", {"s1", "s2", "s3"}}};
  // Each sort sees its own align's item: instance i after instance i.
  json sort = Task("sort", "grep -qx \"$UNISCHED_SCATTER_ITEM\" " + marks_ + "/align", {"align"});
  sort["scatter"] = {{"over", {"s1", "s2", "s3"}}};
  // The gather runs once, after every sort.
  json merge = Task("merge", "test $(wc -l < " + marks_ + "/sort) -eq 3", {"sort"});
  const std::string id = Submit({{"name", "pipeline"}, {"tasks", {Task("index", "true"), align, sort, merge}}});
  const json w = WaitState(id, {"SUCCEEDED", "FAILED"});
  ASSERT_EQ(w["state"], "SUCCEEDED") << w.dump(2);
  EXPECT_EQ(Marks("index"), (std::vector<std::string>{"one"}));
  EXPECT_EQ(Marks("align"), (std::vector<std::string>{"s1", "s2", "s3"}));
  EXPECT_EQ(Marks("sort"), (std::vector<std::string>{"s1", "s2", "s3"}));
  EXPECT_EQ(Marks("merge"), (std::vector<std::string>{"one"}));
  EXPECT_EQ(w["counts"]["SUCCEEDED"], 8);
  // Every instance's job is an ordinary job, named after its task.
  const json& instance = WorkflowTask(w, "align")["instances"][1];
  ASSERT_EQ(instance["jobs"].size(), 1u);
  const json job = d().Call("GET", "/v1/jobs/" + instance["jobs"][0].get<std::string>()).json;
  EXPECT_EQ(job["name"], "align[1]");
  EXPECT_EQ(job["state"], "COMPLETED");
  EXPECT_EQ(job["env"]["UNISCHED_WORKFLOW_ID"], id);
  EXPECT_EQ(job["env"]["UNISCHED_SCATTER_ITEM"], "s2");

  const Reply dot = d().Call("GET", "/v1/workflows/" + id + "?format=dot");
  EXPECT_EQ(dot.status, 200);
  EXPECT_NE(dot.body.find("t_align -> t_sort;"), std::string::npos) << dot.body;
  EXPECT_NE(dot.body.find("3 SUCCEEDED"), std::string::npos) << dot.body;
  const Reply mermaid = d().Call("GET", "/v1/workflows/" + id + "?format=mermaid");
  EXPECT_NE(mermaid.body.find("t_sort --> t_merge"), std::string::npos) << mermaid.body;
}

TEST_F(WorkflowTest, AFailureIsRetriedWithTwiceTheMemoryThenTheAlternativeToolTakesOver) {
  json align = Task("align", "exit 1");
  align["job"]["resources"]["memory_mb"] = 100;
  align["on_failure"] = {{"retries", 1}, {"change", {{"memory_factor", 2}}}, {"alternative", "align_mm2"}};
  const json alternative = Task("align_mm2", "test \"$UNISCHED_WORKFLOW_TOOL\" = align_mm2");
  const std::string id = Submit({{"name", "tools"}, {"tasks", {align, alternative, Task("call", "true", {"align"})}}});
  const json w = WaitState(id, {"SUCCEEDED", "FAILED"});
  ASSERT_EQ(w["state"], "SUCCEEDED") << w.dump(2);
  const json& instance = WorkflowTask(w, "align")["instances"][0];
  ASSERT_EQ(instance["jobs"].size(), 3u) << instance.dump();
  EXPECT_EQ(instance["tool"], "align_mm2");
  std::vector<int64_t> memory;
  for (const auto& job_id : instance["jobs"]) {
    memory.push_back(d().Call("GET", "/v1/jobs/" + job_id.get<std::string>()).json["resources"]["memory_mb"]);
  }
  EXPECT_EQ(memory[0], 100);
  EXPECT_EQ(memory[1], 200) << "the retry asks twice the memory";
  EXPECT_EQ(Marks("align").size(), 2u);
  EXPECT_EQ(Marks("align_mm2").size(), 1u);
  EXPECT_EQ(Marks("call").size(), 1u) << "what follows runs after the alternative succeeded";
  std::vector<std::string> kinds;
  for (const auto& e : w["events"]) kinds.push_back(e["kind"]);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "workflow_retry"), kinds.end());
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "workflow_alternative"), kinds.end());
}

TEST_F(WorkflowTest, AFailedWorkflowResumesWithoutRunningWhatSucceeded) {
  // `flaky` fails until the flag exists, and its failure (then: fail)
  // cancels `slow`, which waits for the flag too.
  const std::string flag = marks_ + "/fixed";
  const std::string id =
      Submit({{"name", "resume"},
              {"tasks",
               {Task("first", "true"), Task("flaky", "test -e " + flag, {"first"}),
                Task("slow", "test -e " + flag + " || sleep 300"), Task("last", "true", {"flaky"})}}});
  json w = WaitState(id, {"FAILED", "SUCCEEDED"});
  ASSERT_EQ(w["state"], "FAILED") << w.dump(2);
  EXPECT_NE(w["reason"].get<std::string>().find("flaky"), std::string::npos) << w["reason"];
  for (int i = 0; i < 100 && WorkflowTask(Get(id), "slow")["instances"][0]["state"] != "CANCELLED"; ++i) {
    std::this_thread::sleep_for(100ms);
  }
  w = Get(id);
  EXPECT_EQ(WorkflowTask(w, "slow")["instances"][0]["state"], "CANCELLED") << w.dump(2);
  EXPECT_EQ(WorkflowTask(w, "last")["instances"][0]["state"], "WAITING");

  { std::ofstream(flag) << "x"; }
  const Reply resumed = d().Call("POST", "/v1/workflows/" + id + "/resume", json::object());
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  w = WaitState(id, {"SUCCEEDED", "FAILED"});
  ASSERT_EQ(w["state"], "SUCCEEDED") << w.dump(2);
  EXPECT_EQ(Marks("first").size(), 1u) << "first succeeded and is not run again";
  EXPECT_EQ(Marks("flaky").size(), 2u);
  EXPECT_EQ(Marks("slow").size(), 2u);
  EXPECT_EQ(Marks("last").size(), 1u);
  EXPECT_EQ(WorkflowTask(w, "flaky")["instances"][0]["tries"], 2);
}

TEST_F(WorkflowTest, CancellingStopsItsJobsAndReleasesNothingMore) {
  const std::string id =
      Submit({{"name", "cancel"}, {"tasks", {Task("long", "sleep 300"), Task("after", "true", {"long"})}}});
  json w;
  for (int i = 0; i < 100; ++i) {
    w = Get(id);
    const json& jobs = WorkflowTask(w, "long")["instances"][0]["jobs"];
    if (!jobs.empty() && d().Call("GET", "/v1/jobs/" + jobs[0].get<std::string>()).json["state"] == "RUNNING") break;
    std::this_thread::sleep_for(100ms);
  }
  const std::string job = WorkflowTask(w, "long")["instances"][0]["jobs"][0];
  const Reply cancelled = d().Call("DELETE", "/v1/workflows/" + id);
  ASSERT_EQ(cancelled.status, 200) << cancelled.body;
  EXPECT_EQ(cancelled.json["state"], "CANCELLED");
  EXPECT_EQ(d().WaitTerminal(job)["state"], "CANCELLED");
  for (int i = 0; i < 100 && WorkflowTask(Get(id), "long")["instances"][0]["state"] != "CANCELLED"; ++i) {
    std::this_thread::sleep_for(100ms);
  }
  w = Get(id);
  EXPECT_EQ(WorkflowTask(w, "long")["instances"][0]["state"], "CANCELLED");
  EXPECT_EQ(WorkflowTask(w, "after")["instances"][0]["state"], "CANCELLED");
  EXPECT_TRUE(WorkflowTask(w, "after")["instances"][0]["jobs"].empty()) << "never released";
  EXPECT_EQ(d().Call("DELETE", "/v1/workflows/" + id).status, 409) << "a cancelled workflow has ended";
}

TEST_F(WorkflowTest, AWorkflowGoesOnAcrossARestartAndEachTaskRunsOnce) {
  const std::string id = Submit(
      {{"name", "restart"}, {"tasks", {Task("a", "sleep 1"), Task("b", "sleep 1", {"a"}), Task("c", "true", {"b"})}}});
  for (int i = 0; i < 100 && Marks("a").empty(); ++i) std::this_thread::sleep_for(50ms);
  d().Stop();
  std::this_thread::sleep_for(1500ms);  // a ends while the daemon is down
  d().Start();
  const json w = WaitState(id, {"SUCCEEDED", "FAILED"});
  ASSERT_EQ(w["state"], "SUCCEEDED") << w.dump(2);
  EXPECT_EQ(Marks("a").size(), 1u);
  EXPECT_EQ(Marks("b").size(), 1u);
  EXPECT_EQ(Marks("c").size(), 1u);
  EXPECT_FALSE(w["ended_at"].is_null());
}

TEST_F(WorkflowTest, BadWorkflowsAreRefusedNamingTheFieldAndNothingIsMade) {
  struct Case {
    json body;
    int status;
    std::string field;
  };
  const json ok = ShellJob("batch", "true");
  json bad_cpus = ok;
  bad_cpus["resources"]["cpus"] = -1;
  const std::vector<Case> cases = {
      {{{"tasks", {{{"name", "a"}, {"job", ok}, {"after", {"b"}}}, {{"name", "b"}, {"job", ok}, {"after", {"a"}}}}}},
       422,
       "tasks[0].after"},
      {{{"tasks", {{{"name", "a"}, {"job", ok}, {"after", {"nope"}}}}}}, 422, "tasks[0].after[0]"},
      {{{"tasks", {{{"name", "a"}, {"job", bad_cpus}}}}}, 422, "tasks[0].job.resources.cpus"},
      {{{"tasks", {{{"name", "a"}, {"job", ok}, {"colour", "red"}}}}}, 422, "tasks[0].colour"},
      {{{"tasks", {{{"name", "a"}, {"job", "true"}}}}}, 400, "tasks[0].job"},
      {{{"tasks", {{{"name", "a"}, {"job", ok}, {"on_failure", {{"then", "panic"}}}}}}},
       422,
       "tasks[0].on_failure.then"},
      {{{"tasks", json::array()}}, 422, "tasks"},
      {{{"project", "nope"}, {"tasks", {{{"name", "a"}, {"job", ok}}}}}, 422, ""},
  };
  for (const auto& c : cases) {
    const Reply r = d().Call("POST", "/v1/workflows", c.body);
    EXPECT_EQ(r.status, c.status) << c.body.dump() << " -> " << r.body;
    if (!c.field.empty()) {
      EXPECT_EQ(r.json["error"]["field"], c.field) << r.body;
    }
  }
  EXPECT_TRUE(d().Call("GET", "/v1/workflows").json["items"].empty());
  EXPECT_TRUE(d().Call("GET", "/v1/jobs").json["items"].empty());
}

}  // namespace
}  // namespace unisched::testing
