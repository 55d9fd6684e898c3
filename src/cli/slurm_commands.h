#pragma once
// The commands Slurm users type, over the API (docs/slurm.md): squeue,
// sacct, scancel with filters, scontrol's requeue and update.

#include <functional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/session.h"

namespace unisched::cli {

inline constexpr const char* kSqueueUsage =
    "[--me] [-u USER[,...]] [-t STATE[,...]] [-p QUEUE[,...]] [-A PROJECT[,...]] [-j ID[,...]] [-n NAME[,...]]\n"
    "       [-r|--array] [-h|--noheader] [-l|--long] [--start] [-o|--format FMT] [--json]\n"
    "  Waiting and running jobs (all states with -t ALL; states also as PD, R, CD, CA, F, TO, NF). -r lists an\n"
    "  array's waiting tasks one per row. Slurm's --format letters: %i %j %u %a %P %q %t %T %M %l %D %C %b %R %r\n"
    "  %N %Q %p %V %S %e %E %A %F %K %L %Z %o %c %m, widths as %.18i\n"
    "  (default \"%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R\").";
inline constexpr const char* kSacctUsage =
    "[--me|-u USER[,...]|-a] [-j ID[,...]] [-S T] [-E T] [-s STATE[,...]] [--name N[,...]] [-r QUEUE[,...]]\n"
    "      [-A PROJECT[,...]] [-X] [-n] [-p|-P] [-o|--format F[,F...]] [--json]\n"
    "  Per-job rows with their ledger usage: your own jobs (every one you may see with -a) active in the window\n"
    "  (default the last 24 h; any time with -j). T: 2026-12-01[T08:00[:00]], 08:00, MMDD, now-2hours, today,\n"
    "  RFC 3339 (UTC without a zone). -X is accepted: there are no step rows. Fields: JobID JobName User Account\n"
    "  Partition State ExitCode Submit Start End Elapsed Timelimit AllocCPUS AllocNodes AllocGPUS NodeList Reason\n"
    "  CPUTime CPUTimeRAW TotalCPU GPUTimeRAW MaxRSS (width: F%20).";
inline constexpr const char* kScancelUsage =
    "[ID...] [--me|-u USER[,...]] [-n NAME[,...]] [-t STATE[,...]] [-p QUEUE[,...]] [-A PROJECT[,...]] [--json]\n"
    "  Cancels the IDs given (123, 123_7, 123_[1-5]), or every waiting or running job the filters match (at least\n"
    "  one filter); with IDs and filters, the IDs that match. -t PENDING leaves an array's running tasks be.";
inline constexpr const char* kUpdateUsage =
    "ID [--time T|--walltime SECONDS] [--priority N] [--queue Q] [--json]\n"
    "  Changes a PENDING or HELD job (scontrol update): users may lower the time limit and priority (<= 0).";

std::vector<FlagSpec> SqueueFlags();
std::vector<FlagSpec> SacctFlags();
std::vector<FlagSpec> ScancelFlags();
std::vector<FlagSpec> UpdateFlags();

int RunSqueue(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure);
int RunSacct(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure);
int RunScancel(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure);
int RunUpdate(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure);

}  // namespace unisched::cli
