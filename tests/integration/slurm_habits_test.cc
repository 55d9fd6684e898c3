// The batch habits Slurm users bring, through the real daemon and the real
// CLI (docs/slurm.md): requeue, update of a waiting job, squeue, sacct,
// scancel by filter, submit --wait's exit code.

#include <gtest/gtest.h>

#include <cctype>
#include <sstream>
#include <string>

#include "testing/daemon.h"

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
    policy: {max_walltime_hours: 2, default_walltime_hours: 1}
  - name: short
    pool: cpu
projects:
  - name: default
)yaml";

class SlurmHabitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_.UseConfigText(kConfig);
    daemon_.Start();
  }
  TestDaemon& d() { return daemon_; }
  bool HasEvent(const std::string& id, const std::string& kind, const std::string& words) {
    const json events = d().Call("GET", "/v1/jobs/" + id + "/events").json;
    for (const auto& e : events["events"]) {
      if (e["kind"] == kind && e["message"].get<std::string>().find(words) != std::string::npos) return true;
    }
    ADD_FAILURE() << "no " << kind << " event with '" << words << "': " << events.dump();
    return false;
  }
  TestDaemon daemon_;
};

TEST_F(SlurmHabitsTest, ARequeuedRunningJobRunsAgainAsItsNextAttempt) {
  const std::string id = d().Submit(
      ShellJob("batch", "if [ \"$UNISCHED_ATTEMPT\" = 1 ]; then sleep 60; fi; echo attempt $UNISCHED_ATTEMPT"));
  d().WaitJob(id, [](const json& j) { return j["state"] == "RUNNING"; });
  const Reply requeued = d().Call("POST", "/v1/jobs/" + id + "/requeue");
  ASSERT_EQ(requeued.status, 200) << requeued.body;
  EXPECT_EQ(requeued.json["requeue_requested"], true) << requeued.body;
  const json job = d().WaitTerminal(id);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump();
  ASSERT_EQ(job["attempts"].size(), 2u) << job.dump();
  EXPECT_EQ(job["attempts"][0]["state"], "CANCELLED");
  EXPECT_EQ(job["attempts"][0]["reason"], "requeued");
  EXPECT_EQ(job["requeue_requested"], false);
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + id + "/log").body, "attempt 2\n");
  HasEvent(id, "requeued", "back to PENDING for attempt 2");

  // A finished job stays finished.
  const Reply finished = d().Call("POST", "/v1/jobs/" + id + "/requeue");
  EXPECT_EQ(finished.status, 409) << finished.body;
  EXPECT_EQ(finished.json["error"]["code"], "job_finished");
  EXPECT_NE(finished.body.find("submit it again"), std::string::npos) << finished.body;
}

