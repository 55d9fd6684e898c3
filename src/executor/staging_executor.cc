// The local executor with data staging around its attempts (docs/data.md;
// ADR 0011): a decorator, so that the supervisor path stays as it was for
// the many attempts that stage nothing.
//
// An attempt with a stage-in is taken by a staging thread, which fetches its
// objects and then launches it on the local executor; its result, when it
// has a stage-out, goes to a staging thread again, which sends its files and
// then hands the result on. A stage-in that fails ends the attempt FAILED
// (StageInFailed, retried by the queue's policy); a stage-out that fails
// makes it FAILED (StageOutFailed): its results did not arrive. Bytes moved
// over the network come with the result (usage.network_bytes_in/out).
//
// After a restart: an attempt whose supervisor never claimed it is staged in
// again (an object already fetched comes from the node cache); one that ran
// is recovered, and its stage-out runs when its result is collected.

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "executor/account_resolver.h"
#include "executor/attempt_files.h"
#include "executor/local_executor.h"
#include "executor/stager.h"

namespace unisched::executor {
namespace {

constexpr int kStagingThreads = 4;
// How long a stage-out recovered without the stores' keys waits for them.
constexpr std::chrono::seconds kStoreKeysWait{60};

class StagingExecutor final : public Executor {
 public:
  StagingExecutor(const LocalExecutorOptions& options, ResultSink sink)
      : options_(options),
        sink_(std::move(sink)),
        cache_(options.stage_cache_dir.empty() ? options.work_root + "/.stage-cache" : options.stage_cache_dir,
               options.stage_cache_bytes) {
    inner_ = std::make_unique<LocalExecutor>(options, [this](RunResult r) { OnInnerResult(std::move(r)); });
    for (int i = 0; i < kStagingThreads; ++i) {
      threads_.emplace_back([this] {
        pthread_setname_np(pthread_self(), "us-staging");
        Work();
      });
    }
  }
  ~StagingExecutor() override { Shutdown(); }

  Status Launch(const LaunchSpec& spec) override {
    if (spec.data.empty()) return inner_->Launch(spec);
    if (spec.argv.empty()) return Error::BadRequest("bad_launch", "the command (argv) is empty", "argv");
    const AttemptKey key{spec.job_id, spec.attempt, spec.task};
    std::lock_guard lock(mu_);
    if (stopping_) return Error::Unavailable("the executor is shut down");
    if (tracked_.count(key) != 0) return Status::Ok();  // staging, running or staging out already
    Tracked& t = tracked_[key];
    t.spec = spec;
    // One with nothing to stage in is launched from a staging thread too:
    // tracked first, so that a result that comes at once finds it.
    if (spec.data.stage_in.empty()) t.phase = Phase::kRunning;
    queue_.push_back({key, /*out=*/false, {}});
    cv_.notify_one();
    return Status::Ok();
  }

  void Recover(const LaunchSpec& spec) override {
    if (spec.data.empty()) {
      inner_->Recover(spec);
      return;
    }
    // Never taken by a supervisor: stage in (again), then launch. One that
    // was (even if a reboot took its runs_dir) is the local executor's to
    // collect, adopt or call lost: its command may have run.
    if (!inner_->EverStarted(spec.job_id, spec.attempt, spec.task)) {
      (void)Launch(spec);
      return;
    }
    {
      std::lock_guard lock(mu_);
      Tracked& t = tracked_[{spec.job_id, spec.attempt, spec.task}];
      t.spec = spec;
      t.phase = Phase::kRunning;
    }
    inner_->Recover(WithoutData(spec));
  }

  void Cancel(model::JobId job_id, int attempt, bool preempt) override {
    {
      std::lock_guard lock(mu_);
      for (auto it = tracked_.lower_bound({job_id, attempt, 0});
           it != tracked_.end() && it->first.job_id == job_id && it->first.attempt == attempt; ++it) {
        StopStaging(it->second);
      }
    }
    inner_->Cancel(job_id, attempt, preempt);
  }

  void CancelTasks(model::JobId job_id, int attempt, const std::vector<int>& tasks) override {
    {
      std::lock_guard lock(mu_);
      for (int task : tasks) {
        if (auto it = tracked_.find({job_id, attempt, task}); it != tracked_.end()) StopStaging(it->second);
      }
    }
    inner_->CancelTasks(job_id, attempt, tasks);
  }

  std::string LogPath(model::JobId job_id, int attempt, int task, std::string_view stream) const override {
    return inner_->LogPath(job_id, attempt, task, stream);
  }
  void Forget(model::JobId job_id, int attempt) override { inner_->Forget(job_id, attempt); }
  void Release(model::JobId job_id, int attempt) override { inner_->Release(job_id, attempt); }
  void ReleaseAllExcept(const std::set<std::pair<model::JobId, int>>& running) override {
    inner_->ReleaseAllExcept(running);
  }

