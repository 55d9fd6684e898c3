#pragma once
// unisched-supervisor: runs one attempt of a job, contained and unprivileged,
// and leaves its result in the attempt directory. One process per attempt,
// started by the executor; it outlives the daemon. The protocol (files,
// claim/lock handshake, outcomes, signals) is in docs/execution.md.

#include <string>

namespace unisched::supervisor {

// Runs the attempt in `attempt_dir` to its end. Returns the process exit
// status: 0 when a result was written or another supervisor owns the
// attempt; non-zero when the attempt could not be claimed or its result
// could not be written.
int RunSupervisor(const std::string& attempt_dir);

}  // namespace unisched::supervisor
