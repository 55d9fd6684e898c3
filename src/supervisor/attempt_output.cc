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
#include <tuple>
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
  for (const auto& [path, fd, flag] :
       {std::tuple{&output_file, &stdout_copy_fd_, "-o"}, std::tuple{&error_file, &stderr_copy_fd_, "-e"}}) {
    if (path->empty()) continue;
    const int opened = OpenAppendAsAccount(*path, account);
    if (opened < 0) {
      return "cannot open the job's output file " + *path + " (" + flag + ") as " + account.name + ": " +
             std::strerror(-opened);
    }
    *fd = opened;
  }
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
    if (account.switch_user) {
      if (::setgroups(account.groups.size(), account.groups.data()) != 0 || ::setgid(account.gid) != 0 ||
          ::setuid(account.uid) != 0) {
        err = errno;
      }
    }
    int fd = -1;
    if (err == 0) {
      ::umask(027);
      fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0640);
      if (fd < 0) err = errno;
    }
    char control[CMSG_SPACE(sizeof(int))] = {};
    iovec payload{&err, sizeof err};
    msghdr message{};
    message.msg_iov = &payload;
    message.msg_iovlen = 1;
    if (fd >= 0) {
      message.msg_control = control;
      message.msg_controllen = sizeof control;
      cmsghdr* header = CMSG_FIRSTHDR(&message);
      header->cmsg_level = SOL_SOCKET;
      header->cmsg_type = SCM_RIGHTS;
      header->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(header), &fd, sizeof fd);
    }
    _exit(::sendmsg(sockets[1], &message, 0) < 0 ? 1 : 0);
  }
  ::close(sockets[1]);
  int err = EIO;
  char control[CMSG_SPACE(sizeof(int))] = {};
  iovec payload{&err, sizeof err};
  msghdr message{};
  message.msg_iov = &payload;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t got;
  do {
    got = ::recvmsg(sockets[0], &message, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  ::close(sockets[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != static_cast<ssize_t>(sizeof err)) return -EIO;
  int fd = -1;
  if (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr && header->cmsg_type == SCM_RIGHTS) {
    std::memcpy(&fd, CMSG_DATA(header), sizeof fd);
  }
  if (err != 0) {
    if (fd >= 0) ::close(fd);
    return -err;
  }
  return fd >= 0 ? fd : -EIO;
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