  void Shutdown() override {
    std::call_once(shutdown_once_, [this] {
      {
        std::lock_guard lock(mu_);
        stopping_ = true;
      }
      cv_.notify_all();
      keys_cv_.notify_all();
      // A transfer under way finishes first (at most its retries' time);
      // what waits in the queue is picked up again after the restart.
      for (auto& t : threads_) t.join();
      inner_->Shutdown();
    });
  }

  std::vector<AttemptRef> NeedingStoreKeys() const override {
    std::vector<AttemptRef> out;
    std::lock_guard lock(mu_);
    for (const auto& [key, t] : tracked_) {
      if (LacksStoreKeys(t.spec)) out.push_back({key.job_id, key.attempt, key.task});
    }
    return out;
  }

  void ProvideStoreKeys(const LaunchSpec& spec) override {
    {
      std::lock_guard lock(mu_);
      auto it = tracked_.find({spec.job_id, spec.attempt, spec.task});
      if (it == tracked_.end() || !LacksStoreKeys(it->second.spec) || LacksStoreKeys(spec)) return;
      it->second.spec.stores = spec.stores;
    }
    keys_cv_.notify_all();
  }

  std::vector<StagingProgress> Staging() const override {
    std::vector<StagingProgress> out;
    std::lock_guard lock(mu_);
    for (const auto& [key, t] : tracked_) {
      if (t.phase == Phase::kRunning) continue;
      out.push_back({key.job_id, key.attempt, key.task, t.phase == Phase::kIn ? "staging_in" : "staging_out",
                     t.counters->done.load(), t.counters->total.load()});
    }
    return out;
  }

 private:
  enum class Phase { kIn, kRunning, kOut };
  struct Tracked {
    LaunchSpec spec;
    Phase phase = Phase::kIn;
    bool cancelled = false;
    int64_t bytes_in = 0;
    std::shared_ptr<StageCounters> counters = std::make_shared<StageCounters>();
  };
  struct Job {
    AttemptKey key;
    bool out = false;
    RunResult result;  // out: the attempt's, to hand on after the stage-out
  };

  // A cancel: a stage-in under way stops (its transfers abort within a
  // second); a stage-out runs to its end, since the job's results are in it.
  static void StopStaging(Tracked& t) {
    t.cancelled = true;
    if (t.phase == Phase::kIn) t.counters->cancelled = true;
  }

  static LaunchSpec WithoutData(LaunchSpec spec) {
    spec.data = {};
    spec.stores.clear();
    return spec;
  }

  std::string WorkDir(model::JobId job_id) const { return options_.work_root + "/" + std::to_string(job_id); }

  // Who the staged files are given to: the job's account, as the supervisor
  // will run it (a sandboxed job's leased uid reads them as others: 0644).
  Result<StageOwner> OwnerOf(const LaunchSpec& spec) {
    if (::geteuid() != 0) return StageOwner{};
    if (spec.ids) return StageOwner{spec.ids->uid != 0, spec.ids->uid, spec.ids->gid};
    if (spec.unix_user.empty()) return StageOwner{};
    auto account = accounts_.Resolve(spec.unix_user);
    if (!account.ok()) return account.error();
    return StageOwner{account->uid != 0, account->uid, account->gid};
  }

  static RunResult Ended(const AttemptKey& key, RunOutcome outcome, std::string reason) {
    RunResult r;
    r.job_id = key.job_id;
    r.attempt = key.attempt;
    r.task = key.task;
    r.outcome = outcome;
    r.reason = std::move(reason);
    r.ended_at = SystemClock().Now();
    return r;
  }

  void OnInnerResult(RunResult r) {
    const AttemptKey key{r.job_id, r.attempt, r.task};
    {
      std::lock_guard lock(mu_);
      auto it = tracked_.find(key);
      if (it != tracked_.end()) {
        Tracked& t = it->second;
        const bool succeeded = r.outcome == RunOutcome::kCompleted;
        const bool ran = succeeded || r.outcome == RunOutcome::kFailed || r.outcome == RunOutcome::kTimeout ||
                         r.outcome == RunOutcome::kCancelled;
        bool any = false;
        for (const auto& stage : t.spec.data.stage_out)
          any = any || succeeded || stage.when == model::StageWhen::kAlways;
        r.usage.network_bytes_in += t.bytes_in;
        if (ran && any && !stopping_) {
          t.phase = Phase::kOut;
          queue_.push_back({key, /*out=*/true, std::move(r)});
          cv_.notify_one();
          return;
        }
        tracked_.erase(it);
      }
    }
    sink_(std::move(r));
  }

  void Work() {
    for (;;) {
      Job job;
      std::shared_ptr<StageCounters> counters;
      LaunchSpec spec;
      bool cancelled = false;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        job = std::move(queue_.front());
        queue_.pop_front();
        auto it = tracked_.find(job.key);
        if (it == tracked_.end()) continue;
        counters = it->second.counters;
        spec = it->second.spec;
        cancelled = it->second.cancelled;
      }
      if (job.out) {
        StageOutAndHandOn(job, spec, *counters);
      } else {
        StageInAndLaunch(job.key, spec, *counters, cancelled);
      }
    }
  }

