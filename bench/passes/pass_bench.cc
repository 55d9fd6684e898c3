// unisched-pass-bench: the daemon's two kinds of scheduling pass on the
// cycle bench's cluster (10,000 nodes in two pools, nearly full; pending
// jobs of twenty shapes from 200 users in 20 projects), through the
// daemon's own code: BuildCycleSnapshot, KeptOrder and Decide
// (docs/scheduling-cycle.md, "Full passes and event passes").
//
//   full:  every active job into the snapshot, every pending job ranked and
//          explained, the order kept (what a tick runs).
//   event: the kept order's head (scheduler.event_pass_depth per pool), the
//          jobs changed since (ten submissions) and the reserved ones, with
//          the running jobs the full pass kept (lent), ranked and walked to
//          the depth without reasons (what a submission or an end wakes).
//
// The event pass is run for several queue lengths to show that it does not
// grow with them. One JSON line per (policy, pending): p50 and p99 of each
// pass in milliseconds.
//
// usage: unisched-pass-bench [--nodes N] [--pending N,N,...] [--runs N] [--depth N]
//                            [--policy fcfs|easy|conservative|all]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "../cycle/synthetic_cluster.h"
#include "daemon/cycle_snapshot.h"
#include "daemon/kept_order.h"
#include "unisched/config/config.h"
#include "unisched/scheduler/scheduler.h"

