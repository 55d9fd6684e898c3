// The supervisor of one attempt: read the spec from stdin, create the
// attempt's directories, claim, start the job, watch it (output, wall time,
// cancel, exit), reap the whole tree, write the result.

#include "supervisor/supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "executor/attempt_files.h"
#include "supervisor/capped_log.h"
#include "supervisor/job_launch.h"
#include "unisched/isolation/isolation.h"

namespace unisched::supervisor {
namespace {

namespace files = executor::files;
using executor::RunOutcome;
using executor::RunResult;
using Mono = std::chrono::steady_clock;

// Where a job without PATH in its environment finds its command. The job's
// environment still gets no PATH: only the search uses it.
constexpr const char* kDefaultSearchPath = "/usr/local/bin:/usr/bin:/bin";
// How long to wait for the job's leftovers to die and its pipes to close
// after the main process ended, before writing the result anyway.
constexpr auto kDrainLimit = std::chrono::seconds(10);
constexpr auto kSweepInterval = std::chrono::milliseconds(100);

int64_t NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// mkdir that accepts an existing directory. Returns 0 or the errno.
int MakeDir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) == 0 || errno == EEXIST) return 0;
  return errno;
}

// <root>/<job>/<attempt>, 0700 by the umask; the executor made <root>.
// A retention pass may remove an empty <job> directory between our two
// mkdirs: then make it again. Returns 0 or the errno.
int MakeJobAndAttemptDir(const std::string& dir) {
  const size_t slash = dir.find_last_of('/');
  const std::string job_dir = slash != std::string::npos && slash > 0 ? dir.substr(0, slash) : std::string();
  int err = 0;
  for (int i = 0; i < 3; ++i) {
    if (!job_dir.empty()) {
      if ((err = MakeDir(job_dir, 0700)) != 0) return err;
    }
    if ((err = MakeDir(dir, 0700)) != ENOENT) return err;
  }
  return err;
}

// The attempt's output directory (the spec's log_dir): made by the first
// byte of output or diagnostics, like the files in it, so a quiet attempt
// creates no inode there (it is on disk, while the attempt directory may be
// on a tmpfs). Empty: the attempt directory, which exists already.
std::string g_log_dir;
bool g_log_dir_made = false;

int EnsureLogDir() {
  if (g_log_dir.empty() || g_log_dir_made) return 0;
  const int err = MakeJobAndAttemptDir(g_log_dir);
  g_log_dir_made = err == 0;
  return err;
}

// supervisor.log, created by the first diagnostic: most attempts have none,
// and an inode not created is the cheapest. Until the attempt directory
// exists (or if the log cannot be created) diagnostics go to stderr, which
// the executor points at /dev/null.
std::string g_log_path;
int g_log_fd = -1;

void Log(const char* format, ...) __attribute__((format(printf, 1, 2)));
void Log(const char* format, ...) {
  char line[2048];
  int n = std::snprintf(line, sizeof line, "unisched-supervisor[%d]: ", static_cast<int>(::getpid()));
  va_list args;
  va_start(args, format);
  if (n > 0 && static_cast<size_t>(n) < sizeof line) n += std::vsnprintf(line + n, sizeof line - n, format, args);
  va_end(args);
  if (n < 0) return;
  size_t len = std::min(static_cast<size_t>(n), sizeof line - 2);
  line[len++] = '\n';
  if (g_log_fd < 0 && !g_log_path.empty() && EnsureLogDir() == 0) {
    g_log_fd = ::open(g_log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  }
  const int fd = g_log_fd >= 0 ? g_log_fd : STDERR_FILENO;
  ssize_t ignored = ::write(fd, line, len);
  (void)ignored;  // nowhere left to report a failed diagnostic
}

using containment::ReadAll;  // the spec memfd on stdin

// With fds 0-2 closed, a pipe could become the job's "stdout" by accident.
void EnsureStandardFds() {
  for (;;) {
    const int fd = ::open("/dev/null", O_RDWR);
    if (fd < 0) return;
    if (fd > 2) {
      ::close(fd);
      return;
    }
  }
}

// Our children, from /proc: the job's main process and every orphan of its
// tree, which the kernel re-parents to us (we are a child subreaper).
std::vector<pid_t> DirectChildren() {
  std::vector<pid_t> out;
  const pid_t self = ::getpid();
  // One file read where the kernel has CONFIG_PROC_CHILDREN (we are
  // single-threaded, so the main thread's list is all of them) ...
  if (auto list = files::ReadWholeFile("/proc/self/task/" + std::to_string(self) + "/children")) {
    const char* s = list->c_str();
    char* end = nullptr;
    for (long v = std::strtol(s, &end, 10); end != s; v = std::strtol(s, &end, 10)) {
      out.push_back(static_cast<pid_t>(v));
      s = end;
    }
    return out;
  }
  // ... else a scan of /proc.
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    const std::string path = std::string("/proc/") + e->d_name + "/stat";
    const auto stat = files::ReadWholeFile(path);
    if (!stat) continue;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    const size_t close = stat->rfind(')');
    if (close == std::string::npos || close + 4 >= stat->size()) continue;
    const long ppid = std::strtol(stat->c_str() + close + 4, nullptr, 10);
    if (ppid == self) out.push_back(static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10)));
  }
  ::closedir(proc);
  return out;
}

