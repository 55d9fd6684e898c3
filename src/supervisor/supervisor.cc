// The supervisor's event loop and its attempts: read the spec, create the
// attempt's directories, claim, start the job, watch it (output, wall time,
// cancel, exit), reap the whole tree, write the result. See supervisor.h for
// the two modes; an Attempt does not know which one runs it, except where a
// process-wide fact differs (noted there).

#include "supervisor/supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
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
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "executor/attempt_files.h"
#include "supervisor/capped_log.h"
#include "supervisor/job_launch.h"
#include "unisched/isolation/isolation.h"
#include "unisched/posix/posix.h"

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
// PATH_MAX and then some: an attempt directory longer than this is refused.
constexpr size_t kMaxRequest = 8192;
// Events taken per epoll_wait; more stay ready for the next call.
constexpr int kEventsPerWait = 64;

int64_t NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
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
      if ((err = posix::MakeDir(job_dir, 0700)) != 0) return err;
    }
    if ((err = posix::MakeDir(dir, 0700)) != ENOENT) return err;
  }
  return err;
}

// A diagnostic of the supervisor itself, where no attempt's log can take it:
// stderr, which the executor points at /dev/null.
void LogToStderr(const char* format, ...) __attribute__((format(printf, 1, 2)));
void LogToStderr(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::fprintf(stderr, "unisched-supervisor[%d]: ", static_cast<int>(::getpid()));
  std::vfprintf(stderr, format, args);
  std::fputc('\n', stderr);
  va_end(args);
}

using containment::ReadAll;  // the spec memfd

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
// tree, which the kernel re-parents to us (we are a child subreaper). Only
// a supervisor of one attempt can tell that they are all that attempt's.
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

// The three pipes of a job, as the loop tells them apart.
enum Stream : int { kStdoutPipe = 0, kStderrPipe = 1, kErrorPipe = 2 };

class Loop;

// One attempt, from its spec to its result. Driven by the Loop: Begin, then
// events (output, the main process's exit, a cancel) and Tick, until done().
class Attempt {
 public:
  Attempt(Loop& loop, uint64_t serial, std::string dir) : loop_(loop), serial_(serial), dir_(std::move(dir)) {}
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;
  ~Attempt();

  // Everything up to the job's start (spec, directories, claim, containment,
  // fork). An attempt with nothing to watch is done() on return: a launch
  // failure has its result written by then.
  void Begin(int spec_fd);
  void OnOutput(Stream stream);
  void OnMainExit(int status, const rusage& usage);
  // A cancel (preempt: with the preempt grace instead of the kill grace).
  void RequestStop(bool preempt);
  // The executor's cancel file, if there is one (a shared supervisor's cancel).
  void CheckCancelFile();
  // When the loop has it down to be ticked next (Loop::Schedule).
  std::optional<Mono::time_point> scheduled;
  // Timers due by `now`, and the end once the whole tree is gone and the
  // pipes are closed. Returns when to be called again at the latest.
  std::optional<Mono::time_point> Tick(Mono::time_point now);
  // A child of ours that belongs to no attempt was reaped: a leftover of
  // its tree may be gone.
  void OnOrphanReaped() { tree_check_due_ = true; }
  bool AwaitingTree() const { return main_reaped_ && !tree_gone_; }

  bool done() const { return done_; }
  int exit_status() const { return exit_status_; }
  // Why it could not make its directory or claim (0: it could, or found
  // the attempt claimed by another supervisor).
  int unclaimed_errno() const { return unclaimed_errno_; }
  const std::string& dir() const { return dir_; }
  pid_t main_pid() const { return job_.pid; }

 private:
  // The launch failure before the job starts (empty: none).
  std::string Prepare(Result<files::AttemptSpec> parsed);
  ClaimResult Claim();
  void WriteState();
  std::string MakeWorkDir(const Account& account);
  void Start();
  void StopJob(Stop why, bool preempted);
  void Signal(int sig);
  bool TreeGone();
  // The main process is reaped, the rest of the tree gone, the pipes closed.
  bool Over() const {
    return main_reaped_ && tree_gone_ && job_.stdout_fd < 0 && job_.stderr_fd < 0 && job_.error_fd < 0;
  }
  void DrainPipe(int& fd, CappedLog& log);
  void ClosePipes();
  void Finish();
  void FinishWith(const RunResult& result);
  void Log(const char* format, ...) __attribute__((format(printf, 2, 3)));
  int EnsureLogDir();
  std::string Path(const char* name) const { return dir_ + "/" + name; }
  // Output files: in the spec's log_dir, or beside the control files.
  std::string LogPath(const char* name) const { return (log_dir_.empty() ? dir_ : log_dir_) + "/" + name; }

