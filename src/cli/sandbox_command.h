#pragma once
// `unisched sandbox create|exec|rm|ls`: agent sandboxes over the API
// (docs/sandboxes.md).

#include <functional>
#include <string>

#include "cli/args.h"
#include "cli/session.h"

namespace unisched::cli {

// positionals[0] is the subcommand. `usage_failure` prints a usage error
// and returns the exit status.
int RunSandbox(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure);

}  // namespace unisched::cli
