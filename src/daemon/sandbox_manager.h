#pragma once
// The sandbox manager (docs/sandboxes.md): API sandboxes for agent tool calls.
// It owns the instances (sandbox::Instance), the warm pool per image, the
// images and their versions, admission against the queue's max_concurrency,
// idle reclaim (scale_in_idle_seconds), and the records: each sandbox in the
// store, each exec an event, each instance's life in the ledger as
// instance_seconds.
//
// Blocking work (starting an instance, an exec) runs on threads of its own,
// never on the caller's (HTTP) thread.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "unisched/config/config.h"
#include "unisched/metrics/metrics.h"
#include "unisched/policy/quota.h"
#include "unisched/sandbox/instance.h"
#include "unisched/service/planes.h"
#include "unisched/store/store.h"

namespace unisched::daemon {

class SandboxManager final : public service::SandboxPlane {
 public:
  SandboxManager(const config::Config& config, store::Store& store, metrics::Metrics& metrics, const Clock& clock,
                 service::ControlPlane& control, std::string state_dir, std::string init_path);
  ~SandboxManager() override;

  // Registers the config's images, ends the sandboxes a previous run left
  // (state lost), starts the reaper and the warm pool.
  Status Start();
  // Ends every sandbox (state stopped, charged to now) and every warm instance.
  void Stop();

  // service::SandboxPlane
  void Create(CreateRequest request, std::string actor, std::function<void(Result<nlohmann::json>)> done) override;
  service::SandboxHolds Holds() const override;
  Result<nlohmann::json> Get(int64_t id) const override;
  nlohmann::json List(bool active_only) const override;
  void Exec(int64_t id, ExecRequest request, std::string actor,
            std::function<void(Result<nlohmann::json>)> done) override;
  void PutFile(int64_t id, std::string path, std::string data, std::string actor,
               std::function<void(Result<nlohmann::json>)> done) override;
  void GetFile(int64_t id, std::string path, std::function<void(Result<std::string>)> done) override;
  void Delete(int64_t id, std::string actor, std::function<void(Result<nlohmann::json>)> done) override;
  nlohmann::json ListImages() const override;
  void AddImage(config::ImageSpec image, std::string actor, std::function<void(Result<nlohmann::json>)> done) override;
  void RollbackImage(std::string name, std::string actor, std::function<void(Result<nlohmann::json>)> done) override;

 private:
  using Limits = service::SandboxLimits;
  struct ImageVersion {
    std::string name, version, rootfs, created_by;
    std::vector<std::pair<std::string, std::string>> binds;
    Timestamp created_at{};
  };
  // A started instance and what it was started as.
  struct Started {
    std::shared_ptr<sandbox::Instance> instance;
    std::string queue;
    Limits limits;
  };
  struct Sandbox {
    int64_t id = 0;
    std::string user, project, queue, pool, node, image, image_version, state = "running", end_reason;
    Limits limits;
    int64_t idle_timeout_seconds = 0;
    Timestamp created_at{};
    Timestamp charged_until{};  // the ledger holds its life up to here (interim entries)
    std::optional<Timestamp> ended_at;
    int64_t execs = 0;
    int64_t uid = 0;
    std::string instance_name;
    bool warm_start = false;
    std::shared_ptr<sandbox::Instance> instance;
    std::chrono::steady_clock::time_point last_active{};
    int busy = 0;
    bool ending = false;
  };

  // Runs fn on a thread of its own; Stop waits for all of them.
  void Spawn(std::function<void()> fn);
  Result<Started> StartInstance(const ImageVersion& image, const std::string& queue, const Limits& limits);
  Result<ImageVersion> ResolveImage(const std::string& reference) const;  // REQUIRES: mu_
  nlohmann::json ViewOf(const Sandbox& s) const;
  // The view of a sandbox from its stored record.
  static Result<nlohmann::json> StoredView(const store::SandboxRow& row);
  nlohmann::json ImageView(const std::string& name) const;  // REQUIRES: mu_
  store::SandboxRow RowOf(const Sandbox& s) const;
  // Destroys its instance and commits its end (state, ledger, event, audit);
  // then done. `s` is already out of active_.
  void EndSandbox(std::shared_ptr<Sandbox> s, std::string state, std::string reason, std::string actor,
                  std::function<void(Result<nlohmann::json>)> done);
  // The running sandbox `id`, marked busy (a call in progress is never
  // reclaimed); Conflict when it is not running.
  Result<std::shared_ptr<Sandbox>> Acquire(int64_t id);
  // One request to its instance, then the busy mark released and the idle
  // clock restarted: a broken instance ends the sandbox (EndBroken), an
  // error answer of the init becomes an Error.
  Result<nlohmann::json> CallInstance(const std::shared_ptr<Sandbox>& s, const nlohmann::json& request, int timeout_ms,
                                      bool exec);
  // A call found the instance broken: the sandbox ends as failed, unless it
  // is ending already.
  void EndBroken(const std::shared_ptr<Sandbox>& s, const std::string& reason);
  // What running sandboxes and creates given a slot hold.  REQUIRES: mu_
  service::SandboxHolds OwnHolds() const;
  // At start: work directories and cgroups of instances of a dead daemon.
  void RemoveLeftovers();
  // One ledger entry of its instance_seconds over [from, to).
  store::LedgerEntry ChargeEntry(const Sandbox& s, Timestamp from, Timestamp to, bool final, Timestamp now) const;
  // Interim entries of every active sandbox up to now (every
  // store.accounting_interval_seconds, from the reaper).
  void ChargeRunning();
  void ReaperLoop();
  void RefillWarm();
  void PublishMetrics();  // REQUIRES: mu_
  // The cgroup caps of an instance with these limits.
  containment::Limits ContainmentLimits(const Limits& limits) const;

  const config::Config& config_;
  store::Store& store_;
  metrics::Metrics& metrics_;
  const Clock& clock_;
  service::ControlPlane& control_;
  std::string sandboxes_dir_;
  std::string init_path_;
  std::string name_prefix_;  // host-unique per daemon run: cgroup and directory names
  bool isolation_available_ = false;

  mutable std::mutex mu_;
  std::condition_variable slots_cv_;  // a sandbox ended: a waiting create may go on
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  int64_t next_id_ = 1;
  int64_t next_instance_ = 1;
  std::map<int64_t, std::shared_ptr<Sandbox>> active_;
  std::set<std::shared_ptr<Sandbox>> admitted_;                        // creates given a slot, not yet committed
  std::map<std::string, std::map<std::string, ImageVersion>> images_;  // name -> version -> image
  std::map<std::string, std::vector<std::string>> image_stack_;        // name -> current versions, last current
  std::map<std::string, int> warm_target_;                             // name -> instances kept warm
  std::map<std::string, std::deque<Started>> warm_;                    // name:version -> idle instances
  std::map<std::string, int> warm_starting_;                           // name:version -> starts under way

  std::mutex threads_mu_;
  std::condition_variable threads_cv_;
  int threads_running_ = 0;
  std::thread reaper_;
};

}  // namespace unisched::daemon