TEST_F(SlurmHabitsTest, AWaitingJobIsUpdatedWithinItsCallersRights) {
  const std::string alice = d().CreateUser("alice", "user", {"default"});
  json blocker = ShellJob("batch", "sleep 60");
  const Reply b = d().Call("POST", "/v1/jobs", blocker.dump(), {}, &alice);
  ASSERT_EQ(b.status, 201) << b.body;
  const std::string blocker_id = b.json["id"];
  json waiting = ShellJob("batch", "true");
  waiting["dependency"] = "afterok:" + blocker_id;
  const Reply w = d().Call("POST", "/v1/jobs", waiting.dump(), {}, &alice);
  ASSERT_EQ(w.status, 201) << w.body;
  const std::string id = w.json["id"];
  EXPECT_EQ(w.json["resources"]["walltime_seconds"], 3600);

  auto patch = [&](const json& body, const std::string* token) {
    return d().Call("PATCH", "/v1/jobs/" + id, body.dump(), {}, token);
  };
  struct Case {
    const char* what;
    json body;
    bool as_admin;
    int status;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"lower the time limit", {{"resources", {{"walltime_seconds", 600}}}}, false, 200, ""},
      {"raise it again as its user",
       {{"resources", {{"walltime_seconds", 1200}}}},
       false,
       403,
       "resources.walltime_seconds"},
      {"a priority above 0 as its user", {{"priority", 5}}, false, 403, "priority"},
      {"a lower priority", {{"priority", -5}}, false, 200, ""},
      {"over the queue's maximum",
       {{"resources", {{"walltime_seconds", 3 * 3600}}}},
       true,
       422,
       "resources.walltime_seconds"},
      {"an unknown queue", {{"queue", "nope"}}, false, 422, "queue"},
      {"an unknown key", {{"name", "x"}}, false, 422, "name"},
      {"raise it as an admin", {{"resources", {{"walltime_seconds", 5400}}}}, true, 200, ""},
      {"another queue", {{"queue", "short"}}, false, 200, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const Reply r = patch(c.body, c.as_admin ? nullptr : &alice);
    EXPECT_EQ(r.status, c.status) << r.body;
    if (c.status != 200) {
      EXPECT_EQ(r.json["error"]["field"], c.field) << r.body;
    }
  }
  const json job = d().Call("GET", "/v1/jobs/" + id).json;
  EXPECT_EQ(job["resources"]["walltime_seconds"], 5400) << job.dump();
  EXPECT_EQ(job["priority"], -5);
  EXPECT_EQ(job["queue"], "short");
  HasEvent(id, "updated", "time limit 3600 -> 600 s (by alice)");
  HasEvent(id, "updated", "queue batch -> short (pool cpu)");

  // A running job is not updated.
  d().WaitJob(blocker_id, [](const json& j) { return j["state"] == "RUNNING"; });
  const Reply running = d().Call("PATCH", "/v1/jobs/" + blocker_id, json{{"priority", -1}}.dump());
  EXPECT_EQ(running.status, 409) << running.body;
  EXPECT_EQ(d().Call("DELETE", "/v1/jobs/" + blocker_id).status, 200);
}

