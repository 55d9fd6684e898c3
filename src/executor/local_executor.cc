// LocalExecutor: one unisched-supervisor per attempt, watched through its
// process (while it is our child) and through its attempt directory (after
// a daemon restart). See executor.h and docs/execution.md.

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "executor/attempt_files.h"
#include "unisched/containment/containment.h"
#include "unisched/executor/executor.h"
#include "unisched/posix/posix.h"

namespace unisched::executor {

std::string_view ToString(RunOutcome outcome) {
  return files::OutcomeName(outcome);
}

namespace {

using Key = std::pair<model::JobId, int>;
// How often every attempt is looked at: adopted ones (not our children, so
// no pidfd tells when they end) and children whose pidfd could not be opened.
constexpr int kPollMillis = 200;
// Pidfd events taken per epoll_wait; more stay ready for the next call.
constexpr int kEventsPerWait = 64;
// A supervisor creates its claim and then flocks it: a claim seen with a
// free lock and no state.json may be that instant, so it is looked at again
// this much later before it counts as a dead supervisor.
constexpr auto kClaimSettle = std::chrono::milliseconds(200);

// What an NSS lookup that reports no error leaves in errno when one of its
// modules could not open its file or socket.
bool OutOfDescriptors(int err) {
  return err == EMFILE || err == ENFILE;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Creates `path` with `mode` and any missing parents with `parent_mode`
// (exactly, whatever the umask). Returns 0 or the errno.
int MakeDirs(const std::string& path, mode_t mode, mode_t parent_mode = 0711) {
  if (path.empty()) return EINVAL;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  const size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    if (int err = MakeDirs(path.substr(0, slash), parent_mode, parent_mode)) return err;
  }
  if (::mkdir(path.c_str(), mode) != 0) return errno == EEXIST ? 0 : errno;
  if (::chmod(path.c_str(), mode) != 0) return errno;
  return 0;
}

enum class LockState { kHeld, kFree, kMissing, kUnknown };

// Whether a live supervisor holds the lock on the attempt's claim. The probe
// holds it for an instant only (a supervisor that has just created the claim
// waits for it); kMissing: no claim; kUnknown: the claim could not be opened
// (out of descriptors, say), so nothing can be concluded yet.
LockState ProbeLock(const std::string& dir) {
  const int fd = ::open((dir + "/" + files::kClaim).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ENOTDIR ? LockState::kMissing : LockState::kUnknown;
  LockState state = LockState::kFree;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    state = errno == EWOULDBLOCK ? LockState::kHeld : LockState::kFree;
  } else {
    ::flock(fd, LOCK_UN);
  }
  ::close(fd);
  return state;
}

// The last non-empty line of a small diagnostics file, for "lost" reasons.
std::string LastLine(const std::string& path) {
  auto text = files::ReadWholeFile(path);
  if (!text) return {};
  while (!text->empty() && text->back() == '\n') text->pop_back();
  const size_t nl = text->find_last_of('\n');
  return nl == std::string::npos ? *text : text->substr(nl + 1);
}

// The pid of the supervisor that claimed `dir`, while it runs the attempt:
// it holds the claim's lock until the attempt ends, so a held lock means the
// pid in the claim is still that supervisor (a pid reused by another
// process holds no lock). *shared: it is a host, whose attempts are
// cancelled through a file (SendCancel).
pid_t LiveSupervisorPid(const std::string& dir, bool* shared) {
  pid_t pid = 0;
  if (auto claim = files::ReadWholeFile(dir + "/" + files::kClaim)) {
    pid = std::atoi(claim->c_str());
    *shared = claim->find(" shared") != std::string::npos;
  }
  if (pid <= 0) {
    if (auto state = files::ReadWholeFile(dir + "/" + files::kState)) {
      const auto j = nlohmann::json::parse(*state, nullptr, false);
      if (j.is_object()) pid = j.value("supervisor_pid", 0);
    }
  }
  if (pid <= 0) return 0;
  return ProbeLock(dir) == LockState::kHeld ? pid : 0;
}

RunResult Lost(const Key& key, std::string reason) {
  RunResult r;
  r.job_id = key.first;
  r.attempt = key.second;
  r.outcome = RunOutcome::kLost;
  r.reason = std::move(reason);
  return r;
}

// An attempt its supervisor could not claim: it never ran, so it failed to
// launch (and may be launched again as a new attempt), rather than `lost`.
RunResult Unclaimed(const Key& key, std::string reason, bool transient) {
  RunResult r;
  r.job_id = key.first;
  r.attempt = key.second;
  r.outcome = RunOutcome::kLaunchFailed;
  r.reason = std::move(reason);
  r.transient = transient;
  return r;
}

// result.json as a RunResult, nullopt if there is none (yet).
std::optional<RunResult> ReadResult(const Key& key, const std::string& dir) {
  auto text = files::ReadWholeFile(dir + "/" + files::kResult);
  if (!text) return std::nullopt;
  auto result = files::ResultFromJson(*text);
  if (!result.ok()) return Lost(key, result.error().message);
  result->job_id = key.first;
  result->attempt = key.second;
  return std::move(result).value();
}

// A supervisor that died without a result (SIGKILL, the OOM killer) leaves
// its job running, re-parented away from it, in the attempt's cgroups, still
// as the sandbox uid the dead supervisor no longer holds; the attempt is
// `lost` and may be retried, so the job would run twice at once. Before the
// lost result is handed on, whatever is left in those groups is killed and
// the groups removed. They are named <job>-<attempt>-<supervisor pid>, and
// the supervisor wrote its pid into the claim before making them: without a
// claim (or its pid) no group was made. The pid in the name keeps another
// daemon's attempt with the same job id out of reach.
void KillLeftovers(const std::string& attempt_dir, const Key& key) {
  const auto claim = files::ReadWholeFile(attempt_dir + "/" + files::kClaim);
  if (!claim) return;
  const long pid = std::strtol(claim->c_str(), nullptr, 10);
  if (pid <= 0) return;
  if (auto groups = containment::Containment::Find(files::CgroupName(key.first, key.second, pid))) {
    (void)groups->KillAllAndDestroy();  // best effort: the lost result matters more than an empty group
  }
}

// posix_spawn of the supervisor executable: no fork of the (large,
// threaded) daemon, nothing inherited but stdin (`stdin_fd`, or /dev/null)
// and, when given, `fd3` as fd 3; an empty environment, its own session.
// stdout and stderr are /dev/null: the supervisor opens supervisor.log
// itself, only when it has something to say.
Result<pid_t> SpawnSupervisorProcess(const std::string& supervisor_path, const std::string& arg, int stdin_fd,
                                     int fd3 = -1) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  if (stdin_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, stdin_fd, 0);  // dup2 clears close-on-exec
  } else {
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  if (fd3 >= 0) posix_spawn_file_actions_adddup2(&actions, fd3, 3);  // fd3 > 3 (see the host)
  posix_spawn_file_actions_addclosefrom_np(&actions, fd3 >= 0 ? 4 : 3);
  // Blocked from the first instruction: a cancel sent right away waits in
  // the supervisor's signalfd rather than killing it before it is ready.
  sigset_t blocked;
  sigemptyset(&blocked);
  for (int sig : {SIGTERM, SIGINT, SIGCHLD, SIGUSR1, SIGUSR2}) sigaddset(&blocked, sig);
  sigset_t defaults;
  sigfillset(&defaults);
  posix_spawnattr_setsigmask(&attr, &blocked);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);

