// Seeing attempts end: the watcher thread waits for our supervisor children
// to exit (their pidfds), for the hosts' notices and for wakes, looks at
// adopted attempts' files on a timer, and hands each attempt's result to the
// sink exactly once. See local_executor.h.

#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>

#include "executor/attempt_claim.h"
#include "executor/local_executor.h"
#include "unisched/containment/containment.h"
#include "unisched/posix/posix.h"

namespace unisched::executor {

namespace {

// How often every attempt is looked at: adopted ones (not our children, so
// no pidfd tells when they end) and children whose pidfd could not be opened.
constexpr int kPollMillis = 200;
// Pidfd events taken per epoll_wait; more stay ready for the next call.
constexpr int kEventsPerWait = 64;
// A supervisor creates its claim and then flocks it: a claim seen with a
// free lock and no state.json may be that instant, so it is looked at again
// this much later before it counts as a dead supervisor.
constexpr auto kClaimSettle = std::chrono::milliseconds(200);

// A supervisor that died without a result (SIGKILL, the OOM killer) leaves
// its job running, re-parented away from it, in the attempt's cgroups, still
// as the sandbox uid the dead supervisor no longer holds; the attempt is
// `lost` and may be retried, so the job would run twice at once. Before the
// lost result is handed on, whatever is left in those groups is killed and
// the groups removed. They are named <job>-<attempt>-<supervisor pid>, and
// the supervisor wrote its pid into the claim before making them: without a
// claim (or its pid) no group was made. The pid in the name keeps another
// daemon's attempt with the same job id out of reach.
void KillLeftovers(const std::string& attempt_dir, const AttemptKey& key) {
  const auto claim = files::ReadWholeFile(attempt_dir + "/" + files::kClaim);
  if (!claim) return;
  const long pid = std::strtol(claim->c_str(), nullptr, 10);
  if (pid <= 0) return;
  if (auto groups = containment::Containment::Find(files::CgroupName(key.job_id, key.attempt, key.task, pid))) {
    (void)groups->KillAllAndDestroy();  // best effort: the lost result matters more than an empty group
  }
}

}  // namespace

std::optional<LocalExecutor::Key> LocalExecutor::KeyOf(const std::string& attempt_dir) const {
  const std::string prefix = options_.runs_dir + "/";
  if (attempt_dir.rfind(prefix, 0) != 0) return std::nullopt;
  const std::string rest = attempt_dir.substr(prefix.size());  // <job>/<attempt>[.<task>]
  const size_t slash = rest.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 >= rest.size()) return std::nullopt;
  const std::string job = rest.substr(0, slash);
  const auto task = ParseTaskDirName(rest.substr(slash + 1));
  if (job.find_first_not_of("0123456789") != std::string::npos || job.size() > 18 || !task) return std::nullopt;
  return Key{std::stoll(job), task->first, task->second};
}

void LocalExecutor::Wake() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
  (void)ignored;  // the counter saturating still wakes the watcher
}

