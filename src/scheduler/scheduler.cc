// The scheduling cycle: order, admit, fit, reasons (see scheduler.h and
// docs/scheduling-cycle.md). Works on a private copy of the nodes so that
// every start decided in a cycle is seen by the fits after it.

#include "unisched/scheduler/scheduler.h"

#include <algorithm>
#include <utility>

namespace unisched::scheduler {
namespace {

using Clock = std::chrono::steady_clock;

// The cycle's view of the nodes: a copy of the snapshot's, updated with each
// start as it is decided.
class WorkingNodes {
 public:
  explicit WorkingNodes(const std::vector<model::NodeUsage>& nodes) : nodes_(nodes) {
    for (auto& node : nodes_) {
      // A snapshot built by hand may leave gpu_busy short; missing means free.
      node.gpu_busy.resize(node.spec.gpus.size(), false);
    }
    // Name order, so the candidate list (and so the plan) does not depend on
    // the order the snapshot happened to list nodes in.
    std::stable_sort(nodes_.begin(), nodes_.end(),
                     [](const model::NodeUsage& a, const model::NodeUsage& b) { return a.spec.name < b.spec.name; });
    for (size_t i = 0; i < nodes_.size(); ++i) {
      by_pool_[nodes_[i].spec.pool].push_back(&nodes_[i]);
      index_.emplace(nodes_[i].spec.name, i);  // first wins, as in Fit
    }
  }
  // by_pool_ points into nodes_.
  WorkingNodes(const WorkingNodes&) = delete;
  WorkingNodes& operator=(const WorkingNodes&) = delete;

  const std::vector<const model::NodeUsage*>& Pool(const std::string& pool) const {
    static const std::vector<const model::NodeUsage*> kNone;
    auto it = by_pool_.find(pool);
    return it == by_pool_.end() ? kNone : it->second;
  }

  void Apply(const model::Allocation& allocation) {
    for (const auto& share : allocation) {
      auto it = index_.find(share.node);
      if (it != index_.end()) nodes_[it->second].Apply(share, +1);
    }
  }

 private:
  std::vector<model::NodeUsage> nodes_;
  std::map<std::string, std::vector<const model::NodeUsage*>> by_pool_;
  std::map<std::string, size_t> index_;
};

// Phase 1: pending jobs grouped by pool (pools in name order), each group in
// policy order. Sorting by id first makes the result independent of the
// snapshot's order even for a policy that leaves ties.
std::map<std::string, std::vector<const PendingJob*>> Order(const std::vector<PendingJob>& pending,
                                                            const OrderingPolicy& ordering, Timestamp now) {
  std::map<std::string, std::vector<const PendingJob*>> by_pool;
  for (const auto& job : pending) by_pool[job.pool].push_back(&job);
  for (auto& [pool, jobs] : by_pool) {
    std::sort(jobs.begin(), jobs.end(), [](const PendingJob* a, const PendingJob* b) { return a->id < b->id; });
    std::stable_sort(jobs.begin(), jobs.end(),
                     [&](const PendingJob* a, const PendingJob* b) { return ordering.Before(*a, *b, now); });
  }
  return by_pool;
}

// Phase 2: the first admission check that says wait, if any.
std::optional<model::PendingReason> Admit(const std::vector<std::unique_ptr<AdmissionCheck>>& checks,
                                          const PendingJob& job, const Snapshot& snapshot,
                                          const std::vector<Start>& decided, Timestamp now) {
  for (const auto& check : checks) {
    if (auto reason = check->Check(job, snapshot, decided, now)) return reason;
  }
  return std::nullopt;
}

std::string JobsAhead(int n, const std::string& pool) {
  return std::to_string(n) + (n == 1 ? " job ahead in " : " jobs ahead in ") + pool;
}

}  // namespace

bool PriorityFifoOrdering::Before(const PendingJob& a, const PendingJob& b, Timestamp /*now*/) const {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.queue_tier != b.queue_tier) return a.queue_tier > b.queue_tier;
  if (a.submitted_at != b.submitted_at) return a.submitted_at < b.submitted_at;
  return a.id < b.id;
}

Scheduler::Scheduler(std::unique_ptr<OrderingPolicy> ordering) : ordering_(std::move(ordering)) {
  if (!ordering_) ordering_ = std::make_unique<PriorityFifoOrdering>();
}

void Scheduler::AddAdmissionCheck(std::unique_ptr<AdmissionCheck> check) {
  if (check) admission_checks_.push_back(std::move(check));
}

Plan Scheduler::Decide(const Snapshot& snapshot, Timestamp now) const {
  const auto cycle_start = Clock::now();
  Plan plan;
  WorkingNodes nodes(snapshot.nodes);

  auto t = Clock::now();
  const auto ordered = Order(snapshot.pending, *ordering_, now);
  plan.report.order = Clock::now() - t;

  for (const auto& [pool, jobs] : ordered) {
    int waiting_ahead = 0;  // jobs of this pool ordered before the current one that stay pending
    // Requests that did not fit since the last start in this pool. Capacity
    // only shrinks during a cycle, so an identical request cannot fit later
    // either, and until the next start its reasons (which quote free
    // amounts) are the same: reuse them instead of fitting and formatting
    // again. With thousands of identical agent jobs waiting, this keeps a
    // saturated pool's cycle cheap.
    struct FailedShape {
      const PendingJob* job;
      std::vector<model::PendingReason> reasons;
    };
    std::vector<FailedShape> failed_shapes;
    constexpr size_t kMaxFailedShapes = 64;
    for (const PendingJob* job : jobs) {
      ++plan.report.considered;
      std::vector<model::PendingReason> reasons;

      t = Clock::now();
      std::optional<model::PendingReason> wait = Admit(admission_checks_, *job, snapshot, plan.starts, now);
      plan.report.admit += Clock::now() - t;

      const FailedShape* known_failure = nullptr;
      if (!wait) {
        for (const auto& f : failed_shapes) {
          if (f.job->resources == job->resources && f.job->constraints == job->constraints) {
            known_failure = &f;
            break;
          }
        }
      }
      if (wait) {
        reasons.push_back(std::move(*wait));
      } else if (known_failure) {
        reasons = known_failure->reasons;
      } else {
        // Phase 3: place it on the nodes as this cycle has left them.
        t = Clock::now();
        model::FitResult fit = model::Fit(nodes.Pool(pool), job->resources, job->constraints, pool);
        if (fit.allocation) nodes.Apply(*fit.allocation);
        plan.report.fit += Clock::now() - t;
        if (fit.allocation) {
          plan.starts.push_back({job->id, std::move(*fit.allocation)});
          ++plan.report.started;
          failed_shapes.clear();  // what is free has changed
          continue;
        }
        reasons = std::move(fit.reasons);
        if (failed_shapes.size() < kMaxFailedShapes) failed_shapes.push_back({job, reasons});
      }

      // Phase 4: its own reasons first, then the queue position.
      if (waiting_ahead > 0) reasons.push_back({"Priority", JobsAhead(waiting_ahead, pool)});
      plan.pending_reasons[job->id] = std::move(reasons);
      ++waiting_ahead;
    }
  }

  plan.report.total = Clock::now() - cycle_start;
  return plan;
}

}  // namespace unisched::scheduler
