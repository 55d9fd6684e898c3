// Helpers over POSIX calls (posix/posix.h).

#include "unisched/posix/posix.h"

#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace unisched::posix {

std::string ErrnoText(int err) {
  return std::strerror(err);
}

int MakeDir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) == 0 || errno == EEXIST) return 0;
  return errno;
}

ssize_t SendWithFd(int socket, const void* data, size_t size, int fd, int flags) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{const_cast<void*>(data), size};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  if (fd >= 0) {
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
  }
  return ::sendmsg(socket, &message, flags);
}

ReceivedWithFd ReceiveWithFd(int socket, void* buffer, size_t size, int flags) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{buffer, size};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ReceivedWithFd got;
  got.bytes = ::recvmsg(socket, &message, flags | MSG_CMSG_CLOEXEC);
  got.flags = message.msg_flags;
  for (cmsghdr* c = got.bytes > 0 ? CMSG_FIRSTHDR(&message) : nullptr; c != nullptr; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) {
      std::memcpy(&got.fd, CMSG_DATA(c), sizeof(int));
    }
  }
  return got;
}

}  // namespace unisched::posix
