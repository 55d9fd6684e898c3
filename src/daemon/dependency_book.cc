#include "daemon/dependency_book.h"

#include <spdlog/spdlog.h>

namespace unisched::daemon {

std::optional<model::JobState> DependencyBook::EndedState(model::JobId id) {
  asked_.insert(id);
  if (auto it = ended_.find(id); it != ended_.end()) return it->second;
  auto stored = store_.GetJob(id);
  if (!stored.ok()) {
    if (stored.error().kind == ErrorKind::kNotFound) {
      ended_.emplace(id, std::nullopt);
      return std::nullopt;
    }
    spdlog::warn("dependency: cannot read job {} from the store: {}", id, stored.error().message);
    return model::JobState::kPending;
  }
  // Only an end is kept: a job not active yet not ended is one whose
  // change the store has not caught up with (read again next cycle).
  if (model::IsTerminal(stored->state)) ended_.emplace(id, stored->state);
  return stored->state;
}

std::optional<model::JobArray> DependencyBook::EndedArray(model::JobId id) {
  asked_.insert(id);
  if (auto it = arrays_.find(id); it != arrays_.end()) return it->second;
  auto stored = store_.GetJob(id);
  if (!stored.ok() && stored.error().kind != ErrorKind::kNotFound) return std::nullopt;  // asked again next cycle
  std::optional<model::JobArray> array = stored.ok() ? stored->array : std::nullopt;
  arrays_.emplace(id, array);
  return array;
}

void DependencyBook::Prune() {
  for (auto it = ended_.begin(); it != ended_.end();) {
    it = asked_.count(it->first) ? std::next(it) : ended_.erase(it);
  }
  for (auto it = arrays_.begin(); it != arrays_.end();) {
    it = asked_.count(it->first) ? std::next(it) : arrays_.erase(it);
  }
  asked_.clear();
}

void DependencyBook::NoteWaiting(const model::Job& job) {
  for (const auto& term : job.dependency.terms) {
    for (model::JobId id : term.jobs) waiting_.emplace(id, job.id);
  }
}

std::vector<model::JobId> DependencyBook::TakeWaiting(model::JobId id, bool ended) {
  auto [first, last] = waiting_.equal_range(id);
  std::vector<model::JobId> out;
  for (auto it = first; it != last; ++it) out.push_back(it->second);
  if (ended) waiting_.erase(first, last);
  return out;
}

void DependencyBook::PruneWaiting(const std::function<bool(model::JobId)>& still_waits) {
  std::erase_if(waiting_, [&](const auto& entry) { return !still_waits(entry.second); });
}

}  // namespace unisched::daemon
