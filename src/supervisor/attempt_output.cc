// AttemptOutput and the supervisor's diagnostics: see attempt_output.h.

#include "supervisor/attempt_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <utility>

#include "executor/attempt_files.h"
#include "unisched/posix/posix.h"

namespace unisched::supervisor {

namespace files = executor::files;

void LogToStderr(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::fprintf(stderr, "unisched-supervisor[%d]: ", static_cast<int>(::getpid()));
  std::vfprintf(stderr, format, args);
  std::fputc('\n', stderr);
  va_end(args);
}

int MakeJobAndAttemptDir(const std::string& dir) {
  const size_t slash = dir.find_last_of('/');
  const std::string job_dir = slash != std::string::npos && slash > 0 ? dir.substr(0, slash) : std::string();
  int err = 0;
  for (int i = 0; i < 3; ++i) {
    if (!job_dir.empty()) {
      if ((err = posix::MakeDir(job_dir, 0700)) != 0) return err;
    }
    if ((err = posix::MakeDir(dir, 0700)) != ENOENT) return err;
  }
  return err;
}

AttemptOutput::~AttemptOutput() {
  if (log_fd_ >= 0) ::close(log_fd_);
}

int AttemptOutput::EnsureDir() {
  if (log_dir_.empty() || log_dir_made_) return 0;
  const int err = MakeJobAndAttemptDir(log_dir_);
  log_dir_made_ = err == 0;
  return err;
}

void AttemptOutput::OpenStreams(int64_t cap) {
  stdout_log_.Open(Path(files::kStdout), cap, [this] { return EnsureDir(); });
  stderr_log_.Open(Path(files::kStderr), cap, [this] { return EnsureDir(); });
}

void AttemptOutput::ReportLostStreams() {
  for (const auto& [log, name] : {std::pair{&stdout_log_, files::kStdout}, std::pair{&stderr_log_, files::kStderr}}) {
    if (log->open_error() != 0) {
      Log("cannot create %s, the job's output is lost: %s", Path(name).c_str(), std::strerror(log->open_error()));
    }
  }
}

void AttemptOutput::Log(const char* format, ...) {
  char line[2048];
  int n = std::snprintf(line, sizeof line, "unisched-supervisor[%d]: ", static_cast<int>(::getpid()));
  va_list args;
  va_start(args, format);
  if (n > 0 && static_cast<size_t>(n) < sizeof line) n += std::vsnprintf(line + n, sizeof line - n, format, args);
  va_end(args);
  if (n < 0) return;
  size_t len = std::min(static_cast<size_t>(n), sizeof line - 2);
  line[len++] = '\n';
  if (log_fd_ < 0 && EnsureDir() == 0) {
    log_fd_ = ::open(Path(files::kSupervisorLog).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  }
  const int fd = log_fd_ >= 0 ? log_fd_ : STDERR_FILENO;
  ssize_t ignored = ::write(fd, line, len);
  (void)ignored;  // nowhere left to report a failed diagnostic
}

}  // namespace unisched::supervisor
