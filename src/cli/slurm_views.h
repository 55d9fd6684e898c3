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
// (start time; a waiting job's estimated start), e (end time), E
// (dependency), A and F (array job id), K (array task index), L (time
// left), p (priority), Z (working directory), o (command), c (CPUs per
// node), m (memory per node). A width pads on the right, or on the left
// after '.' (Slurm's right-justify); a longer value is cut to it. An
// unknown letter is a usage error naming it. The default is Slurm's:
inline constexpr const char* kSqueueDefaultFormat = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
// squeue -l and squeue --start:
inline constexpr const char* kSqueueLongFormat = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
inline constexpr const char* kSqueueStartFormat = "%.18i %.9P %.8j %.8u %.2t %.20S %.5D %R";
// `header` false: squeue -h (--noheader).
Result<std::string> FormatSqueue(const std::vector<nlohmann::json>& jobs, const std::string& format, Timestamp now,
                                 bool header = true);

// squeue -r: each waiting task of an array parent as a row of its own
// (ID_INDEX, the parent's facts), as Slurm lists an array expanded; other
// jobs as they are. A parent none of whose tasks waits any more is left
// out (its tasks are rows of their own), as Slurm never lists it.
std::vector<nlohmann::json> ExpandArrays(const std::vector<nlohmann::json>& jobs, bool expand);

// sacct's --format: comma-separated fields, case-insensitive, each with an
// optional %width (JobID%20); `usage` maps a job id to its ledger metrics
// (/v1/usage?group_by=job). Times as sacct prints them (2026-12-07T06:51:18,
// UTC; Unknown when not yet), durations [D-]HH:MM:SS, ExitCode code:signal
// (a job killed by signal 9: 0:9). Fields: JobID, JobName, User, Account,
// Partition, State, ExitCode, Submit, Start, End, Elapsed, Timelimit,
// AllocCPUS, AllocNodes, AllocGPUS, NodeList, Reason, CPUTime and
// CPUTimeRAW (allocated core-seconds), TotalCPU (used user+system CPU),
// GPUTimeRAW, MaxRSS. Unknown fields are a usage error naming them.
inline constexpr const char* kSacctDefaultFormat = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode";
struct SacctLayout {
  bool header = true;         // false: -n (--noheader)
  bool parsable = false;      // -p / -P: fields joined by '|', no padding
  bool trailing_bar = false;  // -p: a '|' after the last field too
};
Result<std::string> FormatSacct(const std::vector<nlohmann::json>& jobs, const nlohmann::json& usage_by_job,
                                const std::string& format, Timestamp now, const SacctLayout& layout = {});

}  // namespace unisched::cli