  std::string path = supervisor_path;
  std::string arg_copy = arg;
  char* argv[] = {path.data(), arg_copy.data(), nullptr};
  char* envp[] = {nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, path.c_str(), &actions, &attr, argv, envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    std::string message = "cannot start the supervisor '" + path + "': " + posix::ErrnoText(rc);
    return IsTransientErrno(rc) ? TransientLaunchError(std::move(message)) : Error::Unavailable(std::move(message));
  }
  return pid;
}

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
class SupervisorHosts {
 public:
  SupervisorHosts(std::string supervisor_path, int epoll_fd)
      : supervisor_path_(std::move(supervisor_path)),
        epoll_fd_(epoll_fd),
        hosts_(std::clamp<size_t>(std::thread::hardware_concurrency(), 1, kMaxHosts)) {}
  SupervisorHosts(const SupervisorHosts&) = delete;
  SupervisorHosts& operator=(const SupervisorHosts&) = delete;
  ~SupervisorHosts() { Stop(); }

  // Hands the attempt in `attempt_dir`, its spec in `spec_fd`, to a host:
  // that host's pid.
  Result<pid_t> Start(const std::string& attempt_dir, int spec_fd) {
    std::lock_guard lock(mu_);
    if (stopped_) return Error::Unavailable("the supervisor hosts are stopped");
    Host& host = hosts_[next_++ % hosts_.size()];
    if (host.socket < 0) {
      if (Status s = Launch(host); !s.ok()) return s.error();
    }
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    iovec iov{const_cast<char*>(attempt_dir.data()), attempt_dir.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &spec_fd, sizeof(int));
    for (;;) {
      const ssize_t n = ::sendmsg(host.socket, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n == static_cast<ssize_t>(attempt_dir.size())) return host.pid;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        // Its queue is full: a host that takes nothing for this long is stuck.
        pollfd p{host.socket, POLLOUT, 0};
        int ready;
        do {
          ready = ::poll(&p, 1, kSendTimeoutMillis);
        } while (ready < 0 && errno == EINTR);
        if (ready > 0 && (p.revents & POLLOUT) != 0) continue;
        Retire(host);
        return Error::Unavailable("the supervisor host took no launch for " + std::to_string(kSendTimeoutMillis) +
                                  " ms; retired");
      }
      const int err = n < 0 ? errno : EIO;
      Retire(host);
      return Error::Unavailable("cannot send to the supervisor host: " + posix::ErrnoText(err));
    }
  }

  // The attempt directories a host reported over, read from its socket
  // `fd` (an epoll event); nullopt when `fd` is no host's socket. At EOF
  // (it died, or was told to stop) the host is retired.
  std::optional<std::vector<std::string>> TakeNotices(int fd) {
    std::lock_guard lock(mu_);
    Host* host = Find(fd);
    if (host == nullptr) return std::nullopt;
    std::vector<std::string> dirs;
    for (;;) {
      char buf[kMaxNotice];
      const ssize_t n = ::recv(host->socket, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        dirs.emplace_back(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return dirs;
      Retire(*host);
      return dirs;
    }
  }

  // The hosts retired since the last call: no notice comes from them any
  // more, so their attempts must be read from their files.
  std::vector<pid_t> TakeGone() {
    std::lock_guard lock(mu_);
    return std::exchange(gone_, {});
  }

  // Reaps hosts that have exited since they were retired.
  void ReapRetired() {
    std::lock_guard lock(mu_);
    std::erase_if(retired_, [](pid_t pid) { return ::waitpid(pid, nullptr, WNOHANG) != 0; });
  }

  // Whether `pid` is a host that takes launches now (not retired).
  bool Current(pid_t pid) {
    std::lock_guard lock(mu_);
    return pid > 0 && std::any_of(hosts_.begin(), hosts_.end(), [pid](const Host& h) { return h.pid == pid; });
  }

  // Whether `pid` is a host of ours that has not exited (as of the last
  // ReapRetired): it may still claim a launch it was sent.
  bool Alive(pid_t pid) {
    if (Current(pid)) return true;
    std::lock_guard lock(mu_);
    return pid > 0 && std::find(retired_.begin(), retired_.end(), pid) != retired_.end();
  }

  // Closing our ends ends them once their attempts are over; those run on.
  void Stop() {
    std::lock_guard lock(mu_);
    stopped_ = true;
    for (Host& host : hosts_) Retire(host);
  }

 private:
  static constexpr size_t kMaxHosts = 16;
  static constexpr int kSendTimeoutMillis = 5000;
  static constexpr size_t kMaxNotice = 8192;  // an attempt directory (the host's kMaxRequest)

  struct Host {
    int socket = -1;
    pid_t pid = -1;
  };

  Host* Find(int fd) {  // REQUIRES mu_
    for (Host& host : hosts_) {
      if (fd >= 0 && host.socket == fd) return &host;
    }
    return nullptr;
  }

  Status Launch(Host& host) {  // REQUIRES mu_
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
      return Error::Unavailable("cannot make the supervisor host's socket: " + posix::ErrnoText(errno));
    }
    // Its end goes to fd 3 of the host; a number above 3 makes the dup2 a
    // real one, which clears close-on-exec.
    const int theirs = ::fcntl(pair[1], F_DUPFD_CLOEXEC, 10);
    ::close(pair[1]);
    if (theirs < 0) {
      ::close(pair[0]);
      return Error::Unavailable("cannot make the supervisor host's socket: " + posix::ErrnoText(errno));
    }
    auto pid = SpawnSupervisorProcess(supervisor_path_, "--host", -1, theirs);
    ::close(theirs);
    if (!pid.ok()) {
      ::close(pair[0]);
      return pid.error();
    }
    host.socket = pair[0];
    host.pid = *pid;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = host.socket;
    // Without the registration the host's attempts are found once it is
    // retired (by the next failed launch, or Stop): a degraded executor,
    // not a wrong one.
    if (epoll_fd_ >= 0) (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, host.socket, &ev);
    return Status::Ok();
  }

  void Retire(Host& host) {                      // REQUIRES mu_
    if (host.socket >= 0) ::close(host.socket);  // also leaves the epoll set
    host.socket = -1;
    if (host.pid > 0) {
      if (::waitpid(host.pid, nullptr, WNOHANG) == 0) retired_.push_back(host.pid);
      gone_.push_back(host.pid);
    }
    host.pid = -1;
  }

  const std::string supervisor_path_;
  const int epoll_fd_;
  std::mutex mu_;
  std::vector<Host> hosts_;     // GUARDED_BY(mu_)
  size_t next_ = 0;             // GUARDED_BY(mu_): the host of the next launch
  bool stopped_ = false;        // GUARDED_BY(mu_)
  std::vector<pid_t> retired_;  // GUARDED_BY(mu_): hosts whose attempts still run, to reap when they exit
  std::vector<pid_t> gone_;     // GUARDED_BY(mu_): retired, not yet taken by TakeGone
};

