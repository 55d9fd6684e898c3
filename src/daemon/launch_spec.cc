// The launch spec of a job's attempt (launch_spec.h).

#include "daemon/launch_spec.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "unisched/model/output_pattern.h"
#include "unisched/model/words.h"

namespace unisched::daemon {

int RendezvousPort(model::JobId job_id) {
  return kRendezvousPortBase + static_cast<int>(job_id % kRendezvousPorts);
}

namespace {

// The GPUs or CPUs of a task: its node's, or its slice of them when the
// node's tasks share it (tasks_per_node divides the node's GPUs: checked
// at submit; its CPUs: each task has cpus / tasks_per_node of them, the
// remainder left to none).
std::vector<int> TaskShare(const std::vector<int>& node_ids, int tasks_per_node, const TaskPlace& place) {
  if (place.whole_node || tasks_per_node <= 1) return node_ids;
  const size_t each = node_ids.size() / static_cast<size_t>(tasks_per_node);
  const size_t from = std::min(each * static_cast<size_t>(place.local_rank), node_ids.size());
  const size_t to = std::min(from + each, node_ids.size());
  return {node_ids.begin() + static_cast<std::ptrdiff_t>(from), node_ids.begin() + static_cast<std::ptrdiff_t>(to)};
}

// The task's CPU set: its share of its node's cpu_ids (empty for attempts
// stored before shares had ids).
std::vector<int> TaskCpus(const model::Attempt& attempt, int tasks_per_node, const TaskPlace& place) {
  if (place.node_rank < 0 || static_cast<size_t>(place.node_rank) >= attempt.allocation.size()) return {};
  return TaskShare(attempt.allocation[static_cast<size_t>(place.node_rank)].cpu_ids, tasks_per_node, place);
}

}  // namespace

std::string CpuListText(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t last = i;  // the end of a run of consecutive ids
    while (last + 1 < cpus.size() && cpus[last + 1] == cpus[last] + 1) ++last;
    if (!text.empty()) text += ',';
    text += std::to_string(cpus[i]);
    if (last > i) text += '-' + std::to_string(cpus[last]);
    i = last + 1;
  }
  return text;
}

