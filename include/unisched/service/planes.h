#pragma once
// What the job service (and the API's read endpoints) need of the daemon's
// live parts: the control plane (the controller, owner of the live state)
// and the sandbox plane (the sandbox manager, owner of the instances). Both
// are implemented in src/daemon; every method is safe from any thread.

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/config/config.h"
#include "unisched/model/fit.h"
#include "unisched/model/job.h"
#include "unisched/policy/quota.h"

namespace unisched::service {

// What the last cycle said about each pending job: reasons, priority
// factors, estimated start.
using PendingInfoMap = model::PendingInfos;

// What API sandboxes hold, per (queue, project, user).
using SandboxHolds = std::map<std::tuple<std::string, std::string, std::string>, policy::Amount>;

// The caps of one API sandbox instance: CPUs and memory of its cgroup, the
// longest an exec may run.
struct SandboxLimits {
  int64_t cpus = 1, memory_mb = 512, timeout_seconds = 300;
  bool operator==(const SandboxLimits&) const = default;
};

// What the controller publishes after every change: an immutable view for
// readers (GET /v1/nodes, /v1/pools, /v1/queues, pending reasons) and for
// admission (quotas that reject, budgets).
struct ClusterView {
  struct Node {
    model::NodeUsage usage;
    std::string reason;                         // why drained/down
    std::optional<Timestamp> last_heartbeat{};  // agent nodes: its agent's last heartbeat
    // Running nothing since then (its last allocation's end, or the
    // daemon's start); unset while it runs something.
    std::optional<Timestamp> idle_since{};
  };
  std::vector<Node> nodes;
  std::map<std::string, int> pending_by_queue;
  std::map<std::string, int> running_by_queue;
  // Shared between views until the next scheduling cycle replaces it.
  std::shared_ptr<const PendingInfoMap> pending = std::make_shared<PendingInfoMap>();
  // What running jobs and API sandboxes hold per quota scope.
  policy::QuotaTally running_usage;
  // The API sandboxes' part of running_usage, as the controller knows them
  // (shared between views until a sandbox begins or ends).
  std::shared_ptr<const SandboxHolds> sandbox_holds = std::make_shared<SandboxHolds>();
  // Projects with a budget: their use in the current period.
  std::map<std::string, policy::BudgetUse> budget_use;
  // Active job arrays: their first task's id -> the array's (parent's) id,
  // so a task that has not started (no row of its own) is found by its id.
  // Shared between views until an array begins or ends.
  std::shared_ptr<const std::map<model::JobId, model::JobId>> array_parents =
      std::make_shared<std::map<model::JobId, model::JobId>>();
};

// Steps: commands started inside a running job on its nodes (`unisched
// step`, like srun inside an sbatch script), docs/execution.md "Steps".
struct StepRequest {
  std::vector<std::string> command;
  std::optional<int> nodes;                // the first N of the job's nodes; default all (or node_names')
  std::optional<int> tasks_per_node;       // default the job's
  std::vector<std::string> node_names;     // these of the job's nodes instead
  std::map<std::string, std::string> env;  // added to the job's environment
};
struct StepView {
  model::JobId job_id = 0;
  int attempt = 0;
  int step = 0;  // 1, 2, ... within the attempt
  model::JobState state = model::JobState::kRunning;
  std::optional<int> exit_code;  // the highest of its tasks'
  std::string reason;
  std::vector<std::string> nodes;  // by rank
  int tasks_per_node = 1;
  std::vector<model::TaskEnd> tasks;  // once ended: how each task did
  Timestamp started_at{};
  std::optional<Timestamp> ended_at;
};

// Rank r of step s runs as task s * kStepTaskStride + r of its attempt
// (executor::LaunchSpec::task); the attempt's own tasks (its batch script
// or gang) are step 0.
inline constexpr int kStepTaskStride = 1 << 16;

class StepPlane {
 public:
  virtual ~StepPlane() = default;
  // Starts a step of the job's running attempt (`attempt` 0: whichever
  // runs; else only that one, as a job token names it). `done` gets the
  // step as started, or NotFound / Conflict (not running, another attempt)
  // / Unprocessable (nodes it does not have).
  virtual void StartStep(model::JobId job, int attempt, StepRequest request,
                         std::function<void(Result<StepView>)> done) = 0;
  virtual Result<StepView> GetStep(model::JobId job, int step) const = 0;
};

// The control side of the daemon: the controller.
class ControlPlane {
 public:
  // kRequeue: a RUNNING job's attempt is stopped and the job goes back to
  // PENDING (a PENDING or HELD job is left as it is: it already waits).
  enum class JobAction { kCancel, kHold, kRelease, kRequeue };
  // What an update of a waiting job sets (service::PlanJobUpdate made it).
  struct JobChange {
    std::string queue, pool, routing_reason, config_version;
    int64_t walltime_seconds = 0;
    int priority = 0;
    std::string summary;  // "time limit 3600 -> 600 s; priority 0 -> -5" for its event
  };
  virtual ~ControlPlane() = default;
  // A job was durably committed; the scheduler takes it from here. Called
  // before the 201 is sent, so later requests about it are ordered after it.
  virtual void JobCommitted(model::Job job) = 0;
  // Cancel/hold/release; done gets the job as committed after the action, or
  // NotFound / Conflict (terminal job, wrong state).
  virtual void ControlJob(model::JobId id, JobAction action, std::string actor,
                          std::function<void(Result<model::Job>)> done) = 0;
  // Applies a change to a PENDING or HELD job; done gets the job as
  // committed, or NotFound / Conflict (it started or ended meanwhile).
  virtual void UpdateJob(model::JobId id, JobChange change, std::string actor,
                         std::function<void(Result<model::Job>)> done) {
    (void)id, (void)change, (void)actor;
    done(Error::Unavailable("this control plane does not update jobs"));
  }
  // Drain (drain=true) or resume a node; done gets the node's view.
  virtual void SetNodeState(std::string node, bool drain, std::string reason, std::string actor,
                            std::function<void(Result<ClusterView::Node>)> done) = 0;
  virtual std::shared_ptr<const ClusterView> View() const = 0;
  // Where a running job is in its data staging (docs/data.md): "staging_in"
  // or "staging_out" with the bytes moved of those to move, summed over its
  // tasks; nullopt when none of its tasks stages now.
  struct Staging {
    std::string phase;
    int64_t bytes_done = 0;
    int64_t bytes_total = 0;
  };
  virtual std::optional<Staging> StagingOf(model::JobId id) const {
    (void)id;
    return std::nullopt;
  }
  // An API sandbox holding `amount` (service::SandboxAmount) began (sign
  // +1) or ended (-1) in `queue`: it counts against max_concurrency and the
  // quotas like a running job (docs/sandboxes.md).
  virtual void CountSandbox(const std::string& queue, const std::string& project, const std::string& user,
                            const policy::Amount& amount, int sign) {
    (void)queue, (void)project, (void)user, (void)amount, (void)sign;
  }
};

// Sandboxes for agent tool calls (docs/sandboxes.md): the sandbox manager.
// Views are the JSON of the contract; `done` may be called on another thread.
class SandboxPlane {
 public:
  // A create the job service admitted (service/admission.h): the queue, the
  // pool and the limits are final.
  struct CreateRequest {
    std::string user, project, queue, pool, image;
    SandboxLimits limits;
    std::optional<int64_t> idle_timeout_seconds;
  };
  struct ExecRequest {
    std::vector<std::string> argv;
    std::string stdin_data;
    std::map<std::string, std::string> env;
    std::optional<int64_t> timeout_seconds;
  };
  virtual ~SandboxPlane() = default;
  // Waits for a slot (max_concurrency and the quotas, counted with the
  // running jobs), starts the instance, commits the sandbox and the audit
  // record of `actor`, then done (201).
  virtual void Create(CreateRequest request, std::string actor, std::function<void(Result<nlohmann::json>)> done) = 0;
  // What running sandboxes and creates given a slot hold now, per (queue,
  // project, user): exact and current (admission counts them with the jobs).
  virtual SandboxHolds Holds() const = 0;
  virtual Result<nlohmann::json> Get(int64_t id) const = 0;
  virtual nlohmann::json List(bool active_only) const = 0;
  virtual void Exec(int64_t id, ExecRequest request, std::string actor,
                    std::function<void(Result<nlohmann::json>)> done) = 0;
  virtual void PutFile(int64_t id, std::string path, std::string data, std::string actor,
                       std::function<void(Result<nlohmann::json>)> done) = 0;
  virtual void GetFile(int64_t id, std::string path, std::function<void(Result<std::string>)> done) = 0;
  virtual void Delete(int64_t id, std::string actor, std::function<void(Result<nlohmann::json>)> done) = 0;
  virtual nlohmann::json ListImages() const = 0;
  virtual void AddImage(config::ImageSpec image, std::string actor,
                        std::function<void(Result<nlohmann::json>)> done) = 0;
  virtual void RollbackImage(std::string name, std::string actor, std::function<void(Result<nlohmann::json>)> done) = 0;
};

// Live config versions (docs/config-versions.md): the daemon's config
// keeper. Answers are the JSON of the contract; every method is synchronous
// (an admin's call; the store commits before it returns).
class ConfigPlane {
 public:
  struct ApplyRequest {
    std::string text;          // the whole YAML config
    std::string canary_queue;  // non-empty: tried on this queue only
    std::string comment;
    bool dry_run = false;  // only validate and show the impact
  };
  virtual ~ConfigPlane() = default;
  // The current version (its text and number, and any canary); or version
  // `number` when given.
  virtual Result<nlohmann::json> Show(std::optional<int64_t> number) = 0;
  virtual Result<nlohmann::json> Versions(int limit) = 0;
  virtual Result<nlohmann::json> Apply(const ApplyRequest& request, const std::string& actor) = 0;
  // With a canary: ends it (its queue back on the current version).
  // Otherwise: `number` (by default the version before the current) becomes
  // current again.
  virtual Result<nlohmann::json> Rollback(std::optional<int64_t> number, const std::string& actor) = 0;
  // The canary's version becomes the current one for every queue.
  virtual Result<nlohmann::json> Promote(const std::string& actor) = 0;
};

}  // namespace unisched::service
