// Instance: see instance.h.

#include "unisched/sandbox/instance.h"

#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "unisched/isolation/protocol.h"
#include "unisched/posix/posix.h"

namespace unisched::sandbox {
namespace {

using nlohmann::json;

// What the cloned child needs; prepared before the clone, because the child
// shares the daemon's memory (CLONE_VM) until it execs.
struct ChildArgs {
  const containment::Containment* containment = nullptr;
  int control_fd = -1;
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
};

// In the child, PID 1 of the new namespaces: join the cgroups, put the
// control socket at fd 3, exec the init. Only system calls: the memory is
// the daemon's.
int ChildMain(void* raw) {
  const auto* args = static_cast<const ChildArgs*>(raw);
  if (args->containment->JoinSelf() != 0) ::_exit(126);
  if (args->containment->ApplyRlimitsSelf() != 0) ::_exit(126);
  if (::dup2(args->control_fd, 3) < 0) ::_exit(126);
  ::execve(args->path, args->argv, args->envp);
  ::_exit(127);
}

int RemoveEntry(const char* path, const struct stat*, int type, struct FTW*) {
  if (type == FTW_DP) {
    ::rmdir(path);
  } else {
    ::unlink(path);
  }
  return 0;
}

}  // namespace

void RemoveTree(const std::string& path) {
  if (path.empty()) return;
  ::nftw(path.c_str(), RemoveEntry, 64, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

Result<std::unique_ptr<Instance>> Instance::Start(InstanceSpec spec) {
  const uid_t uid = spec.uid.uid();
  if (uid == 0) return Error::Internal("a sandbox instance needs a uid of its own");
  std::unique_ptr<Instance> instance(new Instance(std::move(spec)));
  const InstanceSpec& s = instance->spec_;
  // The work directory: the instance's alone (0700), so no other instance's
  // uid can enter it.
  if (::mkdir(s.work_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Error::Internal("cannot make the work directory " + s.work_dir + ": " + posix::ErrnoText(errno));
  }
  if (::chown(s.work_dir.c_str(), uid, uid) != 0 || ::chmod(s.work_dir.c_str(), 0700) != 0) {
    const int e = errno;
    RemoveTree(s.work_dir);
    return Error::Internal("cannot hand the work directory to uid " + std::to_string(uid) + ": " + posix::ErrnoText(e));
  }
  if (s.use_cgroups) {
    auto c = containment::Containment::Create(s.name, s.limits);
    if (!c.ok()) {
      RemoveTree(s.work_dir);
      return c.error();
    }
    instance->containment_ = std::move(c).value();
  } else {
    instance->containment_ = containment::Containment::Disabled(s.limits);
  }

  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    const int e = errno;
    instance->DestroyLocked();
    return Error::Internal("socketpair: " + posix::ErrnoText(e));
  }
  // exec_cgroup: where the init makes a group per exec, so that the exec's
  // time cap reaches the processes it detached (setsid, double fork).
  json init_spec = {{"work_dir", s.work_dir},
                    {"rootfs", s.rootfs},
                    {"uid", uid},
                    {"binds", json::array()},
                    {"exec_cgroup", instance->containment_.SubtreeDir()}};
  for (const auto& [from, to] : s.binds) init_spec["binds"].push_back({from, to});
  std::string spec_text = init_spec.dump();
  std::string arg0 = "unisched-sandbox";
  std::vector<char*> argv = {arg0.data(), spec_text.data(), nullptr};
  std::string path_env = "PATH=/usr/local/bin:/usr/bin:/bin";
  std::vector<char*> envp = {path_env.data(), nullptr};
  ChildArgs args{&instance->containment_, fds[1], s.init_path.c_str(), argv.data(), envp.data()};

  constexpr size_t kStackSize = 64 * 1024;
  void* stack = ::mmap(nullptr, kStackSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    instance->DestroyLocked();
    return Error::Internal("cannot map a stack: " + posix::ErrnoText(e));
  }
  // Signals stay blocked in the child until the init sets its own mask: no
  // handler of the daemon may run on the shared memory.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const int flags = CLONE_VM | CLONE_VFORK | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC;
  const pid_t pid = ::clone(ChildMain, static_cast<char*>(stack) + kStackSize, flags | SIGCHLD, &args);
  const int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::munmap(stack, kStackSize);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    instance->DestroyLocked();
    return Error::Internal("cannot start the sandbox init (clone): " + posix::ErrnoText(clone_errno));
  }
  instance->pid_ = pid;
  instance->pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  instance->control_fd_ = fds[0];
  json ready;
  const int rc = isolation::ReadFrame(fds[0], ready, 10'000);
  if (rc != 0 || !ready.value("ready", false)) {
    std::string why =
        rc != 0 ? "the init did not answer: " + posix::ErrnoText(rc) : ready.value("error", "no ready message");
    instance->DestroyLocked();
    return Error::Internal("cannot start the sandbox: " + why);
  }
  return instance;
}

Instance::~Instance() {
  Destroy();
}

Result<json> Instance::Call(const json& request, int timeout_ms) {
  std::lock_guard lock(mu_);
  if (destroyed_) return Error::Unavailable("the sandbox instance is gone");
  if (int e = isolation::WriteFrame(control_fd_, request)) {
    DestroyLocked();
    return Error::Unavailable("the sandbox instance is gone (" + posix::ErrnoText(e) + ")");
  }
  json answer;
  if (int e = isolation::ReadFrame(control_fd_, answer, timeout_ms)) {
    DestroyLocked();
    return Error::Unavailable(e == ETIMEDOUT ? "the sandbox instance stopped answering; it was destroyed"
                                             : "the sandbox instance is gone (" + posix::ErrnoText(e) + ")");
  }
  return answer;
}

void Instance::Destroy() {
  {
    std::lock_guard kill_lock(kill_mu_);
    if (pidfd_ >= 0) ::syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0);
  }
  std::lock_guard lock(mu_);
  DestroyLocked();
}

void Instance::DestroyLocked() {
  if (destroyed_) return;
  destroyed_ = true;
  if (control_fd_ >= 0) ::close(control_fd_);  // the init exits on this; SIGKILL makes sure
  control_fd_ = -1;
  if (pid_ > 0) {
    // Killing PID 1 of the namespace kills everything in it.
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    std::lock_guard kill_lock(kill_mu_);
    if (pidfd_ >= 0) ::close(pidfd_);
    pidfd_ = -1;
  }
  for (int i = 0; i < 50 && !containment_.Pids().empty(); ++i) {
    containment_.KillAll(SIGKILL);
    ::usleep(2000);
  }
  containment_.RemoveSubgroups();  // the per-exec groups, emptied with the namespace
  (void)containment_.Destroy();
  RemoveTree(spec_.work_dir);
  spec_.uid = isolation::UidLease();  // the uid is free again only now that nothing of it remains
}

Status Instance::SetLimits(const containment::Limits& limits) {
  std::lock_guard lock(mu_);
  if (destroyed_) return Error::Unavailable("the sandbox instance is gone");
  return containment_.SetLimits(limits);
}

}  // namespace unisched::sandbox
