// Choosing preemption victims (docs/policy/preemption.md): the fewest,
// lowest-priority, most recently started preemptible jobs whose room lets a
// job start, then a reprieve for each victim not needed after all.

#include <algorithm>

#include "scheduler/pool_cycle.h"

namespace unisched::scheduler::internal {

std::vector<const RunningJob*> PoolCycle::ChooseVictims(const PendingJob& job, int64_t priority,
                                                        const std::vector<const RunningJob*>& running) {
  struct Candidate {
    const RunningJob* job;
    int64_t priority;
  };
  std::vector<Candidate> candidates;
  for (const RunningJob* r : running) {
    if (r->preempting_for || r->stopping || being_preempted_.count(r->id)) continue;
    const ScopeInfo& scope = Scope(r->queue, r->project, r->user);
    if (!scope.policy->preemptible) continue;
    if (std::find(job.preempted_by.begin(), job.preempted_by.end(), r->id) != job.preempted_by.end()) continue;
    const int64_t p = PriorityOf(scope, r->submitted_at, r->resources, r->adjustment).Total();
    if (p >= priority) continue;
    candidates.push_back({r, p});
  }
  if (candidates.empty()) return {};
  // Lowest priority first; among equals the most recently started (it has
  // lost the least work), then the highest id.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.priority != b.priority) return a.priority < b.priority;
    if (a.job->started_at != b.job->started_at) return a.job->started_at > b.job->started_at;
    return a.job->id > b.job->id;
  });

  // Hypothetical nodes: the pool as it is now, then release victims in order
  // until the job fits.
  std::vector<model::NodeUsage> scratch;
  scratch.reserve(pool_nodes_->size());
  for (const auto* n : *pool_nodes_) scratch.push_back(*n);
  std::map<std::string, size_t, std::less<>> index;
  for (size_t i = 0; i < scratch.size(); ++i) index.emplace(scratch[i].spec.name, i);
  auto apply = [&](const RunningJob& victim, int sign) {
    for (const auto& share : victim.allocation) {
      auto it = index.find(share.node);
      if (it != index.end()) scratch[it->second].Apply(share, sign);
    }
  };
  auto fits = [&] {
    std::vector<const model::NodeUsage*> ptrs;
    ptrs.reserve(scratch.size());
    for (const auto& n : scratch) ptrs.push_back(&n);
    return model::Fit(ptrs, job.resources, job.constraints, pool_name_, /*explain=*/false).allocation.has_value();
  };
  std::vector<const RunningJob*> victims;
  bool enough = false;
  for (const auto& c : candidates) {
    apply(*c.job, -1);
    victims.push_back(c.job);
    if (fits()) {
      enough = true;
      break;
    }
  }
  if (!enough) return {};
  // Reprieve (as Kubernetes does): give back every victim, highest priority
  // first, whose room turns out not to be needed.
  for (size_t i = victims.size(); i-- > 0;) {
    apply(*victims[i], +1);
    if (fits()) {
      victims.erase(victims.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      apply(*victims[i], -1);
    }
  }
  return victims;
}

}  // namespace unisched::scheduler::internal
