#pragma once
// The supervisor zygote: `unisched-supervisor --zygote`, one per executor.
// Starting a supervisor by fork of this small, single-threaded process
// instead of an exec skips the exec, the C library's start (which asks the
// CPU for its cache sizes with CPUID, a trap to the hypervisor on a VM), and
// the page faults of a fresh image: about a third of a supervisor's CPU.
// docs/execution.md ("The zygote") has the protocol.

namespace unisched::supervisor {

// Serves launch requests on `socket_fd` (SOCK_SEQPACKET) until the executor
// closes it. Each request is the attempt directory, with the spec memfd
// attached (SCM_RIGHTS); the reply is the new supervisor's pid, or -errno.
// The supervisor is made with CLONE_PARENT: it is the executor's child, as
// if spawned by it (waitpid, pidfd and its exit status work unchanged).
int RunZygote(int socket_fd);

}  // namespace unisched::supervisor
