#include "executor/supervisor_hosts.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "executor/supervisor_process.h"
#include "unisched/posix/posix.h"

namespace unisched::executor {

SupervisorHosts::SupervisorHosts(std::string supervisor_path, int epoll_fd)
    : supervisor_path_(std::move(supervisor_path)),
      epoll_fd_(epoll_fd),
      hosts_(std::clamp<size_t>(std::thread::hardware_concurrency(), 1, kMaxHosts)) {}

Result<pid_t> SupervisorHosts::Start(const std::string& attempt_dir, int spec_fd) {
  std::lock_guard lock(mu_);
  if (stopped_) return Error::Unavailable("the supervisor hosts are stopped");
  Host& host = hosts_[next_++ % hosts_.size()];
  if (host.socket < 0) {
    if (Status s = Launch(host); !s.ok()) return s.error();
  }
  for (;;) {
    const ssize_t n =
        posix::SendWithFd(host.socket, attempt_dir.data(), attempt_dir.size(), spec_fd, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(attempt_dir.size())) return host.pid;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Its queue is full: a host that takes nothing for this long is stuck.
      pollfd p{host.socket, POLLOUT, 0};
      int ready;
      do {
        ready = ::poll(&p, 1, kSendTimeoutMillis);
      } while (ready < 0 && errno == EINTR);
      if (ready > 0 && (p.revents & POLLOUT) != 0) continue;
      Retire(host);
      return Error::Unavailable("the supervisor host took no launch for " + std::to_string(kSendTimeoutMillis) +
                                " ms; retired");
    }
    const int err = n < 0 ? errno : EIO;
    Retire(host);
    return Error::Unavailable("cannot send to the supervisor host: " + posix::ErrnoText(err));
  }
}

std::optional<std::vector<std::string>> SupervisorHosts::TakeNotices(int fd) {
  std::lock_guard lock(mu_);
  Host* host = Find(fd);
  if (host == nullptr) return std::nullopt;
  std::vector<std::string> dirs;
  for (;;) {
    char buf[kMaxNotice];
    const ssize_t n = ::recv(host->socket, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      dirs.emplace_back(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return dirs;
    Retire(*host);
    return dirs;
  }
}

std::vector<pid_t> SupervisorHosts::TakeGone() {
  std::lock_guard lock(mu_);
  return std::exchange(gone_, {});
}

void SupervisorHosts::ReapRetired() {
  std::lock_guard lock(mu_);
  std::erase_if(retired_, [](pid_t pid) { return ::waitpid(pid, nullptr, WNOHANG) != 0; });
}

bool SupervisorHosts::Current(pid_t pid) {
  std::lock_guard lock(mu_);
  return pid > 0 && std::any_of(hosts_.begin(), hosts_.end(), [pid](const Host& h) { return h.pid == pid; });
}

bool SupervisorHosts::Alive(pid_t pid) {
  if (Current(pid)) return true;
  std::lock_guard lock(mu_);
  return pid > 0 && std::find(retired_.begin(), retired_.end(), pid) != retired_.end();
}

void SupervisorHosts::Stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  for (Host& host : hosts_) Retire(host);
}

SupervisorHosts::Host* SupervisorHosts::Find(int fd) {
  for (Host& host : hosts_) {
    if (fd >= 0 && host.socket == fd) return &host;
  }
  return nullptr;
}

Status SupervisorHosts::Launch(Host& host) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return Error::Unavailable("cannot make the supervisor host's socket: " + posix::ErrnoText(errno));
  }
  // Its end goes to fd 3 of the host; a number above 3 makes the dup2 a
  // real one, which clears close-on-exec.
  const int theirs = ::fcntl(pair[1], F_DUPFD_CLOEXEC, 10);
  ::close(pair[1]);
  if (theirs < 0) {
    ::close(pair[0]);
    return Error::Unavailable("cannot make the supervisor host's socket: " + posix::ErrnoText(errno));
  }
  auto pid = SpawnSupervisorProcess(supervisor_path_, "--host", -1, theirs);
  ::close(theirs);
  if (!pid.ok()) {
    ::close(pair[0]);
    return pid.error();
  }
  host.socket = pair[0];
  host.pid = *pid;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = host.socket;
  // Without the registration the host's attempts are found once it is
  // retired (by the next failed launch, or Stop): a degraded executor,
  // not a wrong one.
  if (epoll_fd_ >= 0) (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, host.socket, &ev);
  return Status::Ok();
}

void SupervisorHosts::Retire(Host& host) {
  if (host.socket >= 0) ::close(host.socket);  // also leaves the epoll set
  host.socket = -1;
  if (host.pid > 0) {
    if (::waitpid(host.pid, nullptr, WNOHANG) == 0) retired_.push_back(host.pid);
    gone_.push_back(host.pid);
  }
  host.pid = -1;
}

}  // namespace unisched::executor