class LocalExecutor final : public Executor {
 public:
  LocalExecutor(LocalExecutorOptions options, ResultSink sink)
      : options_(std::move(options)),
        sink_(std::move(sink)),
        runs_vanished_(SeparateLogs() && !Exists(options_.runs_dir) && Exists(options_.logs_dir)),
        wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
        epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)),
        hosts_(options_.supervisor_path, epoll_fd_) {
    if (epoll_fd_ >= 0 && wake_fd_ >= 0) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = wake_fd_;
      (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);  // else the periodic scan still finds everything
    }
    watcher_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "us-executor");
      WatchLoop();
    });
  }
  ~LocalExecutor() override {
    Shutdown();
    if (wake_fd_ >= 0) ::close(wake_fd_);
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
  }

  Status Launch(const LaunchSpec& spec) override;
  void Cancel(model::JobId job_id, int attempt, bool preempt) override;
  void Recover(const LaunchSpec& spec) override;
  std::string LogPath(model::JobId job_id, int attempt, std::string_view stream) const override;
  void Forget(model::JobId job_id, int attempt) override;
  void Release(model::JobId job_id, int attempt) override;
  void ReleaseAllExcept(const std::set<Key>& running) override;
  void Shutdown() override;

 private:
  enum class Phase {
    kStarting,  // Launch is preparing or spawning
    kHosted,    // our supervisor host runs it, and will say when it is over
    kChild,     // our supervisor child runs
    kAdopted,   // watched through the attempt directory
  };
  struct Tracked {
    Phase phase = Phase::kStarting;
    pid_t pid = -1;  // our supervisor child, or the host
    int pidfd = -1;  // readable when that child exits
    bool cancel_requested = false;
    bool preempt = false;  // the cancel is a preemption: SIGUSR1, the preempt grace
    bool cancel_sent = false;
    bool host_over = false;   // the host's notice came before Launch recorded the host
    int unclaimed_errno = 0;  // the host's notice said it could not claim the attempt, and why
    // When the claim was first seen unlocked without state.json or result.
    std::optional<std::chrono::steady_clock::time_point> unlocked_since;
  };

  std::string JobRunsDir(model::JobId job_id) const { return options_.runs_dir + "/" + std::to_string(job_id); }
  std::string AttemptDir(model::JobId job_id, int attempt) const {
    return JobRunsDir(job_id) + "/" + std::to_string(attempt);
  }
  std::string WorkDir(model::JobId job_id) const { return options_.work_root + "/" + std::to_string(job_id); }
  // Output (stdout, stderr, supervisor.log) in a directory of its own, or
  // beside the control files.
  bool SeparateLogs() const { return !options_.logs_dir.empty() && options_.logs_dir != options_.runs_dir; }
  std::string JobLogsDir(model::JobId job_id) const {
    return (SeparateLogs() ? options_.logs_dir : options_.runs_dir) + "/" + std::to_string(job_id);
  }
  std::string LogsDir(model::JobId job_id, int attempt) const {
    return JobLogsDir(job_id) + "/" + std::to_string(attempt);
  }

  Result<std::optional<files::ResolvedAccount>> Check(const LaunchSpec& spec);
  // claim, state.json, result.json, cancel, then the attempt's directory and
  // its job's when empty.
  void RemoveControlFiles(model::JobId job_id, int attempt);
  Status MakeRoots();
  struct Spawned {
    pid_t pid = -1;
    bool hosted = false;  // by the host, else a supervisor child of our own
  };
  Result<Spawned> Spawn(const LaunchSpec& spec, const std::string& attempt_dir,
                        std::optional<files::ResolvedAccount> account);
  void WatchLoop();
  // Both REQUIRE mu_. They return the attempt's result once it has one.
  std::optional<RunResult> CheckChild(const Key& key, Tracked& t);
  std::optional<RunResult> CheckAdopted(const Key& key, Tracked& t);
  void WatchPidfd(const Key& key, Tracked& t);  // REQUIRES mu_
  void ClosePidfd(Tracked& t);                  // REQUIRES mu_
  void SendCancel(const Key& key, Tracked& t);  // REQUIRES mu_
  // The attempt a host's notice names (<runs_dir>/<job>/<attempt>).
  std::optional<Key> KeyOf(const std::string& attempt_dir) const;
  void Deliver(std::vector<RunResult> results);
  void Wake();

  const LocalExecutorOptions options_;
  const ResultSink sink_;
  // runs_dir (a tmpfs) is gone while the output directory of earlier
  // attempts is still there: the host restarted (or someone removed it), so
  // an attempt recovered without files may have run, and is lost, not new.
  const bool runs_vanished_;
  const int wake_fd_;
  const int epoll_fd_;  // the wake eventfd, every child's pidfd and the host's socket
  SupervisorHosts hosts_;
  std::thread watcher_;
  std::mutex mu_;
  // Attempts without a result yet. Finished ones leave it at once: the
  // watcher's periodic scan costs time linear in this map, and a daemon
  // that runs agent tasks finishes millions of attempts between retention
  // sweeps.
  std::map<Key, Tracked> attempts_;  // GUARDED_BY(mu_)
  std::map<int, Key> pidfd_keys_;    // GUARDED_BY(mu_): the attempt each watched pidfd belongs to
  std::vector<RunResult> pending_;   // GUARDED_BY(mu_): results made outside the watcher
  // Attempts whose result was handed (or is being handed) to the sink:
  // exactly once each, and never launched again. Kept until Forget.
  std::set<Key> finished_;  // GUARDED_BY(mu_)
  bool stopping_ = false;   // GUARDED_BY(mu_)
  std::atomic<bool> roots_made_{false};
  // Accounts resolved by Check, with when (see there).
  static constexpr auto kAccountCacheTtl = std::chrono::seconds(5);
  static constexpr size_t kAccountCacheSize = 4096;
  std::mutex accounts_mu_;
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, files::ResolvedAccount>>
      accounts_;  // GUARDED_BY(accounts_mu_)
  std::once_flag shutdown_once_;
};

