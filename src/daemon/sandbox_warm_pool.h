#pragma once
// The warm pool (docs/sandboxes.md, The warm pool): per image a target and idle instances of its current version.
// Apart from the manager: what is kept warm, stale or to start next is the pool's own state.

// Not synchronized: the manager holds its lock around every call. Starting and destroying instances is the
// caller's (without the lock).

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/sandbox_images.h"
#include "daemon/sandbox_instances.h"

namespace unisched::daemon {

class WarmPool {
 public:
  // How many instances of `image` to keep warm: at start the largest `warm`
  // of its config entries (RaiseTarget), then each POST /v1/images sets it.
  void RaiseTarget(const std::string& image, int target);
  void SetTarget(const std::string& image, int target);
  int Target(const std::string& image) const;
  // Instances of `image` started now, of any version.
  int Ready(const std::string& image) const;

  // A warm instance of this version started for `queue`, out of the pool.
  std::optional<StartedInstance> Take(const ImageVersion& image, const std::string& queue);
  // Every instance, out of the pool (the daemon stops).
  std::vector<StartedInstance> TakeAll();

  // One pass of the refill: instances over their image's target (all of a
  // version that is no longer current) to destroy, and the versions to start
  // an instance of, at most 16 per image. Each start is under way until
  // StartEnded.
  struct Refill {
    std::vector<StartedInstance> stale;
    std::vector<ImageVersion> to_start;
  };
  Refill PlanRefill(const ImageCatalog& images);
  // A start of PlanRefill is over; Add when it succeeded.
  void StartEnded(const ImageVersion& image);
  void Add(const ImageVersion& image, StartedInstance instance);

 private:
  // image -> instances kept warm
  std::map<std::string, int> targets_;
  // image -> version -> idle instances; starts under way
  std::map<std::string, std::map<std::string, std::deque<StartedInstance>>> idle_;
  std::map<std::string, std::map<std::string, int>> starting_;
};

}  // namespace unisched::daemon
