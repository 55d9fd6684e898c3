// Job start: see job_launch.h. Everything the child needs is prepared in the
// parent; the child makes system calls only (it shares the supervisor's
// memory until its exec), except for an isolated job's child, a copy of the
// single-threaded supervisor, whose mount set-up (EnterIsolation) reads
// /proc/self/mountinfo.

#include "supervisor/job_launch.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "unisched/executor/executor.h"
#include "unisched/isolation/isolation.h"
#include "unisched/isolation/syscall_filter.h"
#include "unisched/posix/posix.h"

namespace unisched::supervisor {
namespace {

enum Step : int {
  kStepSignals = 1,
  kStepProcessGroup,
  kStepContainment,
  kStepRlimits,
  kStepIsolation,
  kStepStdio,
  kStepGroups,
  kStepSetgid,
  kStepSetuid,
  kStepChdir,
  kStepExec,
  kStepSyscallFilter,
  kStepAffinity,
  kStepScript,
  kStepWorkdir,
  kStepTmpDir,
  kStepSecrets,
  kStepSharedStorage,
  kStepMountNamespace,
};

[[noreturn]] void ChildFail(int fd, int step, int err) {
  const LaunchError e{step, err};
  ssize_t ignored = ::write(fd, &e, sizeof e);
  (void)ignored;  // nothing left to report to if this fails
  ::_exit(127);
}

void ClosePair(int fds[2]) {
  if (fds[0] >= 0) ::close(fds[0]);
  if (fds[1] >= 0) ::close(fds[1]);
}

// Out of descriptors, processes or memory here is the machine's moment,
// not the job's fault: the attempt is launched again later.
Error StartError(const std::string& what, int err) {
  std::string message = what + ": " + posix::ErrnoText(err);
  return executor::IsTransientErrno(err) ? executor::TransientLaunchError(std::move(message))
                                         : Error::Internal(std::move(message));
}

// The PID 1 of an isolated job's pid namespace: starts the job and waits for
// it, reaping orphans meanwhile, then exits with its status (128+N for a
// signal: PID 1 cannot die of one it sends itself), which ends the
// namespace and whatever the job left in it. Signals the supervisor sends
// to the process group reach the job directly; PID 1 itself ignores them,
// as the kernel does for an init without handlers.
[[noreturn]] void RunAsInit(int report_fd, char* const* argv, char* const* envp) {
  // It never execs, so close-on-exec closes nothing here: it would hold the
  // supervisor's descriptors (another attempt's locked claim, the host's
  // socket to the executor) for as long as the job runs.
  const int above_report = report_fd + 1;
  if (report_fd > 3) (void)::syscall(SYS_close_range, 3U, static_cast<unsigned>(report_fd - 1), 0U);
  if (::syscall(SYS_close_range, static_cast<unsigned>(above_report), ~0U, 0U) != 0) {
    for (int fd = 3; fd < 65536; ++fd) {
      if (fd != report_fd) ::close(fd);
    }
  }
  // The system call filter (docs/sandboxes.md#system-calls), the last
  // step: on this PID 1 too, which needs nothing it refuses (fork is a
  // clone without namespace flags), and the job inherits it.
  if (int e = isolation::InstallSyscallFilter()) ChildFail(report_fd, kStepSyscallFilter, e);
  const pid_t job = ::fork();
  if (job < 0) ChildFail(report_fd, kStepExec, errno);
  if (job == 0) {
    ::execvpe(argv[0], argv, envp);
    ChildFail(report_fd, kStepExec, errno);
  }
  ::close(report_fd);  // the job holds it until its exec: EOF tells the supervisor it runs
  for (int fd = 0; fd <= 2; ++fd) ::close(fd);
  while (true) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid == job) {
      ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    if (pid < 0 && errno == ECHILD) ::_exit(127);
  }
}

// In the child, as the job's account with the work directory as its cwd:
// the batch script into a file of its own (a new inode each time: an
// earlier attempt's interpreter may still be reading the old one; never
// through a link someone left there), then into the job's -D directory.
// System calls only (the child may share our memory).
void WriteScriptAndEnter(int fd, const JobSpec& spec) {
  if (!spec.script.empty()) {
    const char* name = spec.script_file.c_str();
    if (::unlink(name) != 0 && errno != ENOENT) ChildFail(fd, kStepScript, errno);
    const int out = ::open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700);
    if (out < 0) ChildFail(fd, kStepScript, errno);
    const char* data = spec.script.data();
    size_t left = spec.script.size();
    while (left > 0) {
      const ssize_t n = ::write(out, data, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) ChildFail(fd, kStepScript, n < 0 ? errno : EIO);
      data += n;
      left -= static_cast<size_t>(n);
    }
    // Closed before the exec: a file open for writing cannot be executed (ETXTBSY).
    if (::close(out) != 0) ChildFail(fd, kStepScript, errno);
  }
  if (!spec.chdir.empty() && ::chdir(spec.chdir.c_str()) != 0) ChildFail(fd, kStepWorkdir, errno);
}