std::map<std::string, std::string> JobEnvironment(const model::Job& job, const model::Attempt& attempt,
                                                  const std::string& unix_user, const TaskPlace& place) {
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
  const std::string node_list = model::Join(nodes, ',');
  env["UNISCHED_JOB_ID"] = std::to_string(job.id);
  env["UNISCHED_JOB_NAME"] = job.name;
  env["UNISCHED_ATTEMPT"] = std::to_string(attempt.number);
  env["UNISCHED_NODELIST"] = node_list;
  env["UNISCHED_QUEUE"] = job.queue;
  env["UNISCHED_POOL"] = job.pool;
  env["UNISCHED_PROJECT"] = job.project;
  env["UNISCHED_USER"] = job.user;
  // The job's shape: tasks_per_node tasks on each of its nodes, ranked node
  // by node (rank = node_rank * tasks_per_node + local_rank), as srun and
  // torchrun number them. A batch script is rank 0 on the first node, with
  // the shape its steps will have (as sbatch's environment says it).
  const int node_count = nodes.empty() ? std::max(job.resources.nodes, 1) : static_cast<int>(nodes.size());
  const int per_node = std::max(job.resources.tasks_per_node, 1);
  const int world = node_count * per_node;
  const int cpus_per_task = std::max(job.resources.cpus / per_node, 1);
  const int task_cpus = place.whole_node ? job.resources.cpus : cpus_per_task;
  const std::string node_name =
      static_cast<size_t>(place.node_rank) < nodes.size() ? nodes[static_cast<size_t>(place.node_rank)] : "";
  const std::string master_address = place.master_address.empty() ? "127.0.0.1" : place.master_address;
  const int master_port = place.master_port > 0 ? place.master_port : RendezvousPort(job.id);
  // Slurm's compressed per-node counts: "4(x2)" is 4 on each of 2 nodes.
  auto per_node_list = [node_count](int each) {
    return node_count == 1 ? std::to_string(each) : std::to_string(each) + "(x" + std::to_string(node_count) + ")";
  };
  const std::string shape[][2] = {
      {"UNISCHED_NNODES", std::to_string(node_count)},
      {"UNISCHED_NTASKS", std::to_string(world)},
      {"UNISCHED_TASKS_PER_NODE", std::to_string(per_node)},
      {"UNISCHED_RANK", std::to_string(place.rank)},
      {"UNISCHED_NODE_RANK", std::to_string(place.node_rank)},
      {"UNISCHED_LOCAL_RANK", std::to_string(place.local_rank)},
      {"UNISCHED_NODE", node_name},
      {"UNISCHED_CPUS_PER_TASK", std::to_string(cpus_per_task)},
      {"UNISCHED_MASTER_ADDR", master_address},
      {"UNISCHED_MASTER_PORT", std::to_string(master_port)},
      // torch.distributed's env:// rendezvous reads these (torchrun sets them).
      {"MASTER_ADDR", master_address},
      {"MASTER_PORT", std::to_string(master_port)},
      {"WORLD_SIZE", std::to_string(world)},
      {"RANK", std::to_string(place.rank)},
      {"LOCAL_RANK", std::to_string(place.local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(per_node)},
      {"NODE_RANK", std::to_string(place.node_rank)},
      {"SLURM_JOB_ID", std::to_string(job.id)},
      {"SLURM_JOBID", std::to_string(job.id)},
      {"SLURM_JOB_NAME", job.name},
      {"SLURM_JOB_NODELIST", node_list},
      {"SLURM_NODELIST", node_list},
      {"SLURM_JOB_NUM_NODES", std::to_string(node_count)},
      {"SLURM_NNODES", std::to_string(node_count)},
      {"SLURM_NTASKS", std::to_string(world)},
      {"SLURM_NPROCS", std::to_string(world)},
      {"SLURM_NTASKS_PER_NODE", std::to_string(per_node)},
      {"SLURM_TASKS_PER_NODE", per_node_list(per_node)},
      {"SLURM_JOB_CPUS_PER_NODE", per_node_list(job.resources.cpus)},
      {"SLURM_CPUS_PER_TASK", std::to_string(cpus_per_task)},
      {"SLURM_CPUS_ON_NODE", std::to_string(job.resources.cpus)},
      {"SLURM_MEM_PER_NODE", std::to_string(job.resources.memory_mb)},  // MB, as Slurm's
      {"SLURM_PROCID", std::to_string(place.rank)},
      {"SLURM_NODEID", std::to_string(place.node_rank)},
      {"SLURM_LOCALID", std::to_string(place.local_rank)},
      {"SLURMD_NODENAME", node_name},
      {"SLURM_JOB_PARTITION", job.queue},
      {"SLURM_JOB_ACCOUNT", job.project},
      {"SLURM_JOB_USER", job.user},
      {"SLURM_RESTART_COUNT", std::to_string(std::max(attempt.number - 1, 0))},
      {"OMP_NUM_THREADS", std::to_string(task_cpus)},
  };
  for (const auto& [name, value] : shape) env[name] = value;
  if (job.resources.gpus > 0 && static_cast<size_t>(place.node_rank) < attempt.allocation.size()) {
    std::vector<std::string> indices;
    for (int i : TaskShare(attempt.allocation[static_cast<size_t>(place.node_rank)].gpu_indices, per_node, place)) {
      indices.push_back(std::to_string(i));
    }
    env["CUDA_VISIBLE_DEVICES"] = model::Join(indices, ',');
  }
  if (std::vector<int> cpus = TaskCpus(attempt, per_node, place); !cpus.empty()) {
    env["UNISCHED_CPU_SET"] = CpuListText(std::move(cpus));
  }
  return env;
}

namespace {

// Slurm's -o and -e for one task (the job's patterns expanded for its rank
// and node); as sbatch, stderr goes to the output file when no error file
// is named.
void PlaceOutputFiles(executor::LaunchSpec& spec, const model::Job& job) {
  const model::OutputPlace place{job.id,
                                 spec.task,
                                 spec.node,
                                 job.user,
                                 job.name,
                                 job.array_task ? job.array_task->array_job_id : 0,
                                 job.array_task ? job.array_task->index : 0};
  spec.output_file = job.output_file.empty() ? std::string() : model::ExpandOutputPattern(job.output_file, place);
  spec.error_file = job.error_file.empty() ? spec.output_file : model::ExpandOutputPattern(job.error_file, place);
}

}  // namespace

executor::LaunchSpec BuildLaunchSpec(const config::Config& config, const model::Job& job, const std::string& unix_user,
                                     bool as_root, const std::string& master_address) {
  const model::Attempt& attempt = *job.CurrentAttempt();
  executor::LaunchSpec spec;
  spec.job_id = job.id;
  spec.attempt = attempt.number;
  spec.argv = job.command;
  spec.script = job.script.str();
  spec.chdir = job.workdir;
  spec.env = JobEnvironment(job, attempt, unix_user, TaskPlace{0, 0, 0, master_address, 0, true});
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
    spec.cpu_set = attempt.allocation.front().cpu_ids;
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
  // The shared file systems given to the job's pool (docs/data.md).
  for (const config::SharedFileSystem& fs : config.storage.shared) {
    if (!fs.pools.empty() && std::find(fs.pools.begin(), fs.pools.end(), job.pool) == fs.pools.end()) continue;
    executor::SharedMount mount;
    mount.path = fs.path;
    mount.mount = fs.mount.empty() ? fs.path : fs.mount;
    mount.read_only = fs.read_only;
    if (fs.project_dirs) mount.project = job.project;
    mount.variable = config::SharedVariable(fs.name);
    spec.shared.push_back(std::move(mount));
  }
  PlaceOutputFiles(spec, job);
  return spec;
}

namespace {

// One spec per task of `job`'s current attempt: tasks_per_node on each of
// its allocated nodes, ranked node by node, from `first`.
std::vector<executor::LaunchSpec> ExpandTasks(const executor::LaunchSpec& first, const model::Job& job,
                                              const std::string& unix_user, const std::string& master_address) {
  const model::Attempt& attempt = *job.CurrentAttempt();
  const int per_node = std::max(job.resources.tasks_per_node, 1);
  std::vector<executor::LaunchSpec> tasks;
  for (size_t n = 0; n < attempt.allocation.size(); ++n) {
    const model::NodeAllocation& node = attempt.allocation[n];
    for (int local = 0; local < per_node; ++local) {
      executor::LaunchSpec task = first;
      const int rank = static_cast<int>(n) * per_node + local;
      task.task = rank;
      task.node = node.node;
      const TaskPlace place{rank, static_cast<int>(n), local, master_address, 0, false};
      task.env = JobEnvironment(job, attempt, unix_user, place);
      // Its share of the node's cgroup caps: the node's divided among its tasks.
      task.limits.memory_bytes = node.memory_mb * (int64_t{1} << 20) / per_node;
      task.limits.cpu_millis = int64_t{node.cpus} * 1000 / per_node;
      task.cpu_set = TaskCpus(attempt, per_node, place);
      PlaceOutputFiles(task, job);
      tasks.push_back(std::move(task));
    }
  }
  return tasks;
}

}  // namespace

std::vector<executor::LaunchSpec> BuildGangSpecs(const executor::LaunchSpec& first, const model::Job& job,
                                                 const std::string& unix_user, const std::string& master_address) {
  const size_t nodes = job.CurrentAttempt()->allocation.size();
  const size_t per_node = static_cast<size_t>(std::max(job.resources.tasks_per_node, 1));
  if (job.launch != model::LaunchMode::kPerNode || nodes * per_node < 2) {
    return {};
  }
  return ExpandTasks(first, job, unix_user, master_address);
}

Result<std::vector<executor::LaunchSpec>> BuildStepSpecs(const executor::LaunchSpec& first, const model::Job& job,
                                                         const service::StepRequest& request, int step,
                                                         const std::string& unix_user) {
  const model::Attempt& attempt = *job.CurrentAttempt();
  // The step's nodes: those named, else the first N (default all) of the job's.
  model::Allocation nodes;
  if (!request.node_names.empty()) {
    for (const std::string& name : request.node_names) {
      auto it = std::find_if(attempt.allocation.begin(), attempt.allocation.end(),
                             [&](const model::NodeAllocation& a) { return a.node == name; });
      if (it == attempt.allocation.end()) {
        std::vector<std::string> names;
        for (const auto& a : attempt.allocation) names.push_back(a.node);
        return Error::Unprocessable("invalid_value",
                                    "node " + name + " is not one of job " + std::to_string(job.id) + "'s nodes (" +
                                        model::Join(names, ',') + "); name only those",
                                    "node_names");
      }
      if (std::none_of(nodes.begin(), nodes.end(), [&](const auto& a) { return a.node == name; })) nodes.push_back(*it);
    }
  } else {
    const int want = request.nodes.value_or(static_cast<int>(attempt.allocation.size()));
    if (want < 1 || static_cast<size_t>(want) > attempt.allocation.size()) {
      return Error::Unprocessable("invalid_value",
                                  "job " + std::to_string(job.id) + " has " +
                                      std::to_string(attempt.allocation.size()) + " nodes; a step may use 1 to " +
                                      std::to_string(attempt.allocation.size()) + " of them, not " +
                                      std::to_string(want),
                                  "nodes");
    }
    nodes.assign(attempt.allocation.begin(), attempt.allocation.begin() + want);
  }
  const int per_node = request.tasks_per_node.value_or(std::max(job.resources.tasks_per_node, 1));
  if (per_node < 1 || per_node > job.resources.cpus) {
    return Error::Unprocessable("invalid_value",
                                "tasks_per_node must be 1 to the job's cpus per node (" +
                                    std::to_string(job.resources.cpus) + "), not " + std::to_string(per_node),
                                "tasks_per_node");
  }
  // The step as a gang of its own: the job with the step's command, nodes,
  // shape and environment.
  model::Job step_job = job;
  step_job.command = request.command;
  step_job.launch = model::LaunchMode::kPerNode;
  step_job.resources.tasks_per_node = per_node;
  for (const auto& [k, v] : request.env) step_job.env[k] = v;
  step_job.attempts.back().allocation = nodes;
  executor::LaunchSpec base = first;
  base.argv = request.command;
  base.script.clear();  // a step runs its command, in the batch script's directory (chdir kept, as srun's)
  // A step's output is `unisched step`'s, which prints it into the batch
  // script's output (and so its -o file), as srun's.
  step_job.output_file.clear();
  step_job.error_file.clear();
  const std::string master = first.env.count("UNISCHED_MASTER_ADDR") ? first.env.at("UNISCHED_MASTER_ADDR") : "";
  std::vector<executor::LaunchSpec> tasks = ExpandTasks(base, step_job, unix_user, master);
  for (executor::LaunchSpec& task : tasks) {
    task.env["UNISCHED_STEP"] = std::to_string(step);
    task.env["SLURM_STEP_ID"] = std::to_string(step);
    task.env["SLURM_STEPID"] = std::to_string(step);
    task.env["SLURM_STEP_NUM_NODES"] = std::to_string(nodes.size());
    task.env["SLURM_STEP_NUM_TASKS"] = std::to_string(tasks.size());
    task.task += step * service::kStepTaskStride;
  }
  return tasks;
}

}  // namespace unisched::daemon
