// Job arrays through the real daemon (docs/arrays.md): one submission, tasks
// that start as jobs of their own with their index in their environment, at
// most max_running at once; the array's state follows its tasks; cancelled
// whole or per task; kept across a restart; 100,000 tasks in one request
// with one row.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "testing/daemon.h"
#include "unisched/common/time.h"

namespace unisched::testing {
namespace {

using nlohmann::json;

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

json Array(const std::string& script, const std::string& indices, int max_running = 0) {
  json job = ShellJob("batch", script);
  job["array"] = {{"indices", indices}};
  if (max_running > 0) job["array"]["max_running"] = max_running;
  return job;
}

class ArrayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_.UseConfigText(kConfig);
    daemon_.Start();
  }
  TestDaemon& d() { return daemon_; }
  // Every task of the array, expanded (started ones and waiting ones).
  json Tasks(const std::string& id) { return d().Call("GET", "/v1/jobs?limit=1000&array=" + id).json; }
  TestDaemon daemon_;
};

TEST_F(ArrayTest, EveryTaskRunsOnceWithItsIndexAndAtMostMaxRunningAtOnce) {
  const Reply submitted =
      d().Call("POST", "/v1/jobs",
               Array("echo $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $UNISCHED_ARRAY_TASK_COUNT $SLURM_ARRAY_TASK_MIN "
                     "$SLURM_ARRAY_TASK_MAX $SLURM_ARRAY_TASK_STEP; sleep 0.3",
                     "1-7:2", 2));
  ASSERT_EQ(submitted.status, 201) << submitted.body;
  const std::string id = submitted.json["id"];
  EXPECT_EQ(submitted.json["array"]["indices"], "1-7:2");
  EXPECT_EQ(submitted.json["array"]["tasks"]["total"], 4);
  EXPECT_EQ(submitted.json["array"]["tasks"]["waiting"], 4);

  const json parent = d().WaitTerminal(id);
  ASSERT_EQ(parent["state"], "COMPLETED") << parent.dump(2);
  EXPECT_EQ(parent["array"]["tasks"]["completed"], 4);
  EXPECT_EQ(parent["array"]["waiting"], "");
  EXPECT_TRUE(parent["attempts"].empty());

  const json tasks = Tasks(id);
  ASSERT_EQ(tasks["jobs"].size(), 4u) << tasks.dump(2);
  EXPECT_EQ(tasks["total"], 4);
  std::vector<std::pair<Timestamp, int>> edges;  // +1 at a start, -1 at an end
  std::vector<int64_t> indices;
  for (const json& task : tasks["jobs"]) {
    EXPECT_EQ(task["state"], "COMPLETED") << task.dump();
    EXPECT_EQ(task["array_job_id"], id);
    const int64_t index = task["array_task_id"];
    indices.push_back(index);
    const Reply log = d().Call("GET", "/v1/jobs/" + task["id"].get<std::string>() + "/log");
    EXPECT_EQ(log.body, id + " " + std::to_string(index) + " 4 1 7 2\n");
    // Slurm's name for it finds the same job.
    EXPECT_EQ(d().Call("GET", "/v1/jobs/" + id + "_" + std::to_string(index)).json["id"], task["id"]);
    edges.emplace_back(*ParseRfc3339(task["started_at"].get<std::string>()), +1);
    edges.emplace_back(*ParseRfc3339(task["ended_at"].get<std::string>()), -1);
  }
  std::sort(indices.begin(), indices.end());
  EXPECT_EQ(indices, (std::vector<int64_t>{1, 3, 5, 7}));
  std::sort(edges.begin(), edges.end());  // an end before a start at the same instant
  int running = 0, most = 0;
  for (const auto& [at, step] : edges) most = std::max(most, running += step);
  EXPECT_EQ(most, 2) << "max_running 2, and two could run at once";
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + id + "_4").status, 404);
}

