// Multifactor priority: see the formula in priority.h and docs/policy/priority.md.

#include "unisched/policy/priority.h"

#include <algorithm>
#include <cmath>

namespace unisched::policy {
namespace {

int64_t Term(double weight, double factor) {
  return static_cast<int64_t>(std::llround(weight * std::clamp(factor, 0.0, 1.0)));
}

}  // namespace

PriorityFactors ComputePriority(const model::PriorityWeights& weights, const PriorityInputs& in, Timestamp now) {
  PriorityFactors f;
  f.fairshare = Term(weights.fairshare, in.fairshare_factor);
  const double waited_seconds = std::max<double>(0, std::chrono::duration<double>(now - in.submitted_at).count());
  const double max_age_seconds = weights.max_age_hours * 3600.0;
  f.age = Term(weights.age, max_age_seconds > 0 ? waited_seconds / max_age_seconds : 1.0);
  f.tier = Term(weights.tier, in.max_tier_in_pool > 0 ? static_cast<double>(in.tier) / in.max_tier_in_pool : 0.0);
  f.size = Term(weights.size, in.pool_cpus > 0 ? static_cast<double>(in.job_cpus) / in.pool_cpus : 0.0);
  f.adjustment = in.adjustment;
  return f;
}

}  // namespace unisched::policy