enum class ClaimResult { kOwned, kTaken, kError };
enum class Stop { kNone, kTimeout, kCancel };

class Supervisor {
 public:
  explicit Supervisor(std::string dir) : dir_(std::move(dir)) {}
  int Run();

 private:
  ClaimResult Claim();
  RunResult Supervise();
  std::string MakeWorkDir(const Account& account);
  RunResult Watch(const JobSpec& job_spec, RunResult result);
  bool CancelPending();
  void Signal(int sig);
  void Reap();
  void DrainPipe(int& fd, CappedLog& log);
  void WriteState();
  std::string Path(const char* name) const { return dir_ + "/" + name; }
  // Output files: in the spec's log_dir, or beside the control files.
  std::string LogPath(const char* name) const { return (g_log_dir.empty() ? dir_ : g_log_dir) + "/" + name; }

  std::string dir_;
  Result<files::AttemptSpec> parsed_spec_ = Error::Internal("no spec read");
  int claim_fd_ = -1;
  int signal_fd_ = -1;
  int64_t started_at_ms_ = 0;
  files::AttemptSpec spec_;
  containment::Containment containment_;
  CappedLog stdout_log_;
  CappedLog stderr_log_;
  JobProcess job_;
  isolation::UidLease uid_lease_;  // sandboxed jobs: their own uid, held until we exit
  bool main_reaped_ = false;
  int main_status_ = 0;
  bool children_left_ = true;
};

int Supervisor::Run() {
  EnsureStandardFds();
  ::umask(077);
  // Blocked before anything else, so that a cancel sent right after the
  // spawn waits in the signalfd instead of killing us without a result.
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGUSR1}) sigaddset(&mask, sig);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);

  // The spec comes first: it is the executor's memfd on fd 0, and reading
  // it costs no file.
  // Parsed here, so that even the first diagnostic goes where the spec says;
  // a malformed spec becomes the attempt's launch failure below.
  parsed_spec_ = files::SpecFromJson(ReadAll(STDIN_FILENO));
  if (parsed_spec_.ok()) g_log_dir = parsed_spec_->log_dir;
  g_log_path = LogPath(files::kSupervisorLog);
  if (int err = MakeJobAndAttemptDir(dir_)) {
    Log("cannot create %s: %s", dir_.c_str(), std::strerror(err));
    return 1;
  }

  switch (Claim()) {
    case ClaimResult::kOwned:
      break;
    case ClaimResult::kTaken:
      return 0;
    case ClaimResult::kError:
      return 1;
  }
  (void)::setsid();  // already a session leader when spawned with POSIX_SPAWN_SETSID
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) Log("cannot become a child subreaper: %s", std::strerror(errno));
  signal_fd_ = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  const int signalfd_errno = errno;
  started_at_ms_ = NowMillis();
  WriteState();

  RunResult result;
  if (signal_fd_ < 0) {
    // Cancel and SIGCHLD would go unnoticed: do not start anything.
    result.outcome = RunOutcome::kLaunchFailed;
    result.reason = std::string("cannot watch signals (signalfd): ") + std::strerror(signalfd_errno);
  } else {
    result = Supervise();
  }

  // The groups go before the result appears, so a reader of the result
  // finds nothing of the attempt left in the kernel.
  const std::string contained_by = containment_.Describe();
  if (Status s = containment_.Destroy(); !s.ok()) Log("%s", s.error().message.c_str());
  const std::string json = files::ResultToJson(result, contained_by).dump(2) + "\n";
  // The only durable write: the result must survive a host crash. There is
  // no final state.json: the result's existence says the attempt ended.
  if (int err = files::WriteFileAtomic(dir_, files::kResult, json)) {
    Log("cannot write %s: %s", Path(files::kResult).c_str(), std::strerror(err));
    return 1;
  }
  return 0;
}