Status LocalExecutor::Launch(const LaunchSpec& spec) {
  if (spec.argv.empty()) return Error::BadRequest("bad_launch", "the command (argv) is empty", "argv");
  if (spec.job_id <= 0 || spec.attempt < 1) {
    return Error::BadRequest("bad_launch", "job id and attempt must be positive");
  }
  const Key key{spec.job_id, spec.attempt};
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Error::Unavailable("the executor is shut down");
    // Launched (or launching, or finished) already: the handshake makes this a no-op.
    if (attempts_.count(key) != 0 || finished_.count(key) != 0) return Status::Ok();
    attempts_[key] = Tracked{};
  }
  auto forget_key = [&] {
    std::lock_guard lock(mu_);
    attempts_.erase(key);
  };

  auto account = Check(spec);
  Status checked = account.ok() ? MakeRoots() : Status(account.error());
  if (!checked.ok()) {
    forget_key();
    return checked;
  }
  // Everything per attempt (directories, claim, work directory) is made by
  // the supervisor, off this thread; here only a stat, and the spawn.
  const std::string dir = AttemptDir(spec.job_id, spec.attempt);
  if (Exists(dir + "/" + files::kClaim)) {
    std::lock_guard lock(mu_);
    Tracked& t = attempts_[key];
    t.phase = Phase::kAdopted;
    Wake();
    return Status::Ok();
  }
  auto spawned = Spawn(spec, dir, std::move(account).value());
  if (!spawned.ok()) {
    forget_key();
    return spawned.error();
  }
  {
    std::lock_guard lock(mu_);
    Tracked& t = attempts_[key];
    t.phase = spawned->hosted ? Phase::kHosted : Phase::kChild;
    t.pid = spawned->pid;
    if (!spawned->hosted) WatchPidfd(key, t);
    // The host was quicker than us (done already, or retired): the files tell.
    if (spawned->hosted && (t.host_over || !hosts_.Current(t.pid))) {
      t.phase = Phase::kAdopted;
      Wake();
    }
    if (t.cancel_requested) SendCancel(key, t);
  }
  return Status::Ok();
}

