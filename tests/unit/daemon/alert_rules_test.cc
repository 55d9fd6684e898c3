// The alert rules as pure functions (daemon/alert_rules.h): the live state
// built by hand, time as an argument.

#include "daemon/alert_rules.h"

#include <gtest/gtest.h>

namespace unisched::daemon {
namespace {

const Timestamp kNow = FromUnixMillis(1'800'000'000'000);

config::AlertRule Rule(std::string name, std::string kind, std::string queue = {}, int threshold = 3600) {
  config::AlertRule rule;
  rule.name = std::move(name);
  rule.kind = std::move(kind);
  rule.queue = std::move(queue);
  rule.threshold_seconds = threshold;
  return rule;
}

model::NodeUsage Node(const std::string& name, model::NodeState state) {
  model::NodeUsage n;
  n.spec.name = name;
  n.state = state;
  return n;
}

model::Job Pending(model::JobId id, const std::string& queue, std::chrono::seconds age) {
  model::Job job;
  job.id = id;
  job.queue = queue;
  job.state = model::JobState::kPending;
  job.submitted_at = kNow - age;
  return job;
}

struct World {
  std::vector<model::NodeUsage> nodes;
  std::map<std::string, std::string> reasons;
  std::map<model::JobId, model::Job> jobs;
  int64_t discrepancies = 0;
  std::optional<Timestamp> store_error;
  AlertInputs Inputs() const { return {&nodes, &reasons, &jobs, discrepancies, store_error}; }
};

TEST(AlertRulesTest, EachKindHoldsForWhatItWatches) {
  const std::vector<config::AlertRule> rules = {
      Rule("Down", "node_down"),
      Rule("Drained", "node_drained_automatically"),
      Rule("AgentOld", "pending_age", "agent-sandbox", 300),
      Rule("AnyOld", "pending_age", "", 3600),
      Rule("Ledger", "ledger_discrepancy"),
      Rule("Store", "store_errors"),
  };
  World w;
  w.nodes = {Node("n1", model::NodeState::kDown), Node("n2", model::NodeState::kDrained),
             Node("n3", model::NodeState::kDrained), Node("n4", model::NodeState::kUp)};
  w.reasons = {{"n1", "no heartbeat from its agent for 30 s"},
               {"n2", "black hole: 5 jobs failed within 60 s"},
               {"n3", "drained by alice: maintenance"}};
  w.jobs = {{1, Pending(1, "agent-sandbox", std::chrono::seconds(400))},
            {2, Pending(2, "agent-sandbox", std::chrono::seconds(900))},
            {3, Pending(3, "agent-sandbox", std::chrono::seconds(100))},
            {4, Pending(4, "hpc-precision", std::chrono::seconds(7200))}};
  w.discrepancies = 2;
  w.store_error = kNow - std::chrono::minutes(4);

  const AlertConditions holds = EvaluateAlertRules(rules, w.Inputs(), kNow);
  std::vector<AlertKey> keys;
  for (const auto& [key, what] : holds) keys.push_back(key);
  const std::vector<AlertKey> expected = {{"AgentOld", "queue/agent-sandbox"},
                                          {"AnyOld", "queue/hpc-precision"},
                                          {"Down", "node/n1"},
                                          {"Drained", "node/n2"},  // not n3: a person drained it
                                          {"Ledger", "ledger"},
                                          {"Store", "store"}};
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(holds.at({"AgentOld", "queue/agent-sandbox"}).second,
            "2 jobs pending longer than 300 s in queue agent-sandbox; the oldest, job 2, for 900 s");
  EXPECT_EQ(holds.at({"Down", "node/n1"}).second, "node n1 is down: no heartbeat from its agent for 30 s");
  EXPECT_EQ(holds.at({"Down", "node/n1"}).first->kind, "node_down");

  // Five minutes after the last failed commit, store_errors no longer holds.
  w.store_error = kNow - std::chrono::minutes(5);
  EXPECT_EQ(EvaluateAlertRules(rules, w.Inputs(), kNow).count({"Store", "store"}), 0u);
}

TEST(AlertRulesTest, AnAlertFiresOnceAndResolvesWhenItsConditionEnds) {
  const std::vector<config::AlertRule> rules = {Rule("Down", "node_down")};
  World w;
  w.nodes = {Node("n1", model::NodeState::kDown)};
  w.reasons = {{"n1", "health check failed"}};
  std::map<AlertKey, store::AlertRecord> firing;

  AlertChanges first = DiffAlerts(EvaluateAlertRules(rules, w.Inputs(), kNow), firing, kNow);
  ASSERT_EQ(first.fired.size(), 1u);
  EXPECT_TRUE(first.resolved.empty());
  EXPECT_EQ(first.fired[0].name, "Down");
  EXPECT_EQ(first.fired[0].object, "node/n1");
  EXPECT_EQ(first.fired[0].severity, "warning");
  EXPECT_EQ(first.fired[0].fired_at, kNow);

  // Still down, with another reason: nothing new.
  w.reasons["n1"] = "no heartbeat from its agent for 60 s";
  const Timestamp later = kNow + std::chrono::seconds(30);
  AlertChanges second = DiffAlerts(EvaluateAlertRules(rules, w.Inputs(), later), firing, later);
  EXPECT_TRUE(second.fired.empty());
  EXPECT_TRUE(second.resolved.empty());
  EXPECT_EQ(firing.at({"Down", "node/n1"}).fired_at, kNow);

  w.nodes[0].state = model::NodeState::kUp;
  const Timestamp up = kNow + std::chrono::seconds(90);
  AlertChanges third = DiffAlerts(EvaluateAlertRules(rules, w.Inputs(), up), firing, up);
  EXPECT_TRUE(third.fired.empty());
  ASSERT_EQ(third.resolved.size(), 1u);
  EXPECT_EQ(third.resolved[0].resolved_at, up);
  EXPECT_EQ(third.resolved[0].fired_at, kNow);
  EXPECT_TRUE(firing.empty());
}

}  // namespace
}  // namespace unisched::daemon
