#pragma once
// Small helpers over POSIX calls, one copy for every module that makes
// them (the supervisor, the sandbox init, containment, isolation, the
// executor, the store). Each returns the errno rather than throwing, and
// MakeDir is async-signal-safe: it also runs between clone and exec.

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace unisched::posix {

// strerror(err), as a string.
std::string ErrnoText(int err);

// mkdir(path, mode) that accepts an existing entry: 0, or the errno.
int MakeDir(const std::string& path, mode_t mode);

// One datagram (or stream segment) of `size` bytes with descriptor `fd`
// attached (SCM_RIGHTS; -1: none): sendmsg's result, errno as it left it.
// Async-signal-safe.
ssize_t SendWithFd(int socket, const void* data, size_t size, int fd, int flags);

// What ReceiveWithFd got: recvmsg's result (errno as it left it), the one
// descriptor attached (close-on-exec; -1: none) and the message's flags
// (MSG_TRUNC, MSG_CTRUNC: the descriptor did not fit, e.g. none left).
struct ReceivedWithFd {
  ssize_t bytes = -1;
  int fd = -1;
  int flags = 0;
};
ReceivedWithFd ReceiveWithFd(int socket, void* buffer, size_t size, int flags);

}  // namespace unisched::posix
