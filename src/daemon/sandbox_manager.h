#pragma once
// The sandbox manager (docs/sandboxes.md): API sandboxes for agent tool calls.
// It coordinates the parts that each hold one concern: the live sandboxes
// (sandbox_registry.h), the images and their versions (sandbox_images.h), the
// warm pool per image (sandbox_warm_pool.h), starting and sweeping instances
// (sandbox_instances.h), the ledger entries (sandbox_metering.h) and the
// JSON views (sandbox_views.h). Its own: admission against the queue's
// max_concurrency (sandbox_admission.cc), the calls into a running sandbox
// (sandbox_calls.cc), the reaper's idle reclaim, interim charges and warm
// refill (sandbox_reaper.cc), and here the verbs and the records: each
// sandbox in the store, each exec an event, each instance's life in the
// ledger as instance_seconds.
//
// Blocking work (starting an instance, an exec) runs on threads of its own,
// never on the caller's (HTTP) thread. One lock (mu_) guards the parts.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "daemon/sandbox_images.h"
#include "daemon/sandbox_instances.h"
#include "daemon/sandbox_registry.h"
#include "daemon/sandbox_warm_pool.h"
#include "unisched/config/config.h"
#include "unisched/config/live.h"
#include "unisched/metrics/metrics.h"
#include "unisched/service/planes.h"
#include "unisched/store/store.h"

namespace unisched::daemon {

class SandboxManager final : public service::SandboxPlane {
 public:
  SandboxManager(const config::LiveConfig& live, store::Store& store, metrics::Metrics& metrics, const Clock& clock,
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
  // Runs fn on a thread of its own; Stop waits for all of them.
  void Spawn(std::function<void()> fn);
  // Waits for one more sandbox `s` to fit its queue's max_concurrency and
  // quotas, then holds its slot (sandboxes_.Admit); the error a create gets
  // when none frees in time (sandbox_admission.cc).
  Status AwaitSlot(const std::shared_ptr<Sandbox>& s, bool may_wait, std::chrono::steady_clock::time_point since);
  // Destroys its instance and commits its end (state, ledger, event, audit);
  // then done. `s` is already out of sandboxes_.
  void EndSandbox(std::shared_ptr<Sandbox> s, std::string state, std::string reason, std::string actor,
                  std::function<void(Result<nlohmann::json>)> done);
  // The running sandbox `id`, marked busy; Conflict when it is not running
  // (sandbox_calls.cc).
  Result<std::shared_ptr<Sandbox>> Acquire(int64_t id);
  // One request to its instance, then the busy mark released and the idle
  // clock restarted: a broken instance ends the sandbox (EndBroken), an
  // error answer of the init becomes an Error.
  Result<nlohmann::json> CallInstance(const std::shared_ptr<Sandbox>& s, const nlohmann::json& request, int timeout_ms,
                                      bool exec);
  // A call found the instance broken: the sandbox ends as failed, unless it
  // is ending already.
  void EndBroken(const std::shared_ptr<Sandbox>& s, const std::string& reason);
  // The reaper thread, every 250 ms: idle reclaim, interim charges (every
  // store.accounting_interval_seconds), warm refill (sandbox_reaper.cc).
  void ReaperLoop();
  void ChargeRunning();  // REQUIRES: mu_ not held
  void RefillWarm();
  void PublishMetrics();  // REQUIRES: mu_

  // The config in force; current_config() is its version now.
  const config::LiveConfig& live_;
  const config::Config& current_config() const { return live_.Current(); }
  store::Store& store_;
  metrics::Metrics& metrics_;
  const Clock& clock_;
  service::ControlPlane& control_;
  SandboxInstances instances_;

  mutable std::mutex mu_;             // guards what follows
  std::condition_variable slots_cv_;  // a sandbox ended: a waiting create may go on
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  SandboxRegistry sandboxes_;
  ImageCatalog images_;
  WarmPool warm_;

  std::mutex threads_mu_;
  std::condition_variable threads_cv_;
  int threads_running_ = 0;
  std::thread reaper_;
};

}  // namespace unisched::daemon
