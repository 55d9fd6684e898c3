#include "executor/supervisor_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <utility>

#include "unisched/executor/executor.h"
#include "unisched/posix/posix.h"

namespace unisched::executor {

Result<pid_t> SpawnSupervisorProcess(const std::string& supervisor_path, const std::string& arg, int stdin_fd,
                                     int fd3) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  if (stdin_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, stdin_fd, 0);  // dup2 clears close-on-exec
  } else {
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  if (fd3 >= 0) posix_spawn_file_actions_adddup2(&actions, fd3, 3);  // fd3 > 3 (see the host)
  posix_spawn_file_actions_addclosefrom_np(&actions, fd3 >= 0 ? 4 : 3);
  // Blocked from the first instruction: a cancel sent right away waits in
  // the supervisor's signalfd rather than killing it before it is ready.
  sigset_t blocked;
  sigemptyset(&blocked);
  for (int sig : {SIGTERM, SIGINT, SIGCHLD, SIGUSR1, SIGUSR2}) sigaddset(&blocked, sig);
  sigset_t defaults;
  sigfillset(&defaults);
  posix_spawnattr_setsigmask(&attr, &blocked);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);

  std::string path = supervisor_path;
  std::string arg_copy = arg;
  char* argv[] = {path.data(), arg_copy.data(), nullptr};
  char* envp[] = {nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, path.c_str(), &actions, &attr, argv, envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    std::string message = "cannot start the supervisor '" + path + "': " + posix::ErrnoText(rc);
    return IsTransientErrno(rc) ? TransientLaunchError(std::move(message)) : Error::Unavailable(std::move(message));
  }
  return pid;
}

Result<int> SpecMemfd(const files::AttemptSpec& spec) {
  const std::string json = files::SpecToJson(spec).dump();
  const int fd = ::memfd_create("unisched-spec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    const int err = errno;
    std::string message = "cannot create the spec memfd: " + posix::ErrnoText(err);
    return IsTransientErrno(err) ? TransientLaunchError(std::move(message)) : Error::Unavailable(std::move(message));
  }
  size_t done = 0;
  while (done < json.size()) {
    const ssize_t n = ::write(fd, json.data() + done, json.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      std::string message = "cannot write the spec memfd: " + posix::ErrnoText(err);
      return IsTransientErrno(err) ? TransientLaunchError(std::move(message)) : Error::Unavailable(std::move(message));
    }
    done += static_cast<size_t>(n);
  }
  // Sealed: what the supervisor reads is what was launched.
  (void)::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  if (::lseek(fd, 0, SEEK_SET) != 0) {
    const int err = errno;
    ::close(fd);
    return Error::Unavailable("cannot rewind the spec memfd: " + posix::ErrnoText(err));
  }
  return fd;
}

}  // namespace unisched::executor
