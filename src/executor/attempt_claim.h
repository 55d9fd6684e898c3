#pragma once
// Whether a supervisor still runs an attempt, told by the lock on its claim
// (attempt_files.h). Everything the executor does to an attempt it did not
// see end (call it lost, cancel it, remove its files) asks this first,
// because only a held lock proves that a live supervisor owns the attempt:
// pids are reused, and a claim outlives the supervisor that made it.

#include <sys/types.h>

#include <string>

namespace unisched::executor {

enum class LockState { kHeld, kFree, kMissing, kUnknown };

// Whether a live supervisor holds the lock on the attempt's claim. The probe
// holds it for an instant only (a supervisor that has just created the claim
// waits for it); kMissing: no claim; kUnknown: the claim could not be opened
// (out of descriptors, say), so nothing can be concluded yet.
LockState ProbeLock(const std::string& dir);

// The pid of the supervisor that claimed `dir`, while it runs the attempt:
// it holds the claim's lock until the attempt ends, so a held lock means the
// pid in the claim is still that supervisor (a pid reused by another
// process holds no lock). *shared: it is a host, whose attempts are
// cancelled through a file (SendCancel).
pid_t LiveSupervisorPid(const std::string& dir, bool* shared);

}  // namespace unisched::executor