// What makes a launch fail at once: no supervisor to start, or an account
// that the job may not run as. Creates nothing. Returns the account the job
// runs as when it is not our own and not a leased sandbox uid, resolved here
// so that the supervisor (statically linked) makes no NSS lookup at all
// (attempt_files.h). A supervisor that is not root then fails to switch to
// it, as it always did for another user's account.
Result<std::optional<files::ResolvedAccount>> LocalExecutor::Check(const LaunchSpec& spec) {
  if (::access(options_.supervisor_path.c_str(), X_OK) != 0) {
    return Error::Unavailable("cannot run the supervisor '" + options_.supervisor_path +
                              "': " + posix::ErrnoText(errno));
  }
  const uid_t me = ::geteuid();
  if (spec.unix_user.empty()) {
    if (me != 0) return std::optional<files::ResolvedAccount>();  // runs as we do
    return Error::Unprocessable("no_user", "jobs never run as root: the launch names no unix_user", "unix_user");
  }
  // The lookups read /etc/passwd and /etc/group and ask every NSS module
  // (~60 us a launch here); a found account is reused for kAccountCacheTtl,
  // so a change to it (a new group) applies to launches from then on, as
  // with nscd. Failures are not kept: an account just created works at once.
  const auto now = std::chrono::steady_clock::now();
  std::optional<files::ResolvedAccount> account;
  {
    std::lock_guard lock(accounts_mu_);
    auto cached = accounts_.find(spec.unix_user);
    if (cached != accounts_.end() && now - cached->second.first < kAccountCacheTtl) account = cached->second.second;
  }
  if (!account) {
    std::vector<char> buf(16384);
    passwd pw{};
    passwd* found = nullptr;
    int rc = 0;
    errno = 0;
    while ((rc = ::getpwnam_r(spec.unix_user.c_str(), &pw, buf.data(), buf.size(), &found)) == ERANGE) {
      buf.resize(buf.size() * 2);
    }
    // Out of descriptors (or memory) the lookup fails, or finds nothing
    // when its module could not open the file it reads: either way it says
    // nothing about the account, and the launch is tried again later.
    if (rc != 0 || (found == nullptr && OutOfDescriptors(errno))) {
      const int err = rc != 0 ? rc : errno;
      std::string message = "cannot look up user '" + spec.unix_user + "': " + posix::ErrnoText(err);
      if (IsTransientErrno(err)) return TransientLaunchError(std::move(message));
      return Error::Internal(std::move(message));
    }
    if (found == nullptr) {
      return Error::Unprocessable("unknown_user", "unknown user '" + spec.unix_user + "'", "unix_user");
    }
    std::vector<gid_t> groups(16);
    int count = static_cast<int>(groups.size());
    // getgrouplist reports no error: a group module that cannot open its
    // file leaves errno and the primary group only, and the job would run
    // without its supplementary groups.
    errno = 0;
    while (::getgrouplist(spec.unix_user.c_str(), pw.pw_gid, groups.data(), &count) < 0) {
      groups.resize(std::max(static_cast<size_t>(count), groups.size() * 2));
      count = static_cast<int>(groups.size());
      errno = 0;
    }
    if (OutOfDescriptors(errno)) {
      return TransientLaunchError("cannot look up the groups of user '" + spec.unix_user +
                                  "': " + posix::ErrnoText(errno));
    }
    groups.resize(static_cast<size_t>(count));
    account = files::ResolvedAccount{pw.pw_uid, pw.pw_gid, std::vector<uint32_t>(groups.begin(), groups.end())};
    std::lock_guard lock(accounts_mu_);
    if (accounts_.size() >= kAccountCacheSize) accounts_.clear();  // a bound, not an LRU: refilled in one pass
    accounts_[spec.unix_user] = {now, *account};
  }
  if (account->uid == 0) {
    return Error::Unprocessable("root_user", "jobs never run as root ('" + spec.unix_user + "')", "unix_user");
  }
  if (me != 0 && account->uid == me) return std::optional<files::ResolvedAccount>();  // already that user
  if (me == 0 && spec.isolate) return std::optional<files::ResolvedAccount>();        // a leased sandbox uid
  return account;
}

