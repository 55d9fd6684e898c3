// Live config versions through the real daemon (docs/config-versions.md):
// a version applied without a restart, tried on one canary queue first,
// promoted and rolled back; its impact shown before it is applied; changes
// that need a restart refused with the reason; the store's version in force
// at the next start, a different file refused unless applied on purpose,
// and SIGHUP reading the file again.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "testing/config_text.h"
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
  - name: batch-a
    pool: cpu
    workload_kinds: [hpc]
    policy: {max_walltime_hours: 10}
  - name: batch-b
    pool: cpu
    workload_kinds: [hpc]
    policy: {max_walltime_hours: 10}
projects:
  - name: default
)yaml";

// kConfig with every queue's maximum wall time cut from 10 hours to 1.
std::string ShorterWalltimes() {
  std::string text = kConfig;
  for (int i = 0; i < 2; ++i) text = ReplaceOnce(text, "max_walltime_hours: 10}", "max_walltime_hours: 1}");
  return text;
}

json Job(const std::string& queue, int64_t walltime_seconds, const std::string& script = "true", int cpus = 1) {
  json job = {{"workload", {{"kind", "hpc"}}},
              {"resources", {{"cpus", cpus}, {"memory_mb", 64}, {"walltime_seconds", walltime_seconds}}},
              {"command", {"/bin/sh", "-c", script}}};
  if (!queue.empty()) job["queue"] = queue;
  return job;
}

class ConfigVersionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_.UseConfigText(kConfig);
    daemon_.Start();
  }
  TestDaemon& d() { return daemon_; }

  Reply Apply(const std::string& text, const std::string& canary_queue = "", bool dry_run = false) {
    json body = {{"text", text}};
    if (!canary_queue.empty()) body["canary_queue"] = canary_queue;
    return d().Call("POST", std::string("/v1/config") + (dry_run ? "?dry_run=true" : ""), body);
  }
  int64_t InForce() { return d().Call("GET", "/v1/config").json["in_force"].value("version", int64_t{0}); }
  std::string Digest(int64_t version) {
    return d().Call("GET", "/v1/config?version=" + std::to_string(version)).json.value("digest", "");
  }

  TestDaemon daemon_;
};

TEST_F(ConfigVersionsTest, ACanaryQueueTakesTheNewLimitAloneThenPromotionAndRollback) {
  const Reply first = d().Call("GET", "/v1/config");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.json["version"], 1) << "the file the cluster started on is version 1";
  EXPECT_EQ(first.json["text"], kConfig);
  EXPECT_EQ(first.json["author"], "seed");

  const Reply canary = Apply(ShorterWalltimes(), "batch-a");
  ASSERT_EQ(canary.status, 201) << canary.body;
  EXPECT_EQ(canary.json["version"], 2);
  EXPECT_EQ(canary.json["in_force"]["version"], 1);
  EXPECT_EQ(canary.json["in_force"]["canary"]["queue"], "batch-a");
  ASSERT_EQ(canary.json["deferred_to_promotion"].size(), 1u) << canary.body;
  EXPECT_EQ(canary.json["deferred_to_promotion"][0]["path"], "queues[batch-b].policy.max_walltime_hours");

  // The canary queue limits its new jobs by version 2, the other by 1.
  const Reply refused = d().Call("POST", "/v1/jobs", Job("batch-a", 7200));
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_EQ(refused.json["error"]["code"], "walltime_exceeds_max") << refused.body;
  const std::string in_canary = d().Submit(Job("batch-a", 1800));
  const std::string elsewhere = d().Submit(Job("batch-b", 7200));
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + in_canary).json["config_version"], Digest(2));
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + elsewhere).json["config_version"], Digest(1));

  const Reply promoted = d().Call("POST", "/v1/config/promote");
  ASSERT_EQ(promoted.status, 200) << promoted.body;
  EXPECT_EQ(promoted.json["in_force"]["version"], 2);
  EXPECT_FALSE(promoted.json["in_force"].contains("canary"));
  EXPECT_EQ(d().Call("POST", "/v1/jobs", Job("batch-b", 7200)).status, 422) << "every queue now runs version 2";

  const Reply rolled = d().Call("POST", "/v1/config/rollback");
  ASSERT_EQ(rolled.status, 200) << rolled.body;
  EXPECT_EQ(rolled.json["in_force"]["version"], 1);
  d().Submit(Job("batch-a", 7200));
  d().Submit(Job("batch-b", 7200));

  const json versions = d().Call("GET", "/v1/config/versions").json;
  ASSERT_EQ(versions["versions"].size(), 2u) << versions.dump();
  EXPECT_EQ(versions["versions"][0]["version"], 2);
  EXPECT_FALSE(versions["versions"][0]["current"]);
  EXPECT_TRUE(versions["versions"][1]["current"]);
  EXPECT_EQ(d().Call("POST", "/v1/config/promote").json["error"]["code"], "no_canary");
}

