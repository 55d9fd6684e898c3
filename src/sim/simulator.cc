// The replay loop (event order in simulator.h) and the clusters it runs on.

#include "unisched/sim/simulator.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <queue>
#include <set>
#include <unordered_map>
#include <utility>

#include "unisched/policy/run_time.h"

namespace unisched::sim {
namespace {

constexpr int64_t kUnboundedMemoryMb = int64_t{1} << 40;

int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// A job's wall-time limit in whole seconds, as a ResourceRequest holds it.
int64_t WalltimeSeconds(const TraceJob& job) {
  return std::max<int64_t>(1, CeilDiv(job.estimate_ms, 1000));
}

SimCluster SingleNodeCluster(model::PoolKind kind, model::BackfillChoice backfill) {
  SimCluster cluster;
  cluster.queue = "sim";
  cluster.pool = "sim-pool";

  model::PoolSpec pool;
  pool.name = cluster.pool;
  pool.kind = kind;
  pool.nodes = {"sim-node-01"};
  pool.backfill = backfill.mode;
  pool.predict_run_times = backfill.predicted;
  pool.reservation_depth = 0;  // conservative: every blocked job
  cluster.config.pools.push_back(pool);

  model::QueueSpec queue;
  queue.name = cluster.queue;
  queue.pool = cluster.pool;
  queue.policy.type = "fifo";
  // All weights zero: every job has the same priority, so the order is
  // submit time, then id (trace order), as in the reference simulator.
  queue.policy.priority_weights = model::PriorityWeights{};
  queue.policy.preemptible = false;
  cluster.config.queues.push_back(queue);

  model::NodeUsage node;
  node.spec.name = "sim-node-01";
  node.spec.pool = cluster.pool;
  node.spec.memory_mb = kUnboundedMemoryMb;
  cluster.nodes.push_back(std::move(node));
  return cluster;
}

}  // namespace

model::ResourceRequest SimCluster::RequestFor(int size, int64_t walltime_seconds) const {
  model::ResourceRequest request;
  const int per_node_max = std::max(1, largest_node);
  request.nodes = size <= per_node_max ? 1 : static_cast<int>(CeilDiv(size, per_node_max));
  const int per_node = static_cast<int>(CeilDiv(size, request.nodes));
  if (unit == SizeUnit::kCpus) {
    request.cpus = per_node;
  } else {
    request.cpus = 1;
    request.gpus = per_node;
  }
  request.memory_mb = 0;
  request.walltime_seconds = walltime_seconds;
  return request;
}

bool SimCluster::CanEverFit(const model::ResourceRequest& request) const {
  std::vector<model::NodeUsage> empty = nodes;
  std::vector<const model::NodeUsage*> pointers;
  for (auto& node : empty) {
    node.cpus_used = 0;
    node.memory_used_mb = 0;
    node.gpu_busy = model::BusySet(node.spec.gpus.size());
    node.state = model::NodeState::kUp;
    pointers.push_back(&node);
  }
  return model::Fit(pointers, request, {}, pool).allocation.has_value();
}

SimCluster CpuCluster(int processors, model::BackfillChoice backfill) {
  SimCluster cluster = SingleNodeCluster(model::PoolKind::kCpu, backfill);
  cluster.nodes[0].spec.cpus = processors;
  cluster.unit = SizeUnit::kCpus;
  cluster.capacity = processors;
  cluster.largest_node = processors;
  cluster.description = "one pool of " + std::to_string(processors) + " processors (one node)";
  return cluster;
}

SimCluster GpuCluster(int gpus, model::BackfillChoice backfill) {
  SimCluster cluster = SingleNodeCluster(model::PoolKind::kGpu, backfill);
  model::NodeUsage& node = cluster.nodes[0];
  // CPUs must never be what a GPU job waits for. Each job asks one CPU
  // (RequestFor) and at least one GPU, so no more than `gpus` jobs run at
  // once: as many CPUs suffice. (More cost every pass a copy of the node's
  // CPU bitmap: with 2^20 CPUs, a fifth of a Philly replay.)
  node.spec.cpus = std::max(1, gpus);
  for (int i = 0; i < gpus; ++i) node.spec.gpus.push_back({i, "sim-gpu", 80});
  node.gpu_busy = model::BusySet(static_cast<size_t>(gpus));
  cluster.unit = SizeUnit::kGpus;
  cluster.capacity = gpus;
  cluster.largest_node = gpus;
  cluster.description = "one pool of " + std::to_string(gpus) + " GPUs (one node)";
  return cluster;
}

Result<SimCluster> ConfiguredCluster(const config::Config& config, TraceFormat format,
                                     std::optional<model::BackfillChoice> backfill) {
  const model::ClusterSpec& spec = config.cluster;
  const model::WorkloadKind kind =
      format == TraceFormat::kPhilly ? model::WorkloadKind::kAiTraining : model::WorkloadKind::kHpc;
  const model::QueueSpec* queue = spec.DefaultQueueFor(kind);
  if (!queue && !spec.queues.empty()) queue = &spec.queues.front();
  if (!queue) return Error::BadRequest("bad_config", "the config has no queue to replay the trace into");

  SimCluster cluster;
  cluster.config = scheduler::SchedulerConfig::From(spec);
  if (backfill) {
    for (auto& pool : cluster.config.pools) {
      pool.backfill = backfill->mode;
      pool.predict_run_times = backfill->predicted;
    }
  }
  cluster.queue = queue->name;
  cluster.pool = queue->pool;
  cluster.unit = format == TraceFormat::kPhilly ? SizeUnit::kGpus : SizeUnit::kCpus;
  for (const auto& node : spec.nodes) {
    if (node.pool != cluster.pool) continue;
    model::NodeUsage usage;
    usage.spec = node;
    usage.gpu_busy = model::BusySet(node.gpus.size());
    const int amount = cluster.unit == SizeUnit::kCpus ? node.cpus : static_cast<int>(node.gpus.size());
    cluster.capacity += amount;
    cluster.largest_node = std::max(cluster.largest_node, amount);
    cluster.nodes.push_back(std::move(usage));
  }
  const char* unit = cluster.unit == SizeUnit::kCpus ? "cpus" : "GPUs";
  if (cluster.capacity == 0) {
    return Error::BadRequest("bad_config", "pool " + cluster.pool + " (of queue " + cluster.queue + ") has no " + unit +
                                               " to replay a " + std::string(ToString(format)) + " trace on");
  }
  cluster.description = "queue " + cluster.queue + " on pool " + cluster.pool + " (" +
                        std::to_string(cluster.nodes.size()) + " nodes, " + std::to_string(cluster.capacity) + " " +
                        unit + ")";
  return cluster;
}

Metrics ComputeMetrics(const std::vector<TraceJob>& jobs, const std::vector<int64_t>& start_ms, int64_t capacity) {
  Metrics m;
  double wait_sum = 0, bsld_sum = 0, jct_sum = 0, work = 0;
  int64_t first_submit = 0, last_end = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (i >= start_ms.size() || start_ms[i] < 0) continue;
    const TraceJob& job = jobs[i];
    const double wait = static_cast<double>(start_ms[i] - job.submit_ms) / 1000.0;
    const double run = static_cast<double>(job.run_ms) / 1000.0;
    wait_sum += wait;
    bsld_sum += std::max(1.0, (wait + run) / std::max(run, kBoundedSlowdownThresholdSeconds));
    jct_sum += wait + run;
    work += run * job.size;
    const int64_t end = start_ms[i] + job.run_ms;
    if (m.jobs == 0 || job.submit_ms < first_submit) first_submit = job.submit_ms;
    if (m.jobs == 0 || end > last_end) last_end = end;
    ++m.jobs;
  }
  if (m.jobs == 0) return m;
  const double n = static_cast<double>(m.jobs);
  m.avg_wait_seconds = wait_sum / n;
  m.avg_bounded_slowdown = bsld_sum / n;
  m.avg_jct_seconds = jct_sum / n;
  m.makespan_seconds = static_cast<double>(last_end - first_submit) / 1000.0;
  if (m.makespan_seconds > 0 && capacity > 0) {
    m.utilization = work / (static_cast<double>(capacity) * m.makespan_seconds);
  }
  return m;
}

