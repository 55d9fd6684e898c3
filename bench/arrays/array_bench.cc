// unisched-array-bench: what a 100,000-task job array costs the scheduling
// cycle against 100,000 ordinary pending jobs (docs/arrays.md, issue 21's
// goal: no more). Both go through the daemon's own code: BuildCycleSnapshot
// (where an array is expanded into its waiting tasks) and Decide, on a
// cluster of 1,000 full nodes so that every job is ranked and none starts.
// Prints one JSON line per case: p50 and max of snapshot and decide times.
//
// usage: unisched-array-bench [--tasks N] [--runs N]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "daemon/cycle_snapshot.h"
#include "unisched/config/config.h"
#include "unisched/scheduler/scheduler.h"

namespace {

using namespace unisched;
using Clock = std::chrono::steady_clock;

constexpr int kNodes = 1000;

config::Config MakeConfig() {
  std::string yaml = "pools:\n  - name: cpu\n    kind: cpu\n    nodes: [";
  for (int i = 0; i < kNodes; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "x86-c64m256-hpc-%04d", i);
    yaml += (i ? ", " : "") + std::string(name);
  }
  yaml += "]\nnodes:\n";
  for (int i = 0; i < kNodes; ++i) {
    char line[128];
    std::snprintf(line, sizeof line, "  - {name: x86-c64m256-hpc-%04d, cpus: 64, memory_mb: 262144}\n", i);
    yaml += line;
  }
  yaml += "queues:\n  - name: batch\n    pool: cpu\nprojects:\n  - name: default\n";
  auto loaded = config::LoadConfigText(yaml);
  if (auto* errors = std::get_if<std::vector<config::ConfigError>>(&loaded)) {
    for (const auto& e : *errors) std::fprintf(stderr, "%s\n", e.ToString().c_str());
    std::exit(2);
  }
  return std::get<config::Config>(std::move(loaded));
}

model::Job Template(Timestamp now) {
  model::Job job;
  job.queue = "batch";
  job.pool = "cpu";
  job.project = "default";
  job.user = "alice";
  job.name = "sweep";
  job.state = model::JobState::kPending;
  job.resources.cpus = 1;
  job.resources.memory_mb = 1024;
  job.resources.walltime_seconds = 3600;
  job.command = {"/bin/sh", "-c", "./simulate --seed $SLURM_ARRAY_TASK_ID"};
  job.submitted_at = now - std::chrono::minutes(5);
  return job;
}

double Millis(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

void Run(const char* name, const config::Config& config, const std::map<model::JobId, model::Job>& active, int runs,
         Timestamp now) {
  // Every node full: the cycle ranks every job and starts none.
  std::vector<model::NodeUsage> nodes;
  for (const auto& node : config.cluster.nodes) {
    model::NodeUsage u;
    u.spec = node;
    u.cpus_used = node.cpus;
    u.memory_used_mb = node.memory_mb;
    nodes.push_back(u);
  }
  const policy::DecayedUsage usage{3600.0};
  const service::SandboxHolds holds;
  const std::unordered_map<model::JobId, scheduler::Reservation> reservations;
  const scheduler::Scheduler scheduler(scheduler::SchedulerConfig::From(config.cluster));
  std::vector<double> snapshot_ms, decide_ms;
  size_t pending = 0;
  for (int run = 0; run < runs; ++run) {
    const daemon::CycleState state{active, nodes, usage, {}, holds, reservations, 100000};
    const auto t0 = Clock::now();
    daemon::CycleSnapshot built = daemon::BuildCycleSnapshot(config, state, now);
    const auto t1 = Clock::now();
    scheduler::Plan plan = scheduler.Decide(built.snapshot, now);
    const auto t2 = Clock::now();
    if (!plan.starts.empty()) std::fprintf(stderr, "%s: %zu jobs started on full nodes\n", name, plan.starts.size());
    pending = built.snapshot.pending.size();
    snapshot_ms.push_back(Millis(t1 - t0));
    decide_ms.push_back(Millis(t2 - t1));
  }
  std::sort(snapshot_ms.begin(), snapshot_ms.end());
  std::sort(decide_ms.begin(), decide_ms.end());
  std::printf(
      "{\"bench\":\"array_cycle\",\"case\":\"%s\",\"active_jobs\":%zu,\"pending_offered\":%zu,\"runs\":%d,"
      "\"snapshot_ms_p50\":%.1f,\"snapshot_ms_max\":%.1f,\"decide_ms_p50\":%.1f,\"decide_ms_max\":%.1f}\n",
      name, active.size(), pending, runs, snapshot_ms[snapshot_ms.size() / 2], snapshot_ms.back(),
      decide_ms[decide_ms.size() / 2], decide_ms.back());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t tasks = 100000;
  int runs = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--tasks" && i + 1 < argc) {
      tasks = std::atoll(argv[++i]);
    } else if (flag == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: unisched-array-bench [--tasks N] [--runs N]\n");
      return 2;
    }
  }
  const config::Config config = MakeConfig();
  const Timestamp now = std::chrono::time_point_cast<Timestamp::duration>(std::chrono::system_clock::now());

  std::map<model::JobId, model::Job> ordinary;
  for (int64_t i = 0; i < tasks; ++i) {
    model::Job job = Template(now);
    job.id = i + 1;
    ordinary.emplace(job.id, std::move(job));
  }
  std::map<model::JobId, model::Job> array;
  {
    model::Job parent = Template(now);
    parent.id = 1;
    model::JobArray a;
    a.indices = model::IndexSet::Parse("0-" + std::to_string(tasks - 1), "indices").value();
    a.waiting = a.indices;
    a.first_task_id = 2;
    parent.array = std::move(a);
    array.emplace(parent.id, std::move(parent));
  }
  Run("ordinary_jobs", config, ordinary, runs, now);
  Run("one_array", config, array, runs, now);
  return 0;
}