TEST_F(ArrayTest, AFailedTaskFailsTheArrayAndDependantsSeeTheWholeArray) {
  const std::string id = d().Submit(Array("exit $((SLURM_ARRAY_TASK_ID == 1))", "0-2"));
  const std::string on_success = d().Submit([&] {
    json job = ShellJob("batch", "true");
    job["dependency"] = "afterok:" + id;
    return job;
  }());
  const std::string either = d().Submit([&] {
    json job = ShellJob("batch", "true");
    job["dependency"] = "afterany:" + id;
    return job;
  }());
  const json parent = d().WaitTerminal(id);
  ASSERT_EQ(parent["state"], "FAILED") << parent.dump(2);
  EXPECT_EQ(parent["array"]["tasks"]["completed"], 2);
  EXPECT_EQ(parent["array"]["tasks"]["failed"], 1);
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + id + "_1").json["state"], "FAILED");
  EXPECT_EQ(d().WaitTerminal(either)["state"], "COMPLETED");
  EXPECT_EQ(d().WaitTerminal(on_success)["state"], "CANCELLED");
}

// aftercorr: each task of the second array starts once the task of the
// same index of the first completed; one whose partner failed is cancelled
// (DependencyNeverSatisfied); an index the first array lacks waits for
// nothing.
TEST_F(ArrayTest, AftercorrPairsTasksByIndex) {
  const std::string first =
      d().Submit(Array("sleep 0.$SLURM_ARRAY_TASK_ID; exit $((SLURM_ARRAY_TASK_ID == 1))", "0-2"));
  json second = Array("true", "0-3");
  second["dependency"] = "aftercorr:" + first;
  const std::string id = d().Submit(second);
  const json parent = d().WaitTerminal(id);
  EXPECT_EQ(parent["state"], "FAILED") << parent.dump(2);
  EXPECT_EQ(parent["array"]["tasks"]["completed"], 3);
  EXPECT_EQ(parent["array"]["tasks"]["failed"], 1);
  for (int index : {0, 2}) {
    SCOPED_TRACE(index);
    const json mine = d().Call("GET", "/v1/jobs/" + id + "_" + std::to_string(index)).json;
    const json partner = d().Call("GET", "/v1/jobs/" + first + "_" + std::to_string(index)).json;
    ASSERT_EQ(mine["state"], "COMPLETED") << mine.dump();
    EXPECT_GE(*ParseRfc3339(mine["started_at"].get<std::string>()),
              *ParseRfc3339(partner["ended_at"].get<std::string>()));
  }
  const json never = d().Call("GET", "/v1/jobs/" + id + "_1").json;
  EXPECT_EQ(never["state"], "CANCELLED");
  EXPECT_NE(
      never["state_reason"].get<std::string>().find("DependencyNeverSatisfied: task " + first + "_1 ended FAILED"),
      std::string::npos)
      << never.dump();
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + id + "_3").json["state"], "COMPLETED");

  // Refused at submit: aftercorr on a job that is no array, or naming one.
  json plain = ShellJob("batch", "true");
  plain["dependency"] = "aftercorr:" + first;
  const Reply no_array = d().Call("POST", "/v1/jobs", plain);
  EXPECT_EQ(no_array.status, 422) << no_array.body;
  EXPECT_NE(no_array.body.find("give this job an array"), std::string::npos) << no_array.body;
  const std::string single = d().Submit(ShellJob("batch", "true"));
  json names_single = Array("true", "0-1");
  names_single["dependency"] = "aftercorr:" + single;
  const Reply not_array = d().Call("POST", "/v1/jobs", names_single);
  EXPECT_EQ(not_array.status, 422) << not_array.body;
  EXPECT_NE(not_array.body.find("which is no array"), std::string::npos) << not_array.body;
}

