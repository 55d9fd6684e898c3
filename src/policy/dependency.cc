// Whether a dependency holds (policy/dependency.h).

#include "unisched/policy/dependency.h"

namespace unisched::policy {
namespace {

using model::DependencyType;
using model::JobState;

std::string StateText(JobState state) {
  return std::string(model::ToString(state));
}

// One named job under one term's type.
DependencyCheck CheckJob(DependencyType type, model::JobId id, const std::optional<JobState>& state) {
  const std::string job = "job " + std::to_string(id);
  const std::string type_name(model::ToString(type));
  if (!state) return {DependencyStatus::kNever, job + " does not exist (" + type_name + ")"};
  const bool ended = model::IsTerminal(*state);
  const std::string now = "; it is " + StateText(*state) + ")";
  switch (type) {
    case DependencyType::kAfter:
      if (*state != JobState::kPending && *state != JobState::kHeld) return {};
      return {DependencyStatus::kWaiting, job + " to start (after" + now};
    case DependencyType::kAfterAny:
      if (ended) return {};
      return {DependencyStatus::kWaiting, job + " to end (afterany" + now};
    case DependencyType::kAfterOk:
      if (*state == JobState::kCompleted) return {};
      if (ended) return {DependencyStatus::kNever, job + " ended " + StateText(*state) + "; afterok needs COMPLETED"};
      return {DependencyStatus::kWaiting, job + " to end COMPLETED (afterok" + now};
    case DependencyType::kAfterNotOk:
      if (*state == JobState::kCompleted) {
        return {DependencyStatus::kNever, job + " ended COMPLETED; afternotok needs it to end otherwise"};
      }
      if (ended) return {};
      return {DependencyStatus::kWaiting, job + " to end other than COMPLETED (afternotok" + now};
    case DependencyType::kSingleton:
    case DependencyType::kAfterCorr:  // task by task, when the array is offered (daemon/cycle_snapshot.cc)
      break;
  }
  return {};
}

void Append(std::string& list, const std::string& item) {
  list += (list.empty() ? "" : "; ") + item;
}

}  // namespace

DependencyCheck CheckDependency(const model::Dependency& dependency, const JobStateLookup& state_of,
                                model::JobId singleton_blocker) {
  if (dependency.empty()) return {};
  std::string waiting, never;
  size_t met_terms = 0, never_terms = 0;
  for (const auto& term : dependency.terms) {
    // A term holds when every job it names does (Slurm: afterok:1:2 is
    // afterok:1,afterok:2).
    DependencyStatus term_status = DependencyStatus::kMet;
    if (term.type == DependencyType::kSingleton) {
      if (singleton_blocker != 0) {
        term_status = DependencyStatus::kWaiting;
        Append(waiting, "job " + std::to_string(singleton_blocker) + " of the same user and name to end (singleton)");
      }
    }
    for (model::JobId id : term.jobs) {
      const DependencyCheck one = CheckJob(term.type, id, state_of(id));
      if (one.status == DependencyStatus::kNever) {
        term_status = DependencyStatus::kNever;
        Append(never, one.why);
      } else if (one.status == DependencyStatus::kWaiting) {
        if (term_status == DependencyStatus::kMet) term_status = DependencyStatus::kWaiting;
        Append(waiting, one.why);
      }
    }
    met_terms += term_status == DependencyStatus::kMet;
    never_terms += term_status == DependencyStatus::kNever;
  }
  const size_t terms = dependency.terms.size();
  if (dependency.any) {
    if (met_terms > 0) return {};
    if (never_terms == terms) return {DependencyStatus::kNever, never};
    return {DependencyStatus::kWaiting, "one of: " + waiting};
  }
  if (never_terms > 0) return {DependencyStatus::kNever, never};
  if (met_terms == terms) return {};
  return {DependencyStatus::kWaiting, waiting};
}

}  // namespace unisched::policy
