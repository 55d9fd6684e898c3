#pragma once
// The supervisor hosts (src/supervisor/supervisor.h): `unisched-supervisor
// --host` processes, one per CPU, each started at its first launch. A host
// runs every attempt sent to it and sends each one's directory back when it
// is over; launches go to the hosts in turn. A host is one thread: with one
// for the machine it was the bottleneck (a fifth of the CPU idle under a
// stream of trivial jobs on 2 cores, docs/benchmarks.md). A launch a host
// cannot take (it died, or has not read its socket for kSendTimeoutMillis:
// say a job's exec hangs on a network filesystem while the host waits for
// it) retires it and is reported as an error, and the caller spawns a
// supervisor of its own for that attempt; the next launch there starts a
// new host. A retired host is not killed: it runs what it has (launches
// still queued in its socket included) to their results, and an attempt it
// has not claimed yet counts as lost only once it is gone (Alive).

#include <sys/types.h>

#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "unisched/common/status.h"

namespace unisched::executor {

class SupervisorHosts {
 public:
  // Each host's socket is added to `epoll_fd` (when >= 0), where its
  // notices arrive (TakeNotices).
  SupervisorHosts(std::string supervisor_path, int epoll_fd);
  SupervisorHosts(const SupervisorHosts&) = delete;
  SupervisorHosts& operator=(const SupervisorHosts&) = delete;
  ~SupervisorHosts() { Stop(); }

  // Hands the attempt in `attempt_dir`, its spec in `spec_fd`, to a host:
  // that host's pid.
  Result<pid_t> Start(const std::string& attempt_dir, int spec_fd);

  // The attempt directories a host reported over, read from its socket
  // `fd` (an epoll event); nullopt when `fd` is no host's socket. At EOF
  // (it died, or was told to stop) the host is retired.
  std::optional<std::vector<std::string>> TakeNotices(int fd);

  // The hosts retired since the last call: no notice comes from them any
  // more, so their attempts must be read from their files.
  std::vector<pid_t> TakeGone();

  // Reaps hosts that have exited since they were retired.
  void ReapRetired();

  // Whether `pid` is a host that takes launches now (not retired).
  bool Current(pid_t pid);

  // Whether `pid` is a host of ours that has not exited (as of the last
  // ReapRetired): it may still claim a launch it was sent.
  bool Alive(pid_t pid);

  // Closing our ends ends them once their attempts are over; those run on.
  void Stop();

 private:
  static constexpr size_t kMaxHosts = 16;
  static constexpr int kSendTimeoutMillis = 5000;
  static constexpr size_t kMaxNotice = 8192;  // an attempt directory (the host's kMaxRequest)

  struct Host {
    int socket = -1;
    pid_t pid = -1;
  };

  Host* Find(int fd);         // REQUIRES mu_
  Status Launch(Host& host);  // REQUIRES mu_
  void Retire(Host& host);    // REQUIRES mu_

  const std::string supervisor_path_;
  const int epoll_fd_;
  std::mutex mu_;
  std::vector<Host> hosts_;     // GUARDED_BY(mu_)
  size_t next_ = 0;             // GUARDED_BY(mu_): the host of the next launch
  bool stopped_ = false;        // GUARDED_BY(mu_)
  std::vector<pid_t> retired_;  // GUARDED_BY(mu_): hosts whose attempts still run, to reap when they exit
  std::vector<pid_t> gone_;     // GUARDED_BY(mu_): retired, not yet taken by TakeGone
};

}  // namespace unisched::executor
