#pragma once
// The host's socket to the executor: launch requests in, notices out (docs/execution.md, "The supervisor
// host"). Apart because only the host has one.

#include <cstdint>
#include <deque>
#include <functional>
#include <string>

namespace unisched::supervisor {

class ExecutorSocket {
 public:
  // `fd`: SOCK_SEQPACKET, the executor's (not closed here).
  explicit ExecutorSocket(int fd) : fd_(fd) {}
  ExecutorSocket(const ExecutorSocket&) = delete;
  ExecutorSocket& operator=(const ExecutorSocket&) = delete;

  // Joins the loop's epoll set under `tag`: readable, and writable while
  // notices wait. False (errno set) if it could not.
  bool Attach(int epoll_fd, uint64_t tag);
  // Until the executor closes its end or we stop taking attempts.
  bool open() const { return open_; }

  // Takes the requests waiting, until none is left or the socket is closed
  // (also by `launch`): each well-formed one is handed to `launch` as the
  // attempt directory and the spec memfd, which is closed after the call.
  void Receive(const std::function<void(const std::string& dir, int spec_fd)>& launch);
  // The attempt in `dir` is over (unclaimed_errno: why it could not make
  // its directory or claim). Sent by Flush.
  void Notify(const std::string& dir, int unclaimed_errno);
  // Sends what the socket takes now; the rest waits for it to be writable.
  void Flush();
  // No new attempts: the executor sees EOF and starts another host for its
  // next launch.
  void Close();

 private:
  const int fd_;
  int epoll_fd_ = -1;
  uint64_t tag_ = 0;
  bool open_ = false;
  std::deque<std::string> notices_;  // attempt directories whose attempt is over, to send
  bool want_write_ = false;
};

}  // namespace unisched::supervisor
