// Multifactor priority (policy/priority.h): every factor on its own, the
// weights that scale it, the admin adjustment, and the default weights of
// each queue type. Time is a fixed fake `now`.

#include "unisched/policy/priority.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "testing/builders.h"

namespace unisched::policy {
namespace {

using model::PriorityFactors;
using model::PriorityWeights;
using std::chrono::hours;
using std::chrono::minutes;
using testing::TestEpoch;

const Timestamp kNow = TestEpoch() + hours(1000);

PriorityWeights Only(double fairshare, double age, double tier, double size, double max_age_hours = 168) {
  PriorityWeights w;
  w.fairshare = fairshare;
  w.age = age;
  w.tier = tier;
  w.size = size;
  w.max_age_hours = max_age_hours;
  return w;
}

// Inputs that make every factor 0 except what a case sets.
PriorityInputs Neutral() {
  PriorityInputs in;
  in.fairshare_factor = 0;
  in.submitted_at = kNow;
  in.tier = 0;
  in.max_tier_in_pool = 0;
  in.job_cpus = 0;
  in.pool_cpus = 64;
  in.adjustment = 0;
  return in;
}

TEST(PriorityTest, EachFactorTimesItsWeight) {
  struct Case {
    std::string name;
    PriorityWeights weights;
    PriorityInputs in;
    PriorityFactors want;
  };
  auto with = [](auto change) {
    PriorityInputs in = Neutral();
    change(in);
    return in;
  };
  const std::vector<Case> cases = {
      // Fairshare: F in [0, 1] times its weight.
      {"fairshare 1 (no usage) gives the whole weight",
       Only(10000, 0, 0, 0),
       with([](PriorityInputs& in) { in.fairshare_factor = 1; }),
       {10000, 0, 0, 0, 0}},
      {"fairshare 0.5 gives half",
       Only(10000, 0, 0, 0),
       with([](PriorityInputs& in) { in.fairshare_factor = 0.5; }),
       {5000, 0, 0, 0, 0}},
      {"fairshare 0.25",
       Only(10000, 0, 0, 0),
       with([](PriorityInputs& in) { in.fairshare_factor = 0.25; }),
       {2500, 0, 0, 0, 0}},
      {"fairshare above 1 is clamped",
       Only(10000, 0, 0, 0),
       with([](PriorityInputs& in) { in.fairshare_factor = 3; }),
       {10000, 0, 0, 0, 0}},
      {"fairshare below 0 is clamped",
       Only(10000, 0, 0, 0),
       with([](PriorityInputs& in) { in.fairshare_factor = -1; }),
       {0, 0, 0, 0, 0}},
      {"fairshare weight 0 ignores the factor",
       Only(0, 0, 0, 0),
       with([](PriorityInputs& in) { in.fairshare_factor = 1; }),
       {0, 0, 0, 0, 0}},
      // Age: linear in the wait, capped at max_age.
      {"no wait, no age",
       Only(0, 1000, 0, 0, 10),
       with([](PriorityInputs& in) { in.submitted_at = kNow; }),
       {0, 0, 0, 0, 0}},
      {"half of max_age gives half",
       Only(0, 1000, 0, 0, 10),
       with([](PriorityInputs& in) { in.submitted_at = kNow - hours(5); }),
       {0, 500, 0, 0, 0}},
      {"exactly max_age gives the whole weight",
       Only(0, 1000, 0, 0, 10),
       with([](PriorityInputs& in) { in.submitted_at = kNow - hours(10); }),
       {0, 1000, 0, 0, 0}},
      {"age is capped at max_age",
       Only(0, 1000, 0, 0, 10),
       with([](PriorityInputs& in) { in.submitted_at = kNow - hours(500); }),
       {0, 1000, 0, 0, 0}},
      {"a submit time after now counts as no wait",
       Only(0, 1000, 0, 0, 10),
       with([](PriorityInputs& in) { in.submitted_at = kNow + hours(1); }),
       {0, 0, 0, 0, 0}},
      {"max_age 0: any job is as old as it gets",
       Only(0, 1000, 0, 0, 0),
       with([](PriorityInputs& in) { in.submitted_at = kNow; }),
       {0, 1000, 0, 0, 0}},
      {"default max_age is a week",
       Only(0, 168, 0, 0),
       with([](PriorityInputs& in) { in.submitted_at = kNow - hours(1); }),
       {0, 1, 0, 0, 0}},
      {"terms round to the nearest integer",
       Only(0, 1000, 0, 0, 3),
       with([](PriorityInputs& in) { in.submitted_at = kNow - minutes(1); }),
       {0, 6, 0, 0, 0}},  // 5.56 -> 6
      // Tier: normalized by the highest tier of the pool.
      {"top tier gives the whole weight",
       Only(0, 0, 10000, 0),
       with([](PriorityInputs& in) {
         in.tier = 4;
         in.max_tier_in_pool = 4;
       }),
       {0, 0, 10000, 0, 0}},
      {"tier 1 of 4 gives a quarter",
       Only(0, 0, 10000, 0),
       with([](PriorityInputs& in) {
         in.tier = 1;
         in.max_tier_in_pool = 4;
       }),
       {0, 0, 2500, 0, 0}},
      {"every tier 0: no tier term",
       Only(0, 0, 10000, 0),
       with([](PriorityInputs& in) {
         in.tier = 0;
         in.max_tier_in_pool = 0;
       }),
       {0, 0, 0, 0, 0}},
      // Size: the job's cpus over the pool's.
      {"a quarter of the pool",
       Only(0, 0, 0, 100),
       with([](PriorityInputs& in) {
         in.job_cpus = 16;
         in.pool_cpus = 64;
       }),
       {0, 0, 0, 25, 0}},
      {"the whole pool",
       Only(0, 0, 0, 100),
       with([](PriorityInputs& in) {
         in.job_cpus = 64;
         in.pool_cpus = 64;
       }),
       {0, 0, 0, 100, 0}},
      {"more than the pool is capped",
       Only(0, 0, 0, 100),
       with([](PriorityInputs& in) {
         in.job_cpus = 640;
         in.pool_cpus = 64;
       }),
       {0, 0, 0, 100, 0}},
      {"a pool without cpus gives no size term",
       Only(0, 0, 0, 100),
       with([](PriorityInputs& in) {
         in.job_cpus = 4;
         in.pool_cpus = 0;
       }),
       {0, 0, 0, 0, 0}},
      // Adjustment: added as is, whatever the weights.
      {"adjustment added as is",
       Only(0, 0, 0, 0),
       with([](PriorityInputs& in) { in.adjustment = 250; }),
       {0, 0, 0, 0, 250}},
      {"a negative adjustment lowers",
       Only(0, 0, 0, 0),
       with([](PriorityInputs& in) { in.adjustment = -7; }),
       {0, 0, 0, 0, -7}},
      // All at once: the seed's fairshare queue defaults.
      {"all factors together",
       Only(10000, 1000, 10000, 100, 168),
       with([](PriorityInputs& in) {
         in.fairshare_factor = 0.25;
         in.submitted_at = kNow - hours(84);
         in.tier = 1;
         in.max_tier_in_pool = 2;
         in.job_cpus = 16;
         in.pool_cpus = 64;
         in.adjustment = 3;
       }),
       {2500, 500, 5000, 25, 3}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(ComputePriority(c.weights, c.in, kNow), c.want);
  }
}

TEST(PriorityTest, TotalIsTheSumOfTheTerms) {
  EXPECT_EQ((PriorityFactors{2500, 500, 5000, 25, 3}.Total()), 8028);
  EXPECT_EQ((PriorityFactors{0, 0, 0, 0, -10}.Total()), -10);
  EXPECT_EQ(PriorityFactors{}.Total(), 0);
}

TEST(PriorityTest, LowerFairshareMeansLowerPriority) {
  const PriorityWeights weights = Only(10000, 1000, 0, 0);
  PriorityInputs heavy = Neutral(), light = Neutral();
  heavy.fairshare_factor = 0.1;
  light.fairshare_factor = 0.9;
  EXPECT_LT(ComputePriority(weights, heavy, kNow).Total(), ComputePriority(weights, light, kNow).Total());
  // Waiting long enough makes up for a fairshare gap no larger than the age weight.
  heavy.submitted_at = kNow - hours(168);
  light.fairshare_factor = 0.15;
  EXPECT_GT(ComputePriority(weights, heavy, kNow).Total(), ComputePriority(weights, light, kNow).Total());
}

TEST(PriorityWeightsTest, DefaultsPerQueueType) {
  struct Case {
    std::string type;
    PriorityWeights want;
  };
  const std::vector<Case> cases = {
      {"fifo", Only(0, 0, 10000, 0)},
      {"fairshare", Only(10000, 1000, 10000, 100)},
      {"priority-with-quota", Only(0, 1000, 10000, 0)},
      {"elastic", Only(0, 0, 10000, 0)},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.type);
    model::QueuePolicy policy;
    policy.type = c.type;
    EXPECT_EQ(policy.Weights(), c.want);
  }
}

TEST(PriorityWeightsTest, ConfiguredWeightsReplaceTheDefaults) {
  model::QueuePolicy policy;
  policy.type = "fairshare";
  policy.priority_weights = Only(1, 2, 3, 4, 5);
  EXPECT_EQ(policy.Weights(), Only(1, 2, 3, 4, 5));
}

}  // namespace
}  // namespace unisched::policy
