#pragma once
// One daemon per state directory: `unisched server` holds an exclusive
// flock on <state_dir>/daemon.lock while it runs, and commands that change
// the state offline (`unisched store restore`) take the same lock, so they
// never run under a live daemon. The descriptor is close-on-exec: the
// supervisors that outlive the daemon do not keep its lock.

#include <string>

#include "unisched/common/status.h"

namespace unisched::daemon {

class StateLock {
 public:
  // The lock of `state_dir` (which must exist), or Conflict naming the pid
  // of the process that holds it.
  static Result<StateLock> Acquire(const std::string& state_dir);
  StateLock(StateLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  StateLock& operator=(StateLock&&) = delete;
  StateLock(const StateLock&) = delete;
  ~StateLock();

 private:
  explicit StateLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace unisched::daemon
