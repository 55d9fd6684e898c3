#pragma once
// What an event pass offers the scheduler (docs/scheduling-cycle.md, "Full
// passes and event passes"). A full pass ranks every pending job and
// explains each; it runs on every tick. Between ticks, a pass woken by a
// submission or an end looks only at the head of each pool's queue: the
// order the last full pass left, cut at a depth, plus the jobs that
// changed since (submitted, requeued, released, updated), which Decide
// ranks among them. Its cost grows with the depth, with what changed and
// with the running jobs, never with the queue behind.
//
// Kept as job ids and checked against the active jobs when used: a job
// that started, ended or left PENDING since is passed over, so the order
// never has to be told what left it. The running jobs and fair-share
// factors the full pass showed the scheduler are kept too, and lent to
// each event pass (moved in and back, not copied): tens of thousands of
// running jobs would otherwise be converted again on every pass.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "unisched/model/job.h"
#include "unisched/scheduler/scheduler.h"

namespace unisched::daemon {

class KeptOrder {
 public:
  using ActiveJobs = std::map<model::JobId, model::Job>;

  // From a full pass: `offered_from` (CycleSnapshot::offered_from) and the
  // order its plan left pending jobs in (Plan::order, indices into
  // offered_from). Forgets what changed and started before it. Then
  // TakeBack its snapshot.
  void Rebuild(const std::vector<const model::Job*>& offered_from, const std::vector<uint32_t>& order);
  // Since the last rebuild: a job that may wait in a new place (submitted,
  // requeued, released, updated, an array with a task slot free) or that
  // started.
  void NoteChanged(model::JobId job) { changed_.push_back(job); }
  void NoteStarted(model::JobId job) { started_.push_back(job); }

  bool built() const { return built_; }
  size_t changed() const { return changed_.size(); }

  // The PENDING jobs an event pass offers: per pool the first `depth`
  // still PENDING in the kept order, then every changed job and every job
  // in `reserved` (those holding a reservation: a conservative pool keeps
  // their room from the jobs before them) that is PENDING; each once.
  std::vector<const model::Job*> Candidates(const ActiveJobs& active, size_t depth,
                                            const std::vector<model::JobId>& reserved = {}) const;

  // How the daemon shows a running job to the scheduler (SnapshotOfRunning).
  using ShowRunning = std::function<scheduler::RunningJob(const model::Job&)>;
  // Lends an event pass's snapshot the kept running jobs that still run as
  // they did (the same start), shown again by `show` where a stop was
  // asked for since, plus those started since; and the kept fair-share
  // factors beside its own. TakeBack after Decide.
  void Lend(scheduler::Snapshot& snapshot, const ActiveJobs& active, const ShowRunning& show);
  // Keeps the snapshot's running jobs and fair-share factors (a full pass's,
  // or those lent) for the next event pass.
  void TakeBack(scheduler::Snapshot& snapshot);

 private:
  bool built_ = false;
  std::map<std::string, std::vector<model::JobId>> by_pool_;
  std::vector<model::JobId> changed_;
  std::vector<model::JobId> started_;  // since the running jobs were last lent or kept
  std::vector<scheduler::RunningJob> running_;
  std::map<std::pair<std::string, std::string>, double> fairshare_;
};

}  // namespace unisched::daemon