namespace {

using namespace unisched;
using Clock = std::chrono::steady_clock;

struct Options {
  int nodes = 10000;
  std::vector<int> pending = {25000, 100000, 200000};
  int runs = 7;
  int depth = 1000;
  std::string policy = "all";
};

double Millis(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

config::Config MakeConfig(const Options& o, model::BackfillMode mode, int reservation_depth) {
  config::Config config;
  config.cluster = bench::SyntheticCluster(o.nodes, mode, reservation_depth);
  config.cluster.event_pass_depth = o.depth;
  return config;
}

// The cluster as the cycle bench fills it: every node full with jobs ending
// over the next 1-48 h but one in fifty with a quarter free.
struct World {
  std::vector<model::NodeUsage> nodes;
  std::map<model::JobId, model::Job> active;
  model::JobId next_id = 1;
};

model::Job MakeJob(model::JobId id, bool gpu, std::mt19937& rng, Timestamp submitted) {
  const auto& shapes = gpu ? bench::GpuShapes() : bench::CpuShapes();
  const bench::Shape& sh = shapes[rng() % shapes.size()];
  model::Job job;
  job.id = id;
  job.queue = gpu ? "train" : "hpc";
  job.pool = gpu ? "gpu-pool" : "cpu-pool";
  job.project = "project-" + std::to_string(rng() % 20);
  job.user = "user-" + std::to_string(rng() % 200);
  job.state = model::JobState::kPending;
  job.submitted_at = submitted;
  job.resources.nodes = sh.nodes;
  job.resources.cpus = sh.cpus;
  job.resources.memory_mb = sh.memory_mb;
  job.resources.gpus = sh.gpus;
  job.resources.walltime_seconds = sh.walltime;
  return job;
}

World MakeWorld(const config::Config& config, int pending, Timestamp now) {
  World w;
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> hours(1, 48);
  for (const auto& spec : config.cluster.nodes) {
    model::NodeUsage n;
    n.spec = spec;
    n.gpu_busy = model::BusySet(spec.gpus.size());
    const bool is_gpu = !spec.gpus.empty();
    const int per_job_cpus = is_gpu ? 4 : 16;
    const bool has_room = rng() % 50 == 0;
    const int jobs = is_gpu ? (has_room ? 6 : 8) : (has_room ? 3 : 4);
    for (int j = 0; j < jobs; ++j) {
      model::Job job;
      job.id = w.next_id++;
      job.queue = is_gpu ? "train" : "hpc";
      job.pool = spec.pool;
      job.project = "project-" + std::to_string(job.id % 20);
      job.user = "user-" + std::to_string(job.id % 200);
      job.state = model::JobState::kRunning;
      job.resources = {1, per_job_cpus, int64_t{per_job_cpus} * 4096, is_gpu ? 1 : 0, "", 48 * 3600};
      model::NodeAllocation a{spec.name, per_job_cpus, int64_t{per_job_cpus} * 4096, {}};
      if (is_gpu) a.gpu_indices = {j};
      n.Apply(a, +1);
      model::Attempt attempt;
      attempt.number = 1;
      attempt.allocation = {a};
      job.attempts.push_back(attempt);
      // Started so that it ends 1-48 h from now.
      job.started_at = now + std::chrono::hours(hours(rng)) - std::chrono::hours(48);
      job.submitted_at = *job.started_at - std::chrono::minutes(10);
      w.active.emplace(job.id, std::move(job));
    }
    w.nodes.push_back(std::move(n));
  }
  std::uniform_int_distribution<int> minutes(1, 7 * 24 * 60);
  for (int i = 0; i < pending; ++i) {
    const model::JobId id = w.next_id++;
    w.active.emplace(id, MakeJob(id, i % 5 == 0, rng, now - std::chrono::minutes(minutes(rng))));
  }
  return w;
}

double Pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
}

void Run(const Options& o, const char* name, model::BackfillMode mode, int reservation_depth, int pending) {
  const Timestamp now = FromUnixMillis(1'780'000'000'000);
  const config::Config config = MakeConfig(o, mode, reservation_depth);
  World w = MakeWorld(config, pending, now);
  const scheduler::Scheduler scheduler(scheduler::SchedulerConfig::From(config.cluster));
  const policy::DecayedUsage usage{3600.0};
  const service::SandboxHolds holds;
  std::unordered_map<model::JobId, scheduler::Reservation> reservations;
  std::vector<double> full_ms, event_ms, event_select_ms, event_snapshot_ms, event_decide_ms;
  int event_offered = 0, event_started = 0, full_started = 0;
  std::mt19937 rng(7);
  for (int run = 0; run < o.runs; ++run) {
    // A full pass, as a tick runs it.
    daemon::KeptOrder kept;
    scheduler::Plan full;
    {
      daemon::CycleState state{w.active, w.nodes, usage, {}, holds, reservations, static_cast<size_t>(pending)};
      const auto t0 = Clock::now();
      daemon::CycleSnapshot built = daemon::BuildCycleSnapshot(config, state, now);
      built.snapshot.return_order = true;
      full = scheduler.Decide(built.snapshot, now);
      kept.Rebuild(built.offered_from, full.order);
      kept.TakeBack(built.snapshot);
      full_ms.push_back(Millis(Clock::now() - t0));
      full_started = static_cast<int>(full.starts.size());
    }
    // Its reservations are handed back. (Its starts are not applied: each
    // run starts from the same cluster.)
    reservations.clear();
    for (const auto& r : full.reservations) reservations.emplace(r.job, r);
    // Ten submissions since, then an event pass.
    std::vector<model::JobId> submitted;
    for (int i = 0; i < 10; ++i) {
      const model::JobId id = w.next_id++;
      w.active.emplace(id, MakeJob(id, i % 5 == 0, rng, now));
      kept.NoteChanged(id);
      submitted.push_back(id);
    }
    {
      const auto t0 = Clock::now();
      std::vector<model::JobId> reserved;
      for (const auto& [id, r] : reservations) reserved.push_back(id);
      const std::vector<const model::Job*> candidates =
          kept.Candidates(w.active, static_cast<size_t>(o.depth), reserved);
      daemon::CycleState state{w.active, w.nodes, usage, {}, holds, reservations, candidates.size()};
      state.candidates = &candidates;
      state.most_tasks = o.depth;
      const auto t1 = Clock::now();
      daemon::CycleSnapshot built = daemon::BuildCycleSnapshot(config, state, now);
      kept.Lend(built.snapshot, w.active,
                [&](const model::Job& job) { return daemon::SnapshotOfRunning(config, job, now); });
      built.snapshot.explain = false;
      built.snapshot.max_considered = o.depth;
      const auto t2 = Clock::now();
      scheduler::Plan plan = scheduler.Decide(built.snapshot, now);
      const auto t3 = Clock::now();
      event_ms.push_back(Millis(t3 - t0));
      event_select_ms.push_back(Millis(t1 - t0));
      event_snapshot_ms.push_back(Millis(t2 - t1));
      event_decide_ms.push_back(Millis(t3 - t2));
      kept.TakeBack(built.snapshot);
      event_offered = static_cast<int>(built.snapshot.pending.size());
      event_started = static_cast<int>(plan.starts.size());
    }
    for (model::JobId id : submitted) w.active.erase(id);
  }
  std::printf(
      "{\"bench\":\"passes\",\"policy\":\"%s\",\"nodes\":%d,\"pending\":%d,\"depth\":%d,\"runs\":%d,"
      "\"full_p50_ms\":%.1f,\"full_p99_ms\":%.1f,\"full_started\":%d,"
      "\"event_p50_ms\":%.2f,\"event_p99_ms\":%.2f,\"event_offered\":%d,\"event_started\":%d,"
      "\"event_p50_select_snapshot_decide_ms\":[%.2f,%.2f,%.2f]}\n",
      name, o.nodes, pending, o.depth, o.runs, Pct(full_ms, 0.5), Pct(full_ms, 0.99), full_started, Pct(event_ms, 0.5),
      Pct(event_ms, 0.99), event_offered, event_started, Pct(event_select_ms, 0.5), Pct(event_snapshot_ms, 0.5),
      Pct(event_decide_ms, 0.5));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--policy") {
      o.policy = value;
    } else if (flag == "--nodes") {
      o.nodes = std::atoi(value.c_str());
    } else if (flag == "--runs") {
      o.runs = std::atoi(value.c_str());
    } else if (flag == "--depth") {
      o.depth = std::atoi(value.c_str());
    } else if (flag == "--pending") {
      o.pending.clear();
      std::stringstream list(value);
      for (std::string n; std::getline(list, n, ',');) o.pending.push_back(std::atoi(n.c_str()));
    } else {
      std::fprintf(stderr,
                   "unknown flag %s\nusage: unisched-pass-bench [--nodes N] [--pending N,N,...] [--runs N] "
                   "[--depth N] [--policy fcfs|easy|conservative|all]\n",
                   flag.c_str());
      return 2;
    }
  }
  if (o.runs < 1 || o.depth < 1 || o.pending.empty()) {
    std::fprintf(stderr, "--runs and --depth must be at least 1, --pending a list of counts\n");
    return 2;
  }
  const bool all = o.policy == "all";
  if (!all && o.policy != "fcfs" && o.policy != "easy" && o.policy != "conservative") {
    std::fprintf(stderr, "unknown policy %s; expected fcfs, easy, conservative or all\n", o.policy.c_str());
    return 2;
  }
  for (int pending : o.pending) {
    if (all || o.policy == "fcfs") Run(o, "fcfs", model::BackfillMode::kFcfs, 0, pending);
    if (all || o.policy == "easy") Run(o, "easy", model::BackfillMode::kEasy, 1, pending);
    if (all || o.policy == "conservative")
      Run(o, "conservative-depth-1000", model::BackfillMode::kConservative, 1000, pending);
  }
  return 0;
}
