// One daemon per state directory (state_lock.h).

#include "daemon/state_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

#include "unisched/posix/posix.h"

namespace unisched::daemon {

Result<StateLock> StateLock::Acquire(const std::string& state_dir) {
  const std::string path = state_dir + "/daemon.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Error::Unavailable("cannot open " + path + ": " + posix::ErrnoText(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int saved = errno;
    char holder[32] = {};
    const ssize_t n = ::pread(fd, holder, sizeof(holder) - 1, 0);
    ::close(fd);
    std::string pid = n > 0 ? std::string(holder, static_cast<size_t>(n)) : "";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    if (saved == EWOULDBLOCK) {
      return Error::Conflict("state_dir_in_use", "another unisched daemon" + (pid.empty() ? "" : " (pid " + pid + ")") +
                                                     " uses the state directory " + state_dir +
                                                     "; stop it first, or use another --state-dir");
    }
    return Error::Unavailable("cannot lock " + path + ": " + posix::ErrnoText(saved));
  }
  // The holder's pid, for the message above (advisory: the flock decides).
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The lock holds without the pid; only the message loses it.
  }
  return StateLock(fd);
}

StateLock::~StateLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace unisched::daemon
