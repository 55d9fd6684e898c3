// Job dependencies through the real daemon (docs/dependencies.md): a
// dependant waits with reason Dependency naming what it waits for, starts
// once that holds, is cancelled when it never can, and survives a restart;
// bad dependencies are refused at submit.

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "testing/daemon.h"
#include "unisched/common/time.h"

namespace unisched::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"yaml(
server:
  scheduler_tick_seconds: 0.2
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
  - name: physics
)yaml";

json Job(const std::string& script, const std::string& dependency = "", const std::string& name = "") {
  json job = ShellJob("batch", script);
  if (!dependency.empty()) job["dependency"] = dependency;
  if (!name.empty()) job["name"] = name;
  return job;
}

std::string FirstReasonCode(const json& job) {
  return job["pending_reasons"].empty() ? "" : job["pending_reasons"][0].value("code", "");
}

class DependencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_.UseConfigText(kConfig);
    daemon_.Start();
  }
  TestDaemon& d() { return daemon_; }
  // Waits until the job is PENDING with a first reason `code`; returns it.
  json WaitReason(const std::string& id, const std::string& code) {
    return d().WaitJob(id, [&](const json& j) { return j["state"] == "PENDING" && FirstReasonCode(j) == code; });
  }
  TestDaemon daemon_;
};

TEST_F(DependencyTest, AnAfterokDependantWaitsNamingItsJobAndStartsOnceThatCompletes) {
  const std::string first = d().Submit(Job("sleep 1"));
  const std::string second = d().Submit(Job("true", "afterok:" + first));
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + second).json["dependency"], "afterok:" + first);
  const json waiting = WaitReason(second, "Dependency");
  ASSERT_EQ(FirstReasonCode(waiting), "Dependency") << waiting.dump();
  EXPECT_NE(waiting["pending_reasons"][0]["message"].get<std::string>().find("job " + first + " to end COMPLETED"),
            std::string::npos)
      << waiting.dump();

  const json a = d().WaitTerminal(first);
  const json b = d().WaitTerminal(second);
  ASSERT_EQ(a["state"], "COMPLETED") << a.dump();
  ASSERT_EQ(b["state"], "COMPLETED") << b.dump();
  EXPECT_GE(*ParseRfc3339(b["started_at"].get<std::string>()), *ParseRfc3339(a["ended_at"].get<std::string>()));
}

TEST_F(DependencyTest, AFailureRunsTheAfternotokBranchAndCancelsTheAfterokChain) {
  const std::string failing = d().Submit(Job("sleep 0.5; exit 3"));
  const std::string on_success = d().Submit(Job("true", "afterok:" + failing));
  const std::string after_that = d().Submit(Job("true", "afterok:" + on_success));
  const std::string on_failure = d().Submit(Job("true", "afternotok:" + failing));
  const std::string either = d().Submit(Job("true", "afterany:" + failing));

  EXPECT_EQ(d().WaitTerminal(failing)["state"], "FAILED");
  EXPECT_EQ(d().WaitTerminal(on_failure)["state"], "COMPLETED");
  EXPECT_EQ(d().WaitTerminal(either)["state"], "COMPLETED");
  const json cancelled = d().WaitTerminal(on_success);
  ASSERT_EQ(cancelled["state"], "CANCELLED") << cancelled.dump();
  EXPECT_TRUE(cancelled["attempts"].empty());
  const std::string reason = cancelled["state_reason"];
  EXPECT_EQ(reason.rfind("DependencyNeverSatisfied: job " + failing + " ended FAILED", 0), 0u) << reason;
  // Its own dependant learns in turn that it can never start.
  const json chained = d().WaitTerminal(after_that);
  ASSERT_EQ(chained["state"], "CANCELLED") << chained.dump();
  EXPECT_NE(chained["state_reason"].get<std::string>().find("job " + on_success + " ended CANCELLED"),
            std::string::npos);
  const json events = d().Call("GET", "/v1/jobs/" + on_success + "/events").json;
  bool event = false;
  for (const auto& e : events["events"]) {
    event = event || (e["kind"] == "cancelled" &&
                      e["message"].get<std::string>().find("dependency never satisfied") != std::string::npos);
  }
  EXPECT_TRUE(event) << events.dump();
}