  Loop& loop_;
  const uint64_t serial_;  // the loop's name for it (epoll tags)
  const std::string dir_;
  std::string log_dir_;  // the spec's log_dir: made by the first byte written there
  bool log_dir_made_ = false;
  int log_fd_ = -1;  // supervisor.log, created by the first diagnostic
  files::AttemptSpec spec_;
  JobSpec job_spec_;
  int claim_fd_ = -1;
  int64_t started_at_ms_ = 0;
  containment::Containment containment_;
  CappedLog stdout_log_;
  CappedLog stderr_log_;
  JobProcess job_;
  isolation::UidLease uid_lease_;  // sandboxed jobs: their own uid, held until the attempt ends
  RunResult result_;               // job, attempt and start, until the end fills in the rest
  bool running_ = false;           // the job was started and is watched
  bool done_ = false;
  int exit_status_ = 0;
  int unclaimed_errno_ = 0;

  bool main_reaped_ = false;
  int main_status_ = 0;
  rusage main_usage_{};
  Mono::time_point t0_;
  std::optional<Mono::time_point> deadline_;
  std::optional<Mono::time_point> kill_at_;
  std::optional<Mono::time_point> drain_until_;
  std::optional<Mono::time_point> next_sweep_;
  std::optional<Mono::time_point> main_ended_;
  bool tree_gone_ = false;
  bool tree_check_due_ = false;
  Stop stop_ = Stop::kNone;
  bool stop_before_start_ = false;  // a cancel came before the job started
  std::optional<LaunchError> launch_error_;
};

// The process: signals (one signalfd), children (we are their subreaper),
// the executor's socket (host mode) and the pipes of every attempt's job,
// in one epoll set.
class Loop {
 public:
  // socket_fd < 0: one attempt, no executor socket.
  explicit Loop(int socket_fd) : socket_fd_(socket_fd) {}
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  int RunSingle(const std::string& attempt_dir);
  int RunHost();

  // Whether other attempts may share this process: then a child or an
  // orphan cannot be told to belong to one attempt by being ours.
  bool shared() const { return socket_fd_ >= 0; }
  void Watch(int fd, uint64_t serial, Stream stream);
  // Before the fd is closed: a forked job holds a copy until its exec, which
  // would keep the registration (and its events) alive.
  void Unwatch(int fd);
  // Before a job starts: whether a cancel is already pending for it (a
  // signal, or a host's cancel file).
  bool CancelPending(const Attempt& attempt);
  rlim_t job_open_files_limit() const { return job_open_files_limit_; }
  // Reaps what has ended now (SIGCHLD, or before a result is written).
  void Reap();
  // No child left at all (only meaningful for a single attempt).
  bool children_left() const { return children_left_; }

 private:
  bool Setup();
  int Serve();
  // A new attempt; retired at once when there is nothing to watch.
  void Add(const std::string& dir, int spec_fd);
  void HandleSignals();
  void ServeRequests();
  void CloseSocket();
  void SendNotices();
  void Retire(uint64_t serial);
  Attempt* Find(uint64_t serial);
  // Ticks the attempt in this loop iteration (something happened to it).
  void Touch(uint64_t serial) { due_.insert(serial); }
  // Ticks it again at `wake`.
  void Schedule(uint64_t serial, Attempt& attempt, std::optional<Mono::time_point> wake);

  static uint64_t Tag(uint64_t serial, int kind) { return (serial << 2) | static_cast<uint64_t>(kind); }

  int socket_fd_;
  int epoll_fd_ = -1;
  int signal_fd_ = -1;
  sigset_t mask_{};
  bool socket_open_ = false;
  bool children_left_ = true;
  bool cancel_all_ = false;   // SIGTERM/SIGINT: every attempt is cancelled
  bool preempt_all_ = false;  // SIGUSR1 (single mode): the cancel is a preemption
  uint64_t next_serial_ = 1;  // 0 tags the signalfd and the socket
  std::map<uint64_t, std::unique_ptr<Attempt>> attempts_;
  std::map<pid_t, uint64_t> by_main_pid_;
  // Only these are ticked: the attempts an event touched, and those whose
  // timer is due (timers_ may hold stale entries: an attempt's `scheduled`
  // says which is current). Ticking all of them in every iteration cost
  // time linear in the attempts running for each event.
  std::set<uint64_t> due_;
  std::multimap<Mono::time_point, uint64_t> timers_;
  std::deque<std::string> notices_;  // attempt directories whose attempt is over, to send
  bool want_write_ = false;
  rlim_t job_open_files_limit_ = 0;  // JobSpec::open_files_limit
  int last_exit_status_ = 0;         // of the attempt retired last: a single attempt's process exit status
};

