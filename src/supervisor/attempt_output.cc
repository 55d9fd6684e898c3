// AttemptOutput and the supervisor's diagnostics: see attempt_output.h.

#include "supervisor/attempt_output.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
  for (int fd : {log_fd_, stdout_copy_fd_, stderr_copy_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

std::string AttemptOutput::OpenCopies(const std::string& output_file, const std::string& error_file,
                                      const Account& account) {
  auto refused = [&account](const std::string& path, const char* flag, int err) {
    return "cannot open the job's output file " + path + " (" + flag + ") as " + account.name + ": " +
           std::strerror(err);
  };
  if (!output_file.empty()) {
    const int fd = OpenAppendAsAccount(output_file, account);
    if (fd < 0) return refused(output_file, "-o", -fd);
    stdout_copy_fd_ = fd;
  }
  if (error_file.empty()) return {};
  // stderr into the output file (no -e, as sbatch): its descriptor again,
  // not a second child to open the same file.
  const int fd = error_file == output_file ? ::fcntl(stdout_copy_fd_, F_DUPFD_CLOEXEC, 0)
                                           : OpenAppendAsAccount(error_file, account);
  if (fd < 0) return refused(error_file, "-e", error_file == output_file ? errno : -fd);
  stderr_copy_fd_ = fd;
  return {};
}

void AttemptOutput::Copy(int& fd, const char* data, size_t size, const char* which) {
  while (fd >= 0 && size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Log("writing the job's %s failed, the rest goes to its log only: %s", which,
          std::strerror(n < 0 ? errno : ENOSPC));
      ::close(fd);
      fd = -1;
      return;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

int OpenAppendAsAccount(const std::string& path, const Account& account) {
  int sockets[2];
  if (::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sockets) != 0) return -errno;
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(sockets[0]);
    ::close(sockets[1]);
    return -err;
  }
  if (pid == 0) {
    // The child: only async-signal-safe calls until _exit.
    int err = 0;
    if (account.switch_user && (::setgroups(account.groups.size(), account.groups.data()) != 0 ||
                                ::setgid(account.gid) != 0 || ::setuid(account.uid) != 0)) {
      err = errno;
    }
    int fd = -1;
    if (err == 0) {
      ::umask(027);
      fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0640);
      if (fd < 0) err = errno;
    }
    _exit(posix::SendWithFd(sockets[1], &err, sizeof err, fd, 0) < 0 ? 1 : 0);
  }
  ::close(sockets[1]);
  int err = EIO;
  posix::ReceivedWithFd got;
  do {
    got = posix::ReceiveWithFd(sockets[0], &err, sizeof err, 0);
  } while (got.bytes < 0 && errno == EINTR);
  ::close(sockets[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got.bytes != static_cast<ssize_t>(sizeof err)) err = EIO;
  if (err != 0 || got.fd < 0) {
    if (got.fd >= 0) ::close(got.fd);
    return -(err != 0 ? err : EIO);
  }
  return got.fd;
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
