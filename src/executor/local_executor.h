#pragma once
// LocalExecutor: one unisched-supervisor per attempt, watched through its
// process (while it is our child) and through its attempt directory (after
// a daemon restart). See executor.h and docs/execution.md. Declared here,
// not in the public header, because its members are defined in one file per
// concern: local_executor.cc (launch, cancel, recover), attempt_watcher.cc
// (seeing attempts end) and attempt_file_removal.cc (removing their files).

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "executor/account_resolver.h"
#include "executor/attempt_files.h"
#include "executor/attempt_results.h"
#include "executor/supervisor_hosts.h"
#include "unisched/executor/executor.h"

namespace unisched::executor {

class LocalExecutor final : public Executor {
 public:
  using Key = AttemptKey;

  LocalExecutor(LocalExecutorOptions options, ResultSink sink);
  ~LocalExecutor() override;

  Status Launch(const LaunchSpec& spec) override;
  void Cancel(model::JobId job_id, int attempt, bool preempt) override;
  void CancelTasks(model::JobId job_id, int attempt, const std::vector<int>& tasks) override;
  void Recover(const LaunchSpec& spec) override;
  std::string LogPath(model::JobId job_id, int attempt, int task, std::string_view stream) const override;
  void Forget(model::JobId job_id, int attempt) override;
  void Release(model::JobId job_id, int attempt) override;
  void ReleaseAllExcept(const std::set<std::pair<model::JobId, int>>& running) override;
  void Shutdown() override;

  // runs_dir (root only) and work_root (traversable by every job account,
  // not listable), once per executor; missing parents above them are made
  // 0711. Called by every launch, and by staging before its first write
  // into a work directory.
  Status MakeRoots();
  // Whether a supervisor ever took this task: its claim, or its output
  // directory (which outlives a runs_dir on a tmpfs lost with a reboot).
  bool EverStarted(model::JobId job_id, int attempt, int task) const {
    return Exists(AttemptDir(job_id, attempt, task) + "/" + files::kClaim) || Exists(LogsDir(job_id, attempt, task));
  }

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
  std::string AttemptDir(model::JobId job_id, int attempt, int task = 0) const {
    return JobRunsDir(job_id) + "/" + TaskDirName(attempt, task);
  }
  std::string AttemptDir(const Key& key) const { return AttemptDir(key.job_id, key.attempt, key.task); }
  std::string WorkDir(model::JobId job_id) const { return options_.work_root + "/" + std::to_string(job_id); }
  // Output (stdout, stderr, supervisor.log) in a directory of its own, or
  // beside the control files.
  bool SeparateLogs() const { return !options_.logs_dir.empty() && options_.logs_dir != options_.runs_dir; }
  std::string JobLogsDir(model::JobId job_id) const {
    return (SeparateLogs() ? options_.logs_dir : options_.runs_dir) + "/" + std::to_string(job_id);
  }
  std::string LogsDir(model::JobId job_id, int attempt, int task = 0) const {
    return JobLogsDir(job_id) + "/" + TaskDirName(attempt, task);
  }
  // Every task directory the job has (runs or logs), as (attempt, task).
  std::set<std::pair<int, int>> TaskDirs(model::JobId job_id) const;
  // Forget of one task: its files, and the job's when it was the last.
  void ForgetTask(const Key& key);
  // Removes the work directories of ended jobs older than the retention
  // (docs/execution.md#where-the-files-are). Run by the sweeper thread,
  // SweepLoop, until Shutdown.
  void SweepWorkDirs();
  void SweepLoop();
  // Whether an attempt of the job is tracked (running, or launching: Launch
  // tracks it before its supervisor makes the job's directories). REQUIRES mu_.
  bool AnyAttemptTracked(model::JobId job_id) const;
  // Whether any task of the job holds a claim in runs_dir: an attempt that
  // runs, or whose result is not recorded yet.
  bool AnyClaim(model::JobId job_id) const;
  // The keys of the attempt's tasks this executor tracks. REQUIRES mu_.
  std::vector<Key> TasksOf(model::JobId job_id, int attempt) const;
  static bool Exists(const std::string& path);

  Result<std::optional<files::ResolvedAccount>> Check(const LaunchSpec& spec);
  // claim, state.json, result.json, cancel, then the attempt's directory and
  // its job's when empty.
  void RemoveControlFiles(const Key& key);
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
  // The task a host's notice names (<runs_dir>/<job>/<attempt>[.<task>]).
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
  std::thread sweeper_;  // only with a work_dir_retention
  std::mutex mu_;
  std::condition_variable sweep_cv_;  // with mu_: stopping_ wakes the sweeper
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
  AccountResolver accounts_;
  std::once_flag shutdown_once_;
};

}  // namespace unisched::executor
