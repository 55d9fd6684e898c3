#include "unisched/containment/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace unisched::containment {

std::string ReadAll(int fd) {
  std::string out;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::optional<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out = ReadAll(fd);
  ::close(fd);
  return out;
}

}  // namespace unisched::containment