EstimateAccuracy ComputeEstimateAccuracy(const std::vector<int64_t>& start_ms,
                                         const std::vector<int64_t>& estimate_ms) {
  EstimateAccuracy a;
  std::vector<int64_t> errors, early;  // ms
  for (size_t i = 0; i < start_ms.size() && i < estimate_ms.size(); ++i) {
    if (start_ms[i] < 0 || estimate_ms[i] < 0) continue;
    ++a.estimated;
    if (start_ms[i] > estimate_ms[i]) ++a.late;
    errors.push_back(std::abs(start_ms[i] - estimate_ms[i]));
    early.push_back(estimate_ms[i] - start_ms[i]);
  }
  if (errors.empty()) return a;
  // Nearest rank: the smallest value with at least p of the values at or below it.
  auto quantile = [](std::vector<int64_t>& values, double p) {
    const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(values.size())));
    const size_t at = std::clamp<size_t>(rank, 1, values.size()) - 1;
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(at), values.end());
    return static_cast<double>(values[at]) / 1000.0;
  };
  a.median_error_seconds = quantile(errors, 0.5);
  a.p90_error_seconds = quantile(errors, 0.9);
  a.median_early_seconds = quantile(early, 0.5);
  return a;
}

namespace {

// The persistent state of a replay: the snapshot every Decide sees, kept up
// to date start by start and end by end.
class Replay {
 public:
  Replay(const std::vector<TraceJob>& jobs, const SimCluster& cluster)
      : jobs_(jobs),
        cluster_(cluster),
        scheduler_(cluster.config),
        start_ms_(jobs.size(), -1),
        estimate_ms_(jobs.size(), -1) {
    snapshot_.nodes = cluster.nodes;
    snapshot_.explain = false;
    for (const auto& pool : cluster.config.pools) {
      if (pool.name == cluster.pool) {
        mode_ = pool.backfill;
        predicts_ = pool.predict_run_times;
        carries_profiles_ = cluster.carry_profiles && mode_ != model::BackfillMode::kFcfs && !predicts_;
        snapshot_.keep_profile = carries_profiles_;
      }
    }
    // Arrival order is priority order only when no weight can put a newer
    // job ahead (every trace job has the same queue, tier and adjustment).
    for (const auto& queue : cluster.config.queues) {
      if (queue.name != cluster.queue) continue;
      const model::PriorityWeights w = queue.policy.Weights();
      fifo_order_ = w.fairshare == 0 && w.age == 0 && w.size == 0;
      // A job over a limit waits without holding anything up, so a job
      // ahead blocks those behind it only where no limit applies.
      no_limits_ = !queue.policy.SetsLimits();
    }
    for (const auto& project : cluster.config.projects) {
      if (project.SetsLimits()) no_limits_ = false;
    }
    for (size_t i = 0; i < snapshot_.nodes.size(); ++i) node_index_.emplace(snapshot_.nodes[i].spec.name, i);
    job_index_.reserve(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) job_index_.emplace(jobs[i].id, i);
    requests_.reserve(jobs.size());
    for (const auto& job : jobs) requests_.push_back(cluster.RequestFor(job.size, WalltimeSeconds(job)));
    submit_order_.resize(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) submit_order_[i] = i;
    // A trace read by ParseSwf or ParsePhilly is in submit order already.
    auto by_submit = [&](size_t a, size_t b) { return jobs[a].submit_ms < jobs[b].submit_ms; };
    if (!std::is_sorted(submit_order_.begin(), submit_order_.end(), by_submit)) {
      std::stable_sort(submit_order_.begin(), submit_order_.end(), by_submit);
    }
  }