// ---- Attempt ----

Attempt::~Attempt() {
  for (int* fd : {&job_.stdout_fd, &job_.stderr_fd, &job_.error_fd, &claim_fd_, &log_fd_}) {
    if (*fd >= 0) ::close(*fd);
  }
}

int Attempt::EnsureLogDir() {
  if (log_dir_.empty() || log_dir_made_) return 0;
  const int err = MakeJobAndAttemptDir(log_dir_);
  log_dir_made_ = err == 0;
  return err;
}

// supervisor.log, created by the first diagnostic: most attempts have none,
// and an inode not created is the cheapest. Until the attempt directory
// exists (or if the log cannot be created) diagnostics go to stderr.
void Attempt::Log(const char* format, ...) {
  char line[2048];
  int n = std::snprintf(line, sizeof line, "unisched-supervisor[%d]: ", static_cast<int>(::getpid()));
  va_list args;
  va_start(args, format);
  if (n > 0 && static_cast<size_t>(n) < sizeof line) n += std::vsnprintf(line + n, sizeof line - n, format, args);
  va_end(args);
  if (n < 0) return;
  size_t len = std::min(static_cast<size_t>(n), sizeof line - 2);
  line[len++] = '\n';
  if (log_fd_ < 0 && EnsureLogDir() == 0) {
    log_fd_ = ::open(LogPath(files::kSupervisorLog).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  }
  const int fd = log_fd_ >= 0 ? log_fd_ : STDERR_FILENO;
  ssize_t ignored = ::write(fd, line, len);
  (void)ignored;  // nowhere left to report a failed diagnostic
}

void Attempt::Begin(int spec_fd) {
  // Parsed first, so that even the first diagnostic goes where the spec
  // says; a malformed spec becomes the attempt's launch failure below.
  Result<files::AttemptSpec> parsed = files::SpecFromJson(ReadAll(spec_fd));
  if (parsed.ok()) log_dir_ = parsed->log_dir;
  if (int err = MakeJobAndAttemptDir(dir_)) {
    LogToStderr("cannot create %s: %s", dir_.c_str(), std::strerror(err));
    unclaimed_errno_ = err;
  }
  switch (unclaimed_errno_ != 0 ? ClaimResult::kError : Claim()) {
    case ClaimResult::kOwned:
      break;
    case ClaimResult::kTaken:
      done_ = true;
      return;
    case ClaimResult::kError:
      // Unclaimed, nothing ran and no result can be written: the host says
      // why in its notice, a supervisor of one attempt by its exit status,
      // so that a shortage of descriptors or memory is a launch to try
      // again, not a lost attempt that may have run.
      done_ = true;
      exit_status_ = executor::IsTransientErrno(unclaimed_errno_) ? files::kExitTransient : 1;
      return;
  }
  started_at_ms_ = NowMillis();
  WriteState();
  result_.outcome = RunOutcome::kLaunchFailed;
  if (std::string error = Prepare(std::move(parsed)); !error.empty()) {
    result_.reason = std::move(error);
    return FinishWith(result_);
  }
  if (stop_before_start_ || loop_.CancelPending(*this)) {
    result_.outcome = RunOutcome::kCancelled;
    result_.reason = "cancelled before the job started";
    return FinishWith(result_);
  }
  Start();
}

// One file is claim and lock: the exclusive create decides which supervisor
// runs the attempt, and its flock, held until the attempt ends, tells
// readers that it lives. Readers bridge the instant between the create and
// the flock: a claim with a free lock, no result and no state.json is
// looked at again before it counts as a dead supervisor (see the executor).
// A shared supervisor says so in the claim ("<pid> shared"): its attempts
// are cancelled through a file, not a signal to the pid (docs/execution.md).
ClaimResult Attempt::Claim() {
  claim_fd_ = ::open(Path(files::kClaim).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (claim_fd_ < 0) {
    if (errno == EEXIST) return ClaimResult::kTaken;
    unclaimed_errno_ = errno;
    Log("cannot create %s: %s", Path(files::kClaim).c_str(), std::strerror(unclaimed_errno_));
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
  const std::string pid = std::to_string(::getpid()) + (loop_.shared() ? " shared\n" : "\n");
  ssize_t ignored = ::write(claim_fd_, pid.data(), pid.size());
  (void)ignored;  // the claim is its existence; the pid is a courtesy
  return ClaimResult::kOwned;
}

// Written once, non-durably: its existence tells a reader that the lock was
// taken (so a free lock then means we are gone), and it holds our pid.
void Attempt::WriteState() {
  nlohmann::json j{{"phase", "running"}, {"supervisor_pid", ::getpid()}, {"started_at", started_at_ms_}};
  if (loop_.shared()) j["shared"] = true;
  if (int err = files::WriteFileAtomic(dir_, files::kState, j.dump() + "\n", /*durable=*/false)) {
    Log("cannot write %s: %s", Path(files::kState).c_str(), std::strerror(err));
  }
}

// The job's account, work directory, containment and output files.
std::string Attempt::Prepare(Result<files::AttemptSpec> parsed) {
  auto fail = [](std::string reason) { return reason; };
  if (!parsed.ok()) return fail(parsed.error().message);
  spec_ = std::move(parsed).value();
  const executor::LaunchSpec& launch = spec_.launch;
  result_.job_id = launch.job_id;
  result_.attempt = launch.attempt;
  JobSpec& job_spec = job_spec_;

  job_spec.argv = launch.argv;
  job_spec.env = launch.env;
  job_spec.work_dir = spec_.work_dir;
  job_spec.isolate = launch.isolate;
  job_spec.open_files_limit = loop_.job_open_files_limit();
  if (launch.isolate && ::geteuid() == 0) {
    // A sandboxed job runs as a uid of its own, leased for as long as the
    // attempt lasts (docs/sandboxes.md): never a tenant's shared account.
    uid_lease_ = isolation::UidLease::Acquire(
        launch.sandbox_uid_lock_dir.empty() ? "/run/unisched/sandbox-uids" : launch.sandbox_uid_lock_dir,
        static_cast<uid_t>(launch.sandbox_uid_base > 0 ? launch.sandbox_uid_base : 3'000'000),
        static_cast<uid_t>(launch.sandbox_uid_count > 0 ? launch.sandbox_uid_count : 100'000),
        static_cast<uint64_t>(launch.job_id) * 31 + static_cast<uint64_t>(launch.attempt));
    if (!uid_lease_.held()) {
      const int err = errno;
      result_.transient = executor::IsTransientErrno(err);  // its lock file could not be opened
      return fail(std::string("no free sandbox uid: ") + std::strerror(err));
    }
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

  const containment::Limits& limits = launch.limits;
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
  stdout_log_.Open(LogPath(files::kStdout), launch.log_cap_bytes, [this] { return EnsureLogDir(); });
  stderr_log_.Open(LogPath(files::kStderr), launch.log_cap_bytes, [this] { return EnsureLogDir(); });
  return {};
}

// <work_root>/<job>, shared by the job's attempts and private to its
// account (0700 by the umask; chmod for one made by someone else). The
// executor made work_root. Returns the launch failure reason, or empty.
std::string Attempt::MakeWorkDir(const Account& account) {
  const std::string& work = spec_.work_dir;
  if (work.empty()) return {};
  bool created = true;
  if (::mkdir(work.c_str(), 0700) != 0) {
    if (errno != EEXIST) {
      result_.transient = executor::IsTransientErrno(errno);
      return "cannot create " + work + ": " + std::strerror(errno);
    }
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

void Attempt::Start() {
  const executor::LaunchSpec& launch = spec_.launch;
  // execvpe searches our PATH: the job's, else the default. We are single-
  // threaded, and the value holds until the fork below.
  const auto path = launch.env.find("PATH");
  ::setenv("PATH", path != launch.env.end() ? path->second.c_str() : kDefaultSearchPath, 1);
  auto job = StartJob(job_spec_, containment_);
  if (!job.ok()) {
    result_.reason = job.error().message;
    result_.transient = job.error().code == executor::kTransientLaunchCode;  // no pipe, no process: try later
    return FinishWith(result_);
  }
  job_ = *job;
  containment_.TrackProcessGroup(job_.pid);
  t0_ = Mono::now();
  result_.started_at = FromUnixMillis(NowMillis());
  running_ = true;
  if (launch.walltime_seconds > 0) deadline_ = t0_ + std::chrono::seconds(launch.walltime_seconds);
  loop_.Watch(job_.stdout_fd, serial_, kStdoutPipe);
  loop_.Watch(job_.stderr_fd, serial_, kStderrPipe);
  loop_.Watch(job_.error_fd, serial_, kErrorPipe);
}

void Attempt::RequestStop(bool preempt) {
  if (!running_) {
    stop_before_start_ = true;
    return;
  }
  StopJob(Stop::kCancel, preempt);
}

void Attempt::CheckCancelFile() {
  const auto text = files::ReadWholeFile(Path(files::kCancel));
  if (!text) return;
  RequestStop(text->rfind("preempt", 0) == 0);
}

void Attempt::StopJob(Stop why, bool preempted) {
  if (stop_ != Stop::kNone || main_reaped_) return;
  const executor::LaunchSpec& launch = spec_.launch;
  stop_ = why;
  deadline_.reset();
  Signal(SIGTERM);
  kill_at_ = Mono::now() +
             std::chrono::seconds(std::max(0, preempted ? launch.preempt_grace_seconds : launch.kill_grace_seconds));
}

// The job's whole tree: cgroups, its process group, and (a single
// attempt's supervisor only) orphans re-parented to us.
void Attempt::Signal(int sig) {
  containment_.KillAll(sig);
  if (!main_reaped_ && job_.pid > 0) ::kill(job_.pid, sig);
  if (!loop_.shared()) {
    for (pid_t pid : DirectChildren()) ::kill(pid, sig);
  }
}

// Nothing of the job runs any more. A single attempt's supervisor has all of
// it as children (main process and orphans): none left. A shared one asks
// the cgroups, else the process group (a process that left both cannot be
// found without cgroups; docs/execution.md).
bool Attempt::TreeGone() {
  if (!loop_.shared()) return !loop_.children_left();
  if (containment_.has_groups()) return containment_.Empty();
  return job_.pid <= 0 || (::kill(-job_.pid, 0) != 0 && errno == ESRCH);
}

void Attempt::OnMainExit(int status, const rusage& usage) {
  main_reaped_ = true;
  main_status_ = status;
  main_usage_ = usage;
}

void Attempt::DrainPipe(int& fd, CappedLog& log) {
  char buf[65536];
  // Bounded, so one chatty stream cannot starve the other attempts.
  for (int i = 0; i < 16; ++i) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      log.Append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    loop_.Unwatch(fd);  // EOF or error: no writer left
    ::close(fd);
    fd = -1;
    return;
  }
}

void Attempt::OnOutput(Stream stream) {
  if (stream == kStdoutPipe && job_.stdout_fd >= 0) DrainPipe(job_.stdout_fd, stdout_log_);
  if (stream == kStderrPipe && job_.stderr_fd >= 0) DrainPipe(job_.stderr_fd, stderr_log_);
  if (stream == kErrorPipe && job_.error_fd >= 0) {
    LaunchError e;
    const ssize_t got = ::read(job_.error_fd, &e, sizeof e);
    if (got == static_cast<ssize_t>(sizeof e)) {
      launch_error_ = e;
    } else if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
      loop_.Unwatch(job_.error_fd);  // closed on exec: the command runs
      ::close(job_.error_fd);
      job_.error_fd = -1;
    }
  }
}

std::optional<Mono::time_point> Attempt::Tick(Mono::time_point now) {
  if (!running_ || done_) return std::nullopt;
  const executor::LaunchSpec& launch = spec_.launch;
  if (main_reaped_ && !main_ended_) {
    // The main process is gone: its leftovers go too (a `sleep &` holding
    // our pipes would otherwise keep the attempt open).
    main_ended_ = now;
    deadline_.reset();
    kill_at_.reset();
    result_.ended_at = FromUnixMillis(NowMillis());
    drain_until_ = now + kDrainLimit;
    tree_gone_ = TreeGone();
    if (!tree_gone_) {
      Signal(SIGKILL);
      next_sweep_ = now + kSweepInterval;
      loop_.Reap();
      tree_gone_ = !loop_.shared() && TreeGone();
    }
  } else if (main_reaped_ && !tree_gone_ && (tree_check_due_ || !loop_.shared())) {
    tree_gone_ = TreeGone();
  }
  tree_check_due_ = false;
  if (Over()) {
    Finish();
    return std::nullopt;
  }
  if (drain_until_ && now >= *drain_until_) {
    Log("job %lld attempt %d: leftovers or open pipes after %llds; writing the result anyway",
        static_cast<long long>(launch.job_id), launch.attempt, static_cast<long long>(kDrainLimit.count()));
    Finish();
    return std::nullopt;
  }
  if (!main_reaped_) {
    if (deadline_ && now >= *deadline_) StopJob(Stop::kTimeout, /*preempted=*/false);
    if (kill_at_ && now >= *kill_at_) {
      Signal(SIGKILL);
      kill_at_.reset();
      next_sweep_ = now + kSweepInterval;
    }
  }
  if (next_sweep_ && now >= *next_sweep_) {
    Signal(SIGKILL);
    loop_.Reap();
    if (main_reaped_) tree_gone_ = TreeGone();
    next_sweep_ = now + kSweepInterval;
    if (Over()) {
      Finish();
      return std::nullopt;
    }
  }
  std::optional<Mono::time_point> wake;
  for (const auto& t : {deadline_, kill_at_, next_sweep_, drain_until_}) {
    if (t && (!wake || *t < *wake)) wake = t;
  }
  return wake;
}

// The result of a job that was started, from how it ended.
void Attempt::Finish() {
  const executor::LaunchSpec& launch = spec_.launch;
  RunResult result = std::move(result_);
  if (!main_ended_) result.ended_at = FromUnixMillis(NowMillis());
  const auto wall_end = main_ended_.value_or(Mono::now());
  ClosePipes();
  for (const auto& [log, name] : {std::pair{&stdout_log_, files::kStdout}, std::pair{&stderr_log_, files::kStderr}}) {
    if (log->open_error() != 0) {
      Log("cannot create %s, the job's output is lost: %s", LogPath(name).c_str(), std::strerror(log->open_error()));
    }
  }
  // The main process's own use and that of the descendants it waited for.
  result.usage.wall_seconds = std::chrono::duration<double>(wall_end - t0_).count();
  result.usage.user_cpu_seconds = static_cast<double>(main_usage_.ru_utime.tv_sec) + main_usage_.ru_utime.tv_usec / 1e6;
  result.usage.system_cpu_seconds =
      static_cast<double>(main_usage_.ru_stime.tv_sec) + main_usage_.ru_stime.tv_usec / 1e6;
  result.usage.max_rss_kb = main_usage_.ru_maxrss;

  if (launch_error_) {
    result.outcome = RunOutcome::kLaunchFailed;
    result.reason = DescribeLaunchError(*launch_error_, job_spec_);
    result.exit_code.reset();
    return FinishWith(result);
  }
  if (!main_reaped_) {
    // Only after the drain limit with the main process unkillable (D state).
    result.outcome = RunOutcome::kFailed;
    result.reason = "the job did not exit after SIGKILL";
    return FinishWith(result);
  }
  int code = 0;
  if (WIFEXITED(main_status_)) code = WEXITSTATUS(main_status_);
  if (WIFSIGNALED(main_status_)) code = 128 + WTERMSIG(main_status_);
  result.exit_code = code;
  if (stop_ == Stop::kTimeout) {
    result.outcome = RunOutcome::kTimeout;
    result.reason = "wall time limit of " + std::to_string(launch.walltime_seconds) + " s exceeded";
  } else if (stop_ == Stop::kCancel) {
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
  FinishWith(result);
}

void Attempt::ClosePipes() {
  for (int* fd : {&job_.stdout_fd, &job_.stderr_fd, &job_.error_fd}) {
    if (*fd < 0) continue;
    loop_.Unwatch(*fd);
    ::close(*fd);
    *fd = -1;
  }
}

// The groups go before the result appears, so a reader of the result finds
// nothing of the attempt left in the kernel; the claim's lock goes after it.
void Attempt::FinishWith(const RunResult& result) {
  running_ = false;
  done_ = true;
  // Leftovers killed since the last SIGCHLD: reaped, so that their groups
  // can be removed or pooled (a zombie still counts in pids.current).
  if (next_sweep_) loop_.Reap();
  const std::string contained_by = containment_.Describe();
  if (Status s = containment_.Destroy(); !s.ok()) Log("%s", s.error().message.c_str());
  const std::string json = files::ResultToJson(result, contained_by).dump(2) + "\n";
  // The only durable write: the result must survive a host crash. There is
  // no final state.json: the result's existence says the attempt ended.
  if (int err = files::WriteFileAtomic(dir_, files::kResult, json)) {
    Log("cannot write %s: %s", Path(files::kResult).c_str(), std::strerror(err));
    exit_status_ = 1;
  }
  if (claim_fd_ >= 0) ::close(claim_fd_);
  claim_fd_ = -1;
  uid_lease_ = isolation::UidLease();
}

// ---- Loop ----

bool Loop::Setup() {
  EnsureStandardFds();
  ::umask(077);
  // Blocked before anything else, so that a cancel sent right after the
  // spawn waits in the signalfd instead of killing us without a result.
  sigemptyset(&mask_);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) sigaddset(&mask_, sig);
  ::sigprocmask(SIG_BLOCK, &mask_, nullptr);
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  (void)::setsid();  // already a session leader when spawned with POSIX_SPAWN_SETSID
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) LogToStderr("cannot become a child subreaper: %s", strerror(errno));
  // A host holds a claim and three pipes per running attempt: thousands of
  // descriptors with many short sandbox tasks. Its jobs get the limit back.
  rlimit files{};
  if (shared() && ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    const rlim_t ours = files.rlim_cur;
    files.rlim_cur = files.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &files) == 0) job_open_files_limit_ = ours;
  }
  signal_fd_ = ::signalfd(-1, &mask_, SFD_CLOEXEC | SFD_NONBLOCK);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (signal_fd_ < 0 || epoll_fd_ < 0) return false;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = Tag(0, 0);
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, signal_fd_, &ev) != 0) return false;
  if (socket_fd_ >= 0) {
    ev.data.u64 = Tag(0, 1);
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, socket_fd_, &ev) != 0) return false;
    socket_open_ = true;
  }
  return true;
}

