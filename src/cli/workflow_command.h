#pragma once
// `unisched workflow submit|ls|show|graph|cancel|resume`: workflows over the
// API (docs/workflows.md).

#include "cli/args.h"
#include "cli/session.h"

namespace unisched::cli {

// positionals[0] is the subcommand. `usage_failure` prints a usage error
// and returns the exit status.
int RunWorkflow(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure);

}  // namespace unisched::cli