  SimulationResult Run(const ProgressCallback& progress) {
    const int64_t total_events = static_cast<int64_t>(jobs_.size()) * 2;
    int64_t handled = 0, next_report = 0;
    auto report = [&] {
      if (progress && handled >= next_report) {
        progress(handled, total_events);
        next_report = handled + std::max<int64_t>(1, total_events / 200);
      }
    };
    size_t next_submit = 0;
    std::vector<Termination> ending;
    auto submit_time = [&](size_t k) { return jobs_[submit_order_[k]].submit_ms; };
    while (next_submit < jobs_.size() || !terminations_.empty()) {
      int64_t now = next_submit < jobs_.size() ? submit_time(next_submit) : terminations_.top().time;
      if (!terminations_.empty()) now = std::min(now, terminations_.top().time);

      ending.clear();
      while (!terminations_.empty() && terminations_.top().time == now) {
        ending.push_back(terminations_.top());
        terminations_.pop();
      }
      // 1. Ends at their wall-time limit are free for everything at `now`.
      for (const Termination& t : ending) {
        if (jobs_[t.job].run_ms == WalltimeSeconds(jobs_[t.job]) * 1000) Finish(t.job);
      }
      // 2. Submissions, each with its own pass.
      while (next_submit < jobs_.size() && submit_time(next_submit) == now) {
        const size_t i = submit_order_[next_submit++];
        const bool queue_was_empty = snapshot_.pending.empty();
        Submit(i);
        if (ArrivalCanChangeNothing(i, queue_was_empty)) {
          ++skipped_passes_;
        } else {
          Pass(now, /*move_reservations=*/false, i);
        }
        ++handled;
        report();
      }
      // 3. Terminations, in start order, each with its own pass.
      for (const Termination& t : ending) {
        Finish(t.job);
        if (CompletionCanChangeNothing()) {
          ++skipped_passes_;
        } else {
          Pass(now, /*move_reservations=*/true);
        }
        ++handled;
        report();
      }
    }
    if (progress) progress(total_events, total_events);  // the replay is over, whatever is left pending

    SimulationResult result;
    result.passes = passes_;
    result.max_pending = max_pending_;
    result.never_started = static_cast<int64_t>(snapshot_.pending.size());
    result.start_ms = start_ms_;
    result.prediction = accuracy_;
    result.metrics = ComputeMetrics(jobs_, start_ms_, cluster_.capacity);
    result.estimates = ComputeEstimateAccuracy(start_ms_, estimate_ms_);
    return result;
  }

