#pragma once
// A job, its attempts and its state machine.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unisched/common/time.h"
#include "unisched/model/cluster.h"
#include "unisched/model/data_staging.h"
#include "unisched/model/dependency.h"
#include "unisched/model/job_array.h"
#include "unisched/model/resources.h"

namespace unisched::model {

using JobId = int64_t;

enum class JobState { kPending, kHeld, kRunning, kCompleted, kFailed, kCancelled, kTimeout, kNodeFail };
std::string_view ToString(JobState state);  // "PENDING", ... as in the contract
std::optional<JobState> ParseJobState(std::string_view text);
// COMPLETED, FAILED, CANCELLED, TIMEOUT and NODE_FAIL are terminal and final.
bool IsTerminal(JobState state);
// The transition table of the contract. A terminal state never changes;
// RUNNING may go back to PENDING (requeue: preempted, node failed, retry).
bool CanTransition(JobState from, JobState to);

struct Workload {
  WorkloadKind kind = WorkloadKind::kHpc;
  // Further workload keys (precision, gpu_memory_gb, ...). Scalars only; the
  // API keeps their text form ("fp64", "80", "true").
  std::map<std::string, std::string> features;
  bool operator==(const Workload&) const = default;
};

struct PendingReason {
  std::string code;  // Resources, Priority, NodeLabelsMismatch, Held, ...
  std::string message;
  bool operator==(const PendingReason&) const = default;
};

// The named terms of a pending job's priority (docs/policy/priority.md);
// they sum to the priority the scheduler orders by.
struct PriorityFactors {
  int64_t fairshare = 0;
  int64_t age = 0;
  int64_t tier = 0;
  int64_t size = 0;
  int64_t adjustment = 0;  // the job's own `priority`
  int64_t Total() const { return fairshare + age + tier + size + adjustment; }
  bool operator==(const PriorityFactors&) const = default;
};

// What the last scheduling cycle said about a job left pending. With
// 100,000 jobs waiting, most share the same reasons: they are shared, and the
// queue position is a number until someone asks.
struct PendingInfo {
  std::shared_ptr<const std::vector<PendingReason>> own;  // its own reasons, most useful first
  int jobs_ahead = 0;                                     // pending jobs of its pool ordered before it
  std::shared_ptr<const std::string> pool;
  PriorityFactors priority;
  std::optional<Timestamp> estimated_start;  // where a reservation holds room for it
  // In a pool that plans with predicted run times: the run it is planned
  // with (scheduler::JobFacts::predicted_run_seconds); 0 where none.
  int64_t predicted_run_seconds = 0;

  // The ordered list users see: its own reasons, then Priority "N jobs ahead in POOL".
  std::vector<PendingReason> Reasons() const;
};

// The pending information of many jobs: appended during a cycle, sorted by
// id once (Seal), then looked up by binary search. Cheaper to build every
// cycle than a hash map of 100,000 entries.
class PendingInfos {
 public:
  using value_type = std::pair<JobId, PendingInfo>;
  using const_iterator = std::vector<value_type>::const_iterator;

  void reserve(size_t n) { items_.reserve(n); }
  void emplace(JobId id, PendingInfo info) {
    items_.emplace_back(id, std::move(info));
    sorted_ = false;
  }
  void Seal();
  // Works before Seal too (by a linear scan).
  const_iterator find(JobId id) const;
  size_t count(JobId id) const { return find(id) == end() ? 0 : 1; }
  const PendingInfo& at(JobId id) const;  // throws std::out_of_range
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

 private:
  std::vector<value_type> items_;
  bool sorted_ = true;
};

// Resource use of one run, as the supervisor measured it.
struct RunUsage {
  double wall_seconds = 0;
  double user_cpu_seconds = 0;
  double system_cpu_seconds = 0;
  int64_t max_rss_kb = 0;
  // Bytes its stage-in fetched and its stage-out sent (docs/data.md); a
  // node-cache hit moves nothing.
  int64_t network_bytes_in = 0;
  int64_t network_bytes_out = 0;
  bool operator==(const RunUsage&) const = default;
};

// How a job's attempt starts on its nodes (docs/execution.md, "Multi-node
// jobs"): its command once, on its first node, which starts work on the
// others with `unisched step` (as sbatch does), or as a gang of
// tasks_per_node tasks on every node at once (as srun and torchrun do).
enum class LaunchMode { kBatch, kPerNode };
std::string_view ToString(LaunchMode mode);  // "batch", "per_node"
std::optional<LaunchMode> ParseLaunchMode(std::string_view text);

// How one task of a gang ended: its rank, node, state and exit code.
struct TaskEnd {
  int rank = 0;
  std::string node;
  JobState state = JobState::kCompleted;
  std::optional<int> exit_code;
  std::string reason;
  bool operator==(const TaskEnd&) const = default;
};

// One run of a job; (job id, number) identifies it everywhere.
struct Attempt {
  int number = 1;
  Allocation allocation;
  JobState state = JobState::kRunning;  // RUNNING while it runs, then how it ended
  // When the daemon started the attempt (its allocation began): set once, at
  // the start, and never changed after.
  std::optional<Timestamp> started_at;
  // When its processes started on the node, as its supervisor recorded it
  // (the node's clock): known once the attempt has reported its end.
  std::optional<Timestamp> process_started_at;
  std::optional<Timestamp> ended_at;
  std::optional<int> exit_code;
  std::string reason;
  std::optional<RunUsage> usage;
  // FAILED because it could not be launched for a moment (the machine was
  // out of descriptors, processes or memory; executor::RunResult::transient):
  // requeued with state_reason LaunchRetry, never counted as a retry.
  bool transient = false;
  // In a pool whose backend places jobs (no allocation here): the nodes the
  // backend reports it ran the attempt on, in its own names.
  std::vector<std::string> placed_on{};
  // A gang's attempt (launch per_node): how each task ended, by rank; the
  // attempt's exit code is the highest of theirs.
  std::vector<TaskEnd> tasks{};
  bool operator==(const Attempt&) const = default;

