#pragma once
// Small helpers over POSIX calls, one copy for every module that makes
// them (the supervisor, the sandbox init, containment, isolation, the
// executor, the store). Each returns the errno rather than throwing, and
// MakeDir is async-signal-safe: it also runs between clone and exec.

#include <sys/types.h>

#include <string>

namespace unisched::posix {

// strerror(err), as a string.
std::string ErrnoText(int err);

// mkdir(path, mode) that accepts an existing entry: 0, or the errno.
int MakeDir(const std::string& path, mode_t mode);

}  // namespace unisched::posix
