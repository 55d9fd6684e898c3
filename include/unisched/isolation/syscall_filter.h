#pragma once
// The system call filter of a sandbox (docs/sandboxes.md#system-calls),
// shared by the API sandboxes' init (unisched-sandbox) and the PID 1 of the
// jobs of sandboxed pools (unisched-supervisor).
//
// A deny list on top of the other walls (no capabilities, no_new_privs, a
// uid of its own): the calls below answer an errno before the kernel looks
// at their arguments, so a kernel bug behind one of them is out of reach.
// Everything else is allowed. A system call of another ABI than the native
// one (32-bit int 0x80 or x32 on x86-64) kills the process: the table is
// written for the native numbers only.

#include <span>

namespace unisched::isolation {

struct RefusedCall {
  const char* name;  // libseccomp's name; a call the architecture lacks is skipped
  int error;         // what the call answers: EPERM, or ENOSYS (clone3)
  // Only when a namespace flag is in its flags argument (clone, unshare);
  // otherwise always.
  bool namespace_flags_only;
  const char* why;
};

// The one table of refused calls (syscall_filter.cc; docs/sandboxes.md
// lists the same).
std::span<const RefusedCall> RefusedCalls();

// Builds the filter with libseccomp, once per process, and keeps its BPF
// program for InstallSyscallFilter. Call it before forking the process that
// installs it. Returns 0, or the errno of the failing step with *step naming
// it.
int PrepareSyscallFilter(const char** step);

// Installs the prepared program on the calling (single-threaded) process:
// one prctl, no allocation, so it is safe between fork and exec. Needs
// no_new_privs (DropPrivileges sets it). The filter is inherited by every
// child and across exec and cannot be removed. Returns 0 or the errno
// (EINVAL when PrepareSyscallFilter has not succeeded).
int InstallSyscallFilter();

}  // namespace unisched::isolation
