// One pool's part of a scheduling cycle: the walk over its pending jobs in
// priority order (scheduler.h lists the steps; docs/scheduling-cycle.md).

#include "scheduler/pool_cycle.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <new>
#include <type_traits>

namespace unisched::scheduler::internal {

const model::QueuePolicy& DefaultQueuePolicy() {
  static const model::QueuePolicy kPolicy;
  return kPolicy;
}

std::string JoinIds(const std::vector<model::JobId>& ids) {
  std::string text;
  for (model::JobId id : ids) text += (text.empty() ? "" : ", ") + std::to_string(id);
  return text;
}

const PoolCycle::ScopeInfo& PoolCycle::Scope(const std::string& queue, const std::string& project,
                                             const std::string& user) {
  // A pool's jobs come from a few queues: the last one's facts are kept.
  if (!last_queue_.policy || !SameShortText(last_queue_.name, queue)) {
    last_queue_.name = queue;  // a view of the job's string, which outlives the cycle
    last_queue_.spec = state_.Queue(queue);
    last_queue_.policy = last_queue_.spec ? &last_queue_.spec->policy : &DefaultQueuePolicy();  // as PolicyOf
    last_queue_.weights = last_queue_.policy->Weights();
  }
  // Only fair share tells one user's jobs from another's: in a queue that
  // does not weigh it, a project's users share one scope.
  const std::string_view user_key = last_queue_.weights.fairshare > 0 ? std::string_view(user) : std::string_view();
  const ScopeKey key{queue, project, user_key};
  if (last_scope_ && last_scope_key_ == key) return *last_scope_;
  const uint64_t hash = ScopeKeyHash{}(key);
  size_t probe = 0;
  if (scope_count_ > 0) {  // the first is last_scope_ until there is a second
    if (2 * (scope_count_ + 1) > scope_slots_.size()) GrowScopeTable();
    const size_t mask = scope_slots_.size() - 1;
    for (probe = ScopeSlot(hash); scope_slots_[probe].entry != nullptr; probe = (probe + 1) & mask) {
      if (scope_slots_[probe].hash != hash) continue;
      ScopeEntry& entry = *scope_slots_[probe].entry;
      if (entry.key == key) {
        last_scope_key_ = entry.key;
        last_scope_ = &entry.info;
        return entry.info;
      }
    }
  }
  static_assert(std::is_trivially_destructible_v<ScopeEntry>, "left in the arena without being destroyed");
  ScopeEntry& entry = *new (scope_arena_.allocate(sizeof(ScopeEntry), alignof(ScopeEntry))) ScopeEntry();
  if (++scope_count_ == 1) {
    first_scope_ = &entry;
  } else {
    scope_slots_[probe] = {hash, &entry};
  }
  entry.hash = hash;
  entry.key = key;  // views of its first job's strings, which outlive the cycle
  if (copy_scope_names_ && queue.size() + project.size() + user_key.size() <= entry.text.size()) {
    char* at = entry.text.data();
    auto keep = [&at](std::string_view name) {
      if (!name.empty()) std::memcpy(at, name.data(), name.size());
      const std::string_view kept(at, name.size());
      at += name.size();
      return kept;
    };
    entry.key.queue = keep(queue);
    entry.key.project = keep(project);
    entry.key.user = keep(user_key);
  }
  ScopeInfo& info = entry.info;
  info.queue_spec = last_queue_.spec;
  info.policy = last_queue_.policy;
  info.weights = last_queue_.weights;
  info.project = state_.Project(project);
  info.fairshare = info.weights.fairshare > 0 ? state_.Fairshare(project, user) : 1.0;
  info.has_limits = info.policy->SetsLimits() || (info.project && info.project->SetsLimits());
  last_scope_key_ = entry.key;
  last_scope_ = &info;
  return info;
}

void PoolCycle::GrowScopeTable() {
  const size_t size = scope_slots_.empty() ? 16 : 2 * scope_slots_.size();
  scope_shift_ = 64 - std::countr_zero(size);
  const size_t mask = size - 1;
  std::pmr::vector<ScopeSlotEntry> old(std::move(scope_slots_), &scope_arena_);
  if (old.empty()) old.push_back({first_scope_->hash, first_scope_});  // the table is made for the second scope
  scope_slots_.assign(size, ScopeSlotEntry{});
  for (const ScopeSlotEntry& slot : old) {
    if (slot.entry == nullptr) continue;
    size_t probe = ScopeSlot(slot.hash);
    while (scope_slots_[probe].entry != nullptr) probe = (probe + 1) & mask;
    scope_slots_[probe] = slot;
  }
}

model::PriorityFactors PoolCycle::PriorityOf(const ScopeInfo& scope, Timestamp submitted_at,
                                             const model::ResourceRequest& r, int adjustment) const {
  const model::PriorityWeights& weights = scope.weights;
  policy::PriorityInputs in;
  in.fairshare_factor = scope.fairshare;
  in.submitted_at = submitted_at;
  in.tier = scope.queue_spec ? scope.queue_spec->priority_tier : 0;
  in.max_tier_in_pool = max_tier_;
  in.job_cpus = int64_t{r.nodes} * r.cpus;
  in.pool_cpus = pool_cpus_;
  in.adjustment = adjustment;
  return policy::ComputePriority(weights, in, now_);
}

const std::vector<const model::NodeUsage*>& PoolCycle::StartableNodes(const model::ResourceRequest& r, Timestamp end) {
  const auto& nodes = *pool_nodes_;
  // Only nodes that had room when the cycle began can have room now
  // (a cycle only takes room); on a busy cluster that is a few percent.
  const bool needs_nothing = r.cpus <= 0 && r.memory_mb <= 0 && r.gpus <= 0;
  const Capacity need = policy::PerNode(r);
  std::vector<const model::NodeUsage*>& out = startable_;
  out.clear();
  out.reserve(needs_nothing ? nodes.size() : roomy_.size());
  auto consider = [&](size_t i) {
    // A node held for a reservation must keep the room over the whole window.
    if (any_future_hold_ && has_future_hold_[i] && !timelines_[i].MinFree(now_, end).Covers(need)) return;
    out.push_back(nodes[i]);
  };
  if (needs_nothing) {
    for (size_t i = 0; i < nodes.size(); ++i) consider(i);
  } else {
    for (size_t i : roomy_) consider(i);
  }
  return out;
}

void PoolCycle::Hold(const model::Allocation& allocation, Timestamp from, Timestamp to, bool is_reservation) {
  if (timelines_.empty()) return;  // the pool plans nothing ahead (BuildProfile)
  for (const auto& share : allocation) {
    const std::optional<size_t> i = NodeIndex(share.node);
    if (!i) continue;
    timelines_[*i].Reserve(from, to, ShareCapacity(share));
    ++node_version_[*i];
    if (is_reservation && from > now_) {
      has_future_hold_[*i] = true;
      any_future_hold_ = true;
    }
  }
}

void PoolCycle::Run(const std::string& pool_name, std::vector<const PendingJob*>& jobs,
                    const std::vector<const RunningJob*>& running, const std::vector<uint32_t>* order) {
  const bool explain = state_.snapshot.explain;
  pool_name_ = pool_name;
  auto pool_it = state_.pools.find(pool_name);
  pool_ = pool_it == state_.pools.end() ? nullptr : pool_it->second;
  predicts_ = pool_ && pool_->predict_run_times && pool_->backfill != model::BackfillMode::kFcfs;
  const model::BackfillMode mode = pool_ ? pool_->backfill : model::BackfillMode::kEasy;
  const int depth = !pool_                                       ? 1
                    : mode == model::BackfillMode::kConservative ? pool_->reservation_depth
                    : mode == model::BackfillMode::kEasy         ? 1
                                                                 : 0;
  pool_nodes_ = &nodes_.Pool(pool_name);
  // A queue of thousands is a snapshot larger than the caches: there a
  // scope's key that views its first job's strings costs a miss at each
  // lookup, and the names are copied (ScopeEntry). A replay's passes of a
  // few dozen jobs have them at hand and would pay for the copies only.
  copy_scope_names_ = (order ? order->size() : jobs.size()) >= 1024;
  for (const auto* n : *pool_nodes_) pool_cpus_ += int64_t{n->spec.cpus};
  bool pool_may_preempt = false;
  for (const auto& [name, queue] : state_.queues) {
    if (queue->pool != pool_name) continue;
    max_tier_ = std::max(max_tier_, queue->priority_tier);
    pool_may_preempt = pool_may_preempt || queue->policy.can_preempt;
  }

  // The phases' times (CycleReport) are taken where reasons are explained,
  // as in the daemon: a replay's passes are too short to afford the clock.
  const bool timed = explain;
  auto clock = [timed] { return timed ? SteadyClock::now() : SteadyClock::time_point{}; };
  // 1. Priorities and order.
  auto t = clock();
  std::vector<Ranked> ranked;
  ranked.reserve(jobs.size());
  std::vector<model::PriorityFactors> factors;
  factors.reserve(jobs.size());
  // Distinct request shapes (resources and constraints), found while the
  // jobs are visited in memory order.
  std::vector<const PendingJob*> shapes;
  constexpr size_t kMaxShapes = 256;
  // shape_failed and shape_reasons grow with `shapes` (below).
  std::vector<char> shape_failed;
  std::vector<ReasonList> shape_reasons;
  std::vector<uint64_t> shape_hashes;  // ShapeHash of each of `shapes`
  // Twice as many slots as shapes, so a probe rarely goes far; each holds a
  // shape's index + 1, or 0 (empty).
  constexpr size_t kShapeSlots = 2 * kMaxShapes;
  static_assert((kShapeSlots & (kShapeSlots - 1)) == 0, "a power of two: a probe wraps with a mask");
  std::array<uint16_t, kShapeSlots> shape_slots{};
  {
    const size_t most_shapes = std::min(kMaxShapes, order ? order->size() : jobs.size());
    shapes.reserve(most_shapes);
    shape_failed.reserve(most_shapes);
    shape_reasons.reserve(most_shapes);
    shape_hashes.reserve(most_shapes);
  }
  // A ranked job's scope, priority and request shape.
  auto describe = [&](Ranked& entry) {
    const PendingJob* job = entry.job;
    const ScopeInfo& scope = Scope(job->queue, job->project, job->user);
    // In the caller's order the priority only matters to preemption and to
    // what explain shows.
    model::PriorityFactors& priority = factors[entry.index];
    if (!order || explain || scope.policy->can_preempt) {
      priority = PriorityOf(scope, job->submitted_at, job->resources, job->adjustment);
    }
    uint32_t shape = kNoShape;
    // Found by a hash of what SameShape compares, in an open-addressed
    // table: with hundreds of shapes (every wall time its own), comparing
    // the job with each, or even scanning their hashes, cost more than the
    // rest of its visit.
    const uint64_t key = ShapeHash(*job);
    for (size_t probe = key & (kShapeSlots - 1);; probe = (probe + 1) & (kShapeSlots - 1)) {
      const uint16_t slot = shape_slots[probe];
      if (slot == 0) {
        if (shapes.size() < kMaxShapes) {
          shape = static_cast<uint32_t>(shapes.size());
          shape_slots[probe] = static_cast<uint16_t>(shape + 1);
          shapes.push_back(job);
          shape_hashes.push_back(key);
          shape_failed.push_back(0);
          shape_reasons.emplace_back();
        }
        break;
      }
      if (shape_hashes[slot - 1] == key && SameShape(*shapes[slot - 1], *job)) {
        shape = slot - 1u;
        break;
      }
    }
    entry.scope = &scope;
    entry.priority = priority.Total();
    entry.shape = shape;
  };
  // A pass that leaves reservations where they are (a replay's arrival), in
  // the caller's order and with nothing to explain, keeps every previous
  // reservation still ahead that still fits: the walk passes over such a
  // job without its scope, priority or shape, so they are found only for
  // one not kept after all (describe, in the walk).
  const bool keeps_reservations =
      order && !explain && mode == model::BackfillMode::kConservative && !state_.snapshot.move_reservations;
  auto rank = [&](const PendingJob* job) {
    factors.emplace_back();
    ranked.push_back(
        {job, nullptr, 0, job->submitted_at, job->id, kNoShape, static_cast<uint32_t>(factors.size() - 1)});
    const bool likely_kept =
        keeps_reservations && job->reserved_start && *job->reserved_start > now_ && !job->reserved_nodes.empty();
    if (!likely_kept) describe(ranked.back());
  };
  // EASY, once the head holds its reservation, in the caller's order and
  // with nothing to explain or preempt: a job that cannot start now is
  // passed over without being looked at, and one that asks a node for more
  // than any node has free cannot start now (a cheap test before the scope,
  // the shape and the fit).
  bool backfilling = false;
  const bool pass_over_unstartable = order && !explain && !pool_may_preempt && mode == model::BackfillMode::kEasy &&
                                     !(pool_ && pool_->PlacedByBackend());
  bool most_free_stale = true;
  Capacity most_free;
  auto cannot_start_now = [&](const PendingJob& job) {
    if (most_free_stale) {
      most_free = Capacity{};
      for (const model::NodeUsage* n : *pool_nodes_) {
        if (n->state != model::NodeState::kUp) continue;
        most_free.cpus = std::max<int64_t>(most_free.cpus, n->FreeCpus());
        most_free.memory_mb = std::max(most_free.memory_mb, n->FreeMemoryMb());
        most_free.gpus = std::max<int64_t>(most_free.gpus, n->FreeGpus(""));
      }
      most_free_stale = false;
    }
    return !most_free.Covers(policy::PerNode(job.resources));
  };
  // In the caller's order: the next job of it, ranked; false when none is left.
  size_t next_in_order = 0;
  auto take_next = [&]() {
    while (order && next_in_order < order->size()) {
      // The jobs are scattered in memory and most are passed over after one
      // look at their request: fetch a few ahead.
      constexpr size_t kAhead = 8;
      if (next_in_order + kAhead < order->size()) {
        __builtin_prefetch(&state_.snapshot.pending[(*order)[next_in_order + kAhead]].resources);
      }
      const PendingJob* job = &state_.snapshot.pending[(*order)[next_in_order++]];
      assert(job->pool == pool_name && "Snapshot::pending_order: every job in one pool");
      if (backfilling && pass_over_unstartable && cannot_start_now(*job)) {
        ++plan_.report.considered;
        ++plan_.report.passed_over;
        continue;
      }
      rank(job);
      return true;
    }
    return false;
  };
  // Every job is needed at once where reasons are explained, reservations
  // held from the last cycle are looked up, or the tail is re-sorted.
  const bool take_all = explain || mode == model::BackfillMode::kConservative || predicts_;
  if (!order) {
    for (const PendingJob* job : jobs) rank(job);
    std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
      if (a.priority != b.priority) return a.priority > b.priority;
      if (a.submitted_at != b.submitted_at) return a.submitted_at < b.submitted_at;
      return a.id < b.id;
    });
  } else if (take_all) {
    ranked.reserve(order->size());
    factors.reserve(order->size());
    while (take_next()) {
    }
  }
  plan_.report.order += clock() - t;

  // 2. Profile.
  t = clock();
  // FCFS and a backend that places jobs itself reserve nothing.
  const bool backend_places = pool_ && pool_->PlacedByBackend();
  const bool plans_ahead = mode != model::BackfillMode::kFcfs && !backend_places;
  const PoolProfile* adopted = plans_ahead ? AdoptableProfile(mode, order != nullptr, ranked) : nullptr;
  BuildProfile(running, plans_ahead, adopted);
  std::map<model::JobId, std::vector<model::JobId>> victims_in_flight;
  for (const RunningJob* r : running) {
    if (r->preempting_for) victims_in_flight[*r->preempting_for].push_back(r->id);
  }
  // Conservative: previous reservations hold their room while the jobs
  // before them are placed, so each job only ever moves earlier.
  PreviousHolds previous_holds;
  if (mode == model::BackfillMode::kConservative) {
    previous_holds = HoldPreviousReservations(ranked, /*already_held=*/adopted != nullptr);
    // Every blocked job up to the depth gets one.
    const size_t most = depth == 0 ? ranked.size() : std::min(ranked.size(), static_cast<size_t>(depth));
    plan_.reservations.reserve(plan_.reservations.size() + most);
  }
  plan_.report.reserve += clock() - t;

  // Requests known not to start now: capacity only shrinks during a cycle,
  // so an identical request cannot start later in it either. Its reasons
  // are reused as first found in the cycle (free amounts they quote may have
  // shrunk since; the next cycle refreshes them). With thousands of
  // identical jobs waiting, this keeps a saturated pool's cycle cheap.
  // Conservative pools break that rule in one place: a job's previous
  // reservation, given back when its turn comes, frees room a request
  // shape may already have failed to find. A start now spans [now, now + its
  // planned length), so only a release from before that end can change its
  // answer; `failed_reach` is the latest such end among failed shapes, so
  // releases beyond it (most of a long queue's) cost nothing.
  Timestamp failed_reach = Timestamp::min();
  auto forget_failures_before = [&](Timestamp released_from) {
    if (released_from >= failed_reach) return;
    failed_reach = Timestamp::min();
    for (size_t k = 0; k < shapes.size(); ++k) {
      if (!shape_failed[k]) continue;
      const Timestamp reach = policy::WindowEnd(now_, Planned(*shapes[k]));
      if (reach > released_from) {
        shape_failed[k] = 0;
      } else {
        failed_reach = std::max(failed_reach, reach);
      }
    }
  };

  const auto pool_name_shared = std::make_shared<const std::string>(pool_name_);
  if (explain) plan_.pending.reserve(plan_.pending.size() + ranked.size());
  // The pool's backend places jobs itself (another cluster's scheduler): an
  // admitted job starts with no allocation here; where it runs is the
  // backend's choice, so there is nothing to fit, reserve or preempt
  // (backend_places, above).
  const size_t max_considered = static_cast<size_t>(std::max(0, state_.snapshot.max_considered));
  // The walk stops before `position`: the jobs it did not reach are passed
  // over, and stay pending in the order they would have been taken
  // (Plan::order).
  auto stop_before = [&](size_t position) {
    plan_.report.passed_over += static_cast<int>(ranked.size() - position);
    if (order) plan_.report.passed_over += static_cast<int>(order->size() - next_in_order);
    if (!state_.snapshot.return_order) return;
    const PendingJob* first = state_.snapshot.pending.data();
    for (size_t rest = position; rest < ranked.size(); ++rest) {
      plan_.order.push_back(static_cast<uint32_t>(ranked[rest].job - first));
    }
    if (order)
      plan_.order.insert(plan_.order.end(), order->begin() + static_cast<std::ptrdiff_t>(next_in_order), order->end());
  };
  // What a start takes, toward the limits of the jobs after it (only
  // where a limit reads it: SchedulerState::Tallied).
  auto count_start = [&](const PendingJob& started) {
    if (state_.Tallied(started.queue, started.project)) {
      tally_.Add({started.queue, started.project, started.user}, policy::AmountOf(started.resources));
    }
  };
  int waiting_ahead = 0;      // jobs of this pool ordered before the current one that stay pending
  bool pool_blocked = false;  // fcfs: a job ahead could not start
  int reservations = 0;

  for (size_t position = 0;; ++position) {
    // Strict FCFS: nothing passes a blocked job; without reasons to give
    // the jobs behind it, the pass is over.
    if (pool_blocked && !explain) {
      stop_before(position);
      break;
    }
    if (position >= ranked.size() && !take_next()) break;
    // The depth of an event pass: the jobs behind it are not looked at.
    if (max_considered > 0 && position >= max_considered) {
      stop_before(position);
      break;
    }
    // In priority order the jobs and their factors are scattered in memory
    // (they were ranked in the snapshot's order): fetch a few ahead, as
    // take_next does, so that each visit does not wait for memory.
    if (constexpr size_t kAhead = 8; position + kAhead < ranked.size()) {
      const Ranked& later = ranked[position + kAhead];
      __builtin_prefetch(later.job);
      __builtin_prefetch(&later.job->resources);
      if (explain) __builtin_prefetch(&factors[later.index]);
    }
    const Ranked& entry = ranked[position];
    const PendingJob& job = *entry.job;  // a reference: not read unless needed
    ++plan_.report.considered;
    model::PendingInfo info;
    if (explain) {
      info.priority = factors[entry.index];
      if (predicts_) info.predicted_run_seconds = job.predicted_run_seconds;
    }
    auto keep_pending = [&](model::PendingInfo& pending) {
      if (state_.snapshot.return_order) {
        plan_.order.push_back(static_cast<uint32_t>(entry.job - state_.snapshot.pending.data()));
      }
      if (explain) {
        pending.jobs_ahead = waiting_ahead;
        pending.pool = pool_name_shared;
        plan_.pending.emplace(entry.id, std::move(pending));
      }
      ++waiting_ahead;
    };
    // Puts a reason before the job's own (shared) ones.
    auto prepend = [&](model::PendingReason reason) {
      auto list = std::make_shared<std::vector<model::PendingReason>>();
      list->push_back(std::move(reason));
      if (info.own) list->insert(list->end(), info.own->begin(), info.own->end());
      info.own = std::move(list);
    };

    // Its previous reservation, if held: either kept as it was (not moving
    // this cycle, start still ahead) or given back now and replaced by one
    // at least as early (or a start).
    if (const std::span<const size_t> held = previous_holds.Of(position); !held.empty()) {
      const Timestamp from = std::max(*job.reserved_start, now_);
      if (!state_.snapshot.move_reservations && from > now_) {
        // Kept where it was: the room HoldPreviousReservations held for it
        // stays held (giving it back and holding it again would change no
        // step, yet make the shapes' earliest windows be sought afresh).
        RecordReservation(job.id, from, held);
        ++reservations;
        if (explain) {
          info.own = std::make_shared<const std::vector<model::PendingReason>>(
              std::vector<model::PendingReason>{{"Resources", "waits for its reservation (conservative backfill)"}});
          info.estimated_start = from;
        }
        keep_pending(info);
        continue;
      }
      const Timestamp to = policy::WindowEnd(from, Planned(job));
      for (size_t i : held) {
        timelines_[i].Release(from, to, policy::PerNode(job.resources));
        ++node_version_[i];
      }
      forget_failures_before(from);
    }
    if (!entry.scope) describe(ranked[position]);  // passed over in ranking: its reservation was not kept

    // Admission: quotas and concurrency. An over-limit job waits without
    // holding anything up (it gets no reservation).
    const model::QueuePolicy& queue_policy = *entry.scope->policy;
    std::optional<model::PendingReason> limit;
    if (entry.scope->has_limits) {
      limit = policy::CheckLimits(tally_, {job.queue, job.project, job.user}, job.resources, queue_policy,
                                  entry.scope->project);
      if (!limit && entry.scope->project && !entry.scope->project->budget.Empty()) {
        auto use = state_.snapshot.budget_use.find(job.project);
        limit = policy::CheckBudget(job.project, entry.scope->project->budget,
                                    use == state_.snapshot.budget_use.end() ? policy::BudgetUse{} : use->second);
      }
    }
    if (limit) {
      if (explain) prepend(std::move(*limit));
      keep_pending(info);
      continue;
    }
    if (pool_blocked) {
      keep_pending(info);  // strict FCFS: nothing passes a blocked job
      continue;
    }
    if (backend_places) {
      count_start(job);
      plan_.starts.push_back({job.id, {}});
      ++plan_.report.started;
      continue;
    }

    // Start now, if it fits for its whole wall time without touching a reservation.
    const bool known_failure = entry.shape != kNoShape && shape_failed[entry.shape];
    if (!known_failure) {
      const Timestamp end = policy::WindowEnd(now_, Planned(job));
      t = clock();
      // A shape explained earlier in the cycle keeps that explanation when
      // its failure was forgotten (a conservative reservation given back)
      // and it fails again: explaining costs a fit over the whole pool,
      // and a deep conservative queue gives back hundreds of reservations.
      const bool explained = explain && entry.shape != kNoShape && shape_reasons[entry.shape];
      model::FitResult fit = model::Fit(StartableNodes(job.resources, end), job.resources, job.constraints, pool_name_,
                                        explain && !explained);
      plan_.report.fit += clock() - t;
      if (fit.allocation) {
        nodes_.Apply(*fit.allocation, +1);
        most_free_stale = true;
        Hold(*fit.allocation, now_, end, /*is_reservation=*/false);
        count_start(job);
        plan_.starts.push_back({job.id, std::move(*fit.allocation)});
        ++plan_.report.started;
        continue;
      }
      ReasonList reasons;
      if (explained) {
        reasons = shape_reasons[entry.shape];
      } else if (explain) {
        std::vector<model::PendingReason> list = std::move(fit.reasons);
        {
          // Full nodes and nodes held for a reservation were left out of the
          // fit above, so its reasons describe only the rest ("p has no
          // nodes" when that is none). Explain against the whole pool: if
          // the job fits there now, a reservation holds it back; else the
          // pool-wide shortfall says why. (Once per request shape and cycle.)
          model::FitResult whole = model::Fit(*pool_nodes_, job.resources, job.constraints, pool_name_);
          if (!whole.allocation) {
            list = std::move(whole.reasons);
          } else if (std::optional<model::JobId> holder = HolderOf(*whole.allocation)) {
            list = {{"ReservedForJob", "the room it fits in now is reserved from its start for job " +
                                           std::to_string(*holder) +
                                           " (a higher-priority job); it would not end before that start"}};
          }
        }
        reasons = std::make_shared<const std::vector<model::PendingReason>>(std::move(list));
      }
      if (entry.shape != kNoShape) {
        shape_failed[entry.shape] = 1;
        shape_reasons[entry.shape] = reasons;
        failed_reach = std::max(failed_reach, end);
      }
      info.own = std::move(reasons);
    } else if (explain) {
      info.own = shape_reasons[entry.shape];
    }

    // Preemption: its queue may preempt, and no victims are already stopping for it.
    if (queue_policy.can_preempt) {
      auto in_flight = victims_in_flight.find(job.id);
      if (in_flight != victims_in_flight.end()) {
        if (explain) prepend({"Preempting", "waiting for preempted job(s) " + JoinIds(in_flight->second) + " to stop"});
      } else {
        std::vector<const RunningJob*> victims = ChooseVictims(job, entry.priority, running);
        if (!victims.empty()) {
          std::vector<model::JobId> ids;
          for (const RunningJob* v : victims) {
            const model::QueuePolicy& vp = state_.PolicyOf(v->queue);
            plan_.preemptions.push_back(
                {v->id, job.id, vp.preempt_grace_seconds, vp.preempt_action == model::PreemptAction::kRequeue});
            being_preempted_.insert(v->id);
            ids.push_back(v->id);
            ++plan_.report.preempted;
          }
          if (explain) prepend({"Preempting", "preempting job(s) " + JoinIds(ids) + " to make room"});
        }
      }
    }

    // Reservation, per the pool's backfill mode.
    if (mode == model::BackfillMode::kFcfs) {
      pool_blocked = true;
    } else if (depth == 0 || reservations < depth) {
      t = clock();
      if (const std::optional<Timestamp> earliest = EarliestStart(job, entry.shape)) {
        const Timestamp start = *earliest;
        const std::vector<size_t>& chosen = chosen_;
        const Timestamp reserved_end = policy::WindowEnd(start, Planned(job));
        for (size_t i : chosen) {
          timelines_[i].Reserve(start, reserved_end, policy::PerNode(job.resources));
          if (mode == model::BackfillMode::kEasy && state_.snapshot.keep_profile) {
            easy_holds_.push_back({i, {start, reserved_end, policy::PerNode(job.resources)}});
          }
          ++node_version_[i];
          // Even a reservation from now holds room a later job must not take:
          // the job did not fit now, yet the profile has it fit (a job past
          // its end still holds the room it frees "now"; GPUs are counted,
          // not matched by model).
          has_future_hold_[i] = true;
          any_future_hold_ = true;
          hold_owner_[i] = job.id;
        }
        RecordReservation(job.id, start, chosen);
        ++reservations;
        if (explain) info.estimated_start = start;
        backfilling = mode == model::BackfillMode::kEasy && reservations == depth;
        if (predicts_ && mode == model::BackfillMode::kEasy && reservations == depth) {
          // EASY with predictions backfills the shortest predicted job first
          // (EASY++'s SJBF): the jobs behind the reserved head, by planned
          // length, in priority order among equals.
          std::stable_sort(ranked.begin() + static_cast<std::ptrdiff_t>(position) + 1, ranked.end(),
                           [this](const Ranked& a, const Ranked& b) { return Planned(*a.job) < Planned(*b.job); });
        }
      }
      plan_.report.reserve += clock() - t;
    }
    keep_pending(info);
  }
  if (state_.snapshot.keep_profile && mode != model::BackfillMode::kFcfs && order && !timelines_.empty()) {
    // EASY makes its reservation again each pass (nothing holds the last
    // one): the profile handed on has only the running jobs and the starts.
    for (const auto& [i, hold] : easy_holds_) timelines_[i].Release(hold.from, hold.to, hold.amount);
    plan_.profile = std::make_shared<const PoolProfile>(PoolProfile{pool_name_, now_, std::move(timelines_)});
  }
}

}  // namespace unisched::scheduler::internal
