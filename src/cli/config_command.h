#pragma once
// `unisched config ...`: live config versions (docs/config-versions.md).

#include <functional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/session.h"

namespace unisched::cli {

inline constexpr const char* kConfigUsage =
    "show [--version N] [--json]\n"
    "       unisched config versions [--json]\n"
    "       unisched config apply FILE [--dry-run] [--canary-queue Q] [--comment TEXT] [--json]\n"
    "       unisched config rollback [--version N] [--json]\n"
    "       unisched config promote [--json]\n"
    "  show prints the YAML in force (save it over a file that differs); apply validates FILE, shows what it\n"
    "  changes and its impact, and applies it without a restart (--dry-run: only show); --canary-queue tries it\n"
    "  on one queue until promote or rollback (platform-admin).";

std::vector<FlagSpec> ConfigFlags();

// positionals[0] is the subcommand. `usage_failure` prints a usage error
// and returns the exit status.
int RunConfig(Session& session, const ParsedArgs& args, const std::function<int(const std::string&)>& usage_failure);

}  // namespace unisched::cli
