#pragma once
// Quotas and concurrency limits (docs/policy/quotas.md): what each scope
// holds in running jobs, and whether one more job would exceed a limit.
// Scopes: (queue, project), (queue, user), project over all queues, and a
// queue's running instances (max_concurrency).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "unisched/model/cluster.h"
#include "unisched/model/job.h"

namespace unisched::policy {

// Totals over all nodes of a job (or of many).
struct Amount {
  int64_t cpus = 0;
  int64_t memory_mb = 0;
  int64_t gpus = 0;
  int64_t jobs = 0;
  Amount& operator+=(const Amount& o);
  Amount& operator-=(const Amount& o);
};
Amount AmountOf(const model::ResourceRequest& request);

// Who a job is charged to.
struct JobScope {
  std::string queue;
  std::string project;
  std::string user;
};

class QuotaTally {
 public:
  void Add(const JobScope& scope, const Amount& amount);
  void Remove(const JobScope& scope, const Amount& amount);

  Amount QueueProject(const std::string& queue, const std::string& project) const;
  Amount QueueUser(const std::string& queue, const std::string& user) const;
  Amount Project(const std::string& project) const;
  int64_t QueueJobs(const std::string& queue) const;

 private:
  std::map<std::pair<std::string, std::string>, Amount> queue_project_, queue_user_;
  std::map<std::string, Amount> project_;
  std::map<std::string, int64_t> queue_jobs_;
};

// The first limit that one more job of `request` in `scope` would exceed, as a
// pending reason: QuotaExceeded "project genomics uses 32/32 GPUs in
// ai-training; this job needs 8" or ConcurrencyLimit "agent-sandbox runs
// 500/500 jobs (max_concurrency)". nullopt when it is within every limit.
std::optional<model::PendingReason> CheckLimits(const QuotaTally& tally, const JobScope& scope,
                                                const model::ResourceRequest& request,
                                                const model::QueuePolicy& queue_policy,
                                                const model::ProjectPolicy* project_policy);

// Whether the request alone exceeds a limit (it could never run): the reason,
// or nullopt.
std::optional<model::PendingReason> ExceedsLimitsAlone(const JobScope& scope, const model::ResourceRequest& request,
                                                       const model::QueuePolicy& queue_policy,
                                                       const model::ProjectPolicy* project_policy);

}  // namespace unisched::policy
