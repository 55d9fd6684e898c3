// The sandbox registry (daemon/sandbox_registry.h): ids that go on after the
// store's, creates holding a slot until they run, what admitted and running
// sandboxes hold per (queue, project, user), and taking sandboxes out: for a
// call (busy), to be ended, idle past their timeout, or all at a stop. No
// instance runs here: the registry never looks inside one. Time is passed as
// explicit steady_clock points.

#include "daemon/sandbox_registry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <tuple>

namespace unisched::daemon {
namespace {

using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

const Clock::time_point kT0 = Clock::time_point{} + std::chrono::hours(1000);

std::shared_ptr<Sandbox> MakeSandbox(int64_t id, const std::string& queue = "agent-sandbox",
                                     const std::string& project = "default", const std::string& user = "alice",
                                     service::SandboxLimits limits = {}) {
  auto s = std::make_shared<Sandbox>();
  s->id = id;
  s->queue = queue;
  s->project = project;
  s->user = user;
  s->limits = limits;
  s->idle_timeout_seconds = 60;
  s->last_active = kT0;
  return s;
}

std::tuple<int64_t, int64_t, int64_t, int64_t> Fields(const policy::Amount& a) {
  return {a.cpus, a.memory_mb, a.gpus, a.jobs};
}

// What the registry holds for (queue, project, user): cpus, memory_mb, gpus,
// jobs; all zero when it holds nothing there.
std::tuple<int64_t, int64_t, int64_t, int64_t> HeldBy(const SandboxRegistry& registry, const std::string& queue,
                                                      const std::string& project, const std::string& user) {
  const service::SandboxHolds holds = registry.Holds();
  auto it = holds.find({queue, project, user});
  return it == holds.end() ? std::tuple<int64_t, int64_t, int64_t, int64_t>{0, 0, 0, 0} : Fields(it->second);
}

std::vector<int64_t> Ids(const std::vector<std::shared_ptr<Sandbox>>& sandboxes) {
  std::vector<int64_t> ids;
  for (const auto& s : sandboxes) ids.push_back(s->id);
  return ids;
}

std::vector<int64_t> RunningIds(const SandboxRegistry& registry) {
  std::vector<int64_t> ids;
  for (const auto& [id, s] : registry.running()) ids.push_back(id);
  return ids;
}

TEST(SandboxRegistryTest, SandboxNamesAreSbDashTheId) {
  EXPECT_EQ(SandboxName(1), "sb-1");
  EXPECT_EQ(SandboxName(42), "sb-42");
  EXPECT_EQ(SandboxName(9'000'000'000), "sb-9000000000");
}

TEST(SandboxRegistryTest, IdsStartAtOneAndGoOnAfterTheLargestStoredOneIncreasing) {
  SandboxRegistry fresh;
  EXPECT_EQ(fresh.NewId(), 1);
  EXPECT_EQ(fresh.NewId(), 2);

  SandboxRegistry empty_store;
  empty_store.ResumeIds(0);
  EXPECT_EQ(empty_store.NewId(), 1);

  SandboxRegistry resumed;
  resumed.ResumeIds(41);
  EXPECT_EQ(resumed.NewId(), 42);
  EXPECT_EQ(resumed.NewId(), 43);
  EXPECT_EQ(resumed.NewId(), 44);
}

TEST(SandboxRegistryTest, AnAdmittedCreateHoldsItsLimitsAndGivingItBackReleasesThem) {
  SandboxRegistry registry;
  auto s = MakeSandbox(0, "agent-sandbox", "default", "alice", {.cpus = 2, .memory_mb = 1024, .timeout_seconds = 60});
  registry.Admit(s);
  // One sandbox: its cpus and memory on one node, no gpus, one job.
  EXPECT_EQ(HeldBy(registry, "agent-sandbox", "default", "alice"), std::make_tuple(2, 1024, 0, 1));
  EXPECT_TRUE(registry.running().empty()) << "admitted is not running";
  EXPECT_EQ(registry.Find(0), nullptr);

  registry.Unadmit(s);
  EXPECT_TRUE(registry.Holds().empty());
  registry.Unadmit(s);  // giving it back twice changes nothing
  EXPECT_TRUE(registry.Holds().empty());
}

TEST(SandboxRegistryTest, ActivatingMovesACreateFromAdmittedToRunningAndItStillHoldsOnce) {
  SandboxRegistry registry;
  auto s = MakeSandbox(0, "agent-sandbox", "default", "alice", {.cpus = 1, .memory_mb = 512, .timeout_seconds = 300});
  registry.Admit(s);
  s->id = registry.NewId();  // the manager takes the id after the slot
  registry.Activate(s);
  EXPECT_EQ(RunningIds(registry), std::vector<int64_t>{1});
  EXPECT_EQ(registry.Find(1), s);
  EXPECT_EQ(HeldBy(registry, "agent-sandbox", "default", "alice"), std::make_tuple(1, 512, 0, 1))
      << "counted as running only, no longer as admitted";
  registry.Unadmit(s);  // no longer admitted: a late give-back changes nothing
  EXPECT_EQ(HeldBy(registry, "agent-sandbox", "default", "alice"), std::make_tuple(1, 512, 0, 1));
}

TEST(SandboxRegistryTest, HoldsAddUpAdmittedAndRunningSandboxesPerQueueProjectAndUser) {
  SandboxRegistry registry;
  const service::SandboxLimits small{.cpus = 1, .memory_mb = 256, .timeout_seconds = 10};
  const service::SandboxLimits large{.cpus = 4, .memory_mb = 4096, .timeout_seconds = 10};
  registry.Activate(MakeSandbox(1, "q1", "p1", "alice", small));
  registry.Activate(MakeSandbox(2, "q1", "p1", "alice", large));
  registry.Admit(MakeSandbox(0, "q1", "p1", "alice", small));  // a create under way
  registry.Activate(MakeSandbox(3, "q1", "p1", "bob", small));
  registry.Activate(MakeSandbox(4, "q1", "p2", "alice", large));
  registry.Admit(MakeSandbox(0, "q2", "p1", "alice", large));

  struct Case {
    const char* queue;
    const char* project;
    const char* user;
    std::tuple<int64_t, int64_t, int64_t, int64_t> held;  // cpus, memory_mb, gpus, jobs
  };
  const Case cases[] = {
      {"q1", "p1", "alice", {6, 4608, 0, 3}},  // two running and one admitted
      {"q1", "p1", "bob", {1, 256, 0, 1}},     // another user
      {"q1", "p2", "alice", {4, 4096, 0, 1}},  // another project
      {"q2", "p1", "alice", {4, 4096, 0, 1}},  // another queue, admitted only
      {"q2", "p2", "bob", {0, 0, 0, 0}},       // nothing there
  };
  for (const Case& c : cases) {
    EXPECT_EQ(HeldBy(registry, c.queue, c.project, c.user), c.held) << c.queue << "/" << c.project << "/" << c.user;
  }
  EXPECT_EQ(registry.Holds().size(), 4u) << "only scopes that hold something";
}

TEST(SandboxRegistryTest, FindSeesRunningSandboxesOnly) {
  SandboxRegistry registry;
  auto running = MakeSandbox(1);
  registry.Activate(running);
  registry.Admit(MakeSandbox(2));
  EXPECT_EQ(registry.Find(1), running);
  EXPECT_EQ(registry.Find(2), nullptr) << "admitted, not running";
  EXPECT_EQ(registry.Find(3), nullptr);
  ASSERT_NE(registry.TakeToEnd(1), nullptr);
  EXPECT_EQ(registry.Find(1), nullptr) << "taken out to be ended";
}

TEST(SandboxRegistryTest, AcquiringARunningSandboxMarksItBusyOncePerCall) {
  SandboxRegistry registry;
  auto s = MakeSandbox(7);
  registry.Activate(s);
  auto first = registry.Acquire(7);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(*first, s);
  EXPECT_EQ(s->busy, 1);
  ASSERT_TRUE(registry.Acquire(7).ok());
  EXPECT_EQ(s->busy, 2) << "two calls in progress";
  EXPECT_EQ(registry.Find(7), s) << "acquiring leaves it running";
}

TEST(SandboxRegistryTest, AcquiringASandboxThatIsNotRunningIsAConflict) {
  SandboxRegistry registry;
  registry.Activate(MakeSandbox(1));
  registry.Activate(MakeSandbox(2));
  registry.Admit(MakeSandbox(3));
  ASSERT_NE(registry.TakeToEnd(1), nullptr);
  registry.Find(2)->ending = true;  // being ended, still in the table

  struct Case {
    int64_t id;
    const char* why;
  };
  const Case cases[] = {
      {1, "taken out to be ended"},
      {2, "marked ending"},
      {3, "admitted, not yet running"},
      {99, "unknown"},
  };
  for (const Case& c : cases) {
    auto acquired = registry.Acquire(c.id);
    ASSERT_FALSE(acquired.ok()) << c.why;
    EXPECT_EQ(acquired.error().kind, ErrorKind::kConflict) << c.why;
    EXPECT_EQ(acquired.error().code, "not_running") << c.why;
    EXPECT_NE(acquired.error().message.find(SandboxName(c.id)), std::string::npos)
        << c.why << ": " << acquired.error().message;
  }
  EXPECT_EQ(registry.Find(2)->busy, 0) << "a refused acquire marks nothing busy";
}

TEST(SandboxRegistryTest, TakingASandboxToEndTakesItOutOnceAndMarksItEnding) {
  SandboxRegistry registry;
  auto s = MakeSandbox(5);
  registry.Activate(s);
  registry.Activate(MakeSandbox(6));
  auto taken = registry.TakeToEnd(5);
  ASSERT_EQ(taken, s);
  EXPECT_TRUE(taken->ending);
  EXPECT_EQ(RunningIds(registry), std::vector<int64_t>{6});
  EXPECT_EQ(registry.TakeToEnd(5), nullptr) << "already taken";
  EXPECT_EQ(registry.TakeToEnd(99), nullptr) << "unknown";
  EXPECT_EQ(HeldBy(registry, "agent-sandbox", "default", "alice"), std::make_tuple(1, 512, 0, 1))
      << "only the one still running holds";
}

TEST(SandboxRegistryTest, ASandboxMarkedEndingIsNotTakenToEndAgain) {
  SandboxRegistry registry;
  auto s = MakeSandbox(5);
  registry.Activate(s);
  s->ending = true;
  EXPECT_EQ(registry.TakeToEnd(5), nullptr);
  EXPECT_EQ(registry.Find(5), s) << "left where it was";
}

TEST(SandboxRegistryTest, AnIdleSandboxIsTakenOnlyAfterItsTimeoutAndNeverWhileBusy) {
  struct Case {
    const char* name;
    int64_t idle_timeout_seconds;
    Clock::duration since_last_call;
    int busy;
    bool taken;
  };
  const Case cases[] = {
      {"idle for less than its timeout", 60, seconds(59), 0, false},
      {"idle for exactly its timeout", 60, seconds(60), 0, true},
      {"idle past its timeout", 60, seconds(3600), 0, true},
      {"a call in progress long past its timeout", 60, seconds(3600), 1, false},
      {"two calls in progress", 60, seconds(3600), 2, false},
      {"a timeout of 0: no grace at all", 0, seconds(0), 0, true},
      {"a timeout of 0 but busy", 0, seconds(3600), 1, false},
      {"a last call after now", 60, -seconds(10), 0, false},
  };
  for (const Case& c : cases) {
    SandboxRegistry registry;
    auto s = MakeSandbox(1);
    s->idle_timeout_seconds = c.idle_timeout_seconds;
    s->busy = c.busy;
    registry.Activate(s);
    const auto idle = registry.TakeIdle(kT0 + c.since_last_call);
    if (c.taken) {
      EXPECT_EQ(Ids(idle), std::vector<int64_t>{1}) << c.name;
      EXPECT_TRUE(s->ending) << c.name;
      EXPECT_EQ(registry.Find(1), nullptr) << c.name;
    } else {
      EXPECT_TRUE(idle.empty()) << c.name;
      EXPECT_FALSE(s->ending) << c.name;
      EXPECT_EQ(registry.Find(1), s) << c.name;
    }
  }
}

TEST(SandboxRegistryTest, TakingIdleSandboxesTakesEachOnceAndLeavesTheOthersRunning) {
  SandboxRegistry registry;
  auto short_timeout = MakeSandbox(1);
  short_timeout->idle_timeout_seconds = 10;
  auto long_timeout = MakeSandbox(2);
  long_timeout->idle_timeout_seconds = 100;
  auto busy = MakeSandbox(3);
  busy->idle_timeout_seconds = 10;
  auto recent = MakeSandbox(4);
  recent->idle_timeout_seconds = 10;
  recent->last_active = kT0 + seconds(20);
  auto ending = MakeSandbox(5);
  ending->idle_timeout_seconds = 10;
  for (const auto& s : {short_timeout, long_timeout, busy, recent, ending}) registry.Activate(s);
  ASSERT_TRUE(registry.Acquire(3).ok());
  ending->ending = true;  // being ended by someone else: not taken again

  EXPECT_EQ(Ids(registry.TakeIdle(kT0 + seconds(20))), std::vector<int64_t>{1});
  EXPECT_TRUE(registry.TakeIdle(kT0 + seconds(20)).empty()) << "taken once";
  EXPECT_EQ(RunningIds(registry), (std::vector<int64_t>{2, 3, 4, 5}));

  busy->busy = 0;  // its call ended (the manager releases it and notes the time)
  busy->last_active = kT0 + seconds(20);
  EXPECT_EQ(Ids(registry.TakeIdle(kT0 + seconds(29))), std::vector<int64_t>{});
  EXPECT_EQ(Ids(registry.TakeIdle(kT0 + seconds(30))), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(Ids(registry.TakeIdle(kT0 + seconds(100))), std::vector<int64_t>{2});
  EXPECT_EQ(RunningIds(registry), std::vector<int64_t>{5});
  EXPECT_TRUE(long_timeout->ending);
}

TEST(SandboxRegistryTest, TakingAllEmptiesTheRunningTableButLeavesCreatesUnderWay) {
  SandboxRegistry registry;
  for (int64_t id : {3, 1, 2}) registry.Activate(MakeSandbox(id));
  ASSERT_TRUE(registry.Acquire(2).ok());  // a call in progress is taken too
  auto admitted = MakeSandbox(0, "agent-sandbox", "default", "bob");
  registry.Admit(admitted);

  const auto all = registry.TakeAll();
  EXPECT_EQ(Ids(all), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(registry.running().empty());
  for (int64_t id : {1, 2, 3}) {
    EXPECT_EQ(registry.Find(id), nullptr);
    EXPECT_EQ(registry.TakeToEnd(id), nullptr);
    EXPECT_FALSE(registry.Acquire(id).ok());
  }
  EXPECT_TRUE(registry.TakeAll().empty());
  // TakeAll takes running sandboxes only: an admitted create still holds.
  EXPECT_EQ(HeldBy(registry, "agent-sandbox", "default", "alice"), std::make_tuple(0, 0, 0, 0));
  EXPECT_EQ(HeldBy(registry, "agent-sandbox", "default", "bob"), std::make_tuple(1, 512, 0, 1));
}

TEST(SandboxRegistryTest, TakingAllDoesNotMarkTheSandboxesEnding) {
  // Unlike TakeToEnd and TakeIdle: what TakeAll returns keeps ending false.
  SandboxRegistry registry;
  auto s = MakeSandbox(1);
  registry.Activate(s);
  const auto all = registry.TakeAll();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_FALSE(all[0]->ending);
}

}  // namespace
}  // namespace unisched::daemon