TEST_F(SlurmHabitsTest, TheCliSpeaksSqueueSacctScancelAndWaitsWithTheJobsExitCode) {
  // submit --wait exits with the job's own exit code.
  const auto failed = d().RunCli({"submit", "--queue", "batch", "--wait", "--", "/bin/sh", "-c", "exit 3"});
  EXPECT_EQ(failed.exit_code, 3) << failed.out << failed.err;
  const auto ok = d().RunCli({"submit", "--queue", "batch", "--name", "busy", "--wait", "--", "/bin/sh", "-c",
                              "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;

  const std::string running = d().Submit(ShellJob("batch", "sleep 60"));
  json waiting = ShellJob("batch", "true");
  waiting["name"] = "later";
  waiting["dependency"] = "afterok:" + running;
  const std::string pending = d().Submit(waiting);
  d().WaitJob(running, [](const json& j) { return j["state"] == "RUNNING"; });
  d().WaitJob(pending, [](const json& j) { return !j["pending_reasons"].empty(); });

  const auto squeue = d().RunCli({"squeue", "--me"});
  ASSERT_EQ(squeue.exit_code, 0) << squeue.err;
  EXPECT_NE(squeue.out.find("JOBID PARTITION"), std::string::npos) << squeue.out;
  EXPECT_NE(squeue.out.find(running + "     batch"), std::string::npos) << squeue.out;
  EXPECT_NE(squeue.out.find(" R "), std::string::npos) << squeue.out;
  EXPECT_NE(squeue.out.find("PD"), std::string::npos) << squeue.out;
  EXPECT_NE(squeue.out.find("(Dependency)"), std::string::npos) << squeue.out;
  const auto custom = d().RunCli({"squeue", "--format", "%i:%j:%T", "--state", "PENDING"});
  EXPECT_EQ(custom.out, "JOBID:NAME:STATE\n" + pending + ":later:PENDING\n") << custom.out << custom.err;
  EXPECT_EQ(d().RunCli({"squeue", "--format", "%X"}).exit_code, 2);
  // Slurm's short forms, codes and lists: -h, -t PD, -tPD,R, -j, -u, -o %E.
  const std::string me = d().Call("GET", "/v1/whoami").json.value("user", "");
  const auto short_forms = d().RunCli({"squeue", "-h", "-t", "PD", "-u", me, "-o", "%i %E"});
  EXPECT_EQ(short_forms.out, pending + " afterok:" + running + "\n") << short_forms.out << short_forms.err;
  const auto listed = d().RunCli({"squeue", "-h", "-tPD,R", "-o", "%i"});
  EXPECT_EQ(listed.out, running + "\n" + pending + "\n") << listed.out << listed.err;
  const auto by_id = d().RunCli({"squeue", "-h", "-j", pending, "-o", "%i %t %M"});
  EXPECT_EQ(by_id.out, pending + " PD 0:00\n") << by_id.out << by_id.err;
  EXPECT_EQ(d().RunCli({"squeue", "-t", "XX"}).exit_code, 2);

  const auto sacct = d().RunCli({"sacct", "--format", "JobID,JobName,State,ExitCode,CPUTimeRAW"});
  ASSERT_EQ(sacct.exit_code, 0) << sacct.err;
  EXPECT_NE(sacct.out.find("FAILED     3:0"), std::string::npos) << sacct.out;
  // The busy job's row carries its ledger's allocated core-seconds.
  bool busy_row = false;
  std::istringstream lines(sacct.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("busy") == std::string::npos) continue;
    busy_row = true;
    EXPECT_NE(line.find("COMPLETED"), std::string::npos) << line;
    EXPECT_NE(line.back(), ' ');
    EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(line.back()))) << "CPUTimeRAW: " << line;
  }
  EXPECT_TRUE(busy_row) << sacct.out;
  // sacct -j for one job, -P, -n; -S as Slurm writes it.
  const auto one = d().RunCli({"sacct", "-j", pending, "-n", "-P", "-o", "JobID,JobName,State,Start"});
  EXPECT_EQ(one.out, pending + "|later|PENDING|Unknown\n") << one.out << one.err;
  const auto since = d().RunCli({"sacct", "-X", "-n", "-S", "now-1hour", "-s", "F", "-o", "ExitCode"});
  EXPECT_EQ(since.out, "3:0\n") << since.out << since.err;
  EXPECT_EQ(d().RunCli({"sacct", "-S", "yesterday-ish"}).exit_code, 2);

  // scancel by name cancels the matching job only.
  const auto scancel = d().RunCli({"scancel", "-n", "later", "-t", "PD"});
  EXPECT_EQ(scancel.exit_code, 0) << scancel.err;
  EXPECT_EQ(scancel.out, "Cancelled job " + pending + "\n");
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + pending).json["state"], "CANCELLED");
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + running).json["state"], "RUNNING");
  EXPECT_EQ(d().RunCli({"scancel"}).exit_code, 2);

  // scontrol's requeue and update through the CLI.
  const auto requeue = d().RunCli({"requeue", running});
  EXPECT_EQ(requeue.exit_code, 0) << requeue.err;
  EXPECT_NE(requeue.out.find("Requeue requested for job " + running), std::string::npos) << requeue.out;
  d().WaitJob(running, [](const json& j) { return j["attempts"].size() == 2; });
  EXPECT_EQ(d().RunCli({"scancel", running}).exit_code, 0);

  // Draining and resuming a node.
  const auto drain = d().RunCli({"drain", "x86-c8m16-hpc-01", "--reason", "disk swap"});
  EXPECT_EQ(drain.exit_code, 0) << drain.err;
  EXPECT_NE(drain.out.find("Draining node x86-c8m16-hpc-01"), std::string::npos) << drain.out;
  const json nodes = d().Call("GET", "/v1/nodes").json;
  EXPECT_NE(nodes.dump().find("disk swap"), std::string::npos) << nodes.dump();
  EXPECT_EQ(d().RunCli({"resume", "x86-c8m16-hpc-01"}).exit_code, 0);
  EXPECT_EQ(d().RunCli({"drain"}).exit_code, 2);
}

}  // namespace
}  // namespace unisched::testing
