#include "daemon/kept_order.h"

#include <algorithm>
#include <unordered_set>

namespace unisched::daemon {

void KeptOrder::Rebuild(const std::vector<const model::Job*>& offered_from, const std::vector<uint32_t>& order) {
  by_pool_.clear();
  changed_.clear();
  started_.clear();
  // An array's offered tasks come one after another in the order (same
  // priority, index order): the array is kept once, where its first is.
  model::JobId last_array = 0;
  // The order is pool by pool: one lookup per pool, not per job.
  const std::string* pool = nullptr;
  std::vector<model::JobId>* ids = nullptr;
  for (uint32_t index : order) {
    const model::Job* job = offered_from[index];
    if (job->array) {
      if (job->id == last_array) continue;
      last_array = job->id;
    }
    if (!pool || *pool != job->pool) {
      pool = &job->pool;
      ids = &by_pool_[job->pool];
    }
    ids->push_back(job->id);
  }
  built_ = true;
}

std::vector<const model::Job*> KeptOrder::Candidates(const ActiveJobs& active, size_t depth,
                                                     const std::vector<model::JobId>& reserved) const {
  std::vector<const model::Job*> out;
  std::unordered_set<model::JobId> taken;
  auto take = [&](model::JobId id) {
    auto it = active.find(id);
    if (it == active.end() || it->second.state != model::JobState::kPending) return false;
    if (!taken.insert(id).second) return false;
    out.push_back(&it->second);
    return true;
  };
  for (const auto& [pool, ids] : by_pool_) {
    size_t offered = 0;
    for (size_t i = 0; i < ids.size() && offered < depth; ++i) {
      if (take(ids[i])) ++offered;
    }
  }
  for (model::JobId id : changed_) take(id);
  for (model::JobId id : reserved) take(id);
  return out;
}

void KeptOrder::Lend(scheduler::Snapshot& snapshot, const ActiveJobs& active, const ShowRunning& show) {
  // Tens of thousands of ids, each looked up. The kept jobs are in id order
  // (a full pass walks the active jobs so), so each search starts where the
  // last one ended and steps forward a little before it falls back to a
  // search from the root.
  auto it = active.begin();
  auto find = [&](model::JobId id) -> const model::Job* {
    constexpr int kSteps = 8;
    for (int step = 0; step < kSteps && it != active.end() && it->first < id; ++step) ++it;
    if (it == active.end() || it->first != id) it = active.lower_bound(id);
    return it != active.end() && it->first == id ? &it->second : nullptr;
  };
  auto runs = [](const model::Job* job) { return job && job->state == model::JobState::kRunning && !job->array; };
  std::erase_if(running_, [&](scheduler::RunningJob& kept) {
    const model::Job* job = find(kept.id);
    if (!runs(job) || job->started_at != kept.started_at) return true;  // ended, or ran again since
    if (job->cancel_requested || job->preempting_for || job->requeue_requested) kept = show(*job);
    return false;
  });
  // Started since the last lending: not kept yet.
  std::sort(started_.begin(), started_.end());
  started_.erase(std::unique(started_.begin(), started_.end()), started_.end());
  for (model::JobId id : started_) {
    auto job = active.find(id);
    if (job != active.end() && runs(&job->second)) running_.push_back(show(job->second));
  }
  started_.clear();
  snapshot.running = std::move(running_);
  snapshot.fairshare.merge(fairshare_);
}

void KeptOrder::TakeBack(scheduler::Snapshot& snapshot) {
  running_ = std::move(snapshot.running);
  snapshot.running.clear();
  fairshare_ = std::move(snapshot.fairshare);
  snapshot.fairshare.clear();
}

}  // namespace unisched::daemon
