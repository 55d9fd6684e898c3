#pragma once
// Running attempts of jobs. The local executor starts one small supervisor
// process per attempt (unisched-supervisor); the supervisor outlives the
// daemon, runs the command contained and unprivileged, and leaves its result
// in a state file that the daemon collects, also after a restart.
//
// Every run is an attempt, identified by (job id, attempt). Launch is an
// idempotent handshake: the supervisor claims its attempt directory with an
// exclusive create before it runs anything, so a second launch of the same
// attempt never runs the command twice.

#include <cerrno>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/containment/containment.h"
#include "unisched/model/job.h"

namespace unisched::executor {

// The caps of a job's cgroup: the very struct containment applies.
using Limits = containment::Limits;

// A Unix account as numbers: what a job runs as when the daemon allocated
// its user's account (executor.user_accounts, docs/accounts.md), with no
// lookup by name on any node.
struct UnixIds {
  uint32_t uid = 0;              // 0: the user has no allocated account; the launch is refused
  uint32_t gid = 0;              // primary group: the job's project's
  std::vector<uint32_t> groups;  // supplementary: every project of the user
};

// A secret's value as one launch delivers it (docs/secrets.md): the file
// <secrets dir>/<name>, or the variable `env`. Only in memory and on the
// wire: never written to disk by the daemon, an agent or a supervisor.
struct SecretValue {
  std::string name;
  std::string value;
  std::string env;  // empty: a file
};

// The directory of a task's secret files, as the job sees it: a tmpfs
// mounted there in the job's own mount namespace (invisible to everyone
// else), under its work directory.
inline constexpr char kSecretsDirName[] = ".unisched-secrets";

// A shared file system as one launch sees it (config storage.shared,
// docs/data.md).
struct SharedMount {
  std::string path;   // on the node
  std::string mount;  // inside the job (== path: no bind needed unless read-only)
  bool read_only = false;
  std::string project;   // with project directories: the job's, <path>/<project>; "": none
  std::string variable;  // UNISCHED_SHARED_<NAME>: <mount>, or <mount>/<project>
};

// An object store as one launch stages with it (config
// storage.object_stores, docs/data.md): the keys are the daemon's
// decryption of its credential secrets for this launch, kept in memory and
// on the wire only, like SecretValue.
// One attempt's task, as the daemon and its agents name it.
struct AttemptRef {
  model::JobId job = 0;
  int attempt = 0;
  int task = 0;  // a gang's rank (LaunchSpec::task); absent on the wire: 0
  bool operator==(const AttemptRef&) const = default;
  auto operator<=>(const AttemptRef&) const = default;
};

struct StoreEndpoint {
  std::string name;
  std::string endpoint;
  std::string region;
  bool path_style = true;
  std::string access_key;
  std::string secret_key;
};

struct LaunchSpec {
  model::JobId job_id = 0;
  int attempt = 1;
  // Which of the attempt's tasks this is: 0 for the attempt's one process
  // (a batch script, or rank 0 of a gang), a gang's rank otherwise
  // (docs/execution.md, "Multi-node jobs"). (job, attempt, task) names a
  // launch everywhere; an attempt ends when all its tasks have.
  int task = 0;
  std::vector<std::string> argv;
  // A batch script (model::Job::script): written by the job's own account
  // as an executable file in its work directory (ScriptFileName), which
  // runs in argv[0]'s place, so that its #! line picks the interpreter and
  // argv[1..] are its arguments (docs/execution.md, "Batch scripts").
  // Empty: argv runs.
  std::string script{};
  // The directory the job starts in (Slurm's -D, model::Job::workdir);
  // empty: its work directory.
  std::string chdir{};
  // The complete environment of the job; nothing else is passed on.
  std::map<std::string, std::string> env;
  std::string unix_user;  // account to run as; empty: the daemon's own (only allowed when not root)
  // Set: run as these ids (unix_user is then the unisched user's name, for
  // messages and $USER); no lookup by name.
  std::optional<UnixIds> ids;
  int64_t walltime_seconds = 0;    // 0: unlimited
  int kill_grace_seconds = 10;     // cancel and timeout: SIGTERM .. SIGKILL
  int preempt_grace_seconds = 30;  // preemption: SIGTERM .. SIGKILL (the queue's preempt_grace_seconds)
  Limits limits;
  int64_t log_cap_bytes = 10 << 20;  // per stream
  // Copies of the task's stdout and stderr, uncapped, in files the job's
  // own account opens (appends to, creating them 0640): Slurm's -o and -e,
  // their patterns expanded for this task (docs/execution.md, "Output
  // files"). Empty: none. The same path for both: one file, both streams.
  std::string output_file{};
  std::string error_file{};
  std::string node;  // where it runs (its first allocated node): a local node or an agent's
  // The task's CPUs as logical ids of its node (its share of the
  // allocation's cpu_ids; UNISCHED_CPU_SET). Pinned to only where the
  // executor pins (LocalExecutorOptions::pin_cpus). Empty: no set.
  std::vector<int> cpu_set{};
  // Run in fresh network (loopback only), mount, UTS and IPC namespaces with
  // a read-only root, a private /tmp, no_new_privs and an empty capability
  // bounding set (pools[].sandbox, docs/execution.md).
  bool isolate = false;
  // Isolated jobs run as a uid of their own, leased from this range
  // (sandboxes.uid_base/uid_count/uid_lock_dir, docs/sandboxes.md).
  int64_t sandbox_uid_base = 0;
  int64_t sandbox_uid_count = 0;
  std::string sandbox_uid_lock_dir{};
  // The shared file systems of the job's pool.
  std::vector<SharedMount> shared{};
  // The job's secrets, decrypted by the daemon for this launch only.
  std::vector<SecretValue> secrets{};
  // Its data staging ({job_id} and {attempt} replaced), run by the executor
  // as root before the supervisor starts and after its result (docs/data.md;
  // ADR 0011), and the stores it names. Never passed to the supervisor.
  model::DataStaging data{};
  std::vector<StoreEndpoint> stores{};
};

// The name of a task's directory under its job's: the attempt number for
// task 0 (the attempt's only task unless it is a gang, and the name every
// attempt had before gangs), "<attempt>.<task>" for a gang's other ranks.
inline std::string TaskDirName(int attempt, int task) {
  return task == 0 ? std::to_string(attempt) : std::to_string(attempt) + "." + std::to_string(task);
}

// A job's TMPDIR on `node`, in its work directory (shared by the job's
// tasks and attempts on that node): "<work_dir>/tmp.<node>". The executor
// removes an empty one when the attempt is released; one holding files
// stays with the work directory.
inline std::string TmpDirPath(const std::string& work_dir, const std::string& node) {
  return work_dir + "/tmp." + node;
}
inline bool IsTmpDirName(std::string_view name) {
  return name.size() > 4 && name.substr(0, 4) == "tmp.";
}

// The file a task's batch script is written to, in its job's work
// directory: one per attempt and task, so that tasks sharing a node, and an
// old attempt still ending, never see another's being written. The
// supervisor removes it when its attempt ends.
inline std::string ScriptFileName(int attempt, int task) {
  return "unisched-script." + TaskDirName(attempt, task);
}

// The inverse of TaskDirName: (attempt, task), or nullopt for any other name.
inline std::optional<std::pair<int, int>> ParseTaskDirName(std::string_view name) {
  auto number = [](std::string_view digits) -> std::optional<int> {
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string_view::npos) {
      return std::nullopt;
    }
    return std::stoi(std::string(digits));
  };
  const size_t dot = name.find('.');
  const auto attempt = number(name.substr(0, dot));
  if (!attempt || *attempt <= 0) return std::nullopt;
  if (dot == std::string_view::npos) return std::make_pair(*attempt, 0);
  const auto task = number(name.substr(dot + 1));
  if (!task || *task <= 0) return std::nullopt;
  return std::make_pair(*attempt, *task);
}

