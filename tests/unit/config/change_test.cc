// What differs between config versions, which differences may change live,
// and a canary's merge (unisched/config/change.h).

#include "unisched/config/change.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "testing/config_text.h"

namespace unisched::config {
namespace {

using testing::DefaultConfigText;
using testing::ReplaceOnce;

Config Load(const std::string& text) {
  auto loaded = LoadConfigText(text);
  if (auto* errors = std::get_if<std::vector<ConfigError>>(&loaded)) {
    ADD_FAILURE() << errors->front().ToString();
    return {};
  }
  return std::get<Config>(std::move(loaded));
}

TEST(DiffConfigTextsTest, NamedItemsAreKeyedByNameAndLayoutDoesNotCount) {
  const std::string before = "queues:\n  - {name: a, pool: p, policy: {max_concurrency: 8}}\n  - {name: b, pool: p}\n";
  const std::string after =
      "# a comment\nqueues:\n  - name: b\n    pool: p\n  - name: a\n    pool: p\n    policy: {max_concurrency: 4}\n"
      "  - {name: c, pool: p}\n";
  const auto differences = DiffConfigTexts(before, after);
  ASSERT_EQ(differences.size(), 2u);
  EXPECT_EQ(differences[0].ToString(), "queues[a].policy.max_concurrency: 8 -> 4");
  EXPECT_EQ(differences[1].ToString(), "queues[c]: (absent) -> {name: c, pool: p}");
  EXPECT_TRUE(DiffConfigTexts(before, before + "\n# only a comment\n").empty());
  EXPECT_EQ(DiffConfigTexts("a: [1, 2]\n", "a: [1, 3]\n")[0].ToString(), "a: [1, 2] -> [1, 3]");
  EXPECT_TRUE(DiffConfigTexts("a: ~\n", "b:\n").empty()) << "absent and null mean the same";
}

TEST(ClassifyDifferenceTest, EachSectionHasItsScope) {
  struct Case {
    std::string path, before, after;
    ChangeScope scope;
  };
  const Case cases[] = {
      {"server.listen", "a", "b", ChangeScope::kLocal},
      {"store.backend", "sqlite", "postgresql", ChangeScope::kLocal},
      {"queues[a].policy.max_concurrency", "8", "4", ChangeScope::kLive},
      {"queues[a]", "(absent)", "{name: a}", ChangeScope::kLive},
      {"queues[a].pool", "p", "q", ChangeScope::kRestart},
      {"queues[a].pool", "(absent)", "q", ChangeScope::kLive},
      {"routing.rules[fp64]", "x", "y", ChangeScope::kLive},
      {"projects[genomics].quota.gpus", "8", "4", ChangeScope::kLive},
      {"users[alice].role", "user", "queue-admin", ChangeScope::kLive},
      {"alerts.rules[NodeDown].severity", "warning", "critical", ChangeScope::kLive},
      {"alerts.webhook.url", "", "http://x", ChangeScope::kRestart},
      {"scheduler.fairshare_gpu_weight", "16", "8", ChangeScope::kLive},
      {"baseline.gpu_command", "(absent)", "torchrun train.py", ChangeScope::kLive},
      {"scheduler.fairshare_half_life_hours", "168", "24", ChangeScope::kRestart},
      {"nodes[x86-c8m16-hpc-01].cpus", "8", "4", ChangeScope::kRestart},
      {"pools[cpu].nodes", "[a]", "[a, b]", ChangeScope::kRestart},
      {"executor.kill_grace_seconds", "10", "5", ChangeScope::kRestart},
      {"access.roles", "(absent)", "{}", ChangeScope::kRestart},
  };
  for (const auto& c : cases) {
    const ChangeClass cls = ClassifyDifference({c.path, c.before, c.after});
    EXPECT_EQ(cls.scope, c.scope) << c.path;
    EXPECT_EQ(cls.reason.empty(), c.scope != ChangeScope::kRestart) << c.path << ": " << cls.reason;
  }
}

TEST(MergeCanaryTest, OnlyTheCanaryQueueTakesTheNewVersion) {
  const std::string text = DefaultConfigText();
  const Config current = Load(text);
  std::string next_text = ReplaceOnce(text, "max_walltime_hours: 72", "max_walltime_hours: 2");
  next_text = ReplaceOnce(next_text, "max_walltime_hours: 24", "max_walltime_hours: 2");
  Config next = Load(next_text);
  next.number = 2;
  auto merged = MergeCanary(current, next, "hpc-precision");
  ASSERT_TRUE(merged.ok()) << merged.error().message;
  EXPECT_EQ(*merged->cluster.FindQueue("hpc-precision")->policy.max_walltime_hours, 2);
  EXPECT_EQ(*merged->cluster.FindQueue("ai-inference")->policy.max_walltime_hours, 24);
  EXPECT_EQ(merged->VersionFor("hpc-precision"), next.version);
  EXPECT_EQ(merged->VersionFor("ai-inference"), current.version);
  EXPECT_EQ(merged->canary_number, 2);

  auto missing = MergeCanary(current, next, "no-such-queue");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().field, "canary_queue");
}

TEST(WithLocalSectionsTest, AReplicaKeepsItsOwnServerAndStore) {
  Config cluster = Load(DefaultConfigText());
  Config local = cluster;
  local.server.listen = "10.0.0.2:8642";
  local.store.synchronous = "normal";
  const Config mine = WithLocalSections(cluster, local);
  EXPECT_EQ(mine.server.listen, "10.0.0.2:8642");
  EXPECT_EQ(mine.store.synchronous, "normal");
  EXPECT_EQ(mine.version, cluster.version);
}

}  // namespace
}  // namespace unisched::config