 private:
  struct Termination {
    int64_t time;
    int64_t sequence;  // start order
    size_t job;
    bool operator>(const Termination& o) const { return time != o.time ? time > o.time : sequence > o.sequence; }
  };

  // As in the reference simulator, an arrival's pass is skipped when it
  // cannot start anything: the new job is last in the queue (FIFO), so the
  // previous pass's decisions for the others stand, and the job itself
  // cannot start if it is larger than what is free now (EASY), or if a job
  // was already waiting ahead of it (FCFS). Conservative always runs it (the
  // new job gets its reservation then), and so does EASY for a job that
  // arrives to an empty queue: it starts nothing either, but the job, the
  // head, gets its reservation, the estimate the daemon would show.
  bool ArrivalCanChangeNothing(size_t i, bool queue_was_empty) const {
    if (!fifo_order_) return false;
    const int64_t free_now = cluster_.capacity - used_;
    switch (mode_) {
      case model::BackfillMode::kEasy:
        return jobs_[i].size > free_now && !queue_was_empty;
      case model::BackfillMode::kFcfs:
        return (!queue_was_empty && no_limits_) || jobs_[i].size > free_now;
      case model::BackfillMode::kConservative:
        break;
    }
    return false;
  }

  // As pyss, a FCFS completion looks at the head of the queue only: when
  // the head is larger than all that is free, the pass would start nothing
  // (nothing passes it, and no limit lets a later job go first).
  // EASY, whatever the order: when every waiting job is larger than all
  // that is free, nothing can start, and an EASY pass keeps nothing but its
  // starts (its reservation is made again by the next pass). Conservative
  // passes move reservations earlier, so they always run.
  bool CompletionCanChangeNothing() const {
    if (snapshot_.pending.empty()) return false;
    const int64_t free_now = cluster_.capacity - used_;
    if (mode_ == model::BackfillMode::kEasy) return *pending_sizes_.begin() > free_now;
    if (!fifo_order_ || !no_limits_ || mode_ != model::BackfillMode::kFcfs) return false;
    // In FIFO order the kept order's first job is the head.
    const scheduler::PendingJob& head = snapshot_.pending[snapshot_.pending_order.front()];
    return jobs_[job_index_.at(head.id)].size > free_now;
  }

