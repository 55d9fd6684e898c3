// unisched-syscall-probe NAME...: makes each named system call once, in a
// child process of its own (a call that succeeds may change the caller, e.g.
// unshare), and prints one line per name:
//   NAME ok            the call succeeded
//   NAME errno N       it failed with errno N
//   NAME absent        this architecture has no such call
//   NAME unknown       the probe has no recipe for it (a test failure)
// The arguments are harmless even for root with every capability (bad
// magic numbers, missing paths, descriptor -1, empty ranges), and chosen
// so that, where the kernel allows, an unfiltered call fails otherwise than
// with EPERM: the filter answers before any argument is looked at. Used by
// tests/unit/isolation and the sandbox integration tests.

#include <fcntl.h>
#include <linux/kcmp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace {

constexpr const char* kMissing = "/nonexistent-unisched-probe";

// The result of one call: its return value (errno set when -1); -2: no such
// call here; -3: no recipe.
long Call(const char* name) {
  auto is = [name](const char* n) { return std::strcmp(name, n) == 0; };
  const long self = ::getpid();
  // Positive controls: what every program does.
  if (is("fork")) {
    const long pid = ::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) ::_exit(0);
    if (pid > 0) ::waitpid(static_cast<pid_t>(pid), nullptr, 0);
    return pid < 0 ? -1 : 0;
  }
  if (is("thread")) {  // libc tries clone3 first, then clone
    pthread_t t;
    const int rc = ::pthread_create(
        &t, nullptr, [](void*) -> void* { return nullptr; }, nullptr);
    if (rc != 0) {
      errno = rc;
      return -1;
    }
    ::pthread_join(t, nullptr);
    return 0;
  }
  if (is("unshare-files")) return ::unshare(CLONE_FILES);
#if defined(__x86_64__)
  // The other ABIs of x86-64: getpid by int 0x80 (i386) and with the x32 bit.
  if (is("i386-getpid")) {
    long ret;
    asm volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
    if (ret < 0) {
      errno = static_cast<int>(-ret);
      return -1;
    }
    return ret;
  }
  if (is("x32-getpid")) return ::syscall(0x40000000L | SYS_getpid);
#endif
  // Namespaces.
  if (is("unshare")) return ::unshare(CLONE_NEWUSER);
  if (is("clone")) {
    const long pid = ::syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) ::_exit(0);
    if (pid > 0) ::waitpid(static_cast<pid_t>(pid), nullptr, 0);
    return pid < 0 ? -1 : 0;
  }
#ifdef SYS_clone3
  if (is("clone3")) return ::syscall(SYS_clone3, nullptr, 0);
#endif
  if (is("setns")) return ::syscall(SYS_setns, -1, 0);
  // Mounts.
  if (is("mount")) return ::syscall(SYS_mount, "none", kMissing, "tmpfs", 0, nullptr);
#ifdef SYS_umount
  if (is("umount")) return ::syscall(SYS_umount, kMissing);
#endif
  if (is("umount2")) return ::syscall(SYS_umount2, kMissing, ~0);
  if (is("pivot_root")) return ::syscall(SYS_pivot_root, kMissing, kMissing);
#ifdef SYS_move_mount
  if (is("move_mount")) return ::syscall(SYS_move_mount, -1, "", -1, "", ~0u);
  if (is("open_tree")) return ::syscall(SYS_open_tree, AT_FDCWD, "/", 01000000 /* OPEN_TREE_CLOEXEC */);
  if (is("fsopen")) return ::syscall(SYS_fsopen, "unisched-no-such-fs", 0);
  if (is("fsconfig")) return ::syscall(SYS_fsconfig, -1, 0, nullptr, nullptr, 0);
  if (is("fsmount")) return ::syscall(SYS_fsmount, -1, 0, 0);
  if (is("fspick")) return ::syscall(SYS_fspick, -1, "", ~0u);
#endif
#ifdef SYS_mount_setattr
  if (is("mount_setattr")) return ::syscall(SYS_mount_setattr, -1, "", ~0u, nullptr, 0);
