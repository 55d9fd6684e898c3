// The controller's nodes part (daemon/node_book.h): what heartbeats, silence,
// drains and allocations do to a node's state, and what each stores (the
// batch's writes are committed to the in-memory store and read back).

#include "daemon/node_book.h"

#include <gtest/gtest.h>

#include "testing/load_config.h"
#include "testing/memory_store.h"

namespace unisched::daemon {
namespace {

constexpr const char* kConfig = R"yaml(
health:
  heartbeat_timeout_seconds: 30
pools:
  - name: p
    kind: cpu
    nodes: [x86-c4m8-local-01]
  - name: a
    kind: cpu
    nodes: [x86-c4m8-agent-01]
nodes:
  - name: x86-c4m8-local-01
    cpus: 4
    memory_mb: 8192
  - name: x86-c4m8-agent-01
    cpus: 4
    memory_mb: 8192
    agent: true
    labels: {rack: r1}
queues:
  - name: q
    pool: p
    policy: {type: fifo}
projects:
  - name: default
)yaml";

constexpr const char* kAgent = "x86-c4m8-agent-01";

class NodeBookTest : public ::testing::Test {
 protected:
  void SetUp() override { book_.Load({}, {}, clock_.Now()); }

  executor::Heartbeat Beat(int cpus = 4, bool healthy = true) {
    executor::Heartbeat hb;
    hb.node = kAgent;
    hb.pool = "a";
    hb.cpus = cpus;
    hb.memory_mb = 8192;
    hb.healthy = healthy;
    hb.health_message = healthy ? "" : "disk full";
    hb.labels = {{"rack", "r9"}, {"ib", "hdr"}};
    return hb;
  }
  model::NodeUsage& Agent() { return *book_.Find(kAgent); }
  // Commits the batch's writes; the kinds of the cluster events stored since.
  std::vector<std::string> Commit(Batch& batch) {
    for (auto& write : batch.writes) EXPECT_TRUE(store_.WriteSync(write).ok());
    batch.writes.clear();
    std::vector<std::string> kinds;
    for (const auto& e : store_.ListClusterEvents({})) kinds.push_back(e.kind);
    std::vector<std::string> fresh(kinds.begin() + static_cast<long>(seen_), kinds.end());
    seen_ = kinds.size();
    return fresh;
  }
  model::NodeState StoredState(const std::string& node) {
    for (const auto& r : store_.LoadNodeStates()) {
      if (r.name == node) return r.state;
    }
    return model::NodeState::kUp;
  }

  config::Config config_ = testing::LoadConfigOrFail(kConfig);
  FakeClock clock_;
  NodeBook book_{config_, clock_};
  testing::MemoryStore store_;
  size_t seen_ = 0;
};

TEST_F(NodeBookTest, AnAgentNodeWaitsForItsAgentThenRegistersWithTheConfigsLabelsWinning) {
  EXPECT_EQ(Agent().state, model::NodeState::kDown);
  EXPECT_EQ(book_.reasons().at(kAgent), "waiting for its agent to register");
  EXPECT_EQ(book_.Find("x86-c4m8-local-01")->state, model::NodeState::kUp);
  for (const auto& view : book_.Views()) EXPECT_FALSE(view.last_heartbeat.has_value()) << "no heartbeat seen yet";

  Batch batch;
  EXPECT_TRUE(book_.Heard(batch, Beat(), clock_.Now()));
  EXPECT_EQ(Commit(batch), std::vector<std::string>{"registered"});
  EXPECT_EQ(Agent().state, model::NodeState::kUp);
  EXPECT_EQ(Agent().spec.labels, (model::Labels{{"rack", "r1"}, {"ib", "hdr"}}));
  EXPECT_EQ(book_.Views()[1].last_heartbeat, clock_.Now());
  // The same heartbeat again changes nothing.
  EXPECT_FALSE(book_.Heard(batch, Beat(), clock_.Now()));
  EXPECT_TRUE(batch.writes.empty());
}

TEST_F(NodeBookTest, AnAgentShortOfItsDeclaredResourcesOrUnhealthyIsDrained) {
  struct Case {
    const char* what;
    int cpus;
    bool healthy;
    bool busy;
    model::NodeState expected;
    std::string reason_prefix;
  };
  const std::vector<Case> cases = {
      {"short of cpus", 2, true, false, model::NodeState::kDrained, "agent reports less than configured: 2 cpus"},
      {"unhealthy and idle", 4, false, false, model::NodeState::kDrained, "health check failed: disk full"},
      {"unhealthy with a job", 4, false, true, model::NodeState::kDraining, "health check failed: disk full"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    NodeBook book(config_, clock_);
    book.Load({}, {}, clock_.Now());
    Batch batch;
    ASSERT_TRUE(book.Heard(batch, Beat(4), clock_.Now()));  // registered, up
    if (c.busy) book.Apply({{kAgent, 1, 1024, {}}}, +1);
    EXPECT_TRUE(book.Heard(batch, Beat(c.cpus, c.healthy), clock_.Now()));
    EXPECT_EQ(book.Find(kAgent)->state, c.expected);
    EXPECT_EQ(book.reasons().at(kAgent).rfind(c.reason_prefix, 0), 0u) << book.reasons().at(kAgent);
  }
}

TEST_F(NodeBookTest, ASilentAgentGoesDownAndItsNextHeartbeatBringsItBack) {
  Batch batch;
  book_.Heard(batch, Beat(), clock_.Now());
  Commit(batch);
  clock_.Advance(std::chrono::seconds(30));
  EXPECT_TRUE(book_.DownSilent(batch, clock_.Now()).empty()) << "at the timeout, not past it";
  clock_.Advance(std::chrono::seconds(1));
  const auto down = book_.DownSilent(batch, clock_.Now());
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].first, kAgent);
  EXPECT_EQ(down[0].second, "no heartbeat from its agent for 31 s");
  EXPECT_EQ(Commit(batch), std::vector<std::string>{"down"});
  EXPECT_EQ(StoredState(kAgent), model::NodeState::kDown);
  EXPECT_TRUE(book_.DownSilent(batch, clock_.Now()).empty()) << "down once";