// runs_dir (root only) and work_root (traversable by every job account, not
// listable), once per executor; missing parents above them are made 0711,
// since both usually share them. The supervisors make what is below.
Status LocalExecutor::MakeRoots() {
  if (roots_made_.load()) return Status::Ok();
  auto failed = [](const std::string& dir, int err) {
    std::string message = "cannot create " + dir + ": " + posix::ErrnoText(err);
    return IsTransientErrno(err) ? TransientLaunchError(std::move(message)) : Error::Internal(std::move(message));
  };
  if (int err = MakeDirs(options_.runs_dir, 0700)) return failed(options_.runs_dir, err);
  if (SeparateLogs()) {
    if (int err = MakeDirs(options_.logs_dir, 0700)) return failed(options_.logs_dir, err);
  }
  if (int err = MakeDirs(options_.work_root, 0711)) return failed(options_.work_root, err);
  roots_made_ = true;
  return Status::Ok();
}

// The spec as a sealed memfd, read from its start: a file that is no inode
// of the disk, and gone with its last reader.
Result<int> SpecMemfd(const files::AttemptSpec& spec) {
  const std::string json = files::SpecToJson(spec).dump();
  const int fd = ::memfd_create("unisched-spec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    const int err = errno;
    std::string message = "cannot create the spec memfd: " + posix::ErrnoText(err);
    return IsTransientErrno(err) ? TransientLaunchError(std::move(message)) : Error::Unavailable(std::move(message));
  }
  size_t done = 0;
  while (done < json.size()) {
    const ssize_t n = ::write(fd, json.data() + done, json.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      std::string message = "cannot write the spec memfd: " + posix::ErrnoText(err);
      return IsTransientErrno(err) ? TransientLaunchError(std::move(message)) : Error::Unavailable(std::move(message));
    }
    done += static_cast<size_t>(n);
  }
  // Sealed: what the supervisor reads is what was launched.
  (void)::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  if (::lseek(fd, 0, SEEK_SET) != 0) {
    const int err = errno;
    ::close(fd);
    return Error::Unavailable("cannot rewind the spec memfd: " + posix::ErrnoText(err));
  }
  return fd;
}

Result<LocalExecutor::Spawned> LocalExecutor::Spawn(const LaunchSpec& spec, const std::string& attempt_dir,
                                                    std::optional<files::ResolvedAccount> account) {
  auto spec_fd = SpecMemfd(files::AttemptSpec{spec, WorkDir(spec.job_id), options_.use_cgroups, std::move(account),
                                              SeparateLogs() ? LogsDir(spec.job_id, spec.attempt) : std::string()});
  if (!spec_fd.ok()) return spec_fd.error();
  // The host is the cheap way; a supervisor of the attempt's own is the way
  // that needs nothing running. Should the host have taken the launch after
  // all, the second supervisor finds the attempt claimed and exits: the
  // claim, not this choice, makes the attempt run once.
  Result<Spawned> spawned = Spawned{};
  if (Result<pid_t> host = hosts_.Start(attempt_dir, *spec_fd); host.ok()) {
    spawned = Spawned{*host, true};
  } else if (Result<pid_t> child = SpawnSupervisorProcess(options_.supervisor_path, attempt_dir, *spec_fd);
             child.ok()) {
    spawned = Spawned{*child, false};
  } else {
    spawned = child.error();
  }
  ::close(*spec_fd);
  return spawned;
}

void LocalExecutor::Cancel(model::JobId job_id, int attempt, bool preempt) {
  std::lock_guard lock(mu_);
  auto it = attempts_.find({job_id, attempt});
  if (it == attempts_.end()) return;
  it->second.cancel_requested = true;
  it->second.preempt = it->second.preempt || preempt;
  SendCancel(it->first, it->second);
}

