#pragma once
// Multifactor priority (docs/policy/priority.md): pure arithmetic on a job's
// facts, the queue's weights and `now`.
//
//   priority = round(w_fairshare * F) + round(w_age * A) + round(w_tier * T)
//            + round(w_size * S) + adjustment
//
// F in [0,1]: the fairshare factor of the job's (project, user), see fairshare.h.
// A = min(1, waited / max_age): grows linearly while the job waits.
// T = queue tier / highest tier in the pool (0 when every tier is 0).
// S = cpus the job asks for (all nodes) / cpus of its pool: large jobs first,
//     since they are the hardest to place and backfill favours small ones.
// adjustment: the job's own `priority` (0 or less for users, any for admins).

#include <cstdint>
#include <string>

#include "unisched/common/time.h"
#include "unisched/model/cluster.h"
#include "unisched/model/job.h"

namespace unisched::policy {

using model::PriorityFactors;

struct PriorityInputs {
  double fairshare_factor = 1;  // in [0,1]
  Timestamp submitted_at{};
  int tier = 0;
  int max_tier_in_pool = 0;
  int64_t job_cpus = 1;   // cpus x nodes
  int64_t pool_cpus = 1;  // all cpus of the pool
  int adjustment = 0;
};

PriorityFactors ComputePriority(const model::PriorityWeights& weights, const PriorityInputs& in, Timestamp now);

}  // namespace unisched::policy
