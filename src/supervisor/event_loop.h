#pragma once
// The epoll loop both modes wait in (signalfd, the executor's socket, every job's pipes), with the timers
// and the reaping that drive the attempts. Apart because it knows no attempt's steps.

#include <signal.h>
#include <sys/resource.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "supervisor/attempt_run.h"
#include "supervisor/executor_socket.h"

namespace unisched::supervisor {

class EventLoop final : public AttemptContext {
 public:
  // The signals the loop takes from its signalfd: SIGCHLD and the cancels.
  // The process blocks them before anything else (supervisor.cc), so that a
  // cancel sent right after the spawn waits in the signalfd.
  static sigset_t Signals();

  // `socket`: the executor's (the host), or null (a supervisor of one
  // attempt). `job_open_files_limit`: JobSpec::open_files_limit.
  EventLoop(ExecutorSocket* socket, rlim_t job_open_files_limit)
      : socket_(socket), job_open_files_limit_(job_open_files_limit) {}
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;
  ~EventLoop();

  // The signalfd and the epoll set, with the socket in it. False (errno
  // set): cancels and SIGCHLD would go unnoticed, so nothing may start.
  bool Open();
  // A new attempt; retired at once when there is nothing to watch.
  void Add(const std::string& dir, int spec_fd);
  // Until no attempt is left and (a host) the executor's socket is closed.
  // Returns the exit status of the attempt retired last: a single attempt's
  // process exit status.
  int Serve();

  // AttemptContext.
  bool shared() const override { return socket_ != nullptr; }
  void Watch(int fd, uint64_t serial, Stream stream) override;
  void Unwatch(int fd) override;
  bool CancelPending(const AttemptRun& attempt) override;
  rlim_t job_open_files_limit() const override { return job_open_files_limit_; }
  void Reap() override;
  bool children_left() const override { return children_left_; }

 private:
  struct Entry {
    std::unique_ptr<AttemptRun> attempt;
    // When it is down to be ticked next (Schedule).
    std::optional<Mono::time_point> scheduled;
  };

  void HandleSignals();
  void Retire(uint64_t serial);
  Entry* Find(uint64_t serial);
  // Ticks the attempt in this loop iteration (something happened to it).
  void Touch(uint64_t serial) { due_.insert(serial); }
  // Ticks it again at `wake`.
  void Schedule(uint64_t serial, Entry& entry, std::optional<Mono::time_point> wake);

  // epoll tags: serial 0 is the signalfd (kind 0) and the socket (kind 1);
  // an attempt's pipes are its serial with kind Stream + 1.
  static uint64_t Tag(uint64_t serial, int kind) { return (serial << 2) | static_cast<uint64_t>(kind); }

  ExecutorSocket* const socket_;
  const rlim_t job_open_files_limit_;
  int epoll_fd_ = -1;
  int signal_fd_ = -1;
  bool children_left_ = true;
  bool cancel_all_ = false;   // SIGTERM/SIGINT: every attempt is cancelled
  bool preempt_all_ = false;  // SIGUSR1 (single mode): the cancel is a preemption
  uint64_t next_serial_ = 1;  // 0 tags the signalfd and the socket
  std::map<uint64_t, Entry> attempts_;
  std::map<pid_t, uint64_t> by_main_pid_;
  // Only these are ticked: the attempts an event touched, and those whose
  // timer is due (timers_ may hold stale entries: an attempt's `scheduled`
  // says which is current). Ticking all of them in every iteration cost
  // time linear in the attempts running for each event.
  std::set<uint64_t> due_;
  std::multimap<Mono::time_point, uint64_t> timers_;
  int last_exit_status_ = 0;  // of the attempt retired last
};

}  // namespace unisched::supervisor
