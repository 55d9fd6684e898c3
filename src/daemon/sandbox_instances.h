#pragma once
// Starting sandbox instances on this host (names, work directories, uids, caps) and sweeping a dead run's.
// Apart from the manager: how an instance is made and removed, not which sandbox or warm pool it serves.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "daemon/sandbox_images.h"
#include "unisched/common/status.h"
#include "unisched/config/config.h"
#include "unisched/containment/containment.h"
#include "unisched/sandbox/instance.h"
#include "unisched/service/planes.h"

namespace unisched::daemon {

// A started instance and what it was started as.
struct StartedInstance {
  std::shared_ptr<sandbox::Instance> instance;
  std::string queue;
  service::SandboxLimits limits;
};

class SandboxInstances {
 public:
  // Work directories go under `sandboxes_dir`; `init_path` is unisched-sandbox.
  SandboxInstances(const config::Config& config, std::string sandboxes_dir, std::string init_path);

  // At start: whether instances can run here (they need root), and their
  // directory made.
  void Prepare();
  bool available() const { return available_; }

  // One instance of `image` with these limits, for `queue`. Blocks until
  // its init answers (or fails). Thread-safe.
  Result<StartedInstance> Start(const ImageVersion& image, const std::string& queue,
                                const service::SandboxLimits& limits);
  // The cgroup caps of an instance with these limits.
  containment::Limits Caps(const service::SandboxLimits& limits) const;

  // An instance of a previous run: what remains in its cgroups killed and
  // removed, its work directory removed.
  void RemoveLost(const std::string& instance_name, const std::string& work_dir) const;
  // At start, once the store's sandboxes are ended: the work directories
  // left in ours (warm instances, a start that never committed), and the
  // cgroups of instances of daemons that are gone.
  void RemoveLeftovers() const;

 private:
  const config::Config& config_;
  std::string sandboxes_dir_;
  std::string init_path_;
  std::string name_prefix_;  // host-unique per daemon run: cgroup and directory names
  bool available_ = false;
  std::atomic<int64_t> next_instance_{1};
};

}  // namespace unisched::daemon