// "/proc/self/fd/<fd>" into `buf`, without the library (the child may
// share our memory): a mount target that is exactly the directory opened,
// never a link someone put in its place.
const char* FdPath(int fd, char (&buf)[32]) {
  char digits[12];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + fd % 10);
    fd /= 10;
  } while (fd > 0 && n < 11);
  const char prefix[] = "/proc/self/fd/";
  size_t i = 0;
  for (; prefix[i] != '\0'; ++i) buf[i] = prefix[i];
  while (n > 0) buf[i++] = digits[--n];
  buf[i] = '\0';
  return buf;
}

void MountSecrets(int fd, const JobSpec& spec) {
  if (spec.secret_files.empty()) return;
  const char* dir = spec.secrets_dir.c_str();
  if (::mkdir(dir, 0700) != 0 && errno != EEXIST) ChildFail(fd, kStepSecrets, errno);
  // The work directory is the job's: a link left there must not redirect the mount.
  const int under = ::open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (under < 0) ChildFail(fd, kStepSecrets, errno);
  char path[32];
  if (::mount("tmpfs", FdPath(under, path), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              spec.secrets_mount_options.c_str()) != 0) {
    ChildFail(fd, kStepSecrets, errno);
  }
  ::close(under);
  const int top = ::open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);  // the tmpfs now
  if (top < 0) ChildFail(fd, kStepSecrets, errno);
  for (const auto& [name, content] : spec.secret_files) {
    const int out = ::openat(top, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
    if (out < 0) ChildFail(fd, kStepSecrets, errno);
    const char* data = content.data();
    size_t left = content.size();
    while (left > 0) {
      const ssize_t n = ::write(out, data, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) ChildFail(fd, kStepSecrets, n < 0 ? errno : EIO);
      data += n;
      left -= static_cast<size_t>(n);
    }
    if (::fchown(out, spec.account.uid, spec.account.gid) != 0) ChildFail(fd, kStepSecrets, errno);
    ::close(out);
  }
  if (::mount(nullptr, FdPath(top, path), nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              nullptr) != 0) {
    ChildFail(fd, kStepSecrets, errno);
  }
  ::close(top);
}