TEST_F(DependencyTest, ASingletonWaitsForTheEarlierJobOfItsName) {
  const std::string first = d().Submit(Job("sleep 1", "singleton", "nightly"));
  const std::string second = d().Submit(Job("true", "singleton", "nightly"));
  const std::string other = d().Submit(Job("true", "singleton", "weekly"));
  const json waiting = WaitReason(second, "Dependency");
  EXPECT_NE(waiting["pending_reasons"][0]["message"].get<std::string>().find("job " + first), std::string::npos)
      << waiting.dump();
  EXPECT_EQ(d().WaitTerminal(other)["state"], "COMPLETED");
  const json a = d().WaitTerminal(first);
  const json b = d().WaitTerminal(second);
  ASSERT_EQ(b["state"], "COMPLETED") << b.dump();
  EXPECT_GE(*ParseRfc3339(b["started_at"].get<std::string>()), *ParseRfc3339(a["ended_at"].get<std::string>()));
}

// GET /v1/reports/pending groups the waiting jobs by why they wait, within
// the caller's rights.
TEST_F(DependencyTest, ThePendingReportGroupsWaitingJobsByTheirReason) {
  const std::string alice = d().CreateUser("alice", "user", {"default"});
  const std::string bob = d().CreateUser("bob", "user", {"physics"});
  const std::string running = d().Submit(Job("sleep 30"));
  const std::string first = d().Submit(Job("true", "afterok:" + running));
  const std::string second = d().Submit(Job("true", "afterok:" + running));
  const std::string held = d().Submit(Job("sleep 30", "afterok:" + running));
  ASSERT_EQ(d().Call("POST", "/v1/jobs/" + held + "/hold").status, 200);
  WaitReason(second, "Dependency");

  const Reply report = d().Call("GET", "/v1/reports/pending?limit=2", {}, {}, &alice);
  ASSERT_EQ(report.status, 200) << report.body;
  EXPECT_EQ(report.json["total"], 3) << report.body;
  ASSERT_EQ(report.json["by_reason"].size(), 2u) << report.body;
  const json& dependency = report.json["by_reason"][0];  // the largest group first
  EXPECT_EQ(dependency["code"], "Dependency");
  EXPECT_EQ(dependency["count"], 2);
  EXPECT_EQ(dependency["pools"]["cpu"], 2);
  EXPECT_EQ(dependency["longest_waiting_job"], first);
  EXPECT_NE(dependency["example"].get<std::string>().find("job " + running), std::string::npos);
  EXPECT_EQ(report.json["by_reason"][1]["code"], "Held");
  ASSERT_EQ(report.json["longest"].size(), 2u);  // limit
  EXPECT_EQ(report.json["longest"][0]["id"], first);
  EXPECT_EQ(report.json["longest"][0]["reason"]["code"], "Dependency");
  EXPECT_GE(report.json["longest"][0]["waiting_seconds"].get<int64_t>(), 0);

  // Another project's member sees none of them.
  const Reply others = d().Call("GET", "/v1/reports/pending", {}, {}, &bob);
  ASSERT_EQ(others.status, 200);
  EXPECT_EQ(others.json["total"], 0);
  EXPECT_TRUE(others.json["by_reason"].empty());
  EXPECT_EQ(d().Call("GET", "/v1/reports/pending?limit=0").status, 422);
  d().Call("DELETE", "/v1/jobs/" + running);
}

