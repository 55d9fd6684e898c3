// EventLoop: see event_loop.h.

#include "supervisor/event_loop.h"

#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "executor/attempt_files.h"
#include "supervisor/attempt_output.h"

namespace unisched::supervisor {
namespace {

// Events taken per epoll_wait; more stay ready for the next call.
constexpr int kEventsPerWait = 64;

constexpr int kSignalKind = 0;
constexpr int kSocketKind = 1;

}  // namespace

sigset_t EventLoop::Signals() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) sigaddset(&signals, sig);
  return signals;
}

EventLoop::~EventLoop() {
  if (signal_fd_ >= 0) ::close(signal_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

bool EventLoop::Open() {
  const sigset_t signals = Signals();
  signal_fd_ = ::signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (signal_fd_ < 0 || epoll_fd_ < 0) return false;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = Tag(0, kSignalKind);
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, signal_fd_, &ev) != 0) return false;
  return socket_ == nullptr || socket_->Attach(epoll_fd_, Tag(0, kSocketKind));
}

void EventLoop::Watch(int fd, uint64_t serial, Stream stream) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = Tag(serial, stream + 1);
  (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);  // a pipe always can be; a failure shows as a stuck attempt
}

void EventLoop::Unwatch(int fd) {
  (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
}

bool EventLoop::CancelPending(const AttemptRun& attempt) {
  HandleSignals();
  if (cancel_all_) return true;
  struct stat st {};
  return shared() && ::stat((attempt.dir() + "/" + executor::files::kCancel).c_str(), &st) == 0;
}

void EventLoop::Reap() {
  for (;;) {
    int status = 0;
    rusage usage{};
    const pid_t pid = ::wait4(-1, &status, WNOHANG, &usage);
    if (pid > 0) {
      auto it = by_main_pid_.find(pid);
      if (it != by_main_pid_.end()) {
        if (Entry* e = Find(it->second)) e->attempt->OnMainExit(status, usage);
        Touch(it->second);
        by_main_pid_.erase(it);
      } else {
        for (auto& [serial, e] : attempts_) {
          if (!e.attempt->AwaitingTree()) continue;
          e.attempt->OnOrphanReaped();
          Touch(serial);
        }
      }
      continue;
    }
    if (pid < 0 && errno == EINTR) continue;
    children_left_ = !(pid < 0 && errno == ECHILD);
    return;
  }
}

// Cancels arrive as signals: SIGTERM/SIGINT stop every attempt (SIGUSR1:
// as a preemption, a single attempt's supervisor only), SIGUSR2 says "look
// for cancel files" (how the executor cancels one attempt of a shared
// supervisor). A cancel that comes before an attempt's job starts is kept
// for it (RequestStop). A shared supervisor told to stop also takes no new
// attempt: it closes the executor's socket, and launches still queued there
// are dropped unclaimed (the executor finds them never started).
void EventLoop::HandleSignals() {
  signalfd_siginfo info;
  bool child = false;
  bool look_for_files = false;
  bool stop_all = false;
  while (::read(signal_fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    switch (info.ssi_signo) {
      case SIGCHLD:
        child = true;
        break;
      case SIGTERM:
      case SIGINT:
        stop_all = true;
        break;
      case SIGUSR1:
        if (!shared()) {
          stop_all = true;
          preempt_all_ = true;
        }
        break;
      case SIGUSR2:
        look_for_files = true;
        break;
    }
  }
  if (child) Reap();
  if (stop_all) {
    cancel_all_ = true;
    if (shared()) socket_->Close();
    for (auto& [serial, e] : attempts_) {
      e.attempt->RequestStop(preempt_all_);
      Touch(serial);
    }
  }
  if (look_for_files) {
    for (auto& [serial, e] : attempts_) {
      e.attempt->CheckCancelFile();
      Touch(serial);
    }
  }
}

EventLoop::Entry* EventLoop::Find(uint64_t serial) {
  auto it = attempts_.find(serial);
  return it == attempts_.end() ? nullptr : &it->second;
}

void EventLoop::Add(const std::string& dir, int spec_fd) {
  const uint64_t serial = next_serial_++;
  AttemptRun* a = (attempts_[serial].attempt = std::make_unique<AttemptRun>(*this, serial, dir)).get();
  a->Begin(spec_fd);
  if (a->main_pid() > 0) by_main_pid_[a->main_pid()] = serial;
  if (a->done()) {
    Retire(serial);
  } else {
    Touch(serial);
  }
}

void EventLoop::Schedule(uint64_t serial, Entry& entry, std::optional<Mono::time_point> wake) {
  if (!wake || wake == entry.scheduled) return;
  entry.scheduled = wake;
  timers_.emplace(*wake, serial);
}

// An attempt that is over leaves the loop; the executor hears of it.
void EventLoop::Retire(uint64_t serial) {
  auto it = attempts_.find(serial);
  if (it == attempts_.end()) return;
  const AttemptRun& a = *it->second.attempt;
  due_.erase(serial);  // its timers_ entries go stale
  last_exit_status_ = a.exit_status();
  if (socket_ != nullptr) socket_->Notify(a.dir(), a.unclaimed_errno());
  // Its main process is normally reaped (and gone from the map) by now;
  // not after the drain limit with the process unkillable.
  if (auto p = by_main_pid_.find(a.main_pid()); p != by_main_pid_.end() && p->second == serial) {
    by_main_pid_.erase(p);
  }
  attempts_.erase(it);
}

int EventLoop::Serve() {
  epoll_event events[kEventsPerWait];
  for (;;) {
    const auto now = Mono::now();
    while (!timers_.empty() && timers_.begin()->first <= now) {
      const auto [when, serial] = *timers_.begin();
      timers_.erase(timers_.begin());
      Entry* e = Find(serial);
      if (e == nullptr || e->scheduled != when) continue;  // stale
      e->scheduled.reset();
      Touch(serial);
    }
    // Ticking may reap and so touch others: those go in the next round.
    const std::set<uint64_t> due = std::exchange(due_, {});
    for (uint64_t serial : due) {
      Entry* e = Find(serial);
      if (e == nullptr) continue;
      const auto next = e->attempt->Tick(now);
      if (e->attempt->done()) {
        Retire(serial);
      } else {
        Schedule(serial, *e, next);
      }
    }
    if (socket_ != nullptr) socket_->Flush();
    if (attempts_.empty() && (socket_ == nullptr || !socket_->open())) return last_exit_status_;

    int timeout_ms = -1;
    if (!due_.empty()) {
      timeout_ms = 0;
    } else if (!timers_.empty()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(timers_.begin()->first - Mono::now());
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 60'000));
    }
    const int ready = ::epoll_wait(epoll_fd_, events, kEventsPerWait, timeout_ms);
    if (ready < 0 && errno != EINTR) {
      LogToStderr("epoll_wait: %s", std::strerror(errno));
      ::usleep(100'000);
    }
    for (int i = 0; i < ready; ++i) {
      const uint64_t serial = events[i].data.u64 >> 2;
      const int kind = static_cast<int>(events[i].data.u64 & 3);
      if (serial == 0 && kind == kSignalKind) {
        HandleSignals();
      } else if (serial == 0) {
        if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) {
          socket_->Receive([this](const std::string& dir, int spec_fd) { Add(dir, spec_fd); });
        }
      } else if (Entry* e = Find(serial)) {
        e->attempt->OnOutput(static_cast<Stream>(kind - 1));
        Touch(serial);
      }
    }
  }
}

}  // namespace unisched::supervisor
