// The agent's GPU detection from nvidia-smi's CSV, and the wire format the
// daemon and its agents exchange.

#include "unisched/agent/agent.h"

#include <gtest/gtest.h>

#include "unisched/executor/wire.h"

namespace unisched::agent {
namespace {

TEST(ParseNvidiaSmiTest, ReadsIndexModelAndMemory) {
  const auto gpus = ParseNvidiaSmi(
      "0, NVIDIA H100 80GB HBM3, 81559\n"
      "1, NVIDIA A100-SXM4-40GB, 40960\n"
      "2, Tesla V100-SXM2-16GB, 16160\n"
      "garbage line\n"
      "x, NVIDIA L4, 22528\n");
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[0].index, 0);
  EXPECT_EQ(gpus[0].model, "h100");
  EXPECT_EQ(gpus[0].memory_gb, 80);
  EXPECT_EQ(gpus[1].model, "a100-sxm4-40gb");
  EXPECT_EQ(gpus[1].memory_gb, 40);
  EXPECT_EQ(gpus[2].model, "tesla");
  EXPECT_EQ(gpus[2].index, 2);
  EXPECT_TRUE(ParseNvidiaSmi("").empty());
}

TEST(WireTest, LaunchSpecResultHeartbeatAndCommandsRoundTrip) {
  executor::LaunchSpec spec;
  spec.job_id = 42;
  spec.attempt = 2;
  spec.argv = {"sleep", "1"};
  spec.env = {{"A", "b"}};
  spec.unix_user = "unisched-job";
  spec.walltime_seconds = 60;
  spec.limits.memory_bytes = 1 << 20;
  spec.node = "x86-c2m2-hpc-01";
  spec.script = "#!/bin/bash\necho \"$@\"\n";  // a batch script reaches an agent's node whole
  spec.chdir = "/scratch/run";
  auto back = executor::LaunchSpecFromJson(executor::LaunchSpecToJson(spec));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->script, spec.script);
  EXPECT_EQ(back->chdir, spec.chdir);
  EXPECT_EQ(back->job_id, 42);
  EXPECT_EQ(back->attempt, 2);
  EXPECT_EQ(back->argv, spec.argv);
  EXPECT_EQ(back->env, spec.env);
  EXPECT_EQ(back->node, spec.node);
  EXPECT_EQ(back->limits.memory_bytes, 1 << 20);

  executor::Heartbeat h;
  h.node = "n";
  h.pool = "p";
  h.cpus = 8;
  h.memory_mb = 1024;
  h.gpus = {{0, "h100", 80}};
  h.running = {{42, 2}};
  h.healthy = false;
  h.health_message = "disk full";
  auto hb = executor::HeartbeatFromJson(executor::HeartbeatToJson(h));
  ASSERT_TRUE(hb.ok()) << hb.error().message;
  EXPECT_EQ(hb->running, h.running);
  EXPECT_EQ(hb->gpus, h.gpus);
  EXPECT_FALSE(hb->healthy);
  EXPECT_EQ(hb->health_message, "disk full");
  EXPECT_FALSE(executor::HeartbeatFromJson(nlohmann::json{{"node", "n"}}).ok()) << "pool and resources are required";

  executor::Commands c;
  c.node_state = "up";
  c.launch = {spec};
  c.cancel = {{42, 1, false, true}};
  c.health_check = {{"/bin/true"}, 30, 5};
  auto cb = executor::CommandsFromJson(executor::CommandsToJson(c));
  ASSERT_TRUE(cb.ok()) << cb.error().message;
  ASSERT_EQ(cb->launch.size(), 1u);
  EXPECT_EQ(cb->launch[0].node, spec.node);
  ASSERT_EQ(cb->cancel.size(), 1u);
  EXPECT_TRUE(cb->cancel[0].stale);
  EXPECT_EQ(cb->health_check, c.health_check);
}

// Data staging on the wire (docs/data.md): the stages and the stores reach
// the agent with their keys; the spec it keeps on disk has no key; its
// heartbeat reports what it stages, and an unknown phase is refused.
TEST(WireTest, StagingTravelsWithItsKeysWhichTheAgentsDiskNeverHolds) {
  executor::LaunchSpec spec;
  spec.job_id = 7;
  spec.argv = {"true"};
  spec.data.stage_in = {{"s3://rgw/data/in/", "input/"}};
  spec.data.stage_out = {{"out/", "s3://rgw/data/results/7/", model::StageWhen::kAlways}};
  spec.stores = {{"rgw", "http://127.0.0.1:7480", "us-east-1", true, "AKID", "s3cr3t-key"}};
  auto back = executor::LaunchSpecFromJson(executor::LaunchSpecToJson(spec));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->data, spec.data);
  ASSERT_EQ(back->stores.size(), 1u);
  EXPECT_EQ(back->stores[0].secret_key, "s3cr3t-key");
  EXPECT_EQ(back->stores[0].endpoint, "http://127.0.0.1:7480");
  const std::string kept = executor::LaunchSpecToJson(spec, /*with_secrets=*/false).dump();
  EXPECT_EQ(kept.find("s3cr3t-key"), std::string::npos) << kept;
  EXPECT_EQ(kept.find("AKID"), std::string::npos) << kept;
  EXPECT_NE(kept.find("s3://rgw/data/results/7/"), std::string::npos) << kept;

  executor::Heartbeat h;
  h.node = "n";
  h.pool = "p";
  h.staging = {{7, 1, 0, "staging_in", 1024, 4096}};
  h.needs_store_keys = {{8, 2, 0}, {9, 1, 3}};
  auto hb = executor::HeartbeatFromJson(executor::HeartbeatToJson(h));
  ASSERT_TRUE(hb.ok()) << hb.error().message;
  ASSERT_EQ(hb->staging.size(), 1u);
  EXPECT_EQ(hb->staging[0].phase, "staging_in");
  EXPECT_EQ(hb->staging[0].bytes_done, 1024);
  EXPECT_EQ(hb->staging[0].bytes_total, 4096);
  EXPECT_EQ(hb->needs_store_keys, h.needs_store_keys);
  nlohmann::json older = executor::HeartbeatToJson(h);
  older.erase("needs_store_keys");  // an agent from before it existed: none needed
  EXPECT_TRUE(executor::HeartbeatFromJson(older)->needs_store_keys.empty());
  older["needs_store_keys"] = {{{"job", 1}, {"attempt", 2.5}}};
  EXPECT_FALSE(executor::HeartbeatFromJson(older).ok());
  nlohmann::json odd = executor::HeartbeatToJson(h);
  odd["staging"][0]["phase"] = "teleporting";
  EXPECT_FALSE(executor::HeartbeatFromJson(odd).ok());
}

}  // namespace
}  // namespace unisched::agent
