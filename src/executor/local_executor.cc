// The verbs that start and stop attempts (Launch, Cancel, Recover), and the
// executor's life (its construction, Shutdown). See local_executor.h.

#include "executor/local_executor.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <utility>

#include "executor/attempt_claim.h"
#include "executor/supervisor_process.h"
#include "unisched/posix/posix.h"

namespace unisched::executor {

namespace {

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

}  // namespace

LocalExecutor::LocalExecutor(LocalExecutorOptions options, ResultSink sink)
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
  if (options_.work_dir_retention.count() > 0) {
    sweeper_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "us-work-sweep");
      SweepLoop();
    });
  }
}

LocalExecutor::~LocalExecutor() {
  Shutdown();
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

bool LocalExecutor::Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

Status LocalExecutor::Launch(const LaunchSpec& spec) {
  if (spec.argv.empty()) return Error::BadRequest("bad_launch", "the command (argv) is empty", "argv");
  if (spec.job_id <= 0 || spec.attempt < 1 || spec.task < 0) {
    return Error::BadRequest("bad_launch", "job id and attempt must be positive, task not negative");
  }
  const Key key{spec.job_id, spec.attempt, spec.task};
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
  const std::string dir = AttemptDir(key);
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
  if (spec.ids) {
    // The account the daemon allocated to the job's user: numbers, no lookup.
    if (me == 0 && spec.isolate) return std::optional<files::ResolvedAccount>();  // a leased sandbox uid
    if (spec.ids->uid == 0) {
      return Error::Unprocessable(
          "no_account",
          "user '" + spec.unix_user + "' has no Unix account allocated (executor.user_accounts, docs/accounts.md)",
          "unix_user");
    }
    if (me != 0) return std::optional<files::ResolvedAccount>();  // cannot switch; as for a named account
    return std::optional<files::ResolvedAccount>(
        files::ResolvedAccount{spec.ids->uid, spec.ids->gid, spec.ids->groups});
  }
  if (spec.unix_user.empty()) {
    if (me != 0) return std::optional<files::ResolvedAccount>();  // runs as we do
    return Error::Unprocessable("no_user", "jobs never run as root: the launch names no unix_user", "unix_user");
  }
  auto account = accounts_.Resolve(spec.unix_user);
  if (!account.ok()) return account.error();
  if (account->uid == 0) {
    return Error::Unprocessable("root_user", "jobs never run as root ('" + spec.unix_user + "')", "unix_user");
  }
  if (me != 0 && account->uid == me) return std::optional<files::ResolvedAccount>();  // already that user
  if (me == 0 && spec.isolate) return std::optional<files::ResolvedAccount>();        // a leased sandbox uid
  return std::optional<files::ResolvedAccount>(std::move(account).value());
}

// Missing parents are made 0711 since both roots usually share them. The
// supervisors make what is below.
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

Result<LocalExecutor::Spawned> LocalExecutor::Spawn(const LaunchSpec& spec, const std::string& attempt_dir,
                                                    std::optional<files::ResolvedAccount> account) {
  auto spec_fd = SpecMemfd(files::AttemptSpec{
      spec, WorkDir(spec.job_id), options_.use_cgroups, std::move(account),
      SeparateLogs() ? LogsDir(spec.job_id, spec.attempt, spec.task) : std::string(), options_.pin_cpus});
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

std::vector<LocalExecutor::Key> LocalExecutor::TasksOf(model::JobId job_id, int attempt) const {
  std::vector<Key> keys;
  for (auto it = attempts_.lower_bound(Key{job_id, attempt, 0});
       it != attempts_.end() && it->first.job_id == job_id && it->first.attempt == attempt; ++it) {
    keys.push_back(it->first);
  }
  return keys;
}

void LocalExecutor::Cancel(model::JobId job_id, int attempt, bool preempt) {
  std::lock_guard lock(mu_);
  for (const Key& key : TasksOf(job_id, attempt)) {
    Tracked& t = attempts_.at(key);
    t.cancel_requested = true;
    t.preempt = t.preempt || preempt;
    SendCancel(key, t);
  }
}

void LocalExecutor::CancelTasks(model::JobId job_id, int attempt, const std::vector<int>& tasks) {
  std::lock_guard lock(mu_);
  for (int task : tasks) {
    auto it = attempts_.find(Key{job_id, attempt, task});
    if (it == attempts_.end()) continue;
    it->second.cancel_requested = true;
    SendCancel(it->first, it->second);
  }
}

// A supervisor of one attempt is signalled: SIGTERM, or SIGUSR1 to allow
// the preempt grace instead of the kill grace. The host runs many: the
// attempt directory gets a `cancel` file ("cancel" or "preempt"), and the
// host a SIGUSR2 to look for such files. The directory is made if the host
// has not got to the attempt yet: it reads the file before the job starts.
void LocalExecutor::SendCancel(const Key& key, Tracked& t) {
  if (t.cancel_sent) return;
  const std::string dir = AttemptDir(key);
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

void LocalExecutor::Recover(const LaunchSpec& spec) {
  const Key key{spec.job_id, spec.attempt, spec.task};
  const std::string dir = AttemptDir(key);
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
    RunResult failed = LaunchFailure(spec.job_id, spec.attempt, s.error());
    failed.task = spec.task;
    pending_.push_back(std::move(failed));
    Wake();
  }
}

std::string LocalExecutor::LogPath(model::JobId job_id, int attempt, int task, std::string_view stream) const {
  if (stream != files::kStdout && stream != files::kStderr) return {};
  return LogsDir(job_id, attempt, task) + "/" + std::string(stream);
}

void LocalExecutor::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    Wake();
    sweep_cv_.notify_all();
    if (watcher_.joinable()) watcher_.join();
    if (sweeper_.joinable()) sweeper_.join();
    hosts_.Stop();
    std::lock_guard lock(mu_);
    for (auto& [key, t] : attempts_) ClosePidfd(t);
  });
}

}  // namespace unisched::executor
