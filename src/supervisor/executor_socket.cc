// ExecutorSocket: see executor_socket.h.

#include "supervisor/executor_socket.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "executor/attempt_files.h"
#include "supervisor/attempt_output.h"
#include "unisched/posix/posix.h"

namespace unisched::supervisor {
namespace {

// PATH_MAX and then some: an attempt directory longer than this is refused.
constexpr size_t kMaxRequest = 8192;

}  // namespace

bool ExecutorSocket::Attach(int epoll_fd, uint64_t tag) {
  epoll_fd_ = epoll_fd;
  tag_ = tag;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag_;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd_, &ev) != 0) return false;
  open_ = true;
  return true;
}

// Each request: the attempt directory, with the spec memfd as the only
// descriptor. A malformed one is dropped: its attempt is never claimed, and
// the executor reports it lost once we are gone.
void ExecutorSocket::Receive(const std::function<void(const std::string& dir, int spec_fd)>& launch) {
  while (open_) {
    char buf[kMaxRequest];
    const posix::ReceivedWithFd got = posix::ReceiveWithFd(fd_, buf, sizeof buf, MSG_DONTWAIT);
    const ssize_t n = got.bytes;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    const int spec_fd = got.fd;
    if (n <= 0) {
      // The executor closed its end (stopped or died): no new attempts; the
      // running ones go on, and their results wait in their directories.
      Close();
      return;
    }
    if ((got.flags & (MSG_TRUNC | MSG_CTRUNC)) == MSG_CTRUNC && spec_fd < 0 && buf[0] == '/') {
      // The kernel could not give us the spec's descriptor: we are out of
      // descriptors (or the machine is). Unclaimed, so the executor hears
      // at once that the launch is to be tried again, instead of waiting
      // for us to exit.
      const std::string dir(buf, static_cast<size_t>(n));
      LogToStderr("launch request for %s dropped: its spec descriptor did not arrive", dir.c_str());
      Notify(dir, EMFILE);
    } else if ((got.flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || spec_fd < 0 || buf[0] != '/') {
      LogToStderr("malformed launch request dropped");
    } else {
      launch(std::string(buf, static_cast<size_t>(n)), spec_fd);
    }
    if (spec_fd >= 0) ::close(spec_fd);
  }
}

void ExecutorSocket::Notify(const std::string& dir, int unclaimed_errno) {
  if (open_) notices_.push_back(executor::files::Notice(dir, unclaimed_errno));
}

// Notices are datagrams of an attempt directory each. A full socket (the
// executor is slow to read) keeps them here until it can take more.
void ExecutorSocket::Flush() {
  while (!notices_.empty() && open_) {
    const std::string& dir = notices_.front();
    const ssize_t n = ::send(fd_, dir.data(), dir.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    notices_.pop_front();  // sent, or the executor is gone (it will read the files)
  }
  const bool want_write = !notices_.empty() && open_;
  if (want_write != want_write_ && open_) {
    epoll_event ev{};
    ev.events = EPOLLIN | (want_write ? static_cast<uint32_t>(EPOLLOUT) : 0U);
    ev.data.u64 = tag_;
    (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd_, &ev);
    want_write_ = want_write;
  }
}

void ExecutorSocket::Close() {
  if (!open_) return;
  (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd_, nullptr);
  (void)::shutdown(fd_, SHUT_RDWR);
  open_ = false;
  notices_.clear();  // the executor reads the results from the files
}

}  // namespace unisched::supervisor