enum class RunOutcome {
  kCompleted,     // exit status 0
  kFailed,        // non-zero exit or killed by a signal (not by us)
  kTimeout,       // wall time exceeded; we sent SIGTERM, grace, SIGKILL
  kCancelled,     // Cancel() asked it to stop
  kLaunchFailed,  // the command could not start (reason says why)
  kLost,          // the supervisor vanished without a result
};
std::string_view ToString(RunOutcome outcome);

// How an attempt's (or a task's, or a step's) outcome shows as a job state.
inline model::JobState JobStateOf(RunOutcome outcome) {
  switch (outcome) {
    case RunOutcome::kCompleted:
      return model::JobState::kCompleted;
    case RunOutcome::kTimeout:
      return model::JobState::kTimeout;
    case RunOutcome::kCancelled:
      return model::JobState::kCancelled;
    case RunOutcome::kFailed:
    case RunOutcome::kLaunchFailed:
    case RunOutcome::kLost:
      break;
  }
  return model::JobState::kFailed;
}

// How one task of a gang ended, as its attempt's result keeps it.
struct TaskEnd {
  int rank = 0;
  std::string node;
  RunOutcome outcome = RunOutcome::kLost;
  std::optional<int> exit_code;
  std::string reason;
  bool operator==(const TaskEnd&) const = default;
};

