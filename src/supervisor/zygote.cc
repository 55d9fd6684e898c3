// RunZygote: see zygote.h.

#include "supervisor/zygote.h"

#include <sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "supervisor/supervisor.h"

namespace unisched::supervisor {
namespace {

// PATH_MAX and then some: an attempt directory longer than this is refused.
constexpr size_t kMaxRequest = 8192;

enum class Received { kRequest, kMalformed, kClosed, kError };

// One request: the attempt directory in the payload, the spec memfd as the
// only descriptor (*spec_fd, -1 if none came).
Received ReceiveRequest(int socket_fd, std::string& dir, int* spec_fd) {
  char buf[kMaxRequest];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  iovec iov{buf, sizeof buf};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  *spec_fd = -1;
  ssize_t n;
  do {
    n = ::recvmsg(socket_fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return Received::kClosed;
  if (n < 0) return Received::kError;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) {
      std::memcpy(spec_fd, CMSG_DATA(c), sizeof(int));
    }
  }
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || *spec_fd < 0 || buf[0] != '/') return Received::kMalformed;
  dir.assign(buf, static_cast<size_t>(n));
  return Received::kRequest;
}

void Reply(int socket_fd, int32_t value) {
  ssize_t n;
  do {
    n = ::send(socket_fd, &value, sizeof value, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  // A failed reply: the executor is gone or gives up on us; the next
  // receive sees that.
}

}  // namespace

int RunZygote(int socket_fd) {
  for (;;) {
    std::string dir;
    int spec_fd = -1;
    switch (ReceiveRequest(socket_fd, dir, &spec_fd)) {
      case Received::kRequest:
        break;
      case Received::kMalformed:
        if (spec_fd >= 0) ::close(spec_fd);
        Reply(socket_fd, -EINVAL);
        continue;
      case Received::kClosed:
        return 0;  // the executor closed its end (stopped or died)
      case Received::kError:
        return 1;
    }
    // A fork whose child has our parent (the executor) as its parent.
    // Raw clone rather than fork(): glibc's fork has no CLONE_PARENT. We are
    // single-threaded and hold no lock, which is what fork would otherwise
    // see to; glibc 2.34+ asks the kernel for the thread id where it needs
    // it (raise), so the child's stale cached id is not used.
    const long pid = ::syscall(SYS_clone, CLONE_PARENT | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
    if (pid == 0) {
      // The supervisor, in the state the executor's posix_spawn gave it:
      // the spec on stdin, no other descriptor of ours, a session of its
      // own, SIGTERM/SIGINT/SIGCHLD/SIGUSR1 blocked (inherited from us).
      ::close(socket_fd);
      if (::dup2(spec_fd, STDIN_FILENO) < 0) std::_Exit(1);
      ::close(spec_fd);
      (void)::setsid();
      std::exit(RunSupervisor(dir));
    }
    const int32_t reply = pid > 0 ? static_cast<int32_t>(pid) : -errno;
    ::close(spec_fd);
    Reply(socket_fd, reply);
  }
}

}  // namespace unisched::supervisor
