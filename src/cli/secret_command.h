#pragma once
// `unisched secret create|rotate|ls|rm`: a project's secrets over the API
// (docs/secrets.md). A value is read from standard input, never from the
// command line, where `ps` would show it.

#include "cli/args.h"
#include "cli/session.h"

namespace unisched::cli {

// positionals[0] is the subcommand. `usage_failure` prints a usage error
// and returns the exit status.
int RunSecret(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure);

}  // namespace unisched::cli