// A supervisor of one attempt is signalled: SIGTERM, or SIGUSR1 to allow
// the preempt grace instead of the kill grace. The host runs many: the
// attempt directory gets a `cancel` file ("cancel" or "preempt"), and the
// host a SIGUSR2 to look for such files. The directory is made if the host
// has not got to the attempt yet: it reads the file before the job starts.
void LocalExecutor::SendCancel(const Key& key, Tracked& t) {
  if (t.cancel_sent) return;
  const std::string dir = AttemptDir(key.first, key.second);
  auto cancel_shared = [&](pid_t pid) {
    if (MakeDirs(dir, 0700, 0700) != 0) return false;  // the watcher retries
    if (files::WriteFileAtomic(dir, files::kCancel, t.preempt ? "preempt\n" : "cancel\n", /*durable=*/false) != 0) {
      return false;
    }
    ::kill(pid, SIGUSR2);
    return true;
  };
  const int sig = t.preempt ? SIGUSR1 : SIGTERM;
  if (t.phase == Phase::kHosted && t.pid > 0) {
    t.cancel_sent = cancel_shared(t.pid);
  } else if (t.phase == Phase::kChild && t.pid > 0) {
    ::kill(t.pid, sig);
    t.cancel_sent = true;
  } else if (t.phase == Phase::kAdopted) {
    // Until the claim names a live supervisor, the watcher retries.
    bool shared = false;
    if (pid_t pid = LiveSupervisorPid(dir, &shared); pid > 0) {
      if (shared) {
        t.cancel_sent = cancel_shared(pid);
      } else {
        ::kill(pid, sig);
        t.cancel_sent = true;
      }
    }
  }
}

std::optional<Key> LocalExecutor::KeyOf(const std::string& attempt_dir) const {
  const std::string prefix = options_.runs_dir + "/";
  if (attempt_dir.rfind(prefix, 0) != 0) return std::nullopt;
  const std::string rest = attempt_dir.substr(prefix.size());  // <job>/<attempt>
  const size_t slash = rest.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 >= rest.size()) return std::nullopt;
  const std::string job = rest.substr(0, slash);
  const std::string attempt = rest.substr(slash + 1);
  if (job.find_first_not_of("0123456789") != std::string::npos ||
      attempt.find_first_not_of("0123456789") != std::string::npos || job.size() > 18 || attempt.size() > 9) {
    return std::nullopt;
  }
  return Key{std::stoll(job), std::stoi(attempt)};
}

void LocalExecutor::Recover(const LaunchSpec& spec) {
  const Key key{spec.job_id, spec.attempt};
  const std::string dir = AttemptDir(spec.job_id, spec.attempt);
  {
    std::lock_guard lock(mu_);
    if (stopping_ || attempts_.count(key) != 0 || finished_.count(key) != 0) return;
    // Started before: its files tell the rest (result, still running, or lost).
    if (Exists(dir + "/" + files::kClaim) || Exists(dir + "/" + files::kResult)) {
      attempts_[key].phase = Phase::kAdopted;
      Wake();
      return;
    }
  }
  if (runs_vanished_) {
    std::lock_guard lock(mu_);
    pending_.push_back(Lost(key, "its files in " + options_.runs_dir +
                                     " are gone (the host restarted, or the directory was removed), so whether it "
                                     "ran is unknown"));
    Wake();
    return;
  }
  // Never claimed: it never ran, so it may run now.
  if (Status s = Launch(spec); !s.ok()) {
    std::lock_guard lock(mu_);
    pending_.push_back(LaunchFailure(spec.job_id, spec.attempt, s.error()));
    Wake();
  }
}

std::string LocalExecutor::LogPath(model::JobId job_id, int attempt, std::string_view stream) const {
  if (stream != files::kStdout && stream != files::kStderr) return {};
  return LogsDir(job_id, attempt) + "/" + std::string(stream);
}

void LocalExecutor::Forget(model::JobId job_id, int attempt) {
  if (attempt <= 0) {  // every attempt of the job, wherever it left files
    std::error_code ec;
    std::set<int> attempts;
    for (const std::string& dir : {JobRunsDir(job_id), JobLogsDir(job_id)}) {
      for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos) {
          attempts.insert(std::stoi(name));
        }
      }
    }
    for (int a : attempts) Forget(job_id, a);
    return;
  }
  const Key key{job_id, attempt};
  const std::string dir = AttemptDir(job_id, attempt);
  bool other_attempt_live = false;
  {
    std::lock_guard lock(mu_);
    // Still running: its files are its state. Retention comes back later.
    if (attempts_.count(key) != 0) return;
    if (const LockState lock = ProbeLock(dir); lock == LockState::kHeld || lock == LockState::kUnknown) return;
    finished_.erase(key);
    // Another attempt of the job that is starting may not have made its
    // directory yet: the job's directories stay until it is done too.
    auto other = attempts_.lower_bound({job_id, 0});
    other_attempt_live = other != attempts_.end() && other->first.first == job_id;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);  // best effort: retention retries on its next pass
  if (SeparateLogs()) std::filesystem::remove_all(LogsDir(job_id, attempt), ec);
  if (other_attempt_live) return;
  bool job_gone = true;
  for (const std::string& job_dir : {JobRunsDir(job_id), JobLogsDir(job_id)}) {
    if (!std::filesystem::exists(job_dir, ec)) continue;
    if (std::filesystem::is_empty(job_dir, ec) && !ec) {
      std::filesystem::remove(job_dir, ec);
    } else {
      job_gone = false;
    }
  }
  if (job_gone) std::filesystem::remove_all(WorkDir(job_id), ec);
}