// A child's end is an event on its pidfd, so a wake looks only at the
// attempts whose supervisors exited: with hundreds of short attempts running,
// looking at all of them on each end made every end cost time linear in the
// running ones. The rest (adopted attempts, children without a pidfd) are
// looked at every kPollMillis, and when woken through the eventfd (an
// adopted attempt, a result made elsewhere, a stop).
void LocalExecutor::WatchLoop() {
  using Clock = std::chrono::steady_clock;
  auto next_scan = Clock::now();
  epoll_event events[kEventsPerWait];
  for (;;) {
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(next_scan - Clock::now()).count();
    int ready = 0;
    if (epoll_fd_ >= 0) {
      ready = ::epoll_wait(epoll_fd_, events, kEventsPerWait,
                           static_cast<int>(std::clamp<int64_t>(wait_ms, 0, kPollMillis)));
    } else {
      ::usleep(static_cast<useconds_t>(std::clamp<int64_t>(wait_ms, 0, kPollMillis) * 1000));
    }
    bool woken = false;
    std::vector<int> exited;
    std::vector<std::string> over;  // notices: attempt directories the host is done with
    for (int i = 0; i < ready; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        woken = true;
      } else if (auto notices = hosts_.TakeNotices(fd)) {
        for (std::string& dir : *notices) over.push_back(std::move(dir));
      } else {
        exited.push_back(fd);
      }
    }
    const std::vector<pid_t> hosts_gone = hosts_.TakeGone();
    if (woken) {
      uint64_t count = 0;
      ssize_t ignored = ::read(wake_fd_, &count, sizeof count);
      (void)ignored;  // EAGAIN: another read took it
    }
    const bool scan = woken || !hosts_gone.empty() || Clock::now() >= next_scan;
    if (scan) {
      next_scan = Clock::now() + std::chrono::milliseconds(kPollMillis);
      hosts_.ReapRetired();
    }

    std::vector<RunResult> results;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      auto finish = [&](const Key& key, RunResult r) {
        attempts_.erase(key);
        if (finished_.insert(key).second) results.push_back(std::move(r));
      };
      std::vector<RunResult> made_elsewhere;
      made_elsewhere.swap(pending_);
      for (RunResult& r : made_elsewhere) finish(Key{r.job_id, r.attempt, r.task}, std::move(r));
      auto check = [&](std::map<Key, Tracked>::iterator it) {
        const Key key = it->first;
        Tracked& t = it->second;
        std::optional<RunResult> r;
        if (t.phase == Phase::kChild) r = CheckChild(key, t);
        // The host is done with it: a result, else the files tell (another
        // supervisor runs it, or it could not be claimed).
        if (t.phase == Phase::kHosted) {
          r = ReadResult(key, AttemptDir(key));
          if (!r) t.phase = Phase::kAdopted;
        }
        if (!r && t.phase == Phase::kAdopted) {
          if (t.cancel_requested) SendCancel(key, t);
          r = CheckAdopted(key, t);
        }
        if (r) finish(key, std::move(*r));
      };
      for (int fd : exited) {
        auto owner = pidfd_keys_.find(fd);
        if (owner == pidfd_keys_.end()) continue;  // closed since the wait
        auto it = attempts_.find(owner->second);
        if (it != attempts_.end() && it->second.pidfd == fd) check(it);
      }
      for (const std::string& notice : over) {
        const files::ParsedNotice parsed = files::ParseNotice(notice);
        const auto key = KeyOf(parsed.attempt_dir);
        auto it = key ? attempts_.find(*key) : attempts_.end();
        if (it == attempts_.end()) continue;
        it->second.unclaimed_errno = parsed.unclaimed_errno;
        if (it->second.phase == Phase::kStarting) it->second.host_over = true;  // Launch looks
        if (it->second.phase == Phase::kHosted) check(it);
      }
      for (pid_t host : hosts_gone) {
        // Its notices stopped: what it ran is read from the files now.
        for (auto& [key, t] : attempts_) {
          if (t.phase == Phase::kHosted && t.pid == host) t.phase = Phase::kAdopted;
        }
      }
      if (scan) {
        // A child with a pidfd is seen through it (level-triggered: an end
        // not taken yet fires again), and an attempt of the live host
        // through its notice, so the scan leaves them alone.
        for (auto it = attempts_.begin(); it != attempts_.end();) {
          const auto current = it++;  // check may erase it
          const Tracked& t = current->second;
          if (t.phase == Phase::kChild && t.pidfd >= 0) continue;
          if (t.phase == Phase::kHosted) continue;
          check(current);
        }
      }
    }
    if (options_.use_cgroups) {
      for (const RunResult& r : results) {
        if (r.outcome == RunOutcome::kLost) {
          const Key key{r.job_id, r.attempt, r.task};
          KillLeftovers(AttemptDir(key), key);
        }
      }
    }
    Deliver(std::move(results));
  }
}

// Our child's pidfd, readable when it exits. Without one (pidfd_open
// refused) the periodic scan's waitpid finds the exit instead.
void LocalExecutor::WatchPidfd(const Key& key, Tracked& t) {
  t.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, t.pid, 0));
  if (t.pidfd < 0) return;
  pidfd_keys_[t.pidfd] = key;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = t.pidfd;
  if (epoll_fd_ < 0 || ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, t.pidfd, &ev) != 0) ClosePidfd(t);
}

