#pragma once
// Where an attempt's output goes: stdout, stderr and supervisor.log, each made by its first byte (a quiet
// attempt creates none). Apart from the state machine, which only writes to them.

#include <cstdint>
#include <string>
#include <utility>

#include "supervisor/capped_log.h"
#include "supervisor/job_launch.h"

namespace unisched::supervisor {

// A diagnostic of the supervisor itself, where no attempt's log can take it:
// stderr, which the executor points at /dev/null.
void LogToStderr(const char* format, ...) __attribute__((format(printf, 1, 2)));

// <root>/<job>/<attempt>, 0700 by the umask; the executor made <root>.
// A retention pass may remove an empty <job> directory between our two
// mkdirs: then make it again. Returns 0 or the errno.
int MakeJobAndAttemptDir(const std::string& dir);

// The output files of one attempt: in the spec's log_dir (made by the first
// byte written there), or beside the control files.
class AttemptOutput {
 public:
  explicit AttemptOutput(std::string attempt_dir) : attempt_dir_(std::move(attempt_dir)) {}
  AttemptOutput(const AttemptOutput&) = delete;
  AttemptOutput& operator=(const AttemptOutput&) = delete;
  ~AttemptOutput();

  // The spec's log_dir (empty: the attempt directory). Set first, so that
  // even the first diagnostic goes where the spec says.
  void SetDir(std::string log_dir) { log_dir_ = std::move(log_dir); }
  std::string Path(const char* name) const { return (log_dir_.empty() ? attempt_dir_ : log_dir_) + "/" + name; }

  // stdout and stderr, each capped at `cap` bytes, created by their first
  // byte: a silent job leaves neither file.
  void OpenStreams(int64_t cap);
  CappedLog& stdout_log() { return stdout_log_; }
  CappedLog& stderr_log() { return stderr_log_; }
  // Says in supervisor.log which stream's file could not be created.
  void ReportLostStreams();

  // The spec's output_file and error_file (Slurm's -o and -e), opened for
  // appending by `account` itself, so a job writes only where its user
  // may. "" or why a file cannot be opened (the launch then fails).
  std::string OpenCopies(const std::string& output_file, const std::string& error_file, const Account& account);
  // Appends a stream's bytes to its copy, if it has one. A copy that
  // cannot be written (a full disk) is given up with a line in supervisor.log;
  // the captured stream goes on.
  void CopyStdout(const char* data, size_t size) { Copy(stdout_copy_fd_, data, size, "output_file"); }
  void CopyStderr(const char* data, size_t size) { Copy(stderr_copy_fd_, data, size, "error_file"); }

  // A line in supervisor.log, created by the first diagnostic: most
  // attempts have none, and an inode not created is the cheapest. Until the
  // directory exists (or if the log cannot be created) it goes to stderr.
  void Log(const char* format, ...) __attribute__((format(printf, 2, 3)));

 private:
  int EnsureDir();
  void Copy(int& fd, const char* data, size_t size, const char* which);

  const std::string attempt_dir_;
  std::string log_dir_;
  bool log_dir_made_ = false;
  int log_fd_ = -1;  // supervisor.log, created by the first diagnostic
  CappedLog stdout_log_;
  CappedLog stderr_log_;
  int stdout_copy_fd_ = -1;  // output_file
  int stderr_copy_fd_ = -1;  // error_file: a descriptor of its own even when the path is output_file's
};

// Opens `path` for appending (created 0640 when missing) as `account`: a
// child that has become the account opens it and hands the descriptor
// back over a socket, so the supervisor's root never opens a user's path.
// The descriptor, or -errno.
int OpenAppendAsAccount(const std::string& path, const Account& account);

}  // namespace unisched::supervisor