void Loop::Watch(int fd, uint64_t serial, Stream stream) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = Tag(serial, stream + 1);
  (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);  // a pipe always can be; a failure shows as a stuck attempt
}

void Loop::Unwatch(int fd) {
  (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
}

bool Loop::CancelPending(const Attempt& attempt) {
  HandleSignals();
  if (cancel_all_) return true;
  struct stat st {};
  return shared() && ::stat((attempt.dir() + "/" + files::kCancel).c_str(), &st) == 0;
}

void Loop::Reap() {
  for (;;) {
    int status = 0;
    rusage usage{};
    const pid_t pid = ::wait4(-1, &status, WNOHANG, &usage);
    if (pid > 0) {
      auto it = by_main_pid_.find(pid);
      if (it != by_main_pid_.end()) {
        if (Attempt* a = Find(it->second)) a->OnMainExit(status, usage);
        Touch(it->second);
        by_main_pid_.erase(it);
      } else {
        for (auto& [serial, a] : attempts_) {
          if (!a->AwaitingTree()) continue;
          a->OnOrphanReaped();
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
void Loop::HandleSignals() {
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
    if (shared()) CloseSocket();
    for (auto& [serial, a] : attempts_) {
      a->RequestStop(preempt_all_);
      Touch(serial);
    }
  }
  if (look_for_files) {
    for (auto& [serial, a] : attempts_) {
      a->CheckCancelFile();
      Touch(serial);
    }
  }
}

// The executor sees EOF and starts another host for its next launch.
void Loop::CloseSocket() {
  if (!socket_open_) return;
  (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, socket_fd_, nullptr);
  (void)::shutdown(socket_fd_, SHUT_RDWR);
  socket_open_ = false;
  notices_.clear();  // the executor reads the results from the files
}

Attempt* Loop::Find(uint64_t serial) {
  auto it = attempts_.find(serial);
  return it == attempts_.end() ? nullptr : it->second.get();
}

void Loop::Add(const std::string& dir, int spec_fd) {
  const uint64_t serial = next_serial_++;
  Attempt* a = (attempts_[serial] = std::make_unique<Attempt>(*this, serial, dir)).get();
  a->Begin(spec_fd);
  if (a->main_pid() > 0) by_main_pid_[a->main_pid()] = serial;
  if (a->done()) {
    Retire(serial);
  } else {
    Touch(serial);
  }
}

void Loop::Schedule(uint64_t serial, Attempt& attempt, std::optional<Mono::time_point> wake) {
  if (!wake || wake == attempt.scheduled) return;
  attempt.scheduled = wake;
  timers_.emplace(*wake, serial);
}

// An attempt that is over leaves the loop; the executor hears of it.
void Loop::Retire(uint64_t serial) {
  auto it = attempts_.find(serial);
  if (it == attempts_.end()) return;
  due_.erase(serial);  // its timers_ entries go stale
  last_exit_status_ = it->second->exit_status();
  if (socket_open_) notices_.push_back(files::Notice(it->second->dir(), it->second->unclaimed_errno()));
  // Its main process is normally reaped (and gone from the map) by now;
  // not after the drain limit with the process unkillable.
  if (auto p = by_main_pid_.find(it->second->main_pid()); p != by_main_pid_.end() && p->second == serial) {
    by_main_pid_.erase(p);
  }
  attempts_.erase(it);
}

// Each request: the attempt directory, with the spec memfd as the only
// descriptor. A malformed one is dropped: its attempt is never claimed, and
// the executor reports it lost once we are gone.
void Loop::ServeRequests() {
  while (socket_open_) {
    char buf[kMaxRequest];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    iovec iov{buf, sizeof buf};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(socket_fd_, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    int spec_fd = -1;
    for (cmsghdr* c = n > 0 ? CMSG_FIRSTHDR(&msg) : nullptr; c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) {
        std::memcpy(&spec_fd, CMSG_DATA(c), sizeof(int));
      }
    }
    if (n <= 0) {
      // The executor closed its end (stopped or died): no new attempts; the
      // running ones go on, and their results wait in their directories.
      CloseSocket();
      return;
    }
    if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == MSG_CTRUNC && spec_fd < 0 && buf[0] == '/') {
      // The kernel could not give us the spec's descriptor: we are out of
      // descriptors (or the machine is). Unclaimed, so the executor hears
      // at once that the launch is to be tried again, instead of waiting
      // for us to exit.
      const std::string dir(buf, static_cast<size_t>(n));
      LogToStderr("launch request for %s dropped: its spec descriptor did not arrive", dir.c_str());
      if (socket_open_) notices_.push_back(files::Notice(dir, EMFILE));
    } else if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || spec_fd < 0 || buf[0] != '/') {
      LogToStderr("malformed launch request dropped");
    } else {
      Add(std::string(buf, static_cast<size_t>(n)), spec_fd);
    }
    if (spec_fd >= 0) ::close(spec_fd);
  }
}

// Notices are datagrams of an attempt directory each. A full socket (the
// executor is slow to read) keeps them here until it can take more.
void Loop::SendNotices() {
  while (!notices_.empty() && socket_open_) {
    const std::string& dir = notices_.front();
    const ssize_t n = ::send(socket_fd_, dir.data(), dir.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    notices_.pop_front();  // sent, or the executor is gone (it will read the files)
  }
  const bool want_write = !notices_.empty() && socket_open_;
  if (want_write != want_write_ && socket_open_) {
    epoll_event ev{};
    ev.events = EPOLLIN | (want_write ? static_cast<uint32_t>(EPOLLOUT) : 0U);
    ev.data.u64 = Tag(0, 1);
    (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, socket_fd_, &ev);
    want_write_ = want_write;
  }
}

// Until no attempt is left and (a host) the executor has closed the socket.
int Loop::Serve() {
  epoll_event events[kEventsPerWait];
  for (;;) {
    const auto now = Mono::now();
    while (!timers_.empty() && timers_.begin()->first <= now) {
      const auto [when, serial] = *timers_.begin();
      timers_.erase(timers_.begin());
      Attempt* a = Find(serial);
      if (a == nullptr || a->scheduled != when) continue;  // stale
      a->scheduled.reset();
      Touch(serial);
    }
    // Ticking may reap and so touch others: those go in the next round.
    const std::set<uint64_t> due = std::exchange(due_, {});
    for (uint64_t serial : due) {
      Attempt* a = Find(serial);
      if (a == nullptr) continue;
      const auto next = a->Tick(now);
      if (a->done()) {
        Retire(serial);
      } else {
        Schedule(serial, *a, next);
      }
    }
    SendNotices();
    if (attempts_.empty() && !socket_open_) return last_exit_status_;

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
      if (serial == 0 && kind == 0) {
        HandleSignals();
      } else if (serial == 0) {
        if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) ServeRequests();
      } else if (Attempt* a = Find(serial)) {
        a->OnOutput(static_cast<Stream>(kind - 1));
        Touch(serial);
      }
    }
  }
}

int Loop::RunSingle(const std::string& attempt_dir) {
  if (!Setup()) {
    // Cancel and SIGCHLD would go unnoticed: do not start anything.
    LogToStderr("cannot watch signals (signalfd, epoll): %s", std::strerror(errno));
    return 1;
  }
  Add(attempt_dir, STDIN_FILENO);
  return Serve();
}

int Loop::RunHost() {
  if (!Setup()) {
    LogToStderr("cannot watch signals or the executor (signalfd, epoll): %s", std::strerror(errno));
    return 1;
  }
  return Serve();
}

}  // namespace

int RunSupervisor(const std::string& attempt_dir) {
  Loop loop(-1);
  return loop.RunSingle(attempt_dir);
}

int RunHost(int socket_fd) {
  Loop loop(socket_fd);
  return loop.RunHost();
}

}  // namespace unisched::supervisor