  void Submit(size_t i) {
    pending_sizes_.insert(jobs_[i].size);
    const TraceJob& job = jobs_[i];
    scheduler::PendingJob pending;
    pending.id = job.id;
    pending.queue = cluster_.queue;
    pending.pool = cluster_.pool;
    pending.project = job.group;
    pending.user = job.user;
    pending.submitted_at = FromUnixMillis(job.submit_ms);
    pending.resources = requests_[i];
    if (predicts_) {
      // A trace job has no name: its user's history predicts it.
      pending.predicted_run_seconds = predictor_.Predict(job.user, {}, pending.resources.walltime_seconds);
      if (pending.predicted_run_seconds > 0) {
        const int64_t run = CeilDiv(job.run_ms, 1000);
        ++accuracy_.predicted;
        accuracy_.absolute_error_sum += static_cast<double>(std::abs(pending.predicted_run_seconds - run));
        if (pending.predicted_run_seconds < run) ++accuracy_.under;
      }
    }
    const uint32_t position = static_cast<uint32_t>(snapshot_.pending.size());
    pending_position_[job.id] = position;
    snapshot_.pending.push_back(std::move(pending));
    if (fifo_order_) {
      // Every job has the same priority: Decide's order is (submission, id),
      // and jobs arrive in submission order, so the new one goes last but
      // for ties of its submission time.
      auto& order = snapshot_.pending_order;
      auto at = order.end();
      while (at != order.begin()) {
        const scheduler::PendingJob& before = snapshot_.pending[*(at - 1)];
        if (before.submitted_at < snapshot_.pending[position].submitted_at ||
            (before.submitted_at == snapshot_.pending[position].submitted_at && before.id < job.id)) {
          break;
        }
        --at;
      }
      order.insert(at, position);
    }
  }

  // One scheduling pass. As in the reference simulator, conservative
  // reservations are placed again (only ever earlier) when a job ends, and
  // left where they are when one arrives. `arriving`: the job whose
  // submission the pass follows; its reservation is its estimate.
  void Pass(int64_t now, bool move_reservations, std::optional<size_t> arriving = std::nullopt) {
    if (snapshot_.pending.empty()) return;  // nothing to decide
    ++passes_;
    max_pending_ = std::max(max_pending_, static_cast<int64_t>(snapshot_.pending.size()));
    snapshot_.move_reservations = move_reservations;
    snapshot_.previous_profile = std::move(profile_);  // none unless carries_profiles_
    scheduler::Plan plan = scheduler_.Decide(snapshot_, FromUnixMillis(now));
    snapshot_.previous_profile.reset();
    snapshot_.ended_early.clear();
    profile_ = std::move(plan.profile);
    for (auto& start : plan.starts) Start(start, now);
    for (auto& r : plan.reservations) {
      auto position = pending_position_.find(r.job);
      if (position == pending_position_.end()) continue;
      if (arriving && r.job == jobs_[*arriving].id) estimate_ms_[*arriving] = ToUnixMillis(r.start);
      scheduler::PendingJob& job = snapshot_.pending[position->second];
      job.reserved_start = r.start;
      job.reserved_nodes = std::move(r.nodes);
    }
    // Preemptions cannot happen: the replay's queues never preempt.
  }

  void Start(scheduler::Start& start, int64_t now) {
    auto index = job_index_.find(start.job);
    auto position = pending_position_.find(start.job);
    assert(index != job_index_.end() && position != pending_position_.end());
    if (index == job_index_.end() || position == pending_position_.end()) return;
    const size_t i = index->second;
    const TraceJob& job = jobs_[i];
    pending_sizes_.erase(pending_sizes_.find(job.size));

    const size_t at = position->second;
    scheduler::PendingJob pending = std::move(snapshot_.pending[at]);
    if (fifo_order_) {
      // Out of the order; the last job moves into its place in `pending`.
      auto& order = snapshot_.pending_order;
      order.erase(std::find(order.begin(), order.end(), static_cast<uint32_t>(at)));
      const auto last = static_cast<uint32_t>(snapshot_.pending.size() - 1);
      // The last job in `pending` arrived last: it is found from the back.
      if (at != last) *std::find(order.rbegin(), order.rend(), last) = static_cast<uint32_t>(at);
    }
    RemoveAt(snapshot_.pending, pending_position_, at);

    for (const auto& share : start.allocation) ApplyShare(share, +1);
    // Its request's wall time is the trace's (RequestFor): the end the
    // replay's scheduler expects, as the daemon's would.
    running_position_[job.id] = snapshot_.running.size();
    snapshot_.running.push_back(scheduler::StartedJob(std::move(static_cast<scheduler::JobFacts&>(pending)),
                                                      std::move(start.allocation), FromUnixMillis(now)));

    start_ms_[i] = now;
    used_ += job.size;
    terminations_.push({now + job.run_ms, next_sequence_++, i});
  }

