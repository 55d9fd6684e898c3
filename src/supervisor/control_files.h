#pragma once
// An attempt's control files (claim and its lock, state.json, result.json): the supervisor's side of the
// handshake with the executor. Apart because the executor reads them while the attempt runs.

#include <cstdint>
#include <string>
#include <utility>

#include "executor/attempt_files.h"
#include "supervisor/attempt_output.h"

namespace unisched::supervisor {

enum class ClaimResult { kOwned, kTaken, kError };

class ControlFiles {
 public:
  // `shared`: the host runs the attempt (it says so in the claim and the state).
  ControlFiles(std::string dir, bool shared, AttemptOutput& output)
      : dir_(std::move(dir)), shared_(shared), output_(output) {}
  ControlFiles(const ControlFiles&) = delete;
  ControlFiles& operator=(const ControlFiles&) = delete;
  ~ControlFiles();

  // Makes the attempt directory and claims the attempt: kTaken when another
  // supervisor did first, kError when it could not (unclaimed_errno() says
  // why, when it is a failure to make the directory or the claim).
  ClaimResult Claim();
  int unclaimed_errno() const { return unclaimed_errno_; }
  // Once, right after the claim is locked.
  void WriteState(int64_t started_at_ms);
  // result.json, durably; then the claim's lock goes, whether or not the
  // result could be written (false: it could not).
  bool WriteResult(const executor::RunResult& result, const std::string& contained_by);

 private:
  std::string Path(const char* name) const { return dir_ + "/" + name; }

  const std::string dir_;
  const bool shared_;
  AttemptOutput& output_;  // diagnostics
  int claim_fd_ = -1;      // locked until the result is written
  int unclaimed_errno_ = 0;
};

}  // namespace unisched::supervisor
