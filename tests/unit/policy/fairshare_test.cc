// Fairshare (policy/fairshare.h): usage decayed with a half-life, and the
// factor F = 2^(-U/S) on two levels (projects, users within a project).

#include "unisched/policy/fairshare.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "testing/builders.h"

namespace unisched::policy {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using ::testing::ElementsAre;
using testing::TestEpoch;

constexpr double kHour = 3600;
const Timestamp kT0 = TestEpoch();

model::ProjectPolicy ProjectWith(std::string name, double shares, std::map<std::string, double> user_shares = {}) {
  model::ProjectPolicy p;
  p.name = std::move(name);
  p.shares = shares;
  p.user_shares = std::move(user_shares);
  return p;
}

// ---- decay ----

TEST(DecayedUsageTest, UsageHalvesEveryHalfLife) {
  struct Case {
    std::string name;
    Timestamp at;
    double want;
  };
  const std::vector<Case> cases = {
      {"at the charge", kT0, 100},
      {"half a half-life", kT0 + minutes(30), 100 / std::sqrt(2.0)},
      {"one half-life: half", kT0 + hours(1), 50},
      {"two half-lives: a quarter", kT0 + hours(2), 25},
      {"ten half-lives", kT0 + hours(10), 100.0 / 1024},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    DecayedUsage usage(kHour);
    usage.Charge("genomics", "alice", 100, kT0);
    usage.DecayTo(c.at);
    EXPECT_NEAR(usage.Project("genomics"), c.want, 1e-9);
    EXPECT_NEAR(usage.User("genomics", "alice"), c.want, 1e-9);
    EXPECT_NEAR(usage.Total(), c.want, 1e-9);
    EXPECT_EQ(usage.AsOf(), c.at);
  }
}

TEST(DecayedUsageTest, DecayingInStepsEqualsDecayingAtOnce) {
  DecayedUsage steps(kHour), once(kHour);
  steps.Charge("genomics", "alice", 100, kT0);
  once.Charge("genomics", "alice", 100, kT0);
  for (int i = 1; i <= 120; ++i) steps.DecayTo(kT0 + minutes(i));
  once.DecayTo(kT0 + hours(2));
  EXPECT_NEAR(steps.Total(), once.Total(), 1e-9);
  EXPECT_NEAR(once.Total(), 25, 1e-9);
}

TEST(DecayedUsageTest, DecayNeverGoesBackwards) {
  DecayedUsage usage(kHour);
  usage.Charge("genomics", "alice", 100, kT0);
  usage.DecayTo(kT0 + hours(2));
  usage.DecayTo(kT0 + hours(1));  // earlier: ignored
  EXPECT_NEAR(usage.Total(), 25, 1e-9);
  EXPECT_EQ(usage.AsOf(), kT0 + hours(2));
  // A charge stamped before AsOf() is added as is, and does not move AsOf() back.
  usage.Charge("genomics", "alice", 10, kT0 + hours(1));
  EXPECT_NEAR(usage.Total(), 35, 1e-9);
  EXPECT_EQ(usage.AsOf(), kT0 + hours(2));
}

TEST(DecayedUsageTest, ChargesAddUpPerProjectAndUser) {
  DecayedUsage usage(kHour);
  usage.Charge("genomics", "alice", 100, kT0);
  usage.Charge("genomics", "bob", 40, kT0);
  usage.Charge("climate", "alice", 10, kT0);
  usage.Charge("climate", "carol", 0, kT0);  // nothing charged
  usage.Charge("climate", "dave", -5, kT0);  // never negative
  EXPECT_DOUBLE_EQ(usage.Project("genomics"), 140);
  EXPECT_DOUBLE_EQ(usage.Project("climate"), 10);
  EXPECT_DOUBLE_EQ(usage.Project("physics"), 0);
  EXPECT_DOUBLE_EQ(usage.User("genomics", "alice"), 100);
  EXPECT_DOUBLE_EQ(usage.User("climate", "alice"), 10);
  EXPECT_DOUBLE_EQ(usage.User("climate", "carol"), 0);
  EXPECT_DOUBLE_EQ(usage.Total(), 150);
  EXPECT_THAT(usage.UsersOf("genomics"), ElementsAre("alice", "bob"));
  EXPECT_THAT(usage.UsersOf("climate"), ElementsAre("alice"));
}

TEST(DecayedUsageTest, ALaterChargeWeighsMoreThanAnEqualEarlierOne) {
  DecayedUsage usage(kHour);
  usage.Charge("genomics", "alice", 100, kT0);
  usage.Charge("climate", "bob", 100, kT0 + hours(1));
  EXPECT_NEAR(usage.Project("genomics"), 50, 1e-9);
  EXPECT_NEAR(usage.Project("climate"), 100, 1e-9);
  EXPECT_GT(FairshareFactor(usage, {}, "genomics", "alice"), FairshareFactor(usage, {}, "climate", "bob"));
}

TEST(DecayedUsageTest, ZeroHalfLifeForgetsAtOnce) {
  DecayedUsage usage(0);
  usage.Charge("genomics", "alice", 100, kT0);
  EXPECT_DOUBLE_EQ(usage.Total(), 100);
  usage.DecayTo(kT0 + milliseconds(1));
  EXPECT_DOUBLE_EQ(usage.Total(), 0);
}

TEST(DecayedUsageTest, EntriesAndRestoreRoundTrip) {
  DecayedUsage usage(kHour);
  usage.Charge("genomics", "alice", 100, kT0);
  usage.Charge("genomics", "bob", 40, kT0 + minutes(10));
  usage.Charge("climate", "carol", 7, kT0 + minutes(20));

  DecayedUsage restored(kHour);
  restored.Charge("stale", "eve", 999, kT0);  // replaced, not merged
  restored.Restore(usage.Entries(), usage.AsOf());
  EXPECT_EQ(restored.AsOf(), usage.AsOf());
  EXPECT_DOUBLE_EQ(restored.Total(), usage.Total());
  EXPECT_DOUBLE_EQ(restored.Project("stale"), 0);
  for (const std::string project : {"genomics", "climate"}) {
    EXPECT_DOUBLE_EQ(restored.Project(project), usage.Project(project)) << project;
    EXPECT_EQ(restored.UsersOf(project), usage.UsersOf(project)) << project;
  }
  EXPECT_DOUBLE_EQ(restored.User("genomics", "bob"), usage.User("genomics", "bob"));
  ASSERT_EQ(restored.Entries().size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(restored.Entries()[i].project, usage.Entries()[i].project);
    EXPECT_EQ(restored.Entries()[i].user, usage.Entries()[i].user);
    EXPECT_DOUBLE_EQ(restored.Entries()[i].usage, usage.Entries()[i].usage);
  }
  // Both go on decaying the same way.
  usage.DecayTo(kT0 + hours(3));
  restored.DecayTo(kT0 + hours(3));
  EXPECT_NEAR(restored.Total(), usage.Total(), 1e-9);
  EXPECT_NEAR(FairshareFactor(restored, {}, "genomics", "bob"), FairshareFactor(usage, {}, "genomics", "bob"), 1e-12);
}

// ---- the factor ----

TEST(FairshareFactorTest, ProjectLevel) {
  struct Usage {
    std::string project, user;
    double amount;
  };
  struct Case {
    std::string name;
    std::vector<model::ProjectPolicy> projects;
    std::vector<Usage> usage;
    std::string project, user;
    double want;
  };
  const std::vector<model::ProjectPolicy> equal = {ProjectWith("genomics", 1), ProjectWith("climate", 1)};
  const std::vector<Case> cases = {
      {"no usage at all: 1", equal, {}, "genomics", "alice", 1.0},
      {"no usage of one's own while others used: 1", equal, {{"climate", "bob", 50}}, "genomics", "alice", 1.0},
      {"usage equal to the share: 0.5",
       equal,
       {{"genomics", "alice", 50}, {"climate", "bob", 50}},
       "genomics",
       "alice",
       0.5},
      {"the only project, using it all: 0.5", {}, {{"genomics", "alice", 50}}, "genomics", "alice", 0.5},
      {"three quarters on a half share: 2^-1.5",
       equal,
       {{"genomics", "alice", 75}, {"climate", "bob", 25}},
       "genomics",
       "alice",
       std::exp2(-1.5)},
      {"a quarter on a half share: 2^-0.5",
       equal,
       {{"genomics", "alice", 75}, {"climate", "bob", 25}},
       "climate",
       "bob",
       std::exp2(-0.5)},
      {"shares 3:1 used 3:1: 0.5 each (1)",
       {ProjectWith("genomics", 3), ProjectWith("climate", 1)},
       {{"genomics", "alice", 75}, {"climate", "bob", 25}},
       "genomics",
       "alice",
       0.5},
      {"shares 3:1 used 3:1: 0.5 each (2)",
       {ProjectWith("genomics", 3), ProjectWith("climate", 1)},
       {{"genomics", "alice", 75}, {"climate", "bob", 25}},
       "climate",
       "bob",
       0.5},
      {"an unlisted project has share 1 among the listed ones",
       equal,
       {{"physics", "eve", 100}},
       "physics",
       "eve",
       std::exp2(-3.0)},  // s_p = 1/3, U = 1
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    DecayedUsage usage(kHour);
    for (const auto& u : c.usage) usage.Charge(u.project, u.user, u.amount, kT0);
    EXPECT_NEAR(FairshareFactor(usage, c.projects, c.project, c.user), c.want, 1e-9);
  }
}

TEST(FairshareFactorTest, HeavierUseMeansALowerFactor) {
  const std::vector<model::ProjectPolicy> equal = {ProjectWith("genomics", 1), ProjectWith("climate", 1)};
  double previous = 1.01;
  for (double genomics_use : {0.0, 10.0, 50.0, 100.0, 400.0, 1600.0}) {
    SCOPED_TRACE(genomics_use);
    DecayedUsage usage(kHour);
    usage.Charge("climate", "bob", 100, kT0);
    usage.Charge("genomics", "alice", genomics_use, kT0);
    const double f = FairshareFactor(usage, equal, "genomics", "alice");
    EXPECT_LT(f, previous);
    EXPECT_GT(f, 0);
    previous = f;
  }
}

TEST(FairshareFactorTest, DecayAloneDoesNotChangeTheFactor) {
  DecayedUsage usage(kHour);
  usage.Charge("genomics", "alice", 75, kT0);
  usage.Charge("climate", "bob", 25, kT0);
  const double before = FairshareFactor(usage, {}, "genomics", "alice");
  usage.DecayTo(kT0 + hours(5));
  EXPECT_NEAR(FairshareFactor(usage, {}, "genomics", "alice"), before, 1e-12);
}

TEST(FairshareFactorTest, UsersWithinAProject) {
  // genomics and climate share equally and have used equally (80 each);
  // within genomics, usage and user shares differ.
  struct Case {
    std::string name;
    std::map<std::string, double> user_shares;
    double alice_use, bob_use;
    std::string user;
    double want;
  };
  // With U_p = 0.5, s_p = 0.5, own = user's usage / all usage (160), Slurm's
  // classic effective usage:
  //   U = own + (U_p - own) * s_u,  S = s_p * s_u,  F = 2^(-U/S).
  const std::vector<Case> cases = {
      {"equal shares, heavy user", {}, 60, 20, "alice", std::exp2(-(60.0 / 160 + (0.5 - 60.0 / 160) * 0.5) / 0.25)},
      {"equal shares, light user", {}, 60, 20, "bob", std::exp2(-(20.0 / 160 + (0.5 - 20.0 / 160) * 0.5) / 0.25)},
      {"shares 3:1, equal use, more shares",
       {{"alice", 3}, {"bob", 1}},
       40,
       40,
       "alice",
       std::exp2(-(0.25 + (0.5 - 0.25) * 0.75) / 0.375)},
      {"shares 3:1, equal use, fewer shares",
       {{"alice", 3}, {"bob", 1}},
       40,
       40,
       "bob",
       std::exp2(-(0.25 + (0.5 - 0.25) * 0.25) / 0.125)},
      // carol has no usage and no listed share: she counts as a third user,
      // and the project's use weighs on her too (a third of it).
      {"a new user of the project", {}, 60, 20, "carol", std::exp2(-(0 + (0.5 - 0) / 3) / (0.5 / 3))},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<model::ProjectPolicy> projects = {ProjectWith("genomics", 1, c.user_shares),
                                                        ProjectWith("climate", 1)};
    DecayedUsage usage(kHour);
    usage.Charge("genomics", "alice", c.alice_use, kT0);
    usage.Charge("genomics", "bob", c.bob_use, kT0);
    usage.Charge("climate", "dave", 80, kT0);
    EXPECT_NEAR(FairshareFactor(usage, projects, "genomics", c.user), c.want, 1e-9);
  }
}

TEST(FairshareFactorTest, WithinAProjectTheHeavierUserAndTheSmallerShareRankLower) {
  const std::vector<model::ProjectPolicy> plain = {ProjectWith("genomics", 1), ProjectWith("climate", 1)};
  DecayedUsage usage(kHour);
  usage.Charge("genomics", "alice", 60, kT0);
  usage.Charge("genomics", "bob", 20, kT0);
  usage.Charge("climate", "dave", 80, kT0);
  EXPECT_LT(FairshareFactor(usage, plain, "genomics", "alice"), FairshareFactor(usage, plain, "genomics", "bob"));

  const std::vector<model::ProjectPolicy> weighted = {ProjectWith("genomics", 1, {{"alice", 3}, {"bob", 1}}),
                                                      ProjectWith("climate", 1)};
  DecayedUsage equal_use(kHour);
  equal_use.Charge("genomics", "alice", 40, kT0);
  equal_use.Charge("genomics", "bob", 40, kT0);
  equal_use.Charge("climate", "dave", 80, kT0);
  EXPECT_GT(FairshareFactor(equal_use, weighted, "genomics", "alice"),
            FairshareFactor(equal_use, weighted, "genomics", "bob"));
}

TEST(FairshareFactorTest, ALightProjectOutranksAHeavyOneWhateverItsUsersDo) {
  // Fairshare is about the project first: every user of a light project
  // ranks above the users of a project that used four times as much.
  const std::vector<model::ProjectPolicy> equal = {ProjectWith("genomics", 1), ProjectWith("climate", 1)};
  DecayedUsage usage(kHour);
  usage.Charge("genomics", "alice", 400, kT0);
  usage.Charge("climate", "bob", 100, kT0);
  EXPECT_GT(FairshareFactor(usage, equal, "climate", "bob"), FairshareFactor(usage, equal, "genomics", "alice"));
}

TEST(ChargeRateTest, CpusPlusWeightedGpusOverAllNodes) {
  EXPECT_DOUBLE_EQ(ChargeRate(testing::MakeRequest().Nodes(2).Cpus(4).Gpus(2), 16), 2 * (4 + 16 * 2));
  EXPECT_DOUBLE_EQ(ChargeRate(testing::MakeRequest().Cpus(8), 16), 8);
  EXPECT_DOUBLE_EQ(ChargeRate(testing::MakeRequest().Cpus(1).Gpus(8), 0), 1);
}

}  // namespace
}  // namespace unisched::policy