  // The start of the run as measured with ended_at: both on the node's clock
  // once the supervisor reported, the daemon's until then.
  std::optional<Timestamp> RunStart() const { return process_started_at ? process_started_at : started_at; }
};

// A batch script's text (docs/slurm-users.md): fixed once submitted, and
// shared by every copy of its job rather than copied with it, because the
// daemon copies active jobs often (views, batches, lists) and a script may
// be up to kMaxScriptBytes (batch_script.h).
class ScriptText {
 public:
  ScriptText() = default;
  explicit ScriptText(std::string text)
      : text_(text.empty() ? nullptr : std::make_shared<const std::string>(std::move(text))) {}
  // "" for a job that runs its command.
  const std::string& str() const {
    static const std::string kNone;
    return text_ ? *text_ : kNone;
  }
  bool empty() const { return text_ == nullptr; }
  bool operator==(const ScriptText& other) const { return text_ == other.text_ || str() == other.str(); }

 private:
  std::shared_ptr<const std::string> text_;
};

// A secret of the job's project the job gets at launch (docs/secrets.md):
// as the file $UNISCHED_SECRETS_DIR/<name> on a tmpfs only the job sees,
// or, when `env` names a variable, in that variable. Only the name is kept
// with the job; the value is read, decrypted and handed over per launch.
struct SecretUse {
  std::string name;
  std::string env;  // empty: a file
  bool operator==(const SecretUse&) const = default;
};

// Why `name` cannot name a secret, or "" when it can: 1 to 128 letters,
// digits, '.', '_' and '-', starting with a letter or digit (it is also the
// secret's file name in the job's secrets directory).
std::string CheckSecretName(std::string_view name);
inline constexpr size_t kMaxSecretsPerJob = 64;

struct Routing {
  std::string pool;
  std::string queue;
  std::string reason;
  bool operator==(const Routing&) const = default;
};

struct Job {
  JobId id = 0;
  std::string name;
  std::string user;
  std::string project;
  std::string queue;
  std::string pool;
  JobState state = JobState::kPending;
  std::string state_reason;
  Workload workload;
  ResourceRequest resources;
  Labels constraints;  // node labels the job requires
  LaunchMode launch = LaunchMode::kBatch;
  // What runs: `command`, or, for a batch script (`script` not empty), the
  // script written to a file in the job's work directory and executed with
  // command[1..] as its arguments; command[0] then only names the script
  // (sbatch's SCRIPT, shown as the job's command) and is replaced by the
  // file's path at launch (docs/execution.md, "Batch scripts").
  std::vector<std::string> command;
  ScriptText script;
  std::map<std::string, std::string> env;
  std::vector<SecretUse> secrets;
  // Objects copied in before the job starts and files copied out after it
  // ends (docs/data.md).
  DataStaging data;
  // The directory the job starts in (Slurm's -D): absolute; empty: its
  // work directory <work_root>/<job>.
  std::string workdir;
  // Where each task's stdout and stderr are copied (Slurm's -o and -e): an
  // absolute pattern (output_pattern.h), a relative one made absolute when
  // submitted, under `workdir` as in Slurm, else under executor.output_dir. error_file empty: stderr goes to
  // output_file too; both empty: the captured log only.
  std::string output_file;
  std::string error_file;
  int priority = 0;
  Routing routing;
  std::optional<int> exit_code;
  std::vector<Attempt> attempts;
  Timestamp submitted_at{};
  std::optional<Timestamp> started_at;
  std::optional<Timestamp> ended_at;
  std::string config_version;  // the config the job was admitted under
  bool cancel_requested = false;
  // Requeue asked for while RUNNING (POST /v1/jobs/{id}/requeue): its
  // attempt is being stopped; when it has, the job goes back to PENDING.
  bool requeue_requested = false;
  // Preemption: while set, this RUNNING job is being stopped to make room for
  // that job. preempted_by lists every job that ever preempted this one; it
  // may never preempt them back (no preemption loops).
  std::optional<JobId> preempting_for;
  std::vector<JobId> preempted_by;
  // When the running attempt was asked to stop (cancel or preemption): its
  // room is free by then plus the grace at the latest.
  std::optional<Timestamp> stop_requested_at;
  // Retries: the job's own limit (overrides its queue's max_retries), and
  // while a retry waits out its backoff, when it may start.
  std::optional<int> max_retries;
  std::optional<Timestamp> eligible_at;
  // Jobs it waits for (Slurm's --dependency; model/dependency.h): checked
  // until its first start, never after (a requeued job has met it).
  Dependency dependency;
  // An array's parent (its tasks wait in it until they start), or a task
  // of an array (model/job_array.h, docs/arrays.md); neither: an ordinary job.
  std::optional<JobArray> array;
  std::optional<ArrayTask> array_task;

  // The latest attempt, or nullptr before the first start.
  const Attempt* CurrentAttempt() const { return attempts.empty() ? nullptr : &attempts.back(); }
  Attempt* CurrentAttempt() { return attempts.empty() ? nullptr : &attempts.back(); }
  // Names of the nodes of the current attempt (those its backend reported,
  // in a pool whose backend places jobs).
  std::vector<std::string> NodeNames() const;
  bool operator==(const Job&) const = default;
};

}  // namespace unisched::model