TEST_F(ConfigVersionsTest, ADryRunShowsTheImpactAndStoresNothing) {
  // A running job admitted for 2 hours, and a pending one that asks for
  // every CPU, routed to batch-a (the first queue of its kind).
  const std::string running = d().Submit(Job("batch-a", 7200, "sleep 60"));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (d().Call("GET", "/v1/jobs/" + running).json["state"] != "RUNNING" &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string pending = d().Submit(Job("", 600, "true", 8));
  ASSERT_EQ(d().Call("GET", "/v1/jobs/" + pending).json["queue"], "batch-a");

  // batch-a limited to 1 hour and no longer the queue of hpc work.
  const std::string next = ReplaceOnce(ShorterWalltimes(), "workload_kinds: [hpc]", "workload_kinds: [ai-inference]");
  const Reply dry = Apply(next, "", /*dry_run=*/true);
  ASSERT_EQ(dry.status, 200) << dry.body;
  EXPECT_FALSE(dry.json["applied"]);
  EXPECT_EQ(dry.json["changes"].size(), 3u) << dry.body;
  const json& impact = dry.json["impact"];
  ASSERT_EQ(impact["pending_rerouted"].size(), 1u) << dry.body;
  EXPECT_EQ(impact["pending_rerouted"][0]["job"].dump(), pending);
  EXPECT_EQ(impact["pending_rerouted"][0]["to_queue"], "batch-b");
  ASSERT_EQ(impact["running_over_limit"].size(), 1u) << dry.body;
  EXPECT_EQ(impact["running_over_limit"][0]["limit"], "queues[batch-a].policy.max_walltime_hours");
  EXPECT_EQ(impact["running_over_limit"][0]["jobs"][0].dump(), running);
  EXPECT_EQ(impact["limits_changed"].size(), 2u) << dry.body;

  EXPECT_EQ(d().Call("GET", "/v1/config/versions").json["versions"].size(), 1u) << "a dry run stores nothing";
  EXPECT_EQ(InForce(), 1);
  d().Call("DELETE", "/v1/jobs/" + running);
  d().Call("DELETE", "/v1/jobs/" + pending);
}

TEST_F(ConfigVersionsTest, ChangesThatNeedARestartAreRefusedWithTheReason) {
  const Reply node = Apply(ReplaceOnce(kConfig, "cpus: 8", "cpus: 4"));
  EXPECT_EQ(node.status, 422) << node.body;
  EXPECT_EQ(node.json["error"]["code"], "not_live");
  EXPECT_EQ(node.json["error"]["field"], "nodes[x86-c8m16-hpc-01].cpus");
  EXPECT_NE(node.json["error"]["message"].get<std::string>().find("restart"), std::string::npos) << node.body;

  const Reply listen =
      Apply(ReplaceOnce(kConfig, "scheduler_tick_seconds: 0.2", "scheduler_tick_seconds: 0.2\n  listen: 0.0.0.0:1"));
  EXPECT_EQ(listen.status, 422) << listen.body;
  EXPECT_EQ(listen.json["error"]["field"], "server.listen") << listen.body;

  const Reply invalid = Apply(ReplaceOnce(kConfig, "max_walltime_hours: 10}", "max_walltime_hours: -1}"));
  EXPECT_EQ(invalid.status, 422) << invalid.body;
  EXPECT_EQ(invalid.json["error"]["code"], "invalid_config");
  EXPECT_EQ(invalid.json["error"]["field"], "text.queues[0].policy.max_walltime_hours") << invalid.body;

  const std::string user = d().CreateUser("carol", "user", {"default"});
  EXPECT_EQ(d().Call("POST", "/v1/config", json{{"text", kConfig}}.dump(), {}, &user).status, 403);
  EXPECT_EQ(d().Call("GET", "/v1/config", "", {}, &user).status, 403);
  EXPECT_EQ(Apply(kConfig).json["applied"], false) << "the same text changes nothing";
  EXPECT_EQ(d().Call("GET", "/v1/config/versions").json["versions"].size(), 1u);
}

TEST_F(ConfigVersionsTest, TheStoresVersionOutlivesARestartAndADifferentFileNeedsApplyConfig) {
  ASSERT_EQ(Apply(ShorterWalltimes()).status, 201);
  d().Stop();

  // The old file: refused, with what differs and what to do.
  const auto refused = d().RunCli({"server", "--config", d().state_dir() + "/test-config.yaml", "--listen",
                                   "127.0.0.1:0", "--state-dir", d().state_dir()},
                                  {}, std::chrono::seconds(60));
  const std::string said = refused.out + refused.err;
  EXPECT_EQ(refused.exit_code, 1) << said;
  EXPECT_NE(said.find("queues[batch-a].policy.max_walltime_hours: 1 -> 10"), std::string::npos) << said;
  EXPECT_NE(said.find("--apply-config"), std::string::npos) << said;

  // The cluster's version as the file: starts, version 2 in force.
  d().UseConfigText(ShorterWalltimes());
  d().Start();
  EXPECT_EQ(InForce(), 2);
  EXPECT_EQ(d().Call("POST", "/v1/jobs", Job("batch-a", 7200)).status, 422);

  // SIGHUP reads the file again, through the path of POST /v1/config.
  d().UseConfigText(kConfig);
  ASSERT_EQ(::kill(d().pid(), SIGHUP), 0);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (InForce() != 3 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const json third = d().Call("GET", "/v1/config").json;
  EXPECT_EQ(third["version"], 3) << third.dump();
  EXPECT_EQ(third["author"], "SIGHUP");
  d().Submit(Job("batch-a", 7200));

  // A file applied on purpose at a start becomes the next version.
  d().Stop();
  d().UseConfigText(ShorterWalltimes());
  d().SetServerArgs({"--apply-config"});
  d().Start();
  const json fourth = d().Call("GET", "/v1/config").json;
  EXPECT_EQ(fourth["version"], 4) << fourth.dump();
  EXPECT_EQ(fourth["author"], "--apply-config");
  EXPECT_EQ(fourth["in_force"]["previous_version"], 3);
}

TEST_F(ConfigVersionsTest, TheCliShowsAppliesCanariesAndRollsBack) {
  const std::string file = d().state_dir() + "/shorter.yaml";
  std::ofstream(file) << ShorterWalltimes();
  const auto dry = d().RunCli({"config", "apply", file, "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("Dry run: nothing applied."), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("queues[batch-b].policy.max_walltime_hours: 10 -> 1"), std::string::npos) << dry.out;

  const auto canary = d().RunCli({"config", "apply", file, "--canary-queue", "batch-b", "--comment", "try b"});
  EXPECT_EQ(canary.exit_code, 0) << canary.err;
  EXPECT_NE(canary.out.find("Applied as version 2."), std::string::npos) << canary.out;
  EXPECT_NE(canary.out.find("with version 2 on queue batch-b"), std::string::npos) << canary.out;
  const auto versions = d().RunCli({"config", "versions"});
  EXPECT_NE(versions.out.find("canary:batch-b"), std::string::npos) << versions.out;
  EXPECT_NE(versions.out.find("try b"), std::string::npos) << versions.out;
  const auto promoted = d().RunCli({"config", "promote"});
  EXPECT_NE(promoted.out.find("Promoted version 2"), std::string::npos) << promoted.out;
  const auto show = d().RunCli({"config", "show"});
  EXPECT_EQ(show.out, ShorterWalltimes());
  const auto back = d().RunCli({"config", "rollback", "--version", "1"});
  EXPECT_EQ(back.exit_code, 0) << back.err;
  EXPECT_NE(back.out.find("in force: version 1"), std::string::npos) << back.out;

  const auto refused = d().RunCli({"config", "apply", d().state_dir() + "/no-such-file.yaml"});
  EXPECT_EQ(refused.exit_code, 2);
  const auto bad = d().RunCli({"config", "frobnicate"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("show, versions, apply, rollback, promote"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace unisched::testing