// The shared file systems' sources, opened (O_PATH) in the job's mount
// namespace before an isolated job's view hides them (its /tmp, /home and
// /dev/shm are fresh tmpfs): a bind from the descriptor still reaches them.
// At most kMaxBinds (config checks). System calls only.
constexpr size_t kMaxBinds = 32;
void OpenBindSources(int fd, const JobSpec& spec, int (&sources)[kMaxBinds]) {
  for (size_t i = 0; i < spec.binds.size() && i < kMaxBinds; ++i) {
    sources[i] = ::open(spec.binds[i].source.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (sources[i] < 0) ChildFail(fd, kStepSharedStorage, errno);
  }
}

// mkdir -p of `path` (absolute), as far as it is missing: a bind target
// under an isolated job's fresh tmpfs (/tmp, /home) is made there; on its
// read-only root it must exist already. System calls only.
void MakeTarget(int fd, const std::string& path) {
  char buf[4096];
  if (path.size() >= sizeof buf) ChildFail(fd, kStepSharedStorage, ENAMETOOLONG);
  for (size_t i = 0; i <= path.size(); ++i) {
    buf[i] = path[i];  // path[size()] is the NUL
    if (i > 0 && (path[i] == '/' || i == path.size())) {
      buf[i] = '\0';
      if (::mkdir(buf, 0755) == 0) {
        // Traversable by the job whatever the supervisor's umask.
        if (::chmod(buf, 0755) != 0) ChildFail(fd, kStepSharedStorage, errno);
      } else if (errno != EEXIST) {
        ChildFail(fd, kStepSharedStorage, errno);
      }
      buf[i] = path[i];
    }
  }
}

// In the child, still root, after the isolation (whose mount namespace it
// then uses): the shared file systems' binds, then the secret files on a
// tmpfs of the job's own. A job that is not isolated gets a mount namespace
// here, a slave of the host's so that later host mounts (an automounted
// file system) still reach it. `sources`: the binds' sources as
// OpenBindSources opened them (an isolated job's, before its isolation);
// null: opened here. System calls only.
void MountPrivately(int fd, const JobSpec& spec, int (*sources)[kMaxBinds]) {
  if (spec.secret_files.empty() && spec.binds.empty()) return;
  int opened[kMaxBinds];
  if (!spec.isolate) {
    if (::unshare(CLONE_NEWNS) != 0) ChildFail(fd, kStepMountNamespace, errno);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) ChildFail(fd, kStepMountNamespace, errno);
  }
  if (sources == nullptr) {
    OpenBindSources(fd, spec, opened);
    sources = &opened;
  }
  for (size_t i = 0; i < spec.binds.size() && i < kMaxBinds; ++i) {
    const JobSpec::Bind& bind = spec.binds[i];
    char source[32];
    MakeTarget(fd, bind.target);
    if (::mount(FdPath((*sources)[i], source), bind.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      ChildFail(fd, kStepSharedStorage, errno);
    }
    ::close((*sources)[i]);
    // A bind keeps its source mount's flags; this sets them: read-only as
    // configured, writable otherwise (also under an isolated job's
    // read-only root), never setuid or devices.
    const unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | (bind.read_only ? MS_RDONLY : 0);
    if (::mount(nullptr, bind.target.c_str(), nullptr, flags, nullptr) != 0) ChildFail(fd, kStepSharedStorage, errno);
  }
  MountSecrets(fd, spec);
}

// Everything the job's child needs, prepared by the parent.
struct ChildArgs {
  const JobSpec* spec;
  const containment::Containment* containment;
  const isolation::IsolationSpec* isolation_spec;
  char* const* argv;
  char* const* envp;
  int devnull;
  int out;     // the write end of the stdout pipe
  int err;     // of the stderr pipe
  int report;  // of the launch-error pipe (close-on-exec)
};

// Its stack when it shares our memory (CLONE_VM): execvpe's PATH search
// puts a path on it, EnterIsolation is never run on it.
constexpr size_t kChildStackBytes = 256 << 10;

// The job's side of StartJob: process group, containment, stdio, user,
// working directory, exec. Only system calls, except for an isolated job's
// mount set-up (EnterIsolation reads /proc/self/mountinfo), which runs in a
// copy of our memory.
[[noreturn]] void RunChild(const ChildArgs& a) {
  const JobSpec& spec = *a.spec;
  const containment::Containment& containment = *a.containment;
  const Account& account = spec.account;
  const int fd = a.report;
  // The supervisor blocks and ignores signals for itself; the job gets
  // the defaults back.
  sigset_t none;
  sigemptyset(&none);
  if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0) ChildFail(fd, kStepSignals, errno);
  for (int sig : {SIGHUP, SIGPIPE, SIGINT, SIGTERM, SIGCHLD}) ::signal(sig, SIG_DFL);
  if (::setpgid(0, 0) != 0) ChildFail(fd, kStepProcessGroup, errno);
  if (int e = containment.JoinSelf()) ChildFail(fd, kStepContainment, e);
  if (int e = containment.ApplyRlimitsSelf()) ChildFail(fd, kStepRlimits, e);
  if (spec.open_files_limit > 0) {
    rlimit files{};
    if (::getrlimit(RLIMIT_NOFILE, &files) != 0) ChildFail(fd, kStepRlimits, errno);
    files.rlim_cur = std::min<rlim_t>(spec.open_files_limit, files.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &files) != 0) ChildFail(fd, kStepRlimits, errno);
  }
  if (spec.affinity && ::sched_setaffinity(0, sizeof(cpu_set_t), &*spec.affinity) != 0) {
    ChildFail(fd, kStepAffinity, errno);
  }
  int sources[kMaxBinds];
  if (spec.isolate) {
    // The pid namespace came with the clone.
    if (::unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC) != 0) ChildFail(fd, kStepIsolation, errno);
    OpenBindSources(fd, spec, sources);
    const char* step = "";
    if (int e = isolation::EnterIsolation(*a.isolation_spec, &step)) ChildFail(fd, kStepIsolation, e);
  }
  MountPrivately(fd, spec, spec.isolate ? &sources : nullptr);
  if (::dup2(a.devnull, 0) < 0 || ::dup2(a.out, 1) < 0 || ::dup2(a.err, 2) < 0) ChildFail(fd, kStepStdio, errno);
  // Nothing of the supervisor leaks into the job; the report pipe is
  // already close-on-exec and must stay open until the exec.
  if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int i = 3; i < 4096; ++i) {
      if (i != fd) ::fcntl(i, F_SETFD, FD_CLOEXEC);
    }
  }
  ::umask(022);
  if (spec.isolate) {
    const char* step = "";
    if (int e = isolation::DropPrivileges(account.uid, account.gid, &step)) ChildFail(fd, kStepSetuid, e);
    // EnterIsolation made the work directory the working directory.
    WriteScriptAndEnter(fd, spec);
    RunAsInit(fd, a.argv, a.envp);
  }
  if (account.switch_user) {
    if (::setgroups(account.groups.size(), account.groups.data()) != 0) ChildFail(fd, kStepGroups, errno);
    if (::setgid(account.gid) != 0) ChildFail(fd, kStepSetgid, errno);
    if (::setuid(account.uid) != 0) ChildFail(fd, kStepSetuid, errno);
  }
  // After the switch, so the job's own account must be able to enter it.
  if (!spec.work_dir.empty() && ::chdir(spec.work_dir.c_str()) != 0) ChildFail(fd, kStepChdir, errno);
  if (!spec.tmp_dir.empty() && ::mkdir(spec.tmp_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    ChildFail(fd, kStepTmpDir, errno);
  }
  WriteScriptAndEnter(fd, spec);
  // execvpe searches the supervisor's PATH (set by the caller), never
  // passing it on: the job sees envp only.
  ::execvpe(a.argv[0], a.argv, a.envp);
  ChildFail(fd, kStepExec, errno);
}

