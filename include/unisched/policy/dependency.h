#pragma once
// Whether a job's dependency holds, may still hold, or never can
// (docs/dependencies.md). Pure: the states of the jobs it names come in
// through a lookup, and so does the earlier job a singleton waits for.

#include <functional>
#include <optional>
#include <string>

#include "unisched/model/dependency.h"
#include "unisched/model/job.h"

namespace unisched::policy {

enum class DependencyStatus {
  kMet,      // the job may be scheduled
  kWaiting,  // not yet: a named job has not started or ended as asked
  kNever,    // it cannot hold any more (a job it needs COMPLETED failed, or is gone)
};

struct DependencyCheck {
  DependencyStatus status = DependencyStatus::kMet;
  // What it waits for, or why it can never hold: "job 12 to end COMPLETED
  // (afterok; it is RUNNING)". Empty when met.
  std::string why;
};

// The state of a named job now; nullopt: there is no such job (never
// submitted, or removed by the store's retention).
using JobStateLookup = std::function<std::optional<model::JobState>(model::JobId)>;

// `singleton_blocker`: an earlier job of the same user and name that has
// not ended (0: none), which a singleton term waits for.
//
// Per named job and type (terminal: COMPLETED, FAILED, CANCELLED, TIMEOUT,
// NODE_FAIL):
//   after       met once it left PENDING/HELD (started, or ended unstarted)
//   afterany    met once terminal
//   afterok     met when COMPLETED; never when otherwise terminal
//   afternotok  met when terminal but not COMPLETED; never when COMPLETED
// A missing job is never met. Terms joined by ',' are met when all are and
// never when one is never; joined by '?', met when one is and never when all
// are never.
DependencyCheck CheckDependency(const model::Dependency& dependency, const JobStateLookup& state_of,
                                model::JobId singleton_blocker = 0);

}  // namespace unisched::policy