TEST_F(ArrayTest, CancellingTheArrayStopsItsRunningTaskAndNoWaitingOneStarts) {
  const std::string id = d().Submit(Array("sleep 30", "0-99", 1));
  d().WaitJob(id, [](const json& j) { return j["array"]["tasks"]["active"] == 1; });
  const json listed = Tasks(id);
  EXPECT_EQ(listed["total"], 100);
  EXPECT_EQ(listed["jobs"].size(), 100u);
  EXPECT_EQ(listed["jobs"][1]["state"], "PENDING") << listed["jobs"][1].dump();
  // A waiting task has its reason: the array's cap.
  const json waiting = d().Call("GET", "/v1/jobs/" + id).json;
  ASSERT_FALSE(waiting["pending_reasons"].empty()) << waiting.dump(2);
  EXPECT_EQ(waiting["pending_reasons"][0]["code"], "JobArrayTaskLimit");
  const json task = d().Call("GET", "/v1/jobs/" + id + "_50").json;  // not looked at: waits as its array
  ASSERT_FALSE(task["pending_reasons"].empty()) << task.dump(2);
  EXPECT_EQ(task["pending_reasons"][0]["code"], "JobArrayTaskLimit");

  const Reply cancel = d().Call("DELETE", "/v1/jobs/" + id);
  ASSERT_EQ(cancel.status, 200) << cancel.body;
  const json parent = d().WaitTerminal(id);
  EXPECT_EQ(parent["state"], "CANCELLED") << parent.dump(2);
  EXPECT_EQ(parent["array"]["tasks"]["failed"], 100);
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + id + "_0").json["state"], "CANCELLED");
  const json never = d().Call("GET", "/v1/jobs/" + id + "_50").json;
  EXPECT_EQ(never["state"], "CANCELLED");
  EXPECT_EQ(never["state_reason"], "cancelled before it started");
  // The one that started (its own row), then the 99 cancelled before they started.
  const json all = Tasks(id);
  EXPECT_EQ(all["total"], 100);
  ASSERT_EQ(all["jobs"].size(), 100u);
  EXPECT_TRUE(all["jobs"][0]["started_at"].is_string()) << all["jobs"][0].dump();
  EXPECT_EQ(all["jobs"][1]["array_task_id"], 1);
  EXPECT_TRUE(all["jobs"][1]["started_at"].is_null());
  EXPECT_EQ(all["jobs"][99]["state"], "CANCELLED");
}

TEST_F(ArrayTest, OneWaitingTaskIsCancelledAloneAndTheOthersRun) {
  const std::string id = d().Submit(Array("sleep 0.3", "0-3", 1));
  const Reply cancel = d().Call("DELETE", "/v1/jobs/" + id + "_3");
  ASSERT_EQ(cancel.status, 200) << cancel.body;
  EXPECT_EQ(cancel.json["state"], "CANCELLED");
  EXPECT_EQ(cancel.json["array_task_id"], 3);
  EXPECT_EQ(d().Call("POST", "/v1/jobs/" + id + "_2/hold").status, 409);
  // Cancelled before it started: ended, as any finished job (409, not 404).
  const Reply again = d().Call("DELETE", "/v1/jobs/" + id + "_3");
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_NE(again.body.find("job " + id + "_3 already ended CANCELLED"), std::string::npos) << again.body;
  const json parent = d().WaitTerminal(id);
  EXPECT_EQ(parent["state"], "FAILED") << "not every task completed: " << parent.dump(2);
  EXPECT_EQ(parent["array"]["tasks"]["completed"], 3);
  EXPECT_EQ(parent["array"]["tasks"]["failed"], 1);
  // Listed expanded with the others, and by sacct as Slurm collapses it.
  const json tasks = Tasks(id);
  EXPECT_EQ(tasks["total"], 4) << tasks.dump(2);
  ASSERT_EQ(tasks["jobs"].size(), 4u) << tasks.dump(2);
  EXPECT_EQ(tasks["jobs"][3]["array_task_id"], 3);
  EXPECT_EQ(tasks["jobs"][3]["state"], "CANCELLED");
  EXPECT_EQ(d().Call("GET", "/v1/jobs?state=CANCELLED&array=" + id).json["total"], 1);
  const auto sacct = d().RunCli({"sacct", "-n", "-P", "-o", "JobID,State"});
  EXPECT_NE(sacct.out.find(id + "_[3]|CANCELLED\n"), std::string::npos) << sacct.out << sacct.err;
  EXPECT_NE(sacct.out.find(id + "_2|COMPLETED\n"), std::string::npos) << sacct.out;
  EXPECT_EQ(("\n" + sacct.out).find("\n" + id + "|"), std::string::npos)
      << "no row for the array itself: " << sacct.out;
}