// Closing the pidfd also takes it out of the epoll set (it is its only
// descriptor).
void LocalExecutor::ClosePidfd(Tracked& t) {
  if (t.pidfd < 0) return;
  pidfd_keys_.erase(t.pidfd);
  ::close(t.pidfd);
  t.pidfd = -1;
}

std::optional<RunResult> LocalExecutor::CheckChild(const Key& key, Tracked& t) {
  int status = 0;
  const pid_t rc = ::waitpid(t.pid, &status, WNOHANG);
  if (rc == 0 || (rc < 0 && errno == EINTR)) return std::nullopt;
  ClosePidfd(t);
  t.pid = -1;
  const std::string dir = AttemptDir(key);
  if (auto r = ReadResult(key, dir)) return r;
  // It could not make the directory or the claim for a transient cause:
  // it ran nothing (and no other supervisor claimed the attempt meanwhile).
  if (rc > 0 && WIFEXITED(status) && WEXITSTATUS(status) == files::kExitTransient &&
      ProbeLock(dir) == LockState::kMissing) {
    return Unclaimed(
        key, "the supervisor could not create or claim " + dir + " (out of descriptors, processes or memory)", true);
  }
  // No result: another supervisor may own the attempt (ours found it
  // claimed, or made a claim while ours could not), or someone else reaped
  // ours (rc < 0). The files decide.
  if (rc < 0 || (WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == files::kExitTransient))) {
    t.phase = Phase::kAdopted;
    return CheckAdopted(key, t);
  }
  std::string why = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                        : "exited with status " + std::to_string(WEXITSTATUS(status));
  std::string reason = "the supervisor " + why + " without a result";
  if (std::string last = LastLine(LogsDir(key.job_id, key.attempt, key.task) + "/" + files::kSupervisorLog);
      !last.empty()) {
    reason += ": " + last;
  }
  return Lost(key, std::move(reason));
}

std::optional<RunResult> LocalExecutor::CheckAdopted(const Key& key, Tracked& t) {
  const std::string dir = AttemptDir(key);
  if (auto r = ReadResult(key, dir)) return r;
  const LockState lock = ProbeLock(dir);
  // Its result may have been unreadable for the same reason: look again on
  // the next tick rather than call a running attempt lost.
  if (lock == LockState::kUnknown) return std::nullopt;
  if (lock == LockState::kHeld) {
    t.unlocked_since.reset();
    return std::nullopt;
  }
  // The host could not claim it (its notice said why): nothing ran.
  if (lock == LockState::kMissing && t.unclaimed_errno != 0) {
    return Unclaimed(
        key, "the supervisor host could not create or claim " + dir + ": " + posix::ErrnoText(t.unclaimed_errno),
        IsTransientErrno(t.unclaimed_errno));
  }
  // Sent to a host that was retired but lives on: it may yet claim it.
  if (lock == LockState::kMissing && t.pid > 0 && hosts_.Alive(t.pid)) return std::nullopt;
  // The supervisor writes its result before it lets go of the lock: look
  // again, in case it ended between the two checks.
  if (auto r = ReadResult(key, dir)) return r;
  // state.json is written once the lock is held. Without it, a free lock
  // may be a supervisor between creating its claim and locking it: only a
  // claim that stays so for kClaimSettle is a dead one. The watcher's tick
  // brings us back; nothing waits here.
  if (lock == LockState::kFree && !Exists(dir + "/" + files::kState)) {
    const auto now = std::chrono::steady_clock::now();
    if (!t.unlocked_since) t.unlocked_since = now;
    if (now - *t.unlocked_since < kClaimSettle) return std::nullopt;
    if (auto r = ReadResult(key, dir)) return r;
    if (const LockState again = ProbeLock(dir); again == LockState::kHeld || again == LockState::kUnknown) {
      t.unlocked_since.reset();
      return std::nullopt;
    }
  }
  return Lost(key, "the supervisor died without a result");
}

// Outside mu_: the sink posts to the controller. Each result is here once
// (the watcher put its key in finished_).
void LocalExecutor::Deliver(std::vector<RunResult> results) {
  for (RunResult& r : results) {
    if (sink_) sink_(std::move(r));
  }
}

}  // namespace unisched::executor
