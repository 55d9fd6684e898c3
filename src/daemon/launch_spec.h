#pragma once
// The launch spec of a job's attempt: built once, here, from the job, its
// allocation and the config, and carried as is to the local executor or an
// agent node. Pure: the account the job runs as and whether the daemon is
// root come in as arguments.

#include <map>
#include <string>

#include "unisched/config/config.h"
#include "unisched/executor/executor.h"
#include "unisched/model/job.h"

namespace unisched::daemon {

// The environment of a job: nothing of the daemon's own. A fixed PATH and
// LANG, USER and LOGNAME of its account, the job's env, then what the
// scheduler sets, which the job cannot override: UNISCHED_JOB_ID,
// _JOB_NAME, _ATTEMPT, _NODELIST, _QUEUE, _POOL, _PROJECT, _USER,
// OMP_NUM_THREADS (its cpus) and CUDA_VISIBLE_DEVICES (its GPUs' indices).
std::map<std::string, std::string> JobEnvironment(const model::Job& job, const model::Attempt& attempt,
                                                  const std::string& unix_user);

// The spec of the job's current attempt. `unix_user`: the account it runs
// as (empty: the daemon's own, when the daemon is not root). `as_root`:
// whether the daemon runs as root; only then are sandboxed pools' jobs
// isolated (namespaces and mounts need it). The cgroup caps are the first
// node's allocation (memory, cpus × 1000 millis) and executor.pids_limit.
executor::LaunchSpec BuildLaunchSpec(const config::Config& config, const model::Job& job, const std::string& unix_user,
                                     bool as_root);

}  // namespace unisched::daemon