// Only the control files go (and the directories they leave empty):
// where output shares the attempt directory, it stays until Forget. An
// attempt still running, or not yet delivered, is left alone.
void LocalExecutor::Release(model::JobId job_id, int attempt) {
  const Key key{job_id, attempt};
  {
    std::lock_guard lock(mu_);
    if (attempts_.count(key) != 0 || finished_.count(key) == 0) return;
  }
  RemoveControlFiles(job_id, attempt);
}

void LocalExecutor::RemoveControlFiles(model::JobId job_id, int attempt) {
  const std::string dir = AttemptDir(job_id, attempt);
  for (const char* name : {files::kResult, files::kState, files::kClaim, files::kCancel}) {
    (void)::unlink((dir + "/" + name).c_str());  // absent (never written, or released before): fine
  }
  bool gone = ::rmdir(dir.c_str()) == 0 || errno == ENOENT;
  if (!gone && errno == ENOTEMPTY && SeparateLogs()) {
    // Only control files live here, so what is left is the temporary of an
    // atomic write whose writer was killed before its rename (a daemon's
    // cancel file, a supervisor's state): ".<name>.<pid>.<n>.tmp".
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.size() > 5 && name.front() == '.' && name.ends_with(".tmp")) (void)::unlink(entry.path().c_str());
    }
    gone = ::rmdir(dir.c_str()) == 0;
  }
  // The job's directory goes with its last attempt (the rmdir fails while
  // another is there); also when this attempt never made its own.
  if (gone) (void)::rmdir(JobRunsDir(job_id).c_str());
}

// After a restart: whatever is in runs_dir that the store does not record
// as running had its end committed (or its job is gone), as a Release of
// it would have, had the daemon lived to call it.
void LocalExecutor::ReleaseAllExcept(const std::set<Key>& running) {
  auto number = [](const std::filesystem::path& path) -> std::optional<int64_t> {
    const std::string name = path.filename().string();
    if (name.empty() || name.size() > 18 || name.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    return std::stoll(name);
  };
  std::error_code ec;
  for (const auto& job_entry : std::filesystem::directory_iterator(options_.runs_dir, ec)) {
    const auto job_id = number(job_entry.path());
    if (!job_id) continue;
    std::vector<int> found;
    std::error_code job_ec;
    for (const auto& entry : std::filesystem::directory_iterator(job_entry.path(), job_ec)) {
      const auto attempt = number(entry.path());
      if (attempt && *attempt > 0 && *attempt <= INT32_MAX) found.push_back(static_cast<int>(*attempt));
    }
    for (int attempt : found) {
      const Key key{*job_id, attempt};
      if (running.count(key) != 0) continue;
      {
        std::lock_guard lock(mu_);
        if (stopping_ || attempts_.count(key) != 0) continue;  // launched by us since: not a leftover
      }
      // A supervisor that still runs it owns the files (and only its end
      // would make them safe to remove): nothing here expects that.
      if (const LockState lock = ProbeLock(AttemptDir(*job_id, attempt));
          lock == LockState::kHeld || lock == LockState::kUnknown) {
        continue;
      }
      RemoveControlFiles(*job_id, attempt);
    }
    if (found.empty()) (void)::rmdir(job_entry.path().c_str());  // a job directory left empty
  }
}

void LocalExecutor::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    Wake();
    if (watcher_.joinable()) watcher_.join();
    hosts_.Stop();
    std::lock_guard lock(mu_);
    for (auto& [key, t] : attempts_) ClosePidfd(t);
  });
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
      for (RunResult& r : made_elsewhere) finish({r.job_id, r.attempt}, std::move(r));
      auto check = [&](std::map<Key, Tracked>::iterator it) {
        const Key key = it->first;
        Tracked& t = it->second;
        std::optional<RunResult> r;
        if (t.phase == Phase::kChild) r = CheckChild(key, t);
        // The host is done with it: a result, else the files tell (another
        // supervisor runs it, or it could not be claimed).
        if (t.phase == Phase::kHosted) {
          r = ReadResult(key, AttemptDir(key.first, key.second));
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
        if (r.outcome == RunOutcome::kLost) KillLeftovers(AttemptDir(r.job_id, r.attempt), {r.job_id, r.attempt});
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
  const std::string dir = AttemptDir(key.first, key.second);
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
  if (std::string last = LastLine(LogsDir(key.first, key.second) + "/" + files::kSupervisorLog); !last.empty()) {
    reason += ": " + last;
  }
  return Lost(key, std::move(reason));
}

std::optional<RunResult> LocalExecutor::CheckAdopted(const Key& key, Tracked& t) {
  const std::string dir = AttemptDir(key.first, key.second);
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

}  // namespace

std::unique_ptr<Executor> MakeLocalExecutor(const LocalExecutorOptions& options, Executor::ResultSink sink) {
  return std::make_unique<LocalExecutor>(options, std::move(sink));
}

}  // namespace unisched::executor