TEST_F(ArrayTest, AnArrayGoesOnAcrossARestartAndEachTaskRunsOnce) {
  // Written by the job's account.
  const std::string dir = d().state_dir() + "/marks";
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::all);
  const std::string id = d().Submit(Array("echo x >> " + dir + "/task-$SLURM_ARRAY_TASK_ID && sleep 0.5", "0-5", 2));
  d().WaitJob(id, [](const json& j) { return j["array"]["tasks"]["active"] == 2; });
  d().Stop();
  d().Start();
  const json parent = d().WaitTerminal(id);
  // The tasks with their attempts' reasons: what a failure needs to be understood.
  ASSERT_EQ(parent["state"], "COMPLETED") << parent.dump(2) << Tasks(id).dump(2);
  EXPECT_EQ(parent["array"]["tasks"]["completed"], 6);
  for (int index = 0; index < 6; ++index) {
    EXPECT_EQ(ReadFile(dir + "/task-" + std::to_string(index)), "x\n") << index;
  }
}

TEST_F(ArrayTest, AHundredThousandTasksAreOneRequestAndOneRow) {
  const std::string blocker = d().Submit(ShellJob("batch", "sleep 60"));
  json big = Array("true", "0-99999");
  big["dependency"] = "afterok:" + blocker;
  const Reply submitted = d().Call("POST", "/v1/jobs", big);
  ASSERT_EQ(submitted.status, 201) << submitted.body;
  const std::string id = submitted.json["id"];
  EXPECT_EQ(submitted.json["array"]["tasks"]["total"], 100000);
  const json page = d().Call("GET", "/v1/jobs?limit=3&array=" + id).json;
  EXPECT_EQ(page["total"], 100000);
  ASSERT_EQ(page["jobs"].size(), 3u);
  EXPECT_EQ(page["jobs"][2]["array_task_id"], 2);
  EXPECT_EQ(page["jobs"][2]["state"], "PENDING");
  // Page after page, the waiting tasks in order: the last page holds the last one.
  ASSERT_TRUE(page["next_cursor"].is_string()) << page.dump();
  const json second =
      d().Call("GET", "/v1/jobs?limit=3&array=" + id + "&cursor=" + page["next_cursor"].get<std::string>()).json;
  ASSERT_EQ(second["jobs"].size(), 3u) << second.dump();
  EXPECT_EQ(second["jobs"][0]["array_task_id"], 3);
  const int64_t last_cursor = std::stoll(second["next_cursor"].get<std::string>()) + 99999 - 6 - 1;
  const json last = d().Call("GET", "/v1/jobs?limit=3&array=" + id + "&cursor=" + std::to_string(last_cursor)).json;
  ASSERT_EQ(last["jobs"].size(), 2u) << last.dump();
  EXPECT_EQ(last["jobs"][1]["array_task_id"], 99999);
  EXPECT_TRUE(last["next_cursor"].is_null());
  // The task ids were reserved at submit: no later job takes one.
  const int64_t first = std::stoll(submitted.json["array"]["first_task_id"].get<std::string>());
  const int64_t next = std::stoll(d().Submit(ShellJob("batch", "true")));
  EXPECT_TRUE(next < first || next >= first + 100000) << next;
  // A waiting task is found by its own id too (it has no row yet), and
  // cancelled by it alone.
  const Reply by_id = d().Call("GET", "/v1/jobs/" + std::to_string(first + 70000));
  ASSERT_EQ(by_id.status, 200) << by_id.body;
  EXPECT_EQ(by_id.json["name"], submitted.json["name"]);
  EXPECT_EQ(by_id.json["array_task_id"], 70000);
  EXPECT_EQ(by_id.json["state"], "PENDING");
  EXPECT_EQ(by_id.json["id"], std::to_string(first + 70000));
  const Reply cancelled = d().Call("DELETE", "/v1/jobs/" + std::to_string(first + 5));
  ASSERT_EQ(cancelled.status, 200) << cancelled.body;
  EXPECT_EQ(cancelled.json["array_task_id"], 5);
  EXPECT_EQ(cancelled.json["state"], "CANCELLED");
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + id + "_5").json["state"], "CANCELLED");
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + std::to_string(first + 100000)).status, 404);  // past the array
  EXPECT_EQ(d().Call("DELETE", "/v1/jobs/" + id).json["state"], "CANCELLED");
  EXPECT_EQ(d().Call("DELETE", "/v1/jobs/" + blocker).status, 200);
}