TEST_F(DependencyTest, BadDependenciesAreRefusedAtSubmitAndChangeNothing) {
  const std::string alice = d().CreateUser("alice", "user", {"default"});
  const std::string bob = d().CreateUser("bob", "user", {"physics"});
  json bobs_job = Job("sleep 30");
  bobs_job["project"] = "physics";
  const Reply bobs = d().Call("POST", "/v1/jobs", bobs_job.dump(), {}, &bob);
  ASSERT_EQ(bobs.status, 201) << bobs.body;
  const std::string bobs_id = bobs.json["id"];
  const std::string failed = d().Submit(Job("exit 1"));
  ASSERT_EQ(d().WaitTerminal(failed)["state"], "FAILED");
  const size_t jobs_before = d().Call("GET", "/v1/jobs?limit=1000").json["jobs"].size();

  struct Case {
    const char* what;
    json dependency;
    std::string name;
    int status;
    const char* code;
  };
  const std::vector<Case> cases = {
      {"another project's job", "afterok:" + bobs_id, "", 422, "unknown_job"},
      {"no such job", "afterok:999999", "", 422, "unknown_job"},
      {"bad text", "afterok:one", "", 422, "invalid_value"},
      {"not a string", 12, "", 400, "malformed_value"},
      {"already impossible", "afterok:" + failed, "", 422, "dependency_never_satisfied"},
      {"singleton without a name", "singleton", "", 422, "invalid_value"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    json job = Job("true");
    job["dependency"] = c.dependency;
    if (!c.name.empty()) job["name"] = c.name;
    const Reply r = d().Call("POST", "/v1/jobs", job.dump(), {}, &alice);
    EXPECT_EQ(r.status, c.status) << r.body;
    EXPECT_EQ(r.json["error"]["code"], c.code) << r.body;
    EXPECT_FALSE(r.json["error"]["message"].get<std::string>().empty());
  }
  // The same job id is refused alike whether it is hidden or missing: the
  // answer does not tell another project's ids from unused ones.
  json hidden = Job("true"), missing = Job("true");
  hidden["dependency"] = "afterok:" + bobs_id;
  missing["dependency"] = "afterok:999999";
  std::string hidden_message = d().Call("POST", "/v1/jobs", hidden.dump(), {}, &alice).json["error"]["message"];
  std::string missing_message = d().Call("POST", "/v1/jobs", missing.dump(), {}, &alice).json["error"]["message"];
  EXPECT_EQ(hidden_message.replace(hidden_message.find(bobs_id), bobs_id.size(), "N"),
            missing_message.replace(missing_message.find("999999"), 6, "N"));
  EXPECT_EQ(d().Call("GET", "/v1/jobs?limit=1000").json["jobs"].size(), jobs_before);
  // A platform-admin may name any job.
  json admins = Job("true", "afterany:" + bobs_id);
  EXPECT_EQ(d().Call("POST", "/v1/jobs", admins.dump()).status, 201);
}

TEST_F(DependencyTest, ADependantKeepsWaitingAcrossARestart) {
  // The first job runs through the restart (its supervisor is adopted).
  const std::string first = d().Submit(Job("sleep 4"));
  const std::string second = d().Submit(Job("true", "afterok:" + first));
  WaitReason(second, "Dependency");
  d().Stop();
  d().Start();
  const json waiting = WaitReason(second, "Dependency");
  EXPECT_EQ(waiting["dependency"], "afterok:" + first) << waiting.dump();
  const json a = d().WaitTerminal(first);
  const json b = d().WaitTerminal(second);
  ASSERT_EQ(a["state"], "COMPLETED") << a.dump();
  ASSERT_EQ(b["state"], "COMPLETED") << b.dump();
  EXPECT_GE(*ParseRfc3339(b["started_at"].get<std::string>()), *ParseRfc3339(a["ended_at"].get<std::string>()));
}

TEST(DependencyKeptTest, WithKillInvalidDependencyOffAnImpossibleDependantWaitsWithItsReasonAcrossARestart) {
  TestDaemon d;
  d.UseConfigText(std::string(kConfig) + "scheduler:\n  kill_invalid_dependency: false\n");
  d.Start();
  const std::string first = d.Submit(ShellJob("batch", "sleep 60"));
  json dependant = ShellJob("batch", "true");
  dependant["dependency"] = "afterok:" + first;
  const std::string second = d.Submit(dependant);
  d.WaitJob(second, [](const json& j) { return FirstReasonCode(j) == "Dependency"; });
  ASSERT_EQ(d.Call("DELETE", "/v1/jobs/" + first).status, 200);
  auto never = [&] {
    return d.WaitJob(second, [](const json& j) { return FirstReasonCode(j) == "DependencyNeverSatisfied"; });
  };
  json job = never();
  ASSERT_EQ(job["state"], "PENDING") << job.dump();
  EXPECT_NE(job["pending_reasons"][0]["message"].get<std::string>().find("job " + first + " ended CANCELLED"),
            std::string::npos)
      << job.dump();
  // After a restart the cancelled job is read back from the store.
  d.Stop();
  d.Start();
  job = never();
  EXPECT_EQ(FirstReasonCode(job), "DependencyNeverSatisfied") << job.dump();
  EXPECT_EQ(d.Call("DELETE", "/v1/jobs/" + second).status, 200);
}

}  // namespace
}  // namespace unisched::testing