// One file is claim and lock: the exclusive create decides which supervisor
// runs the attempt, and its flock, held until we exit, tells readers that we
// live. Readers bridge the instant between the create and the flock: a
// claim with a free lock, no result and no state.json is looked at again
// before it counts as a dead supervisor (see the executor).
ClaimResult Supervisor::Claim() {
  claim_fd_ = ::open(Path(files::kClaim).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (claim_fd_ < 0) {
    if (errno == EEXIST) return ClaimResult::kTaken;
    Log("cannot create %s: %s", Path(files::kClaim).c_str(), std::strerror(errno));
    return ClaimResult::kError;
  }
  // Blocking: a reader probing the lock holds it for an instant only.
  while (::flock(claim_fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    // The claim stands (no other supervisor may run the attempt); without
    // the lock a reader takes us for dead once it sees no state.json, so
    // write none and no result: the attempt is then lost, not run twice.
    Log("cannot lock %s: %s", Path(files::kClaim).c_str(), std::strerror(errno));
    return ClaimResult::kError;
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  ssize_t ignored = ::write(claim_fd_, pid.data(), pid.size());
  (void)ignored;  // the claim is its existence; the pid is a courtesy
  return ClaimResult::kOwned;
}

// Written once, non-durably: its existence tells a reader that the lock was
// taken (so a free lock then means we are gone), and it holds our pid.
void Supervisor::WriteState() {
  const nlohmann::json j{{"phase", "running"}, {"supervisor_pid", ::getpid()}, {"started_at", started_at_ms_}};
  if (int err = files::WriteFileAtomic(dir_, files::kState, j.dump() + "\n", /*durable=*/false)) {
    Log("cannot write %s: %s", Path(files::kState).c_str(), std::strerror(err));
  }
}

RunResult Supervisor::Supervise() {
  RunResult result;
  result.outcome = RunOutcome::kLaunchFailed;
  auto fail = [&result](std::string reason) {
    result.reason = std::move(reason);
    return result;
  };

  if (!parsed_spec_.ok()) return fail(parsed_spec_.error().message);
  spec_ = std::move(parsed_spec_).value();
  const executor::LaunchSpec& launch = spec_.launch;
  result.job_id = launch.job_id;
  result.attempt = launch.attempt;

  JobSpec job_spec;
  job_spec.argv = launch.argv;
  job_spec.env = launch.env;
  job_spec.work_dir = spec_.work_dir;
  job_spec.isolate = launch.isolate;
  if (launch.isolate && ::geteuid() == 0) {
    // A sandboxed job runs as a uid of its own, leased for as long as this
    // supervisor lives (docs/sandboxes.md): never a tenant's shared account.
    uid_lease_ = isolation::UidLease::Acquire(
        launch.sandbox_uid_lock_dir.empty() ? "/run/unisched/sandbox-uids" : launch.sandbox_uid_lock_dir,
        static_cast<uid_t>(launch.sandbox_uid_base > 0 ? launch.sandbox_uid_base : 3'000'000),
        static_cast<uid_t>(launch.sandbox_uid_count > 0 ? launch.sandbox_uid_count : 100'000),
        static_cast<uint64_t>(launch.job_id) * 31 + static_cast<uint64_t>(launch.attempt));
    if (!uid_lease_.held()) return fail(std::string("no free sandbox uid: ") + std::strerror(errno));
    job_spec.account.switch_user = true;
    job_spec.account.name = "sandbox uid " + std::to_string(uid_lease_.uid());
    job_spec.account.uid = uid_lease_.uid();
    job_spec.account.gid = uid_lease_.uid();
    job_spec.env["HOME"] = isolation::kSandboxHome;
  } else if (spec_.account) {
    // Resolved by the executor: no NSS module is loaded here (attempt_files.h).
    if (spec_.account->uid == 0) return fail("refusing to run a job as root ('" + launch.unix_user + "')");
    job_spec.account.switch_user = true;
    job_spec.account.name = launch.unix_user;
    job_spec.account.uid = spec_.account->uid;
    job_spec.account.gid = spec_.account->gid;
    job_spec.account.groups.assign(spec_.account->groups.begin(), spec_.account->groups.end());
  } else if (::geteuid() == 0) {
    // The executor resolves every account it does not lease; without one a
    // root supervisor would run the job as root.
    return fail("refusing to run a job as root: the spec names no account for '" + launch.unix_user + "'");
  } else {
    job_spec.account.name = launch.unix_user;  // the executor found it is ours: no switch
  }
  if (std::string error = MakeWorkDir(job_spec.account); !error.empty()) return fail(std::move(error));

  const auto path = launch.env.find("PATH");
  ::setenv("PATH", path != launch.env.end() ? path->second.c_str() : kDefaultSearchPath, 1);

  const containment::Limits limits{launch.limits.memory_bytes, launch.limits.cpu_millis, launch.limits.pids};
  if (spec_.use_cgroups) {
    auto c = containment::Containment::Create(files::CgroupName(launch.job_id, launch.attempt, ::getpid()), limits);
    if (c.ok()) {
      containment_ = std::move(c).value();
    } else {
      Log("cgroups unavailable, falling back to rlimits: %s", c.error().message.c_str());
      containment_ = containment::Containment::Disabled(limits);
    }
  } else {
    containment_ = containment::Containment::Disabled(limits);
  }

  // Created by their first byte: a silent job leaves neither file.
  stdout_log_.Open(LogPath(files::kStdout), launch.log_cap_bytes, EnsureLogDir);
  stderr_log_.Open(LogPath(files::kStderr), launch.log_cap_bytes, EnsureLogDir);

  if (CancelPending()) {
    result.outcome = RunOutcome::kCancelled;
    result.reason = "cancelled before the job started";
    return result;
  }
  return Watch(job_spec, result);
}

// <work_root>/<job>, shared by the job's attempts and private to its
// account (0700 by the umask; chmod for one made by someone else). The
// executor made work_root. Returns the launch failure reason, or empty.
std::string Supervisor::MakeWorkDir(const Account& account) {
  const std::string& work = spec_.work_dir;
  if (work.empty()) return {};
  bool created = true;
  if (::mkdir(work.c_str(), 0700) != 0) {
    if (errno != EEXIST) return "cannot create " + work + ": " + std::strerror(errno);
    created = false;
  }
  if (account.switch_user && ::chown(work.c_str(), account.uid, account.gid) != 0) {
    return "cannot give " + work + " to '" + account.name + "': " + std::strerror(errno);
  }
  if (!created && ::chmod(work.c_str(), 0700) != 0) {
    return "cannot chmod " + work + ": " + std::strerror(errno);
  }
  return {};
}

// Consumes pending signals before the job exists; true if one asked to stop.
bool Supervisor::CancelPending() {
  bool cancel = false;
  signalfd_siginfo info;
  while (::read(signal_fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT || info.ssi_signo == SIGUSR1) cancel = true;
  }
  return cancel;
}

// The job's whole tree: cgroups, its process group, and orphans re-parented to us.
void Supervisor::Signal(int sig) {
  containment_.KillAll(sig);
  if (!main_reaped_ && job_.pid > 0) ::kill(job_.pid, sig);
  for (pid_t pid : DirectChildren()) ::kill(pid, sig);
}

void Supervisor::Reap() {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      if (pid == job_.pid) {
        main_reaped_ = true;
        main_status_ = status;
      }
      continue;
    }
    if (pid < 0 && errno == EINTR) continue;
    children_left_ = !(pid < 0 && errno == ECHILD);
    return;
  }
}

void Supervisor::DrainPipe(int& fd, CappedLog& log) {
  char buf[65536];
  // Bounded, so one chatty stream cannot starve the other or the signals.
  for (int i = 0; i < 16; ++i) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      log.Append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    ::close(fd);  // EOF or error: no writer left
    fd = -1;
    return;
  }
}

RunResult Supervisor::Watch(const JobSpec& job_spec, RunResult result) {
  const executor::LaunchSpec& launch = spec_.launch;
  auto job = StartJob(job_spec, containment_);
  if (!job.ok()) {
    result.reason = job.error().message;
    return result;
  }
  job_ = *job;
  containment_.TrackProcessGroup(job_.pid);
  const auto t0 = Mono::now();
  result.started_at = FromUnixMillis(NowMillis());

  std::optional<Mono::time_point> deadline;
  if (launch.walltime_seconds > 0) deadline = t0 + std::chrono::seconds(launch.walltime_seconds);
  const auto grace = std::chrono::seconds(std::max(0, launch.kill_grace_seconds));
  const auto preempt_grace = std::chrono::seconds(std::max(0, launch.preempt_grace_seconds));
  std::optional<Mono::time_point> kill_at;
  std::optional<Mono::time_point> drain_until;
  std::optional<Mono::time_point> next_sweep;
  std::optional<Mono::time_point> main_ended;
  Stop stop = Stop::kNone;
  std::optional<LaunchError> launch_error;

  auto stop_job = [&](Stop why, Mono::time_point now, bool preempted = false) {
    if (stop != Stop::kNone || main_reaped_) return;
    stop = why;
    Signal(SIGTERM);
    kill_at = now + (preempted ? preempt_grace : grace);
  };

  for (;;) {
    if (main_reaped_ && !main_ended) {
      // The main process is gone: its leftovers go too (a `sleep &` holding
      // our pipes would otherwise keep the attempt open).
      main_ended = Mono::now();
      deadline.reset();
      kill_at.reset();
      result.ended_at = FromUnixMillis(NowMillis());
      Signal(SIGKILL);
      drain_until = *main_ended + kDrainLimit;
      next_sweep = *main_ended + kSweepInterval;
      Reap();
    }
    if (main_reaped_ && !children_left_ && job_.stdout_fd < 0 && job_.stderr_fd < 0 && job_.error_fd < 0) break;
    auto now = Mono::now();
    if (drain_until && now >= *drain_until) {
      Log("job %lld attempt %d: leftovers or open pipes after %llds; writing the result anyway",
          static_cast<long long>(launch.job_id), launch.attempt, static_cast<long long>(kDrainLimit.count()));
      break;
    }

    if (stop != Stop::kNone) deadline.reset();
    std::optional<Mono::time_point> wake;
    for (const auto& t : {deadline, kill_at, next_sweep, drain_until}) {
      if (t && (!wake || *t < *wake)) wake = t;
    }
    int timeout_ms = -1;
    if (wake) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*wake - now).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left + 1, 0, 60'000));
    }

    pollfd fds[4];
    nfds_t n = 0;
    int* watched[4] = {&signal_fd_, &job_.stdout_fd, &job_.stderr_fd, &job_.error_fd};
    int index[4] = {-1, -1, -1, -1};
    for (int i = 0; i < 4; ++i) {
      if (*watched[i] < 0) continue;
      index[i] = static_cast<int>(n);
      fds[n++] = pollfd{*watched[i], POLLIN, 0};
    }
    const int rc = ::poll(fds, n, timeout_ms);
    if (rc < 0 && errno != EINTR) {
      Log("poll: %s", std::strerror(errno));
      ::usleep(100'000);
    }
    auto ready = [&](int i) { return rc > 0 && index[i] >= 0 && fds[index[i]].revents != 0; };

    if (ready(0)) {
      signalfd_siginfo info;
      bool child = false;
      while (::read(signal_fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
        if (info.ssi_signo == SIGCHLD) child = true;
        if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT) stop_job(Stop::kCancel, Mono::now());
        if (info.ssi_signo == SIGUSR1) stop_job(Stop::kCancel, Mono::now(), /*preempted=*/true);
      }
      if (child) Reap();
    }
    if (ready(1)) DrainPipe(job_.stdout_fd, stdout_log_);
    if (ready(2)) DrainPipe(job_.stderr_fd, stderr_log_);
    if (ready(3)) {
      LaunchError e;
      const ssize_t got = ::read(job_.error_fd, &e, sizeof e);
      if (got == static_cast<ssize_t>(sizeof e)) {
        launch_error = e;
      } else if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
        ::close(job_.error_fd);  // closed on exec: the command runs
        job_.error_fd = -1;
      }
    }

    now = Mono::now();
    if (!main_reaped_) {
      if (deadline && now >= *deadline) stop_job(Stop::kTimeout, now);
      if (kill_at && now >= *kill_at) {
        Signal(SIGKILL);
        kill_at.reset();
        next_sweep = now + kSweepInterval;
      }
    }
    if (next_sweep && now >= *next_sweep) {
      Signal(SIGKILL);
      Reap();
      next_sweep = now + kSweepInterval;
    }
  }
  if (!main_ended) result.ended_at = FromUnixMillis(NowMillis());
  const auto wall_end = main_ended.value_or(Mono::now());
  for (int* fd : {&job_.stdout_fd, &job_.stderr_fd, &job_.error_fd}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }

  for (const auto& [log, name] : {std::pair{&stdout_log_, files::kStdout}, std::pair{&stderr_log_, files::kStderr}}) {
    if (log->open_error() != 0) {
      Log("cannot create %s, the job's output is lost: %s", LogPath(name).c_str(), std::strerror(log->open_error()));
    }
  }

  rusage ru{};
  ::getrusage(RUSAGE_CHILDREN, &ru);
  result.usage.wall_seconds = std::chrono::duration<double>(wall_end - t0).count();
  result.usage.user_cpu_seconds = static_cast<double>(ru.ru_utime.tv_sec) + ru.ru_utime.tv_usec / 1e6;
  result.usage.system_cpu_seconds = static_cast<double>(ru.ru_stime.tv_sec) + ru.ru_stime.tv_usec / 1e6;
  result.usage.max_rss_kb = ru.ru_maxrss;

  if (launch_error) {
    result.outcome = RunOutcome::kLaunchFailed;
    result.reason = DescribeLaunchError(*launch_error, job_spec);
    result.exit_code.reset();
    return result;
  }
  if (!main_reaped_) {
    // Only after the drain limit with the main process unkillable (D state).
    result.outcome = RunOutcome::kFailed;
    result.reason = "the job did not exit after SIGKILL";
    return result;
  }
  int code = 0;
  if (WIFEXITED(main_status_)) code = WEXITSTATUS(main_status_);
  if (WIFSIGNALED(main_status_)) code = 128 + WTERMSIG(main_status_);
  result.exit_code = code;
  if (stop == Stop::kTimeout) {
    result.outcome = RunOutcome::kTimeout;
    result.reason = "wall time limit of " + std::to_string(launch.walltime_seconds) + " s exceeded";
  } else if (stop == Stop::kCancel) {
    result.outcome = RunOutcome::kCancelled;
    result.reason = "cancelled";
  } else if (code == 0) {
    result.outcome = RunOutcome::kCompleted;
    result.reason.clear();
  } else {
    result.outcome = RunOutcome::kFailed;
    if (containment_.OomKilled()) {
      result.reason = "out of memory (cgroup limit " + std::to_string(launch.limits.memory_bytes >> 20) + " MB)";
    } else if (WIFSIGNALED(main_status_)) {
      result.reason = "killed by signal " + std::to_string(WTERMSIG(main_status_));
    } else {
      result.reason = "exit status " + std::to_string(code);
    }
  }
  return result;
}

}  // namespace

int RunSupervisor(const std::string& attempt_dir) {
  Supervisor supervisor(attempt_dir);
  return supervisor.Run();
}

}  // namespace unisched::supervisor