#endif
  if (is("name_to_handle_at")) return ::syscall(SYS_name_to_handle_at, AT_FDCWD, "/", nullptr, nullptr, 0);
  if (is("open_by_handle_at")) return ::syscall(SYS_open_by_handle_at, -1, nullptr, 0);
  // Keyrings.
  if (is("keyctl")) return ::syscall(SYS_keyctl, 0xdead, 0, 0, 0, 0);
  if (is("add_key")) return ::syscall(SYS_add_key, nullptr, nullptr, nullptr, 0, 0);
  if (is("request_key")) return ::syscall(SYS_request_key, nullptr, nullptr, nullptr, 0);
  // Tracing and other processes.
  if (is("bpf")) return ::syscall(SYS_bpf, -1, nullptr, 0);
  if (is("perf_event_open")) return ::syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0);
  if (is("ptrace")) return ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
  if (is("process_vm_readv")) return ::syscall(SYS_process_vm_readv, self, nullptr, 0, nullptr, 0, 0);
  if (is("process_vm_writev")) return ::syscall(SYS_process_vm_writev, self, nullptr, 0, nullptr, 0, 0);
  if (is("kcmp")) return ::syscall(SYS_kcmp, self, self, KCMP_VM, 0, 0);
#ifdef SYS_pidfd_getfd
  if (is("pidfd_getfd")) return ::syscall(SYS_pidfd_getfd, -1, 0, 0);
#endif
#ifdef SYS_lookup_dcookie
  if (is("lookup_dcookie")) return ::syscall(SYS_lookup_dcookie, 0, nullptr, 0);
#endif
  if (is("syslog")) return ::syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, nullptr, 0);
  // The host's kernel, devices and clock.
  if (is("kexec_load")) return ::syscall(SYS_kexec_load, 0, 0, nullptr, ~0ul);
#ifdef SYS_kexec_file_load
  if (is("kexec_file_load")) return ::syscall(SYS_kexec_file_load, -1, -1, 0, nullptr, ~0ul);
#endif
  if (is("init_module")) return ::syscall(SYS_init_module, nullptr, 0, "");
  if (is("finit_module")) return ::syscall(SYS_finit_module, -1, "", 0);
  if (is("delete_module")) return ::syscall(SYS_delete_module, "unisched_no_such_module", O_NONBLOCK);
#ifdef SYS_create_module
  if (is("create_module")) return ::syscall(SYS_create_module, nullptr, 0);
#endif
#ifdef SYS_query_module
  if (is("query_module")) return ::syscall(SYS_query_module, nullptr, 0, nullptr, 0, nullptr);
#endif
#ifdef SYS_get_kernel_syms
  if (is("get_kernel_syms")) return ::syscall(SYS_get_kernel_syms, nullptr);
#endif
  if (is("reboot")) return ::syscall(SYS_reboot, 0, 0, 0, nullptr);
  if (is("swapon")) return ::syscall(SYS_swapon, kMissing, 0);
  if (is("swapoff")) return ::syscall(SYS_swapoff, kMissing);
  if (is("acct")) return ::syscall(SYS_acct, kMissing);
  if (is("quotactl")) return ::syscall(SYS_quotactl, 0, kMissing, 0, nullptr);
#ifdef SYS_quotactl_fd
  if (is("quotactl_fd")) return ::syscall(SYS_quotactl_fd, -1, 0, 0, nullptr);
#endif
#ifdef SYS_nfsservctl
  if (is("nfsservctl")) return ::syscall(SYS_nfsservctl, 0, nullptr, nullptr);
#endif
#ifdef SYS__sysctl
  if (is("_sysctl")) return ::syscall(SYS__sysctl, nullptr);
#endif
  if (is("vhangup")) return ::syscall(SYS_vhangup);                              // the child has no terminal (setsid)
  if (is("settimeofday")) return ::syscall(SYS_settimeofday, nullptr, nullptr);  // both NULL: changes nothing
  if (is("clock_settime")) return ::syscall(SYS_clock_settime, -1, nullptr);
#ifdef SYS_stime
  if (is("stime")) return ::syscall(SYS_stime, nullptr);