  EXPECT_TRUE(book_.Heard(batch, Beat(), clock_.Now()));
  EXPECT_EQ(Commit(batch), std::vector<std::string>{"up"});
  EXPECT_EQ(StoredState(kAgent), model::NodeState::kUp);
}

TEST_F(NodeBookTest, ADrainedNodeStaysDrainedWhenItsAgentComesBack) {
  Batch batch;
  book_.Heard(batch, Beat(), clock_.Now());
  book_.DrainOrResume(batch, Agent(), /*drain=*/true, "maintenance", "admin");
  EXPECT_EQ(Agent().state, model::NodeState::kDrained);
  clock_.Advance(std::chrono::seconds(5));
  book_.Heard(batch, Beat(), clock_.Now());
  EXPECT_EQ(Agent().state, model::NodeState::kDrained);
  EXPECT_EQ(book_.reasons().at(kAgent), "maintenance");
}

TEST_F(NodeBookTest, ADrainingNodeIsDrainedWhenItsLastJobLeaves) {
  Batch batch;
  model::NodeUsage& local = *book_.Find("x86-c4m8-local-01");
  book_.Apply({{"x86-c4m8-local-01", 2, 1024, {}}}, +1);
  book_.Apply({{"x86-c4m8-local-01", 1, 1024, {}}}, +1);
  const auto view = book_.DrainOrResume(batch, local, /*drain=*/true, "", "admin");
  EXPECT_EQ(view.usage.state, model::NodeState::kDraining);
  book_.Apply({{"x86-c4m8-local-01", 2, 1024, {}}}, -1);
  EXPECT_EQ(local.state, model::NodeState::kDraining);
  book_.Apply({{"x86-c4m8-local-01", 1, 1024, {}}}, -1);
  EXPECT_EQ(local.state, model::NodeState::kDrained);
  EXPECT_EQ(Commit(batch), std::vector<std::string>{"drain"});
  const auto counts = book_.CountsByStateAndPool();
  EXPECT_EQ(counts.at({"drained", "p"}), 1);
  EXPECT_EQ(counts.at({"up", "p"}), 0);
  EXPECT_EQ(counts.at({"down", "a"}), 1);  // the agent node, never registered
}

TEST_F(NodeBookTest, IdleTimesAreStoredAndABookLoadedFromThemKeepsThem) {
  constexpr const char* kLocal = "x86-c4m8-local-01";
  auto idle_since = [](const NodeBook& book, const std::string& node) -> std::optional<Timestamp> {
    for (const auto& view : book.Views()) {
      if (view.usage.spec.name == node) return view.idle_since;
    }
    return std::nullopt;
  };
  const Timestamp started = clock_.Now();
  Batch batch;
  book_.SaveIdleTimes(batch);  // both idle since the book's start
  Commit(batch);
  EXPECT_EQ(store_.LoadNodeIdleSince(), (std::map<std::string, Timestamp>{{kLocal, started}, {kAgent, started}}));

  clock_.Advance(std::chrono::minutes(5));
  book_.Apply({{kLocal, 2, 1024, {}}}, +1);
  book_.SaveIdleTimes(batch);
  Commit(batch);
  EXPECT_EQ(store_.LoadNodeIdleSince().count(kLocal), 0u) << "busy: no idle time kept";
  clock_.Advance(std::chrono::minutes(5));
  const Timestamp ended = clock_.Now();
  book_.Apply({{kLocal, 2, 1024, {}}}, -1);
  book_.SaveIdleTimes(batch);
  Commit(batch);
  book_.SaveIdleTimes(batch);
  EXPECT_TRUE(batch.writes.empty()) << "nothing changed since the last save";

  // A restart an hour later: the idle times are the stored ones, not the restart.
  clock_.Advance(std::chrono::hours(1));
  NodeBook again(config_, clock_);
  again.Load(store_.LoadNodeStates(), store_.LoadNodeIdleSince(), clock_.Now());
  EXPECT_EQ(idle_since(again, kLocal), ended);
  EXPECT_EQ(idle_since(again, kAgent), started);
  // A stored idle time in the future (a clock set back) counts from the restart.
  ASSERT_TRUE(store_
                  .WriteSync([&](store::Transaction& t) -> Status {
                    if (Status s = t.SetNodeIdleSince(kLocal, clock_.Now() + std::chrono::hours(2)); !s) return s;
                    return t.SetNodeIdleSince("gone-from-the-config", started);
                  })
                  .ok());
  NodeBook skewed(config_, clock_);
  skewed.Load({}, store_.LoadNodeIdleSince(), clock_.Now());
  EXPECT_EQ(idle_since(skewed, kLocal), clock_.Now());
  skewed.SaveIdleTimes(batch);
  Commit(batch);
  const auto stored = store_.LoadNodeIdleSince();
  EXPECT_EQ(stored.count("gone-from-the-config"), 0u);
  EXPECT_EQ(stored.at(kLocal), clock_.Now());
}

}  // namespace
}  // namespace unisched::daemon