  // Frees a running job's resources; a second call for the same job does nothing.
  void Finish(size_t i) {
    auto position = running_position_.find(jobs_[i].id);
    if (position == running_position_.end()) return;
    used_ -= jobs_[i].size;
    if (predicts_) predictor_.Record(jobs_[i].user, {}, CeilDiv(jobs_[i].run_ms, 1000));
    for (const auto& share : snapshot_.running[position->second].allocation) ApplyShare(share, -1);
    // The last pass's profile holds its room until its expected end: the
    // next pass gives it back from then (Snapshot::ended_early).
    if (carries_profiles_ && jobs_[i].run_ms != WalltimeSeconds(jobs_[i]) * 1000) {
      snapshot_.ended_early.push_back(std::move(snapshot_.running[position->second]));
    }
    RemoveAt(snapshot_.running, running_position_, position->second);
  }

  void ApplyShare(const model::NodeAllocation& share, int sign) {
    auto node = node_index_.find(share.node);
    if (node != node_index_.end()) snapshot_.nodes[node->second].Apply(share, sign);
  }

  // Removes items[at] by moving the last item into its place (order does not
  // matter to Decide: it sorts pending jobs itself).
  template <class T>
  static void RemoveAt(std::vector<T>& items, std::unordered_map<model::JobId, size_t>& positions, size_t at) {
    positions.erase(items[at].id);
    if (at + 1 != items.size()) {
      items[at] = std::move(items.back());
      positions[items[at].id] = at;
    }
    items.pop_back();
  }

  const std::vector<TraceJob>& jobs_;
  const SimCluster& cluster_;
  scheduler::Scheduler scheduler_;
  scheduler::Snapshot snapshot_;
  std::vector<model::ResourceRequest> requests_;  // per job
  std::vector<size_t> submit_order_;              // job indices by submit time, trace order among equals
  std::unordered_map<std::string, size_t> node_index_;
  std::unordered_map<model::JobId, size_t> job_index_;
  std::unordered_map<model::JobId, size_t> pending_position_;
  std::unordered_map<model::JobId, size_t> running_position_;
  std::priority_queue<Termination, std::vector<Termination>, std::greater<>> terminations_;
  std::vector<int64_t> start_ms_;
  std::vector<int64_t> estimate_ms_;  // per job: its reservation after its arrival's pass, -1: none
  int64_t next_sequence_ = 0;
  int64_t passes_ = 0;
  int64_t skipped_passes_ = 0;
  int64_t max_pending_ = 0;
  int64_t used_ = 0;  // processors (or GPUs) held by running jobs
  model::BackfillMode mode_ = model::BackfillMode::kEasy;
  // The pool plans with predicted run times: each job gets its prediction
  // at submission, and each end teaches the predictor.
  bool predicts_ = false;
  // EASY and conservative passes hand each one's profile to the next
  // (SimCluster::carry_profiles), with the jobs that ended early in between.
  bool carries_profiles_ = false;
  std::shared_ptr<const scheduler::PoolProfile> profile_;  // the last Decide's
  policy::RunTimePredictor predictor_;
  PredictionAccuracy accuracy_;
  bool fifo_order_ = false;
  bool no_limits_ = true;             // the replay's queue and projects set no quota, cap or budget
  std::multiset<int> pending_sizes_;  // the pending jobs' sizes: the first is the smallest
};

}  // namespace

SimulationResult Simulate(const std::vector<TraceJob>& jobs, const SimCluster& cluster,
                          const ProgressCallback& progress) {
  Replay replay(jobs, cluster);
  return replay.Run(progress);
}

}  // namespace unisched::sim
