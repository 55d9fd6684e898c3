// AttemptRun: see attempt_run.h.

#include "supervisor/attempt_run.h"

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "unisched/common/time.h"

namespace unisched::supervisor {
namespace {

namespace files = executor::files;
using executor::RunOutcome;
using executor::RunResult;

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

}  // namespace

AttemptRun::AttemptRun(AttemptContext& context, uint64_t serial, std::string dir)
    : context_(context),
      serial_(serial),
      dir_(std::move(dir)),
      output_(dir_),
      control_(dir_, context.shared(), output_) {}

AttemptRun::~AttemptRun() {
  for (int* fd : {&job_.stdout_fd, &job_.stderr_fd, &job_.error_fd}) {
    if (*fd >= 0) ::close(*fd);
  }
}

void AttemptRun::Begin(int spec_fd) {
  // Parsed first, so that even the first diagnostic goes where the spec
  // says; a malformed spec becomes the attempt's launch failure below.
  Result<files::AttemptSpec> parsed = files::SpecFromJson(containment::ReadAll(spec_fd));
  if (parsed.ok()) output_.SetDir(parsed->log_dir);
  switch (control_.Claim()) {
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
      exit_status_ = executor::IsTransientErrno(control_.unclaimed_errno()) ? files::kExitTransient : 1;
      return;
  }
  control_.WriteState(NowMillis());
  result_.outcome = RunOutcome::kLaunchFailed;
  if (std::string error = Prepare(std::move(parsed)); !error.empty()) {
    result_.reason = std::move(error);
    return FinishWith(result_);
  }
  if (stop_before_start_ || context_.CancelPending(*this)) {
    result_.outcome = RunOutcome::kCancelled;
    result_.reason = "cancelled before the job started";
    return FinishWith(result_);
  }
  Start();
}

// The job's account, work directory and containment (JobSetup), and its
// output files.
std::string AttemptRun::Prepare(Result<files::AttemptSpec> parsed) {
  if (!parsed.ok()) return parsed.error().message;
  spec_ = std::move(parsed).value();
  result_.job_id = spec_.launch.job_id;
  result_.attempt = spec_.launch.attempt;
  result_.task = spec_.launch.task;
  if (auto failure = setup_.Prepare(spec_, context_.job_open_files_limit(), output_)) {
    result_.transient = failure->transient;
    return std::move(failure->reason);
  }
  output_.OpenStreams(spec_.launch.log_cap_bytes);
  return output_.OpenCopies(spec_.launch.output_file, spec_.launch.error_file, setup_.job_spec().account);
}

void AttemptRun::Start() {
  const executor::LaunchSpec& launch = spec_.launch;
  // execvpe searches our PATH: the job's, else the default. We are single-
  // threaded, and the value holds until the fork below.
  const auto path = launch.env.find("PATH");
  ::setenv("PATH", path != launch.env.end() ? path->second.c_str() : kDefaultSearchPath, 1);
  auto job = StartJob(setup_.job_spec(), setup_.containment());
  // The job has its secrets (or never will): none stays in our memory.
  setup_.ForgetSecrets();
  for (auto& secret : spec_.launch.secrets) ::explicit_bzero(secret.value.data(), secret.value.size());
  spec_.launch.secrets.clear();
  if (!job.ok()) {
    result_.reason = job.error().message;
    result_.transient = job.error().code == executor::kTransientLaunchCode;  // no pipe, no process: try later
    return FinishWith(result_);
  }
  job_ = *job;
  setup_.containment().TrackProcessGroup(job_.pid);
  t0_ = Mono::now();
  result_.started_at = FromUnixMillis(NowMillis());
  running_ = true;
  if (launch.walltime_seconds > 0) deadline_ = t0_ + std::chrono::seconds(launch.walltime_seconds);
  context_.Watch(job_.stdout_fd, serial_, kStdoutPipe);
  context_.Watch(job_.stderr_fd, serial_, kStderrPipe);
  context_.Watch(job_.error_fd, serial_, kErrorPipe);
}

void AttemptRun::RequestStop(bool preempt) {
  if (!running_) {
    stop_before_start_ = true;
    return;
  }
  StopJob(Stop::kCancel, preempt);
}

void AttemptRun::CheckCancelFile() {
  const auto text = files::ReadWholeFile(dir_ + "/" + files::kCancel);
  if (!text) return;
  RequestStop(text->rfind("preempt", 0) == 0);
}

void AttemptRun::StopJob(Stop why, bool preempted) {
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
void AttemptRun::Signal(int sig) {
  setup_.containment().KillAll(sig);
  if (!main_reaped_ && job_.pid > 0) ::kill(job_.pid, sig);
  if (!context_.shared()) {
    for (pid_t pid : DirectChildren()) ::kill(pid, sig);
  }
}

// Nothing of the job runs any more. A single attempt's supervisor has all of
// it as children (main process and orphans): none left. A shared one asks
// the cgroups, else the process group (a process that left both cannot be
// found without cgroups; docs/execution.md).
bool AttemptRun::TreeGone() {
  if (!context_.shared()) return !context_.children_left();
  if (setup_.containment().has_groups()) return setup_.containment().Empty();
  return job_.pid <= 0 || (::kill(-job_.pid, 0) != 0 && errno == ESRCH);
}

void AttemptRun::OnMainExit(int status, const rusage& usage) {
  main_reaped_ = true;
  main_status_ = status;
  main_usage_ = usage;
}

void AttemptRun::DrainPipe(int& fd, Stream stream) {
  char buf[65536];
  // Bounded, so one chatty stream cannot starve the other attempts.
  for (int i = 0; i < 16; ++i) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      if (stream == kStdoutPipe) {
        output_.stdout_log().Append(buf, static_cast<size_t>(n));
        output_.CopyStdout(buf, static_cast<size_t>(n));
      } else {
        output_.stderr_log().Append(buf, static_cast<size_t>(n));
        output_.CopyStderr(buf, static_cast<size_t>(n));
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    context_.Unwatch(fd);  // EOF or error: no writer left
    ::close(fd);
    fd = -1;
    return;
  }
}

void AttemptRun::OnOutput(Stream stream) {
  if (stream == kStdoutPipe && job_.stdout_fd >= 0) DrainPipe(job_.stdout_fd, kStdoutPipe);
  if (stream == kStderrPipe && job_.stderr_fd >= 0) DrainPipe(job_.stderr_fd, kStderrPipe);
  if (stream == kErrorPipe && job_.error_fd >= 0) {
    LaunchError e;
    const ssize_t got = ::read(job_.error_fd, &e, sizeof e);
    if (got == static_cast<ssize_t>(sizeof e)) {
      launch_error_ = e;
    } else if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
      context_.Unwatch(job_.error_fd);  // closed on exec: the command runs
      ::close(job_.error_fd);
      job_.error_fd = -1;
    }
  }
}

std::optional<Mono::time_point> AttemptRun::Tick(Mono::time_point now) {
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
      context_.Reap();
      tree_gone_ = !context_.shared() && TreeGone();
    }
  } else if (main_reaped_ && !tree_gone_ && (tree_check_due_ || !context_.shared())) {
    tree_gone_ = TreeGone();
  }
  tree_check_due_ = false;
  if (Over()) {
    Finish();
    return std::nullopt;
  }
  if (drain_until_ && now >= *drain_until_) {
    output_.Log("job %lld attempt %d: leftovers or open pipes after %llds; writing the result anyway",
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
    context_.Reap();
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
void AttemptRun::Finish() {
  const executor::LaunchSpec& launch = spec_.launch;
  RunResult result = std::move(result_);
  if (!main_ended_) result.ended_at = FromUnixMillis(NowMillis());
  const auto wall_end = main_ended_.value_or(Mono::now());
  ClosePipes();
  output_.ReportLostStreams();
  // The main process's own use and that of the descendants it waited for.
  result.usage.wall_seconds = std::chrono::duration<double>(wall_end - t0_).count();
  result.usage.user_cpu_seconds = static_cast<double>(main_usage_.ru_utime.tv_sec) + main_usage_.ru_utime.tv_usec / 1e6;
  result.usage.system_cpu_seconds =
      static_cast<double>(main_usage_.ru_stime.tv_sec) + main_usage_.ru_stime.tv_usec / 1e6;
  result.usage.max_rss_kb = main_usage_.ru_maxrss;

  if (launch_error_) {
    result.outcome = RunOutcome::kLaunchFailed;
    result.reason = DescribeLaunchError(*launch_error_, setup_.job_spec());
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
    if (setup_.containment().OomKilled()) {
      result.reason = "out of memory (cgroup limit " + std::to_string(launch.limits.memory_bytes >> 20) + " MB)";
    } else if (WIFSIGNALED(main_status_)) {
      result.reason = "killed by signal " + std::to_string(WTERMSIG(main_status_));
    } else {
      result.reason = "exit status " + std::to_string(code);
    }
  }
  FinishWith(result);
}

void AttemptRun::ClosePipes() {
  for (int* fd : {&job_.stdout_fd, &job_.stderr_fd, &job_.error_fd}) {
    if (*fd < 0) continue;
    context_.Unwatch(*fd);
    ::close(*fd);
    *fd = -1;
  }
}

// The groups go before the result appears, so a reader of the result finds
// nothing of the attempt left in the kernel; the claim's lock goes after it.
void AttemptRun::FinishWith(const RunResult& result) {
  running_ = false;
  done_ = true;
  // Leftovers killed since the last SIGCHLD: reaped, so that their groups
  // can be removed or pooled (a zombie still counts in pids.current).
  if (next_sweep_) context_.Reap();
  containment::Containment& containment = setup_.containment();
  const std::string contained_by = containment.Describe();
  if (Status s = containment.Destroy(); !s.ok()) output_.Log("%s", s.error().message.c_str());
  // The batch script's file goes with its attempt (the job's processes are
  // gone), so that a job that left nothing else leaves an empty work
  // directory, removed at once (executor::Release).
  if (const JobSpec& job = setup_.job_spec(); !job.script_file.empty()) {
    (void)::unlink((spec_.work_dir + "/" + job.script_file).c_str());
  }
  if (!control_.WriteResult(result, contained_by)) exit_status_ = 1;
  setup_.ReleaseUid();
}

}  // namespace unisched::supervisor
