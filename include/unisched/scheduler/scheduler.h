#pragma once
// The scheduling cycle as a pure function: decide(snapshot, now) -> plan.
// The controller builds the snapshot from its state, applies the plan in one
// store transaction, then hands starts to the executor.
//
// Phases of Decide (each a function in scheduler.cc, timed in the report):
//   1. order    - pending jobs per pool by the ordering policy (priority, then FIFO)
//   2. admit    - admission checks (seam: quotas, concurrency limits come with the policy work)
//   3. fit      - place each admitted job on free nodes, all-or-nothing (model::Fit)
//   4. reasons  - every job left pending gets an ordered list of reasons

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "unisched/common/time.h"
#include "unisched/model/cluster.h"
#include "unisched/model/fit.h"
#include "unisched/model/job.h"

namespace unisched::scheduler {

struct PendingJob {
  model::JobId id = 0;
  std::string queue;
  std::string pool;
  std::string project;
  std::string user;
  int priority = 0;
  int queue_tier = 0;
  Timestamp submitted_at{};
  model::ResourceRequest resources;
  model::Labels constraints;
};

struct RunningJob {
  model::JobId id = 0;
  std::string queue;
  std::string pool;
  std::string project;
  std::string user;
  model::Allocation allocation;
  Timestamp started_at{};
};

// Everything a cycle may look at, by value: nodes with their usage (running
// allocations already applied), pending jobs, running jobs.
struct Snapshot {
  std::vector<model::NodeUsage> nodes;
  std::vector<PendingJob> pending;
  std::vector<RunningJob> running;
};

struct Start {
  model::JobId job = 0;
  model::Allocation allocation;
};

struct CycleReport {
  std::chrono::nanoseconds order{0}, admit{0}, fit{0}, total{0};
  int considered = 0;
  int started = 0;
};

struct Plan {
  std::vector<Start> starts;
  // Every pending job not started this cycle, with its ordered reasons.
  std::map<model::JobId, std::vector<model::PendingReason>> pending_reasons;
  CycleReport report;
};

// Seam: how jobs are ordered within a pool. Returns true if a goes before b.
class OrderingPolicy {
 public:
  virtual ~OrderingPolicy() = default;
  virtual bool Before(const PendingJob& a, const PendingJob& b, Timestamp now) const = 0;
};
// Priority (higher first), then queue tier, then submit time, then id.
class PriorityFifoOrdering final : public OrderingPolicy {
 public:
  bool Before(const PendingJob& a, const PendingJob& b, Timestamp now) const override;
};

// Seam: may this job start now, given what the cycle has already decided?
// Returns a reason to wait, or nullopt. (Quotas and concurrency caps plug in here.)
class AdmissionCheck {
 public:
  virtual ~AdmissionCheck() = default;
  virtual std::optional<model::PendingReason> Check(const PendingJob& job, const Snapshot& snapshot,
                                                    const std::vector<Start>& decided_so_far, Timestamp now) const = 0;
};

class Scheduler {
 public:
  explicit Scheduler(std::unique_ptr<OrderingPolicy> ordering = std::make_unique<PriorityFifoOrdering>());
  void AddAdmissionCheck(std::unique_ptr<AdmissionCheck> check);

  // Pure: same snapshot and now, same plan. A job that does not fit does not
  // stop later jobs of its pool that do (no idle nodes behind a blocked head);
  // reservations that protect the head come with backfill in the policy work.
  Plan Decide(const Snapshot& snapshot, Timestamp now) const;

 private:
  std::unique_ptr<OrderingPolicy> ordering_;
  std::vector<std::unique_ptr<AdmissionCheck>> admission_checks_;
};

}  // namespace unisched::scheduler
