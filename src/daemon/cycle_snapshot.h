#pragma once
// The first half of the controller's cycle driver: what the scheduler is
// shown, built from the controller's live state as a pure function (the
// second half, applying the plan, changes that state and stays in the
// controller). Pure so the choice of what a cycle sees is tested with
// tables of jobs and a fixed time.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon/run_time_book.h"
#include "unisched/common/time.h"
#include "unisched/config/config.h"
#include "unisched/model/job.h"
#include "unisched/policy/fairshare.h"
#include "unisched/scheduler/scheduler.h"
#include "unisched/service/planes.h"

namespace unisched::daemon {

struct CycleState {
  const std::map<model::JobId, model::Job>& active;  // PENDING, HELD and RUNNING jobs
  const std::vector<model::NodeUsage>& nodes;
  const policy::DecayedUsage& fairshare_usage;
  std::map<std::string, policy::BudgetUse> budget_use;
  const service::SandboxHolds& sandbox_holds;
  // The last cycle's reservations, handed back (conservative pools keep them).
  const std::unordered_map<model::JobId, scheduler::Reservation>& reservations;
  size_t pending_hint = 0;  // about how many jobs are PENDING (sizes the vector once)
  // Set when a pool plans with predicted run times: every pending and
  // running job's prediction (made once per job, then kept), which only
  // such pools read.
  RunTimeBook* run_times = nullptr;
  // How a job that is not active ended (DependencyBook::EndedState), for
  // the dependencies of pending jobs; unset: as if no such job existed.
  std::function<std::optional<model::JobState>(model::JobId)> ended_state{};
  // The array of a job that is not active (DependencyBook::EndedArray), for
  // aftercorr; unset: none.
  std::function<std::optional<model::JobArray>(model::JobId)> ended_array{};
  // An event pass (docs/scheduling-cycle.md): only these PENDING jobs are
  // offered, and no running job is shown (the controller lends the kept
  // ones: KeptOrder), instead of every active job; an array offers at most
  // `most_tasks` of its waiting tasks (0: as many as it may run).
  const std::vector<const model::Job*>* candidates = nullptr;
  int64_t most_tasks = 0;
};

struct CycleSnapshot {
  scheduler::Snapshot snapshot;
  // PENDING jobs not offered to the scheduler, with their pending reason:
  // waiting out a retry backoff (until when) or for their dependency (for
  // which jobs; docs/dependencies.md).
  std::vector<std::pair<model::JobId, model::PendingInfo>> held_back;
  // PENDING jobs whose dependency can never hold, with why: cancelled, or
  // left waiting, per scheduler.kill_invalid_dependency (the controller's
  // choice). Not offered to the scheduler either.
  std::vector<std::pair<model::JobId, std::string>> never_satisfied;
  // Arrays with tasks offered: (the array's id, its first offered task's
  // id). An array's own pending reason is that task's, as squeue shows
  // an array's waiting tasks with the reason of the first.
  std::vector<std::pair<model::JobId, model::JobId>> first_offered_task;
  // The job each of snapshot.pending came from (an array's task: the
  // array), index for index.
  std::vector<const model::Job*> offered_from;
};

// The pending reason of a job held back: one reason, in `pool`.
model::PendingInfo HeldBackInfo(const std::string& pool, std::string code, std::string message);

CycleSnapshot BuildCycleSnapshot(const config::Config& config, const CycleState& state, Timestamp now);

// A RUNNING job as the scheduler sees it: while it is being stopped
// (cancelled or preempted) its room is free by the end of its kill grace.
// `predicted_run_seconds`: its prediction (RunTimeBook), 0 for none.
scheduler::RunningJob SnapshotOfRunning(const config::Config& config, const model::Job& job, Timestamp now,
                                        int64_t predicted_run_seconds = 0);

}  // namespace unisched::daemon
