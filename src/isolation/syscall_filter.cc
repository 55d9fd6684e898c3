// The sandbox's system call filter: see syscall_filter.h.

#include "unisched/isolation/syscall_filter.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace unisched::isolation {
namespace {

// Why each call is refused. The sandbox has no capability, so most of these
// fail anyway; the filter refuses them before the kernel parses anything,
// which keeps their code (and its bugs) out of reach, and holds should a
// capability ever be left by mistake. Modelled on Docker's default profile;
// docs/sandboxes.md#system-calls says where it differs.
constexpr RefusedCall kRefused[] = {
    // Namespaces: a new user namespace gives "root" and every capability
    // inside it, and with them kernel code (mounts of some file systems,
    // netfilter, ...) an unprivileged process otherwise never reaches.
    {"unshare", EPERM, true, "a new namespace (CLONE_NEW*): a user namespace gives root inside it"},
    {"clone", EPERM, true, "a child in new namespaces (CLONE_NEW* flags), as unshare"},
    {"clone3", ENOSYS, false,
     "its flags are in a struct the filter cannot read; ENOSYS makes libc fall back to clone, whose flags it can"},
    {"setns", EPERM, false, "entering another namespace"},
    // Mounts: the sandbox's file tree is built before it starts.
    {"mount", EPERM, false, "the sandbox's mounts are fixed before it starts"},
    {"umount", EPERM, false, "as mount (umount2 with no flags; absent on x86-64)"},
    {"umount2", EPERM, false, "as mount: uncovering what a mount hides"},
    {"pivot_root", EPERM, false, "as mount"},
    {"move_mount", EPERM, false, "the new mount API, as mount"},
    {"open_tree", EPERM, false, "the new mount API, as mount"},
    {"fsopen", EPERM, false, "the new mount API, as mount"},
    {"fsconfig", EPERM, false, "the new mount API, as mount"},
    {"fsmount", EPERM, false, "the new mount API, as mount"},
    {"fspick", EPERM, false, "the new mount API, as mount"},
    {"mount_setattr", EPERM, false, "changing mount flags (read-only, nosuid) after the fact"},
    {"name_to_handle_at", EPERM, false, "file handles: open_by_handle_at's other half"},
    {"open_by_handle_at", EPERM, false, "opens files by handle, past the mount tree (an old container breakout)"},
    // Kernel keyrings are not namespaced: shared with the host's users.
    {"keyctl", EPERM, false, "the kernel keyrings are the host's, not namespaced"},
    {"add_key", EPERM, false, "as keyctl"},
    {"request_key", EPERM, false, "as keyctl"},
    // Tracing, profiling and other processes' memory.
    {"bpf", EPERM, false, "loading BPF programs into the kernel"},
    {"perf_event_open", EPERM, false,
     "profiling: observes the host's CPUs and kernel, a frequent source of kernel bugs"},
    {"ptrace", EPERM, false,
     "debugging other processes: harmless within one sandbox, but a tool call needs no debugger and ptrace has "
     "had many kernel bugs (strace and gdb do not work inside)"},
    {"process_vm_readv", EPERM, false, "another process's memory, as ptrace"},
    {"process_vm_writev", EPERM, false, "another process's memory, as ptrace"},
    {"kcmp", EPERM, false, "compares other processes' kernel objects, as ptrace"},
    {"pidfd_getfd", EPERM, false, "takes another process's descriptors, as ptrace"},
    {"lookup_dcookie", EPERM, false, "profiling (oprofile), leaks host paths"},
    {"syslog", EPERM, false, "the host's kernel log"},
    // The host's kernel, devices and clock.
    {"kexec_load", EPERM, false, "loading a new kernel"},
    {"kexec_file_load", EPERM, false, "loading a new kernel"},
    {"init_module", EPERM, false, "loading kernel modules"},
    {"finit_module", EPERM, false, "loading kernel modules"},
    {"delete_module", EPERM, false, "unloading kernel modules"},
    {"create_module", EPERM, false, "kernel modules (obsolete)"},
    {"query_module", EPERM, false, "kernel modules (obsolete)"},
    {"get_kernel_syms", EPERM, false, "kernel symbols (obsolete)"},
    {"reboot", EPERM, false, "rebooting the host"},
    {"swapon", EPERM, false, "the host's swap"},
    {"swapoff", EPERM, false, "the host's swap"},
    {"acct", EPERM, false, "process accounting of the host"},
    {"quotactl", EPERM, false, "the host's disk quotas"},
    {"quotactl_fd", EPERM, false, "the host's disk quotas"},
    {"nfsservctl", EPERM, false, "the kernel NFS server (obsolete)"},
    {"_sysctl", EPERM, false, "kernel parameters (obsolete; /proc/sys is read-only anyway)"},
    {"vhangup", EPERM, false, "hangs up the terminal"},
    {"settimeofday", EPERM, false, "the clock is the host's, not namespaced"},
    {"clock_settime", EPERM, false, "the clock is the host's, not namespaced"},
    {"stime", EPERM, false, "the clock is the host's (absent on x86-64)"},
    {"iopl", EPERM, false, "raw I/O port access"},
    {"ioperm", EPERM, false, "raw I/O port access"},
    {"modify_ldt", EPERM, false, "16-bit segments: only old code uses it, and it leaked kernel memory"},
    // Obsolete calls no program of a sandbox uses.
    {"sysfs", EPERM, false, "obsolete (file system types: /proc/filesystems)"},
    {"ustat", EPERM, false, "obsolete (statfs)"},
    {"uselib", EPERM, false, "obsolete (a.out shared libraries)"},
    // Memory placement and faults.
    {"userfaultfd", EPERM, false, "user-handled page faults: widens the race windows of kernel exploits"},
    {"mbind", EPERM, false, "NUMA placement is the host's to decide"},
    {"set_mempolicy", EPERM, false, "NUMA placement is the host's to decide"},
    {"set_mempolicy_home_node", EPERM, false, "NUMA placement is the host's to decide"},
    {"get_mempolicy", EPERM, false, "NUMA placement (Docker refuses it with the rest)"},
    {"move_pages", EPERM, false, "NUMA placement, also of other processes"},
    {"migrate_pages", EPERM, false, "NUMA placement of other processes"},
    // io_uring: a second system call interface the filter cannot see into,
    // and a long list of kernel bugs; programs fall back to plain calls.
    {"io_uring_setup", EPERM, false, "io_uring: calls the filter cannot see, many kernel bugs"},
    {"io_uring_enter", EPERM, false, "io_uring"},
    {"io_uring_register", EPERM, false, "io_uring"},
    {"fanotify_init", EPERM, false, "file system wide event monitoring"},
};

// The namespace flags of clone and unshare, refused one rule each: a filter
// compares one masked value per rule. CLONE_NEWTIME shares its bit with
// clone's exit signal, so it is for unshare only.
constexpr unsigned long kCloneNamespaceFlags[] = {CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                                  CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET};

std::vector<sock_filter>& Program() {
  static std::vector<sock_filter> program;
  return program;
}

int Build(scmp_filter_ctx ctx, const char** step) {
  // A call of a foreign ABI (int 0x80, x32) kills: its numbers differ.
  if (int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS); rc < 0) {
    *step = "set the filter's foreign-ABI action";
    return -rc;
  }
  // A binary tree of syscall numbers instead of a list: the kernel runs the
  // filter for every call number when it is attached (to cache the calls
  // always allowed), so a shorter path per call is cheaper at each start.
  if (int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2); rc < 0) {
    *step = "set the filter's optimization";
    return -rc;
  }
  for (const RefusedCall& call : kRefused) {
    *step = call.name;  // names the call whose rule failed
    const int nr = seccomp_syscall_resolve_name(call.name);
    if (nr == __NR_SCMP_ERROR) return ENOSYS;  // libseccomp does not know it: an older libseccomp than the table
    if (!call.namespace_flags_only) {
      if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(call.error), nr, 0); rc < 0) return -rc;
      continue;
    }
    for (unsigned long flag : kCloneNamespaceFlags) {
      if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(call.error), nr, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
          rc < 0) {
        return -rc;
      }
    }
    if (nr == seccomp_syscall_resolve_name("unshare")) {
      const unsigned long flag = CLONE_NEWTIME;
      if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(call.error), nr, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
          rc < 0) {
        return -rc;
      }
    }
  }
  // libseccomp 2.5 exports the program to a descriptor only: a memory file.
  *step = "export the filter";
  const int fd = ::memfd_create("unisched-seccomp", MFD_CLOEXEC);
  if (fd < 0) return errno;
  int err = 0;
  if (int rc = seccomp_export_bpf(ctx, fd); rc < 0) {
    err = -rc;
  } else {
    struct stat st {};
    std::vector<sock_filter> program;
    if (::fstat(fd, &st) != 0) {
      err = errno;
    } else if (st.st_size <= 0 || st.st_size % sizeof(sock_filter) != 0) {
      err = EINVAL;
    } else {
      program.resize(static_cast<size_t>(st.st_size) / sizeof(sock_filter));
      if (::pread(fd, program.data(), static_cast<size_t>(st.st_size), 0) != st.st_size) err = errno ? errno : EIO;
    }
    if (err == 0) Program() = std::move(program);
  }
  ::close(fd);
  return err;
}

}  // namespace

std::span<const RefusedCall> RefusedCalls() {
  return kRefused;
}

int PrepareSyscallFilter(const char** step) {
  if (!Program().empty()) return 0;
  errno = 0;
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) {
    *step = "create the system call filter";
    return errno != 0 ? errno : ENOMEM;
  }
  const int err = Build(ctx, step);
  seccomp_release(ctx);
  return err;
}

int InstallSyscallFilter() {
  const std::vector<sock_filter>& program = Program();
  if (program.empty()) return EINVAL;
  sock_fprog fprog{static_cast<unsigned short>(program.size()), const_cast<sock_filter*>(program.data())};
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0) != 0) return errno;
  return 0;
}

}  // namespace unisched::isolation
