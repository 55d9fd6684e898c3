#pragma once
// One running sandbox instance, as the daemon holds it: its init process
// (unisched-sandbox, PID 1 of its own namespaces), its cgroups, its uid
// lease, its work directory and the control socket to it. Calls are
// serialized per instance; the object is otherwise thread-safe.

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/containment/containment.h"
#include "unisched/isolation/isolation.h"

namespace unisched::sandbox {

struct InstanceSpec {
  std::string name;       // unique on the host; names the cgroups
  std::string init_path;  // the unisched-sandbox binary
  std::string work_dir;   // made by Start (owned by the uid, 0700), removed by Destroy
  std::string rootfs;     // empty: the host's root
  std::vector<std::pair<std::string, std::string>> binds{};
  containment::Limits limits{};
  bool use_cgroups = true;  // false: rlimits only
  isolation::UidLease uid;  // held for the instance's life
};

class Instance {
 public:
  // Starts the init and waits for its {"ready": true} (at most 10 s). On an
  // error nothing is left behind.
  static Result<std::unique_ptr<Instance>> Start(InstanceSpec spec);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  // One request and its answer (protocol.h); waits at most timeout_ms for
  // the answer. A broken channel or an answer late by that much destroys
  // the instance (Unavailable): its state is then unknown.
  Result<nlohmann::json> Call(const nlohmann::json& request, int timeout_ms);
  // New memory, CPU and process caps for the running instance (its cgroups);
  // an error means it should be destroyed.
  Status SetLimits(const containment::Limits& limits);
  // Kills every process of the instance (a call in progress ends at once,
  // Unavailable), removes its cgroups and its work directory, gives back its
  // uid. Idempotent.
  void Destroy();

  pid_t pid() const { return pid_; }
  uid_t uid() const { return spec_.uid.uid(); }
  const std::string& work_dir() const { return spec_.work_dir; }
  const std::string& name() const { return spec_.name; }

 private:
  explicit Instance(InstanceSpec spec) : spec_(std::move(spec)) {}
  void DestroyLocked();

  InstanceSpec spec_;
  containment::Containment containment_;
  mutable std::mutex mu_;
  // Guards pidfd_ only: Destroy kills the init through it without waiting
  // for a call in progress (which holds mu_), and a pidfd names exactly our
  // process, even once it has exited (no pid reuse race).
  std::mutex kill_mu_;
  int pidfd_ = -1;
  int control_fd_ = -1;
  pid_t pid_ = -1;
  bool destroyed_ = false;
};

// Removes a directory tree without following symbolic links (what the
// instance left may point anywhere).
void RemoveTree(const std::string& path);

}  // namespace unisched::sandbox
