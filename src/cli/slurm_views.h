#pragma once
// squeue's and sacct's views of jobs, as Slurm users type them
// (docs/slurm.md): `--format` specifications applied to the API's job
// objects. Pure: the tests give jobs and a time and check the text.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"

namespace unisched::cli {

// squeue's compact state: PD (PENDING and HELD), R, CD, F, CA, TO, NF.
std::string CompactState(const std::string& state);

// squeue's --format: %[-][.][width]<letter> fields and literal text, Slurm's
// letters i (id), j (name), u (user), a (account: project), P (partition:
// queue), q (pool), t (compact state), T (state), M (time used), l (time
// limit), D (nodes), C (CPUs), b (GPUs), R (reason when waiting, else node
// list), r (reason), N (node list), Q (priority), V (submit time), S
// (start time), e (end time). A width pads on the right, or on the left
// after '.' (Slurm's right-justify); a longer value is cut to it. An
// unknown letter is a usage error naming it. The default is Slurm's:
inline constexpr const char* kSqueueDefaultFormat = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
Result<std::string> FormatSqueue(const std::vector<nlohmann::json>& jobs, const std::string& format, Timestamp now);

// sacct's --format: comma-separated fields, case-insensitive, each with an
// optional %width (JobID%20); `usage` maps a job id to its ledger metrics
// (/v1/usage?group_by=job). Fields: JobID, JobName, User, Account,
// Partition, State, ExitCode, Submit, Start, End, Elapsed, Timelimit,
// AllocCPUS, AllocNodes, AllocGPUS, NodeList, Reason, CPUTime and
// CPUTimeRAW (allocated core-seconds), TotalCPU (used user+system CPU),
// GPUTimeRAW, MaxRSS. Unknown fields are a usage error naming them.
inline constexpr const char* kSacctDefaultFormat = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode";
Result<std::string> FormatSacct(const std::vector<nlohmann::json>& jobs, const nlohmann::json& usage_by_job,
                                const std::string& format, Timestamp now);

}  // namespace unisched::cli