TEST_F(ArrayTest, BadArraysAreRefusedWithTheFieldAndNothingIsMade) {
  struct Case {
    json array;
    const char* field;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{{"indices", "5-1"}}, "array.indices", "runs backwards"},
      {{{"indices", "1-4%0"}}, "array.indices", "the cap after '%'"},
      {{{"indices", "1-4%2"}, {"max_running", 3}}, "array.max_running", "give the cap once"},
      {{{"indices", "1-4"}, {"max_running", -1}}, "array.max_running", ""},
      {{{"indices", "0-1000000"}}, "array.indices", "at most 1000000 tasks"},
      {{{"indices", "1-4"}, {"extra", 1}}, "array.extra", ""},
      {json("1-4"), "array", ""},
  };
  const int64_t before = d().Call("GET", "/v1/jobs?limit=0").json["total"];
  for (const auto& c : cases) {
    SCOPED_TRACE(c.array.dump());
    json job = ShellJob("batch", "true");
    job["array"] = c.array;
    const Reply r = d().Call("POST", "/v1/jobs", job);
    EXPECT_TRUE(r.status == 422 || r.status == 400) << r.body;
    EXPECT_EQ(r.json["error"]["field"], c.field) << r.body;
    EXPECT_NE(r.json["error"]["message"].get<std::string>().find(c.says), std::string::npos) << r.body;
  }
  EXPECT_EQ(d().Call("GET", "/v1/jobs?limit=0").json["total"], before);
}

