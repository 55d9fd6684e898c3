#pragma once
// A backend that places jobs itself (backend::Placement::kBackend), as
// another cluster's scheduler would behind the pool-backend port: the
// daemon admits a job of its pool by order, quotas and budgets, and hands
// it over with no allocation; this backend picks one of its own "nodes"
// (the least busy), runs the command as a real process of the test, keeps
// its stdout, and reports how it ended with the node it chose (placed_on).
// Cancel sends SIGTERM. It cannot adopt attempts of a previous process:
// Recover reports them lost.

#include <sys/types.h>

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "unisched/backend/pool_backend.h"

namespace unisched::testing {

class PlacingBackend final : public backend::PoolBackend {
 public:
  PlacingBackend(std::vector<std::string> nodes, ResultSink sink);
  ~PlacingBackend() override;

  backend::Placement placement() const override { return backend::Placement::kBackend; }
  Status Launch(const backend::AttemptLaunch& launch) override;
  void Cancel(model::JobId job, int attempt, bool preempt) override;
  void Recover(const backend::AttemptLaunch& launch) override;
  std::string ReadLog(model::JobId job, int attempt, int task, std::string_view stream, LogRange range) const override;
  void Forget(model::JobId job, int attempt) override;
  void Shutdown() override;

  // Launches it was handed (a repeated launch of an attempt is not counted).
  int launches() const;
  // Whether an allocation was ever handed over with a launch (it must not be).
  bool saw_allocation() const;
  // The last launch handed over.
  backend::AttemptLaunch last_launch() const;

 private:
  struct Run {
    std::string node;
    pid_t pid = -1;
    bool cancelled = false;
    bool ended = false;
    std::string stdout_text;
  };
  using Key = std::pair<model::JobId, int>;
  void Execute(executor::LaunchSpec spec, std::string node);
  void Finish(const Key& key, executor::RunResult result);

  const std::vector<std::string> nodes_;
  ResultSink sink_;
  mutable std::mutex mu_;
  std::map<Key, Run> runs_;
  std::vector<std::thread> threads_;
  int launches_ = 0;
  backend::AttemptLaunch last_launch_;
  bool saw_allocation_ = false;
};

}  // namespace unisched::testing