  void StageInAndLaunch(const AttemptKey& key, const LaunchSpec& spec, StageCounters& counters, bool cancelled) {
    auto finish = [&](RunResult r) {
      {
        std::lock_guard lock(mu_);
        tracked_.erase(key);
      }
      sink_(std::move(r));
    };
    if (cancelled) return finish(Ended(key, RunOutcome::kCancelled, "cancelled while waiting to stage in"));
    int64_t bytes_in = 0;
    if (!spec.data.stage_in.empty()) {
      auto owner = OwnerOf(spec);
      Status roots = owner.ok() ? inner_->MakeRoots() : Status(owner.error());
      if (!roots.ok()) {
        RunResult failed = LaunchFailure(key.job_id, key.attempt, roots.error());
        failed.task = key.task;
        return finish(std::move(failed));
      }
      auto staged = StageIn(spec, WorkDir(spec.job_id), *owner, cache_, counters);
      if (!staged.ok() && counters.cancelled.load()) {
        return finish(Ended(key, RunOutcome::kCancelled, "cancelled while staging in"));
      }
      if (!staged.ok()) {
        RunResult failed = Ended(key, RunOutcome::kFailed, "StageInFailed: " + staged.error().message);
        return finish(std::move(failed));
      }
      bytes_in = staged->network_bytes;
    }
    bool cancelled_meanwhile = false;
    {
      std::lock_guard lock(mu_);
      auto it = tracked_.find(key);
      if (it == tracked_.end()) return;
      it->second.bytes_in = bytes_in;
      cancelled_meanwhile = it->second.cancelled;
      if (!cancelled_meanwhile) it->second.phase = Phase::kRunning;
    }
    if (cancelled_meanwhile) {
      RunResult r = Ended(key, RunOutcome::kCancelled, "cancelled while staging in");
      r.usage.network_bytes_in = bytes_in;
      return finish(std::move(r));
    }
    if (Status s = inner_->Launch(WithoutData(spec)); !s.ok()) {
      RunResult failed = LaunchFailure(key.job_id, key.attempt, s.error());
      failed.task = key.task;
      failed.usage.network_bytes_in = bytes_in;
      finish(std::move(failed));
    }
  }

  // Whether `spec` lacks a store's keys (recovered from an agent's disk,
  // which keeps none) that a stage-out would need.
  static bool LacksStoreKeys(const LaunchSpec& spec) {
    if (spec.data.stage_out.empty()) return false;
    return std::any_of(spec.stores.begin(), spec.stores.end(),
                       [](const StoreEndpoint& s) { return s.access_key.empty() || s.secret_key.empty(); });
  }

  void StageOutAndHandOn(Job& job, const LaunchSpec& recovered_spec, StageCounters& counters) {
    RunResult r = std::move(job.result);
    LaunchSpec spec = recovered_spec;
    if (LacksStoreKeys(spec)) {
      // The daemon sends the keys once the agent asks in its next heartbeat
      // (ProvideStoreKeys): a few heartbeat intervals at most.
      std::unique_lock lock(mu_);
      keys_cv_.wait_for(lock, kStoreKeysWait, [&] {
        auto it = tracked_.find(job.key);
        return stopping_ || it == tracked_.end() || !LacksStoreKeys(it->second.spec);
      });
      if (auto it = tracked_.find(job.key); it != tracked_.end()) spec = it->second.spec;
    }
    auto sent = LacksStoreKeys(spec)
                    ? Result<StageTotals>(Error::Unavailable("the object stores' keys did not arrive within " +
                                                             std::to_string(kStoreKeysWait.count()) +
                                                             " s of the agent's restart"))
                    : StageOut(spec, WorkDir(spec.job_id), r.outcome == RunOutcome::kCompleted, counters);
    if (sent.ok()) {
      r.usage.network_bytes_out += sent->network_bytes;
    } else {
      const std::string why = "StageOutFailed: " + sent.error().message;
      if (r.outcome == RunOutcome::kCompleted) {
        r.outcome = RunOutcome::kFailed;
        r.reason = why;
      } else {
        r.reason = r.reason.empty() ? why : r.reason + "; " + why;
      }
    }
    {
      std::lock_guard lock(mu_);
      tracked_.erase(job.key);
    }
    sink_(std::move(r));
  }

  const LocalExecutorOptions options_;
  const ResultSink sink_;
  StageCache cache_;
  AccountResolver accounts_;
  std::unique_ptr<LocalExecutor> inner_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable keys_cv_;        // ProvideStoreKeys, for a stage-out waiting for them
  std::map<AttemptKey, Tracked> tracked_;  // GUARDED_BY(mu_): attempts with staging, until their result is handed on
  std::deque<Job> queue_;                  // GUARDED_BY(mu_)
  bool stopping_ = false;                  // GUARDED_BY(mu_)
  std::vector<std::thread> threads_;
  std::once_flag shutdown_once_;
};

}  // namespace

std::unique_ptr<Executor> MakeLocalExecutor(const LocalExecutorOptions& options, Executor::ResultSink sink) {
  return std::make_unique<StagingExecutor>(options, std::move(sink));
}

}  // namespace unisched::executor
