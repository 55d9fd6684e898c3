#pragma once
// `unisched step`: starts a command on a running job's nodes from inside the
// job (srun's part in a Slurm batch script), waits for it, prints each
// rank's output and exits with its exit code (docs/execution.md "Steps").

#include <string>
#include <vector>

namespace unisched::cli {

inline constexpr const char* kStepUsage =
    "usage: unisched step [--nodes N] [--tasks-per-node K] [--nodelist NODE,...] [--job ID] -- COMMAND [ARG...]\n"
    "       unisched step --rsh NODE COMMAND...   (a remote shell for mpirun: COMMAND runs by /bin/sh -c on NODE)\n"
    "Inside a job: UNISCHED_URL, UNISCHED_JOB_ID and UNISCHED_JOB_TOKEN say where, which job and as whom.\n"
    "Defaults: all the job's nodes, its tasks_per_node. Exit status: the highest of the ranks' (as srun's).";

int RunStep(const std::vector<std::string>& words);

}  // namespace unisched::cli
