#pragma once
// The launch spec of a job's attempt: built once, here, from the job, its
// allocation and the config, and carried as is to the local executor or an
// agent node. Pure: the account the job runs as and whether the daemon is
// root come in as arguments.

#include <map>
#include <string>
#include <vector>

#include "unisched/config/config.h"
#include "unisched/executor/executor.h"
#include "unisched/model/job.h"
#include "unisched/service/planes.h"

namespace unisched::daemon {

// Where one task of an attempt stands in it: its rank among all tasks
// (node_rank * tasks_per_node + local_rank), and how to reach rank 0.
struct TaskPlace {
  int rank = 0;
  int node_rank = 0;           // its node's index in the allocation
  int local_rank = 0;          // among its node's tasks
  std::string master_address;  // rank 0's node, as other nodes reach it
  int master_port = 0;         // for the ranks' rendezvous
  // A batch script has its whole first node (all its CPUs and GPUs); a
  // gang's task its share (the node's divided by tasks_per_node).
  bool whole_node = true;
};

// A CPU set in the kernel's list format (cpuset.cpus, taskset -c): sorted,
// runs of consecutive ids as ranges, e.g. "0-3,8".
std::string CpuListText(std::vector<int> cpus);

// The port a job's ranks meet on (MASTER_PORT): one of 20000 below
// kRendezvousPortBase + kRendezvousPorts, by job id, so that every task and
// a recovered launch compute the same one. Ports above 32768 are Linux's
// ephemeral range, so none is taken by an outgoing connection.
inline constexpr int kRendezvousPortBase = 12000;
inline constexpr int kRendezvousPorts = 20000;
int RendezvousPort(model::JobId job_id);

// The environment of a job's task: nothing of the daemon's own. A fixed
// PATH and LANG, USER and LOGNAME of its account, the job's env, then what
// the scheduler sets, which the job cannot override: UNISCHED_JOB_ID,
// _JOB_NAME, _ATTEMPT, _NODELIST, _QUEUE, _POOL, _PROJECT, _USER, the job's
// shape and the task's place in it (docs/execution.md, "The job's
// environment"), under unisched's, Slurm's and torchrun's names,
// OMP_NUM_THREADS (its cpus per task) and CUDA_VISIBLE_DEVICES (its GPUs).
std::map<std::string, std::string> JobEnvironment(const model::Job& job, const model::Attempt& attempt,
                                                  const std::string& unix_user, const TaskPlace& place = {});

// The spec of the job's current attempt. `unix_user`: the account it runs
// as (empty: the daemon's own, when the daemon is not root). `as_root`:
// whether the daemon runs as root; only then are sandboxed pools' jobs
// isolated (namespaces and mounts need it). The cgroup caps are the first
// node's allocation (memory, cpus × 1000 millis) and executor.pids_limit.
executor::LaunchSpec BuildLaunchSpec(const config::Config& config, const model::Job& job, const std::string& unix_user,
                                     bool as_root, const std::string& master_address = {});

// A gang's tasks (launch per_node, more than one task): `first` (task 0, as
// BuildLaunchSpec made it) for every rank, each on its node with its place
// in the environment, its share of its node's GPUs and of its cgroup caps
// (the node's divided by tasks_per_node). Empty for an attempt of one task.
std::vector<executor::LaunchSpec> BuildGangSpecs(const executor::LaunchSpec& first, const model::Job& job,
                                                 const std::string& unix_user, const std::string& master_address);

// Step `step` of the job's running attempt: its command as a gang of its
// own on the nodes it asks for (a subset of the job's, the first N, or all),
// tasks_per_node on each (default the job's), each with its place in the
// step and UNISCHED_STEP / SLURM_STEP_ID; task numbers step * kStepTaskStride
// + rank. `first`: the attempt's spec (account, caps, MASTER_ADDR). An error
// names the request's field at fault.
Result<std::vector<executor::LaunchSpec>> BuildStepSpecs(const executor::LaunchSpec& first, const model::Job& job,
                                                         const service::StepRequest& request, int step,
                                                         const std::string& unix_user);

}  // namespace unisched::daemon
