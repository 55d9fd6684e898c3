// unisched-cycle-bench: one scheduling cycle (scheduler::Decide, the code the
// daemon and the simulator run) over a large synthetic cluster: 10,000 nodes
// in two pools, nearly full with running jobs, and 100,000 pending jobs of
// twenty shapes from 200 users in 20 projects (one node in fifty has room). Prints p50/p99 cycle time and
// the process's peak memory for FCFS, EASY and conservative backfill with a
// reservation depth of 1,000, as one JSON line per policy.
//
// usage: unisched-cycle-bench [--nodes N] [--pending N] [--runs N] [--seed N]
//                             [--policy fcfs|easy|conservative|all]

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "synthetic_cluster.h"
#include "unisched/scheduler/scheduler.h"

namespace {

using namespace unisched;

struct Options {
  int nodes = 10000;
  int pending = 100000;
  int runs = 5;
  unsigned seed = 42;
  std::string policy = "all";  // fcfs | easy | conservative | all
};

model::ClusterSpec MakeCluster(const Options& o, model::BackfillMode mode, int depth) {
  return bench::SyntheticCluster(o.nodes, mode, depth);
}

scheduler::Snapshot MakeSnapshot(const Options& o, const model::ClusterSpec& cluster, unisched::Timestamp now) {
  std::mt19937 rng(o.seed);
  scheduler::Snapshot s;
  for (const auto& spec : cluster.nodes) {
    model::NodeUsage n;
    n.spec = spec;
    n.gpu_busy = model::BusySet(spec.gpus.size());
    s.nodes.push_back(n);
  }
  // Running: every node full with jobs ending over the next 1-48 h, except
  // one node in fifty with a quarter free: the steady state of a busy
  // cluster, where cycles run often and little is free at any one of them.
  model::JobId next_id = 1;
  std::uniform_int_distribution<int> hours(1, 48);
  for (auto& n : s.nodes) {
    const bool is_gpu = !n.spec.gpus.empty();
    const int per_job_cpus = is_gpu ? 4 : 16;
    const bool has_room = rng() % 50 == 0;
    const int jobs = is_gpu ? (has_room ? 6 : 8) : (has_room ? 3 : 4);  // gpu: x (4 cpus, 1 GPU); cpu: x 16 cpus
    for (int j = 0; j < jobs; ++j) {
      scheduler::RunningJob r;
      r.id = next_id++;
      r.queue = is_gpu ? "train" : "hpc";
      r.pool = n.spec.pool;
      r.project = "project-" + std::to_string(r.id % 20);
      r.user = "user-" + std::to_string(r.id % 200);
      r.resources = {1, per_job_cpus, int64_t{per_job_cpus} * 4096, is_gpu ? 1 : 0, "", 48 * 3600};
      model::NodeAllocation a{n.spec.name, per_job_cpus, int64_t{per_job_cpus} * 4096, {}};
      if (is_gpu) a.gpu_indices = {j};
      n.Apply(a, +1);
      r.allocation = {a};
      r.started_at = now - std::chrono::hours(1);
      r.submitted_at = r.started_at - std::chrono::minutes(10);
      r.expected_end = now + std::chrono::hours(hours(rng));
      s.running.push_back(r);
    }
  }
  const std::vector<bench::Shape>& cpu_shapes = bench::CpuShapes();
  const std::vector<bench::Shape>& gpu_shapes = bench::GpuShapes();
  std::uniform_int_distribution<int> minutes(1, 7 * 24 * 60);
  for (int i = 0; i < o.pending; ++i) {
    scheduler::PendingJob p;
    p.id = next_id++;
    const bool gpu = i % 5 == 0;
    const bench::Shape& sh = gpu ? gpu_shapes[rng() % gpu_shapes.size()] : cpu_shapes[rng() % cpu_shapes.size()];
    p.queue = gpu ? "train" : "hpc";
    p.pool = gpu ? "gpu-pool" : "cpu-pool";
    p.project = "project-" + std::to_string(rng() % 20);
    p.user = "user-" + std::to_string(rng() % 200);
    p.submitted_at = now - std::chrono::minutes(minutes(rng));
    p.resources = {sh.nodes, sh.cpus, sh.memory_mb, sh.gpus, "", sh.walltime};
    s.pending.push_back(p);
  }
  for (int p = 0; p < 20; ++p) {
    for (int u = 0; u < 200; ++u) {
      s.fairshare[{"project-" + std::to_string(p), "user-" + std::to_string(u)}] =
          0.1 + 0.8 * ((p * 7 + u) % 10) / 10.0;
    }
  }
  return s;
}

long PeakRssKb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

void Run(const Options& o, const char* name, model::BackfillMode mode, int depth) {
  const unisched::Timestamp now = unisched::FromUnixMillis(1'780'000'000'000);
  const model::ClusterSpec cluster = MakeCluster(o, mode, depth);
  scheduler::Snapshot snapshot = MakeSnapshot(o, cluster, now);
  snapshot.explain = std::getenv("NO_EXPLAIN") == nullptr;
  const scheduler::Scheduler scheduler(scheduler::SchedulerConfig::From(cluster));
  std::vector<double> ms;
  scheduler::Plan last;
  for (int i = 0; i < o.runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    scheduler::Plan plan = scheduler.Decide(snapshot, now);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    last = std::move(plan);  // the previous plan is freed outside the timed cycle
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * (ms.size() - 1) + 0.5))]; };
  std::printf(
      "{\"policy\":\"%s\",\"nodes\":%d,\"pending\":%d,\"running\":%zu,\"runs\":%d,\"min_ms\":%.1f,\"p50_ms\":%.1f,"
      "\"p99_ms\":%.1f,"
      "\"starts\":%d,\"reservations\":%d,\"order_ms\":%.1f,\"fit_ms\":%.1f,\"reserve_ms\":%.1f,\"peak_rss_mb\":%.0f}\n",
      name, o.nodes, o.pending, snapshot.running.size(), o.runs, ms.front(), pct(0.5), pct(0.99), last.report.started,
      last.report.reservations, std::chrono::duration<double, std::milli>(last.report.order).count(),
      std::chrono::duration<double, std::milli>(last.report.fit).count(),
      std::chrono::duration<double, std::milli>(last.report.reserve).count(), PeakRssKb() / 1024.0);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--policy")
      o.policy = argv[i + 1];
    else if (flag == "--nodes")
      o.nodes = value;
    else if (flag == "--pending")
      o.pending = value;
    else if (flag == "--runs")
      o.runs = value;
    else if (flag == "--seed")
      o.seed = static_cast<unsigned>(value);
    else {
      std::fprintf(stderr,
                   "unknown flag %s\nusage: unisched-cycle-bench [--nodes N] [--pending N] [--runs N] [--seed N] "
                   "[--policy fcfs|easy|conservative|all]\n",
                   flag.c_str());
      return 2;
    }
  }
  const bool all = o.policy == "all" || o.policy == "both";  // "both": the old name of every policy
  if (!all && o.policy != "fcfs" && o.policy != "easy" && o.policy != "conservative") {
    std::fprintf(stderr, "unknown policy %s; expected fcfs, easy, conservative or all\n", o.policy.c_str());
    return 2;
  }
  if (all || o.policy == "fcfs") Run(o, "fcfs", model::BackfillMode::kFcfs, 0);
  if (all || o.policy == "easy") Run(o, "easy", model::BackfillMode::kEasy, 1);
  if (all || o.policy == "conservative") Run(o, "conservative-depth-1000", model::BackfillMode::kConservative, 1000);
  return 0;
}
