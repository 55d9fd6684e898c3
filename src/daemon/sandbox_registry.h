#pragma once
// The live sandboxes: their records, creates holding a slot, running ones, what they hold, which are idle.
// Apart from the manager: who exists (and may be called, ended or reclaimed) is one small table.

// Not synchronized: the manager holds its lock around every call.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/sandbox/instance.h"
#include "unisched/service/planes.h"

namespace unisched::daemon {

// One sandbox, from its admission to its end.
struct Sandbox {
  int64_t id = 0;
  std::string user, project, queue, pool, node, image, image_version, state = "running", end_reason;
  service::SandboxLimits limits;
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

// Its name in the API, events and audit: sb-N.
std::string SandboxName(int64_t id);

class SandboxRegistry {
 public:
  using Running = std::map<int64_t, std::shared_ptr<Sandbox>>;

  // Ids go on after the largest the store holds.
  void ResumeIds(int64_t max_stored) { next_id_ = max_stored + 1; }
  int64_t NewId() { return next_id_++; }

  // A create given a slot holds it until it runs or gives it back.
  void Admit(const std::shared_ptr<Sandbox>& s) { admitted_.insert(s); }
  void Unadmit(const std::shared_ptr<Sandbox>& s) { admitted_.erase(s); }
  // Its start committed: from admitted to running.
  void Activate(const std::shared_ptr<Sandbox>& s);

  // What running sandboxes and creates given a slot hold, per (queue,
  // project, user).
  service::SandboxHolds Holds() const;

  const Running& running() const { return running_; }
  std::shared_ptr<Sandbox> Find(int64_t id) const;
  // The running sandbox `id`, marked busy (a call in progress is never
  // reclaimed); Conflict when it is not running.
  Result<std::shared_ptr<Sandbox>> Acquire(int64_t id);
  // The running sandbox `id` taken out to be ended (marked ending); null
  // when it is not running or being ended already.
  std::shared_ptr<Sandbox> TakeToEnd(int64_t id);
  // Every running sandbox taken out (the daemon stops).
  std::vector<std::shared_ptr<Sandbox>> TakeAll();
  // Those with no call in progress and none for their idle timeout, taken
  // out to be reclaimed (marked ending).
  std::vector<std::shared_ptr<Sandbox>> TakeIdle(std::chrono::steady_clock::time_point now);

 private:
  int64_t next_id_ = 1;
  Running running_;
  std::set<std::shared_ptr<Sandbox>> admitted_;  // creates given a slot, not yet committed
};

}  // namespace unisched::daemon
