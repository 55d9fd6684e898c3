#pragma once
// The scheduling cycle as a pure function: decide(snapshot, now) -> plan.
// The controller builds the snapshot from its state, applies the plan in one
// store transaction, then hands starts and preemptions to the executor. The
// trace simulator (src/sim) calls the very same Decide on a virtual clock.
//
// Per pool (pools in name order), Decide:
//   1. prioritizes - multifactor priority of every pending job (policy/priority.h),
//                    then orders by priority, submit time, id
//   2. profiles    - per-node availability over time from running jobs' wall-time
//                    ends (policy/profile.h)
//   3. walks the jobs in order; for each:
//      admit   - quotas and concurrency caps (policy/quota.h); an over-limit job
//                waits without holding anything up
//      start   - if it fits now for its whole wall time without touching a
//                reservation: placed (model::Fit), profile and tallies updated
//      preempt - else, if its queue may preempt: the fewest lowest-priority,
//                most recently started preemptible jobs that make room
//      reserve - else, per the pool's backfill mode: fcfs stops the pool here;
//                easy reserves for the first blocked job; conservative for
//                every blocked job up to reservation_depth. A reservation is
//                the job's earliest start in the profile (estimated_start).
//   4. explains    - every job left pending gets ordered reasons
// docs/scheduling-cycle.md and docs/policy/*.md describe each rule.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "unisched/common/time.h"
#include "unisched/model/cluster.h"
#include "unisched/model/fit.h"
#include "unisched/model/job.h"
#include "unisched/policy/profile.h"
#include "unisched/policy/quota.h"