int ChildEntry(void* args) {
  RunChild(*static_cast<const ChildArgs*>(args));
}

}  // namespace

Result<JobProcess> StartJob(const JobSpec& spec, const containment::Containment& containment) {
  if (spec.argv.empty()) return Error::BadRequest("bad_spec", "argv is empty");
  // Everything the child touches is built here, before the fork.
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  // A batch script runs in argv[0]'s place (an absolute path: no search);
  // its #! line names the interpreter, which gets the path as $0.
  if (!spec.script.empty()) argv[0] = const_cast<char*>(spec.script_path.c_str());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out[2] = {-1, -1}, err[2] = {-1, -1}, report[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(report, O_CLOEXEC) != 0) {
    const int e = errno;
    ClosePair(out);
    ClosePair(err);
    ClosePair(report);
    return StartError("cannot create pipes", e);
  }
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) {
    const int e = errno;
    ClosePair(out);
    ClosePair(err);
    ClosePair(report);
    return StartError("cannot open /dev/null", e);
  }

  isolation::IsolationSpec isolation_spec;
  isolation_spec.work_dir = spec.work_dir;
  // A failure before the child exists: close what was opened for it.
  auto fail = [&](const std::string& what) -> Result<JobProcess> {
    const int e = errno;
    ClosePair(out);
    ClosePair(err);
    ClosePair(report);
    ::close(devnull);
    return StartError(what, e);
  };
  // Built once per supervisor process, before the clone: the child only
  // installs it.
  if (const char* step = ""; spec.isolate) {
    if (int e = isolation::PrepareSyscallFilter(&step)) {
      errno = e;
      return fail(std::string("cannot build the system call filter (") + step + ")");
    }
  }
  ChildArgs args{&spec, &containment, &isolation_spec, argv.data(), envp.data(), devnull, out[1], err[1], report[1]};
  pid_t pid;
  if (spec.isolate) {
    // An isolated job's child is PID 1 of a new pid namespace: a clone with
    // CLONE_NEWPID, not unshare, which would put every later child of a host
    // supervisor into that namespace too. A copy of our memory (it goes on
    // running as that PID 1), by raw clone, as glibc's fork takes no flags;
    // the supervisor is single-threaded and holds no lock, and glibc 2.34+
    // asks the kernel for the thread id where it needs it.
    pid = static_cast<pid_t>(::syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, nullptr, nullptr, nullptr, nullptr));
    if (pid == 0) RunChild(args);
  } else {
    // Any other job shares our memory until its exec, and we wait for that
    // (CLONE_VM | CLONE_VFORK, as posix_spawn does): no copy of our page
    // tables, and none of our pages turns copy-on-write. In a long-lived
    // host every page it wrote after a fork was a fault and a copy, about a
    // tenth of a trivial job's CPU (docs/benchmarks.md). The child runs on
    // a stack of its own, so it cannot clobber our frame, and makes only
    // system calls (nothing it changes in memory is ours to see).
    static std::vector<char> child_stack(kChildStackBytes);
    pid = ::clone(ChildEntry, child_stack.data() + child_stack.size(), CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
  }
  if (pid < 0) return fail(spec.isolate ? "cannot create a pid namespace" : "cannot start the job process");

  // Both sides call setpgid, so that signalling the group works from now on,
  // whichever runs first.
  (void)::setpgid(pid, pid);  // fails harmlessly once the child has exec'ed
  ::close(out[1]);
  ::close(err[1]);
  ::close(report[1]);
  ::close(devnull);
  for (int fd : {out[0], err[0], report[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  JobProcess job;
  job.pid = pid;
  job.stdout_fd = out[0];
  job.stderr_fd = err[0];
  job.error_fd = report[0];
  return job;
}

std::string DescribeLaunchError(const LaunchError& error, const JobSpec& spec) {
  const std::string what = posix::ErrnoText(error.err);
  const std::string user = spec.account.name;
  switch (error.step) {
    case kStepSignals:
      return "cannot reset signals: " + what;
    case kStepProcessGroup:
      return "cannot create a process group: " + what;
    case kStepContainment:
      return "cannot join the containment cgroups: " + what;
    case kStepRlimits:
      return "cannot set resource limits: " + what;
    case kStepIsolation:
      return "cannot isolate the job (namespaces, mounts, read-only root): " + what;
    case kStepStdio:
      return "cannot set up standard input and output: " + what;
    case kStepGroups:
    case kStepSetgid:
    case kStepSetuid:
      return "cannot switch to user '" + user + "': " + what;
    case kStepChdir:
      return "cannot change to working directory '" + spec.work_dir + "': " + what;
    case kStepExec:
      if (!spec.script.empty()) {
        // The kernel's ENOENT for a script is usually its interpreter's.
        const std::string shebang = spec.script.substr(0, spec.script.find('\n'));
        return "cannot execute the batch script (" + shebang + "): " + what +
               (error.err == ENOENT ? "; is its interpreter installed on the node?" : "");
      }
      return "cannot execute '" + (spec.argv.empty() ? std::string() : spec.argv[0]) + "': " + what;
    case kStepScript:
      return "cannot write the batch script into the work directory '" + spec.work_dir + "': " + what;
    case kStepWorkdir:
      return "cannot change to the job's workdir '" + spec.chdir + "' as user '" + user + "': " + what;
    case kStepTmpDir:
      return "cannot create the job's TMPDIR '" + spec.tmp_dir + "' as user '" + user + "': " + what;
    case kStepSyscallFilter:
      return "cannot install the sandbox's system call filter: " + what;
    case kStepAffinity:
      return "cannot pin the job to its CPU set: " + what;
    case kStepMountNamespace:
      return "cannot give the job a mount namespace of its own (for its shared file systems and secrets): " + what;
    case kStepSharedStorage:
      return "cannot bind the job's shared file systems: " + what;
    case kStepSecrets:
      return "cannot put the job's secrets into a private tmpfs at '" + spec.secrets_dir + "': " + what +
             (error.err == ELOOP || error.err == ENOTDIR ? " (something other than a directory is in its place)" : "");
  }
  return "launch failed (step " + std::to_string(error.step) + "): " + what;
}

}  // namespace unisched::supervisor
