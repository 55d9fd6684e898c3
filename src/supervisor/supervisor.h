#pragma once
// unisched-supervisor: runs attempts of jobs, contained and unprivileged, and
// leaves each one's result in its attempt directory. It outlives the daemon.
// One event loop serves two modes (docs/execution.md has the protocol:
// files, claim/lock handshake, outcomes, cancel):
//
//   unisched-supervisor ATTEMPT_DIR   one attempt, its spec on stdin; exits
//                                     when the result is written
//   unisched-supervisor --host        the executor's long-lived host: runs
//                                     every attempt the executor sends on fd 3,
//                                     side by side, and exits once the executor
//                                     has closed the socket and the last of
//                                     them has ended
//
// The host exists because a process per attempt was the largest cost of a
// short job: its fork, page faults and exit took about a fifth of the host's
// CPU per trivial job (docs/benchmarks.md).

#include <string>

namespace unisched::supervisor {

// Runs the attempt in `attempt_dir` to its end. Returns the process exit
// status: 0 when a result was written or another supervisor owns the
// attempt; non-zero when the attempt could not be claimed or its result
// could not be written.
int RunSupervisor(const std::string& attempt_dir);

// Serves the executor on `socket_fd` (SOCK_SEQPACKET). Each request is an
// attempt directory with the spec memfd attached (SCM_RIGHTS); when an
// attempt is over (result written, or claimed by another supervisor, or
// unclaimable) its directory is sent back. Returns 0 after the executor
// closed the socket and every attempt ended.
int RunHost(int socket_fd);

}  // namespace unisched::supervisor