TEST_F(ArrayTest, SqueueShowsWaitingTasksCollapsedAndStartedOnesByName) {
  const std::string id = d().Submit(Array("sleep 30", "1-9", 2));
  d().WaitJob(id, [](const json& j) { return j["array"]["tasks"]["active"] == 2; });
  const auto out = d().RunCli({"squeue", "--format", "%i %T"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_NE(out.out.find(id + "_[3-9%2] PENDING"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find(id + "_1 RUNNING"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find(id + "_2 RUNNING"), std::string::npos) << out.out;
  // scancel takes Slurm's task ranges: two waiting tasks go.
  const auto cancelled = d().RunCli({"scancel", id + "_[5-6]"});
  ASSERT_EQ(cancelled.exit_code, 0) << cancelled.err;
  EXPECT_EQ(cancelled.out, "Cancelled job " + id + "_5\nCancelled job " + id + "_6\n");
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + id).json["array"]["waiting"], "3-4,7-9");
  // -j names the array: its waiting tasks' row, then its running tasks; task ranges too.
  const auto by_array = d().RunCli({"squeue", "-h", "-j", id, "-o", "%i %t"});
  EXPECT_EQ(by_array.out, id + "_[3-4,7-9%2] PD\n" + id + "_1 R\n" + id + "_2 R\n") << by_array.out << by_array.err;
  const auto by_range = d().RunCli({"squeue", "-h", "-j", id + "_[1-2]", "-o", "%i %t"});
  EXPECT_EQ(by_range.out, id + "_1 R\n" + id + "_2 R\n") << by_range.out << by_range.err;
  const auto accounted = d().RunCli({"sacct", "-n", "-P", "-j", id, "-o", "JobID,State,Start,Elapsed,Reason"});
  EXPECT_NE(accounted.out.find(id + "_[3-4,7-9%2]|PENDING|Unknown|00:00:00|JobArrayTaskLimit\n"), std::string::npos)
      << accounted.out << accounted.err;
  EXPECT_NE(accounted.out.find(id + "_1|RUNNING|"), std::string::npos) << accounted.out;
  // A waiting task has nothing of its own to update: its array has.
  const Reply update = d().Call("PATCH", "/v1/jobs/" + id + "_8", json{{"priority", -1}});
  EXPECT_EQ(update.status, 409) << update.body;
  EXPECT_NE(update.body.find("update its array " + id), std::string::npos) << update.body;
  // -r: one row per waiting task; the array's reason is its first waiting task's.
  const auto expanded = d().RunCli({"squeue", "-h", "-r", "-t", "PD", "--format", "%i %r"});
  EXPECT_EQ(expanded.out, id + "_3 JobArrayTaskLimit\n" + id + "_4 JobArrayTaskLimit\n" + id +
                              "_7 JobArrayTaskLimit\n" + id + "_8 JobArrayTaskLimit\n" + id + "_9 JobArrayTaskLimit\n")
      << expanded.out << expanded.err;
  // A task is named in a dependency as Slurm names it, before it starts.
  json later = ShellJob("batch", "true");
  later["dependency"] = "afterok:" + id + "_9";
  const std::string dependant = d().Submit(later);
  d().WaitJob(dependant, [](const json& j) {
    return !j["pending_reasons"].empty() && j["pending_reasons"][0]["code"] == "Dependency";
  });
  json unknown = ShellJob("batch", "true");
  unknown["dependency"] = "afterok:" + id + "_99";
  EXPECT_EQ(d().Call("POST", "/v1/jobs", unknown.dump()).status, 422);
  // scancel -t PD: the waiting tasks go, the running ones stay.
  const auto pending_only = d().RunCli({"scancel", "--me", "-t", "PD"});
  ASSERT_EQ(pending_only.exit_code, 0) << pending_only.out << pending_only.err;
  EXPECT_NE(pending_only.out.find("Cancelled job " + id + "_3"), std::string::npos) << pending_only.out;
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + id + "_1").json["state"], "RUNNING");
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + id + "_2").json["state"], "RUNNING");
  // The dependant waited too: gone with them.
  EXPECT_EQ(d().WaitTerminal(dependant)["state"], "CANCELLED");
  EXPECT_EQ(d().Call("DELETE", "/v1/jobs/" + id).status, 200);
  EXPECT_EQ(d().WaitTerminal(id)["state"], "CANCELLED");
}

TEST_F(ArrayTest, AnArraysReasonIsItsFirstWaitingTasks) {
  json big = Array("sleep 30", "0-3");
  big["resources"] = {{"cpus", 8}};
  const std::string id = d().Submit(big);
  d().WaitJob(id, [](const json& j) { return j["array"]["tasks"]["active"] == 1; });
  const json parent = d().WaitJob(id, [](const json& j) { return !j["pending_reasons"].empty(); });
  EXPECT_EQ(parent["pending_reasons"][0]["code"], "Resources") << parent.dump(2);
  EXPECT_EQ(d().Call("DELETE", "/v1/jobs/" + id).status, 200);
  d().WaitTerminal(id);
}

}  // namespace
}  // namespace unisched::testing
