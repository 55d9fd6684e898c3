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
    "[--me] [--user U] [--state S] [--queue Q] [--project P] [--format FMT] [--json]\n"
    "  Waiting and running jobs (all states with --state ALL), Slurm's --format letters: %i %j %u %a %P %q %t\n"
    "  %T %M %l %D %C %b %R %r %N %Q %V %S %e, widths as %.18i (default \"%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R\").";
inline constexpr const char* kSacctUsage =
    "[--me|--user U] [--starttime T] [--endtime T] [--state S] [--format F[,F...]] [--json]\n"
    "  Per-job rows with their ledger usage: jobs active in the window (T: RFC 3339 or YYYY-MM-DD; default the\n"
    "  last 24 h). Fields: JobID JobName User Account Partition State ExitCode Submit Start End Elapsed Timelimit\n"
    "  AllocCPUS AllocNodes AllocGPUS NodeList Reason CPUTime CPUTimeRAW TotalCPU GPUTimeRAW MaxRSS (width: F%20).";
inline constexpr const char* kScancelUsage =
    "[ID...] [--me|--user U] [--name N] [--state S] [--queue Q] [--json]\n"
    "  Cancels the IDs given, or every waiting or running job the filters match (at least one filter).";
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
