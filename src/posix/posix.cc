// Helpers over POSIX calls (posix/posix.h).

#include "unisched/posix/posix.h"

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

}  // namespace unisched::posix