namespace unisched::scheduler {

// What a cycle knows of any job, pending or running: who, where, how big.
struct JobFacts {
  model::JobId id = 0;
  std::string queue;
  std::string pool;
  std::string project;
  std::string user;
  int adjustment = 0;  // the job's own `priority`
  Timestamp submitted_at{};
  model::ResourceRequest resources;  // walltime_seconds 0: no limit
  // How long it is predicted to run, in seconds (0: no prediction), for
  // pools that plan with predictions (PoolSpec::predict_run_times): its
  // reservation and the hole it may backfill into are that long, and a
  // running job that outlives it is planned to end later by steps
  // (policy::CorrectedPrediction). The wall-time request still bounds the
  // real run. The caller predicts (policy::RunTimePredictor); Decide only
  // plans with it.
  int64_t predicted_run_seconds = 0;
};
// A job's facts as the cycle sees them (the daemon's one conversion).
JobFacts FactsOf(const model::Job& job);

struct PendingJob : JobFacts {
  model::Labels constraints;
  std::vector<model::JobId> preempted_by;  // it never preempts these
  // Its reservation from the previous cycle (conservative pools): held for it
  // while the jobs before it are placed, so it only ever moves earlier.
  std::optional<Timestamp> reserved_start;
  std::vector<std::string> reserved_nodes;
};

struct RunningJob : JobFacts {
  model::Allocation allocation;
  Timestamp started_at{};
  // When its resources are free at the latest: start + wall time, or, while
  // it is being preempted or cancelled, when its kill grace ends. An end in
  // the past (a job overrunning into its kill grace) counts as now.
  Timestamp expected_end = Timestamp::max();
  std::optional<model::JobId> preempting_for;  // being stopped for this job
  bool stopping = false;                       // being cancelled: never a victim
};
// A job started at `started_at` on `allocation`: its facts, and its end
// expected at start + wall time (never, without a wall time). The daemon's
// controller and the trace simulator both make running jobs this way.
RunningJob StartedJob(JobFacts facts, model::Allocation allocation, Timestamp started_at);

// What holds quota and concurrency without being a job: an API sandbox
// (docs/sandboxes.md). It counts in max_concurrency and the quotas of its
// scope; it holds no node resources the scheduler places.
struct QuotaHolder {
  std::string queue, project, user;
  policy::Amount amount;
};

// An EASY or conservative pool's availability profile as a pass left it
// (Plan::profile): each of its nodes' timelines, with the running jobs and
// that pass's starts held in it, and (conservative) its reservations; an
// EASY pass makes its reservation again each time.
struct PoolProfile {
  std::string pool;
  Timestamp made_at{};                          // the pass's now
  std::vector<policy::NodeTimeline> timelines;  // per node of the pool, in the pool's order
};

// Everything a cycle may look at, by value.
struct Snapshot {
  std::vector<model::NodeUsage> nodes;
  std::vector<PendingJob> pending;
  std::vector<RunningJob> running;
  std::vector<QuotaHolder> quota_holders{};
  // Fairshare factor per (project, user) of pending and running jobs, from
  // policy::FairshareFactor; missing pairs count as 1 (no usage).
  std::map<std::pair<std::string, std::string>, double> fairshare;
  // Per project with a budget: its use in the current period. A project
  // missing here has used nothing.
  std::map<std::string, policy::BudgetUse> budget_use;
  // false: only starts and preemptions are computed (no reasons, factors or
  // estimates), as the simulator needs.
  bool explain = true;
  // Conservative pools: true places jobs that hold a previous reservation
  // again (each can only move earlier); false leaves them where they are
  // unless their start has come. The daemon moves them every cycle; the
  // simulator only when a job ends, as the reference simulator does.
  bool move_reservations = true;
  // Optional, for a caller that keeps its queue in order (the trace replay,
  // whose FIFO queue's priorities never change): every index of `pending`
  // once, in the order Decide would rank them (priority, then submission,
  // then id), all of them in one pool. The caller vouches for it; one whose
  // priorities move with time (an age weight) or differ by fairshare must
  // not give it. Decide then takes the jobs in this order without ranking
  // them, one at a time as the walk reaches them; with `explain` false a
  // FCFS pool's walk stops at its first blocked job, so a pass costs what it
  // starts, not the queue behind it (docs/scheduling-cycle.md).
  std::vector<uint32_t> pending_order{};
  // At most this many jobs of each pool are looked at (0: every one): the
  // walk stops there and the rest stay as they are (no reasons, no
  // reservations). The daemon's event passes (docs/scheduling-cycle.md,
  // "Full passes and event passes") offer the head of the queue and stop
  // at this depth, as Slurm's main loop stops at default_queue_depth.
  int max_considered = 0;
  // Fill Plan::order: the daemon keeps the order of a full pass for the
  // event passes after it.
  bool return_order = false;
  // Optional, for a caller that replays a trace: the profile the previous
  // Decide returned (Plan::profile), handed back only when nothing has
  // changed since but that plan's starts and reservations applied, pending
  // jobs added, running jobs gone at their expected end, and the running
  // jobs in ended_early gone before it. The caller vouches for it, as for
  // pending_order. An EASY or conservative pass in the caller's order that
  // explains nothing starts from it, with ended_early's room given back from
  // now, instead of building the profile from the running jobs (and, for
  // conservative, holding every previous reservation again), which gives
  // the same profile: a conservative arrival's pass then costs the new job's
  // placement, not the queue's. Any other pass ignores it (docs/simulate.md).
  std::shared_ptr<const PoolProfile> previous_profile;
  std::vector<RunningJob> ended_early;
  // Fill Plan::profile (an EASY or conservative pool in the caller's order).
  bool keep_profile = false;
};

struct Start {
  model::JobId job = 0;
  model::Allocation allocation;
};

struct Preemption {
  model::JobId victim = 0;
  model::JobId preemptor = 0;
  int grace_seconds = 0;  // SIGTERM, then SIGKILL after this long
  bool requeue = true;    // back to PENDING (else CANCELLED), per the victim's queue
};

// A reservation the cycle made or kept: the job's earliest start and nodes.
struct Reservation {
  model::JobId job = 0;
  Timestamp start{};
  std::vector<std::string> nodes;
};

struct CycleReport {
  // order: priorities and sorting; fit: placing jobs now; reserve: profiles
  // and reservations (these three only with Snapshot::explain); total: the
  // whole cycle.
  std::chrono::nanoseconds order{0}, fit{0}, reserve{0}, total{0};
  int considered = 0;
  int started = 0;
  int reservations = 0;
  int preempted = 0;
  // Jobs the walk never looked at: passed over (with a kept order,
  // Snapshot::pending_order), or behind where it stopped (a blocked FCFS
  // pool without reasons, an event pass's depth).
  int passed_over = 0;
};

struct Plan {
  std::vector<Start> starts;
  std::vector<Preemption> preemptions;
  // Every reservation of the cycle (also when !snapshot.explain), to hand
  // back as PendingJob::reserved_* next cycle.
  std::vector<Reservation> reservations;
  // Every pending job not started this cycle (when snapshot.explain).
  model::PendingInfos pending;
  // With Snapshot::return_order: the jobs left pending, as indices into
  // Snapshot::pending, in the order the walk took them (pools in name
  // order, each in its priority order), those it never reached last.
  std::vector<uint32_t> order;
  // With Snapshot::keep_profile: the pool's profile as the pass left it.
  std::shared_ptr<const PoolProfile> profile;
  CycleReport report;
};

// The static policy a scheduler works by: queues (priority weights, quotas,
// preemption), pools (backfill mode), projects (quotas, shares).
struct SchedulerConfig {
  std::vector<model::QueueSpec> queues;
  std::vector<model::PoolSpec> pools;
  std::vector<model::ProjectPolicy> projects;
  static SchedulerConfig From(const model::ClusterSpec& cluster);
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerConfig config = {});
  // The lookup maps point into config_: a copy would point into the
  // original; a move keeps the vectors' storage and so stays valid.
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  Scheduler(Scheduler&&) = default;
  Scheduler& operator=(Scheduler&&) = default;

  // Pure: same snapshot and now, same plan.
  Plan Decide(const Snapshot& snapshot, Timestamp now) const;

  const SchedulerConfig& Config() const { return config_; }

 private:
  SchedulerConfig config_;
  std::map<std::string, const model::QueueSpec*, std::less<>> queues_;
  std::map<std::string, const model::PoolSpec*, std::less<>> pools_;
  std::map<std::string, const model::ProjectPolicy*, std::less<>> projects_;
  // The queues and projects that set a quota, cap or budget: a cycle
  // tallies only the jobs whose limits a check reads (SchedulerState::Tallied).
  std::set<std::string, std::less<>> limited_queues_, limited_projects_;
};

}  // namespace unisched::scheduler
