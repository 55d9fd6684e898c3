// ControlFiles: see control_files.h.

#include "supervisor/control_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace unisched::supervisor {

namespace files = executor::files;

ControlFiles::~ControlFiles() {
  if (claim_fd_ >= 0) ::close(claim_fd_);
}

// One file is claim and lock: the exclusive create decides which supervisor
// runs the attempt, and its flock, held until the attempt ends, tells
// readers that it lives. Readers bridge the instant between the create and
// the flock: a claim with a free lock, no result and no state.json is
// looked at again before it counts as a dead supervisor (see the executor).
// A shared supervisor says so in the claim ("<pid> shared"): its attempts
// are cancelled through a file, not a signal to the pid (docs/execution.md).
ClaimResult ControlFiles::Claim() {
  if (int err = MakeJobAndAttemptDir(dir_)) {
    LogToStderr("cannot create %s: %s", dir_.c_str(), std::strerror(err));
    unclaimed_errno_ = err;
    return ClaimResult::kError;
  }
  claim_fd_ = ::open(Path(files::kClaim).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (claim_fd_ < 0) {
    if (errno == EEXIST) return ClaimResult::kTaken;
    unclaimed_errno_ = errno;
    output_.Log("cannot create %s: %s", Path(files::kClaim).c_str(), std::strerror(unclaimed_errno_));
    return ClaimResult::kError;
  }
  // Blocking: a reader probing the lock holds it for an instant only.
  while (::flock(claim_fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    // The claim stands (no other supervisor may run the attempt); without
    // the lock a reader takes us for dead once it sees no state.json, so
    // write none and no result: the attempt is then lost, not run twice.
    output_.Log("cannot lock %s: %s", Path(files::kClaim).c_str(), std::strerror(errno));
    return ClaimResult::kError;
  }
  const std::string pid = std::to_string(::getpid()) + (shared_ ? " shared\n" : "\n");
  ssize_t ignored = ::write(claim_fd_, pid.data(), pid.size());
  (void)ignored;  // the claim is its existence; the pid is a courtesy
  return ClaimResult::kOwned;
}

// Written once, non-durably: its existence tells a reader that the lock was
// taken (so a free lock then means we are gone), and it holds our pid.
void ControlFiles::WriteState(int64_t started_at_ms) {
  nlohmann::json j{{"phase", "running"}, {"supervisor_pid", ::getpid()}, {"started_at", started_at_ms}};
  if (shared_) j["shared"] = true;
  if (int err = files::WriteFileAtomic(dir_, files::kState, j.dump() + "\n", /*durable=*/false)) {
    output_.Log("cannot write %s: %s", Path(files::kState).c_str(), std::strerror(err));
  }
}

// The only durable write: the result must survive a host crash. There is no
// final state.json: the result's existence says the attempt ended.
bool ControlFiles::WriteResult(const executor::RunResult& result, const std::string& contained_by) {
  const std::string json = files::ResultToJson(result, contained_by).dump(2) + "\n";
  bool written = true;
  if (int err = files::WriteFileAtomic(dir_, files::kResult, json)) {
    output_.Log("cannot write %s: %s", Path(files::kResult).c_str(), std::strerror(err));
    written = false;
  }
  if (claim_fd_ >= 0) ::close(claim_fd_);
  claim_fd_ = -1;
  return written;
}

}  // namespace unisched::supervisor