struct RunResult {
  model::JobId job_id = 0;
  int attempt = 0;
  int task = 0;  // LaunchSpec::task; a gang's whole result: 0, with `tasks`
  RunOutcome outcome = RunOutcome::kLost;
  std::optional<int> exit_code;  // 128+N when killed by signal N; none if it never started
  std::string reason;
  std::optional<Timestamp> started_at;
  std::optional<Timestamp> ended_at;
  model::RunUsage usage;
  // The agent node whose report this is, set by the daemon's agent hub from
  // the authenticated call (never read from the wire); empty: the local
  // executor. The controller applies it only to an attempt on that node.
  std::string reported_by;
  // kLaunchFailed only: the cause was the machine's for a moment (out of
  // descriptors, processes or memory: IsTransientErrno), not the job's, and
  // the command never ran. The daemon starts a new attempt after a short
  // backoff without counting it against max_retries (docs/policy/retries.md).
  // Absent from a result written before it existed: permanent.
  bool transient = false;
  // From a backend that places jobs itself (backend::Placement::kBackend):
  // the nodes it ran the attempt on, in its own names.
  std::vector<std::string> placed_on{};
  // A gang's result (more than one task): how each task ended, by rank.
  std::vector<TaskEnd> tasks{};
};

// Errors a launch may hit while the machine is short of descriptors
// (EMFILE, ENFILE), processes (EAGAIN) or memory (ENOMEM): nothing the job
// asked for is wrong, and the same launch works once the pressure is gone.
inline bool IsTransientErrno(int err) {
  return err == EMFILE || err == ENFILE || err == EAGAIN || err == ENOMEM;
}

// Launch errors of that kind carry this code (kind kUnavailable), so that
// whoever turns a failed Launch into a RunResult marks it transient.
inline constexpr const char* kTransientLaunchCode = "launch_transient";
inline Error TransientLaunchError(std::string message) {
  return {ErrorKind::kUnavailable, kTransientLaunchCode, std::move(message), {}};
}
// A failed Launch as the result that ends its attempt: kLaunchFailed with
// `reason_prefix` and the error's message, transient when the error is.
inline RunResult LaunchFailure(model::JobId job_id, int attempt, const Error& error,
                               const std::string& reason_prefix = {}) {
  RunResult r;
  r.job_id = job_id;
  r.attempt = attempt;
  r.outcome = RunOutcome::kLaunchFailed;
  r.reason = reason_prefix + error.message;
  r.transient = error.code == kTransientLaunchCode;
  return r;
}

// Where an attempt's task is in its data staging (docs/data.md): "staging_in"
// before its supervisor starts, "staging_out" after its result, with the
// bytes moved so far of those to move.
struct StagingProgress {
  model::JobId job_id = 0;
  int attempt = 0;
  int task = 0;
  std::string phase;
  int64_t bytes_done = 0;
  int64_t bytes_total = 0;
};

class Executor {
 public:
  // Called once per attempt that ends, from an executor thread, with no
  // executor lock held (it may call Launch, Cancel, Forget; not Shutdown).
  using ResultSink = std::function<void(RunResult)>;
  virtual ~Executor() = default;