#endif
#ifdef SYS_iopl
  if (is("iopl")) return ::syscall(SYS_iopl, 0);  // level 0: never more than it has
  if (is("ioperm")) return ::syscall(SYS_ioperm, 0, 0, 0);
#endif
#ifdef SYS_modify_ldt
  if (is("modify_ldt")) {
    static char ldt[16];
    return ::syscall(SYS_modify_ldt, 0, ldt, sizeof ldt);  // read
  }
#endif
  // Obsolete.
#ifdef SYS_sysfs
  if (is("sysfs")) return ::syscall(SYS_sysfs, 3);  // how many file system types
#endif
#ifdef SYS_ustat
  if (is("ustat")) return ::syscall(SYS_ustat, 0, nullptr);
#endif
#ifdef SYS_uselib
  if (is("uselib")) return ::syscall(SYS_uselib, kMissing);
#endif
  // Memory.
  if (is("userfaultfd")) return ::syscall(SYS_userfaultfd, O_CLOEXEC | 1 /* UFFD_USER_MODE_ONLY */);
  if (is("mbind")) return ::syscall(SYS_mbind, nullptr, 0, 0, nullptr, 0, 0);
  if (is("set_mempolicy")) return ::syscall(SYS_set_mempolicy, 0 /* MPOL_DEFAULT */, nullptr, 0);
#ifdef SYS_set_mempolicy_home_node
  if (is("set_mempolicy_home_node")) return ::syscall(SYS_set_mempolicy_home_node, 0, 0, 0, 0);
#endif
  if (is("get_mempolicy")) return ::syscall(SYS_get_mempolicy, nullptr, nullptr, 0, nullptr, 0);
  if (is("move_pages")) return ::syscall(SYS_move_pages, 0, 0, nullptr, nullptr, nullptr, 0);
  if (is("migrate_pages")) return ::syscall(SYS_migrate_pages, 0, 0, nullptr, nullptr);
#ifdef SYS_io_uring_setup
  if (is("io_uring_setup")) return ::syscall(SYS_io_uring_setup, 0, nullptr);
  if (is("io_uring_enter")) return ::syscall(SYS_io_uring_enter, -1, 0, 0, 0, nullptr, 0);
  if (is("io_uring_register")) return ::syscall(SYS_io_uring_register, -1, 0, nullptr, 0);
#endif
  if (is("fanotify_init")) return ::syscall(SYS_fanotify_init, 0x200 /* FAN_REPORT_FID */, O_RDONLY);
  // Named in the filter's table, but not a call of this architecture.
  static const char* const kAbsent[] = {
      "umount",     "stime",   "create_module", "query_module",   "get_kernel_syms",
      "nfsservctl", "_sysctl", "iopl",          "ioperm",         "modify_ldt",
      "sysfs",      "ustat",   "uselib",        "lookup_dcookie", "set_mempolicy_home_node"};
  for (const char* absent : kAbsent) {
    if (is(absent)) return -2;
  }
  return -3;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    int report[2];
    if (::pipe(report) != 0) return 2;
    const pid_t child = ::fork();
    if (child < 0) return 2;
    if (child == 0) {
      ::close(report[0]);
      ::setsid();  // no controlling terminal: vhangup has nothing to hang up
      errno = 0;
      const long rc = Call(argv[i]);
      const long result[2] = {rc, errno};
      ssize_t ignored = ::write(report[1], result, sizeof result);
      (void)ignored;
      ::_exit(0);
    }
    ::close(report[1]);
    long result[2] = {0, 0};
    const bool got = ::read(report[0], result, sizeof result) == static_cast<ssize_t>(sizeof result);
    ::close(report[0]);
    ::waitpid(child, nullptr, 0);
    if (!got) {
      std::printf("%s died\n", argv[i]);
    } else if (result[0] == -2) {
      std::printf("%s absent\n", argv[i]);
    } else if (result[0] == -3) {
      std::printf("%s unknown\n", argv[i]);
    } else if (result[0] < 0) {
      std::printf("%s errno %ld\n", argv[i], result[1]);
    } else {
      std::printf("%s ok\n", argv[i]);
    }
  }
  return 0;
}
