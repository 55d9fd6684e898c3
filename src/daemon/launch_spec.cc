// The launch spec of a job's attempt (launch_spec.h).

#include "daemon/launch_spec.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "unisched/model/words.h"

namespace unisched::daemon {

std::map<std::string, std::string> JobEnvironment(const model::Job& job, const model::Attempt& attempt,
                                                  const std::string& unix_user) {
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/bin:/usr/bin:/bin"},
      {"LANG", "C.UTF-8"},
  };
  if (!unix_user.empty()) {
    env["USER"] = unix_user;
    env["LOGNAME"] = unix_user;
  }
  for (const auto& [k, v] : job.env) env[k] = v;
  std::vector<std::string> nodes;
  for (const auto& a : attempt.allocation) nodes.push_back(a.node);
  env["UNISCHED_JOB_ID"] = std::to_string(job.id);
  env["UNISCHED_JOB_NAME"] = job.name;
  env["UNISCHED_ATTEMPT"] = std::to_string(attempt.number);
  env["UNISCHED_NODELIST"] = model::Join(nodes, ',');
  env["UNISCHED_QUEUE"] = job.queue;
  env["UNISCHED_POOL"] = job.pool;
  env["UNISCHED_PROJECT"] = job.project;
  env["UNISCHED_USER"] = job.user;
  env["OMP_NUM_THREADS"] = std::to_string(job.resources.cpus);
  // The job's shape, for the batch script that runs on its first node as
  // task 0 of one task per node (docs/execution.md, "The job's
  // environment"), and under the names Slurm gives, which scripts already
  // read: a batch step of `sbatch --nodes N --ntasks-per-node 1`.
  const int node_count = nodes.empty() ? std::max(job.resources.nodes, 1) : static_cast<int>(nodes.size());
  const std::string shape[][2] = {
      {"UNISCHED_NNODES", std::to_string(node_count)},
      {"UNISCHED_NTASKS", std::to_string(node_count)},
      {"UNISCHED_RANK", "0"},
      {"UNISCHED_NODE_RANK", "0"},
      {"UNISCHED_LOCAL_RANK", "0"},
      {"UNISCHED_CPUS_PER_TASK", std::to_string(job.resources.cpus)},
      {"SLURM_JOB_ID", std::to_string(job.id)},
      {"SLURM_JOBID", std::to_string(job.id)},
      {"SLURM_JOB_NAME", job.name},
      {"SLURM_JOB_NODELIST", model::Join(nodes, ',')},
      {"SLURM_NODELIST", model::Join(nodes, ',')},
      {"SLURM_JOB_NUM_NODES", std::to_string(node_count)},
      {"SLURM_NNODES", std::to_string(node_count)},
      {"SLURM_NTASKS", std::to_string(node_count)},
      {"SLURM_NPROCS", std::to_string(node_count)},
      {"SLURM_CPUS_PER_TASK", std::to_string(job.resources.cpus)},
      {"SLURM_CPUS_ON_NODE", std::to_string(job.resources.cpus)},
      {"SLURM_PROCID", "0"},
      {"SLURM_NODEID", "0"},
      {"SLURM_LOCALID", "0"},
      {"SLURM_JOB_PARTITION", job.queue},
      {"SLURM_JOB_ACCOUNT", job.project},
      {"SLURM_JOB_USER", job.user},
      {"SLURM_RESTART_COUNT", std::to_string(std::max(attempt.number - 1, 0))},
  };
  for (const auto& [name, value] : shape) env[name] = value;
  if (job.resources.gpus > 0 && !attempt.allocation.empty()) {
    std::vector<std::string> indices;
    for (int i : attempt.allocation.front().gpu_indices) indices.push_back(std::to_string(i));
    env["CUDA_VISIBLE_DEVICES"] = model::Join(indices, ',');
  }
  return env;
}

executor::LaunchSpec BuildLaunchSpec(const config::Config& config, const model::Job& job, const std::string& unix_user,
                                     bool as_root) {
  const model::Attempt& attempt = *job.CurrentAttempt();
  executor::LaunchSpec spec;
  spec.job_id = job.id;
  spec.attempt = attempt.number;
  spec.argv = job.command;
  spec.env = JobEnvironment(job, attempt, unix_user);
  spec.unix_user = unix_user;
  spec.walltime_seconds = job.resources.walltime_seconds;
  spec.kill_grace_seconds = config.executor.kill_grace_seconds;
  if (const model::QueueSpec* queue = config.cluster.FindQueue(job.queue)) {
    spec.preempt_grace_seconds = queue->policy.preempt_grace_seconds;
  }
  if (!attempt.allocation.empty()) {
    spec.limits.memory_bytes = attempt.allocation.front().memory_mb * (int64_t{1} << 20);
    spec.limits.cpu_millis = attempt.allocation.front().cpus * 1000;
    spec.node = attempt.allocation.front().node;
  } else {
    // Placed by its pool's backend: the caps of one node's share as asked.
    spec.limits.memory_bytes = job.resources.memory_mb * (int64_t{1} << 20);
    spec.limits.cpu_millis = int64_t{job.resources.cpus} * 1000;
  }
  spec.limits.pids = config.executor.pids_limit;
  spec.log_cap_bytes = config.store.max_log_bytes;
  // Namespaces and mounts need root; a daemon started by an ordinary user
  // (development) runs sandboxed pools' jobs without them (warned at start).
  if (const model::PoolSpec* pool = config.cluster.FindPool(job.pool)) spec.isolate = pool->sandbox && as_root;
  if (spec.isolate) {
    // A uid of its own per attempt, from the sandboxes' range (docs/sandboxes.md).
    spec.sandbox_uid_base = config.sandboxes.uid_base;
    spec.sandbox_uid_count = config.sandboxes.uid_count;
    spec.sandbox_uid_lock_dir = config.sandboxes.uid_lock_dir;
  }
  return spec;
}

}  // namespace unisched::daemon
