#pragma once
// One attempt's state machine, from its spec to its result: claim, start, watch, reap the whole tree,
// write the result. Apart from the loop, which runs many of them side by side.

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "executor/attempt_files.h"
#include "supervisor/attempt_output.h"
#include "supervisor/control_files.h"
#include "supervisor/job_launch.h"
#include "supervisor/job_setup.h"

namespace unisched::supervisor {

using Mono = std::chrono::steady_clock;

// The three pipes of a job, as the loop tells them apart.
enum Stream : int { kStdoutPipe = 0, kStderrPipe = 1, kErrorPipe = 2 };

class AttemptRun;

// What an attempt needs of the loop that runs it. An attempt does not know
// which mode runs it, except where a process-wide fact differs (shared()).
class AttemptContext {
 public:
  // Whether other attempts may share this process: then a child or an
  // orphan cannot be told to belong to one attempt by being ours.
  virtual bool shared() const = 0;
  // The job's pipe `fd`, whose events go to the attempt `serial`.
  virtual void Watch(int fd, uint64_t serial, Stream stream) = 0;
  // Before the fd is closed: a forked job holds a copy until its exec, which
  // would keep the registration (and its events) alive.
  virtual void Unwatch(int fd) = 0;
  // Before a job starts: whether a cancel is already pending for it (a
  // signal, or a host's cancel file).
  virtual bool CancelPending(const AttemptRun& attempt) = 0;
  // JobSpec::open_files_limit.
  virtual rlim_t job_open_files_limit() const = 0;
  // Reaps what has ended now (SIGCHLD, or before a result is written).
  virtual void Reap() = 0;
  // No child left at all (only meaningful for a single attempt).
  virtual bool children_left() const = 0;

 protected:
  ~AttemptContext() = default;
};

// Driven by the loop: Begin, then events (output, the main process's exit, a
// cancel) and Tick, until done().
class AttemptRun {
 public:
  // `serial`: the loop's name for it (Watch).
  AttemptRun(AttemptContext& context, uint64_t serial, std::string dir);
  AttemptRun(const AttemptRun&) = delete;
  AttemptRun& operator=(const AttemptRun&) = delete;
  ~AttemptRun();

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
  int unclaimed_errno() const { return control_.unclaimed_errno(); }
  const std::string& dir() const { return dir_; }
  pid_t main_pid() const { return job_.pid; }

 private:
  enum class Stop { kNone, kTimeout, kCancel };

  // The launch failure before the job starts (empty: none).
  std::string Prepare(Result<executor::files::AttemptSpec> parsed);
  void Start();
  void StopJob(Stop why, bool preempted);
  void Signal(int sig);
  bool TreeGone();
  // The main process is reaped, the rest of the tree gone, the pipes closed.
  bool Over() const {
    return main_reaped_ && tree_gone_ && job_.stdout_fd < 0 && job_.stderr_fd < 0 && job_.error_fd < 0;
  }
  void DrainPipe(int& fd, Stream stream);
  void ClosePipes();
  void Finish();
  void FinishWith(const executor::RunResult& result);

  AttemptContext& context_;
  const uint64_t serial_;
  const std::string dir_;
  AttemptOutput output_;  // stdout, stderr, supervisor.log
  ControlFiles control_;  // claim, state.json, result.json
  executor::files::AttemptSpec spec_;
  JobSetup setup_;  // account, work directory, containment
  JobProcess job_;
  executor::RunResult result_;  // job, attempt and start, until the end fills in the rest
  bool running_ = false;        // the job was started and is watched
  bool done_ = false;
  int exit_status_ = 0;

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

}  // namespace unisched::supervisor
