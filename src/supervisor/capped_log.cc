// CappedLog: see capped_log.h.

#include "supervisor/capped_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

namespace unisched::supervisor {

CappedLog::~CappedLog() {
  if (fd_ >= 0) ::close(fd_);
}

void CappedLog::Open(const std::string& path, int64_t cap, std::function<int()> make_dir) {
  path_ = path;
  cap_ = cap;
  make_dir_ = std::move(make_dir);
}

void CappedLog::Append(const char* data, size_t size) {
  if (truncated_ || size == 0) return;
  size_t keep = size;
  if (cap_ > 0) keep = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(size), cap_ - written_));
  if (keep > 0) {
    WriteAll(data, keep);
    written_ += static_cast<int64_t>(keep);
    last_ = data[keep - 1];
  }
  if (keep < size) {
    truncated_ = true;
    std::string marker = last_ == '\n' ? "" : "\n";
    marker += "[unisched: output truncated at " + std::to_string(cap_) + " bytes]\n";
    WriteAll(marker.data(), marker.size());
  }
}

void CappedLog::WriteAll(const char* data, size_t size) {
  if (fd_ < 0 && open_error_ == 0 && !path_.empty()) {
    if (make_dir_) open_error_ = make_dir_();
    if (open_error_ != 0) return;
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (fd_ < 0) open_error_ = errno;
  }
  if (fd_ < 0) return;
  while (size > 0) {
    const ssize_t n = ::write(fd_, data, size);
    if (n < 0 && errno == EINTR) continue;
    // A full disk loses output, never the job: nothing else to do here.
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace unisched::supervisor
