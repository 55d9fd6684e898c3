#pragma once
// The daemon's memory of how the jobs that waiting jobs depend on ended
// (docs/dependencies.md). An active job's state is the controller's; a job
// that ended is recorded here as it ends, so the next cycle releases its
// dependants at once (before the batch that ends it is committed, the store
// would still say RUNNING); one that ended before this daemon started is
// read from the store, once. The book keeps only what waiting jobs name:
// each cycle asks about those, then prunes the rest. Owned by JobLifecycle
// on the control thread.

#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "unisched/model/job.h"
#include "unisched/store/store.h"

namespace unisched::daemon {

class DependencyBook {
 public:
  explicit DependencyBook(store::Store& store) : store_(store) {}

  // A job reached a terminal state.
  void Ended(model::JobId id, model::JobState state) { ended_[id] = state; }
  // How a job that is not active ended: as recorded, else as stored;
  // nullopt when there is no such job (never submitted, or removed by the
  // store's retention). A store that cannot answer gives PENDING (the
  // dependant waits, and a later cycle asks again): never a wrong end.
  std::optional<model::JobState> EndedState(model::JobId id);
  // The array of a job that is not active (its indices and first task id),
  // for aftercorr (docs/arrays.md): read from the store once; nullopt when
  // there is no such job or it is no array.
  std::optional<model::JobArray> EndedArray(model::JobId id);
  // Forgets every recorded end no EndedState call asked about since the
  // last Prune.
  void Prune();
  size_t size() const { return ended_.size(); }

  // Who waits on whom: a waiting job whose dependency names other jobs is
  // told (by TakeWaiting) when one of them starts or ends, so that a deep
  // queue's event passes offer it (daemon/kept_order.h).
  void NoteWaiting(const model::Job& job);
  // The jobs waiting on `id`; forgotten once it has `ended`.
  std::vector<model::JobId> TakeWaiting(model::JobId id, bool ended);
  // Forgets the waiting jobs for which `still_waits` is false (they
  // started, ended, or named a job that had ended before they came).
  void PruneWaiting(const std::function<bool(model::JobId)>& still_waits);

 private:
  store::Store& store_;
  std::unordered_map<model::JobId, std::optional<model::JobState>> ended_;
  std::unordered_map<model::JobId, std::optional<model::JobArray>> arrays_;
  std::unordered_set<model::JobId> asked_;
  std::unordered_multimap<model::JobId, model::JobId> waiting_;  // named job -> job waiting on it
};

}  // namespace unisched::daemon
