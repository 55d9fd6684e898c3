#include "executor/attempt_claim.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "executor/attempt_files.h"

namespace unisched::executor {

LockState ProbeLock(const std::string& dir) {
  const int fd = ::open((dir + "/" + files::kClaim).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ENOTDIR ? LockState::kMissing : LockState::kUnknown;
  LockState state = LockState::kFree;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    state = errno == EWOULDBLOCK ? LockState::kHeld : LockState::kFree;
  } else {
    ::flock(fd, LOCK_UN);
  }
  ::close(fd);
  return state;
}

pid_t LiveSupervisorPid(const std::string& dir, bool* shared) {
  pid_t pid = 0;
  if (auto claim = files::ReadWholeFile(dir + "/" + files::kClaim)) {
    pid = std::atoi(claim->c_str());
    *shared = claim->find(" shared") != std::string::npos;
  }
  if (pid <= 0) {
    if (auto state = files::ReadWholeFile(dir + "/" + files::kState)) {
      const auto j = nlohmann::json::parse(*state, nullptr, false);
      if (j.is_object()) pid = j.value("supervisor_pid", 0);
    }
  }
  if (pid <= 0) return 0;
  return ProbeLock(dir) == LockState::kHeld ? pid : 0;
}

}  // namespace unisched::executor