  // Starts the attempt. Idempotent: a launch of an attempt that was already
  // launched runs nothing new. An error means nothing was started; its code
  // is kTransientLaunchCode when trying again later may work.
  virtual Status Launch(const LaunchSpec& spec) = 0;
  // SIGTERM to the whole process group of each of the attempt's tasks,
  // SIGKILL after the grace; their results arrive with outcome kCancelled.
  // Unknown or ended attempts: no-op.
  // preempt: the same, with the attempt's preempt grace instead (the daemon
  // decides what happens to the job: requeue or cancel).
  virtual void Cancel(model::JobId job_id, int attempt, bool preempt = false) = 0;
  // The same for some of the attempt's tasks only (a step's, when one of
  // them failed); the executor's others run on.
  virtual void CancelTasks(model::JobId job_id, int attempt, const std::vector<int>& tasks) = 0;
  // After a daemon restart, for an attempt the store records as running:
  // collects its result if it ended, adopts it if its supervisor still runs,
  // and launches it if it never started. The result arrives through the sink.
  virtual void Recover(const LaunchSpec& spec) = 0;
  // The capped output file of an attempt's task ("stdout" or "stderr").
  virtual std::string LogPath(model::JobId job_id, int attempt, int task, std::string_view stream) const = 0;
  // Removes an attempt's files (retention); attempt 0: every attempt of the job.
  virtual void Forget(model::JobId job_id, int attempt) = 0;
  // The attempt's result is durably recorded by the caller: its control
  // files (claim, state, result) are no longer needed to recover it, and may
  // go now rather than at retention. Its output stays until Forget.
  virtual void Release(model::JobId job_id, int attempt) {
    (void)job_id;
    (void)attempt;
  }
  // After a restart, before any Recover or Launch: Release for every attempt
  // that left control files here except those in `running` (the attempts
  // the store records as running, which Recover collects). The store holds
  // the others' ends (the daemon died between a result's commit and its
  // Release) or no longer their job. An attempt whose supervisor still
  // holds its claim is left alone.
  virtual void ReleaseAllExcept(const std::set<std::pair<model::JobId, int>>& running) { (void)running; }
  // Stops watching; running supervisors keep running.
  virtual void Shutdown() = 0;
  // The tasks staging data now.
  virtual std::vector<StagingProgress> Staging() const { return {}; }
  // Attempts recovered without the object stores' keys they need for a
  // stage-out still to come (an agent keeps none on its disk), and their
  // keys when they arrive (the daemon sends the launch again: `spec`).
  virtual std::vector<AttemptRef> NeedingStoreKeys() const { return {}; }
  virtual void ProvideStoreKeys(const LaunchSpec& spec) { (void)spec; }
};

struct LocalExecutorOptions {
  std::string runs_dir;         // supervisor state: <runs_dir>/<job>/<attempt>/ (root only; may be a tmpfs)
  std::string logs_dir;         // stdout, stderr, supervisor.log: <logs_dir>/<job>/<attempt>/; empty: runs_dir
  std::string work_root;        // job working directories: <work_root>/<job>/ (owned by the job's user)
  std::string supervisor_path;  // the unisched-supervisor executable
  bool use_cgroups = true;
  // A finished job's work directory that is not empty is removed this long
  // after its last attempt ended (an empty one at once); zero: kept until
  // the job's record goes (Forget).
  std::chrono::seconds work_dir_retention{std::chrono::hours(24 * 7)};
  // Pin each task to its cpu_set (sched_setaffinity), logical id k being
  // the k-th CPU this process may run on (modulo their count): for a node
  // that is a machine of its own, as an agent's is (executor.pin_cpus, the
  // agent's --pin-cpus; docs/execution.md).
  bool pin_cpus = false;
  // The node's cache of staged objects (docs/data.md), root's only; empty:
  // <work_root>/.stage-cache. Least recently used objects go above the cap.
  std::string stage_cache_dir{};
  int64_t stage_cache_bytes = int64_t{10} << 30;
};

// A local executor that stages data in and out around its attempts.
std::unique_ptr<Executor> MakeLocalExecutor(const LocalExecutorOptions& options, Executor::ResultSink sink);

// executor.work_dir_retention_hours (and the agent's flag) as a duration.
inline std::chrono::seconds WorkDirRetention(double hours) {
  return std::chrono::seconds(static_cast<int64_t>(hours * 3600));
}

}  // namespace unisched::executor
