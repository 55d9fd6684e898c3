#pragma once
// Whether an attempt that failed, or whose node failed, is run again
// (docs/policy/retries.md). Pure: the queue's policy, the job's attempt
// history and the time come in; the decision goes out.

#include <string>

#include "unisched/common/time.h"
#include "unisched/model/cluster.h"
#include "unisched/model/job.h"

namespace unisched::policy {

struct RetryDecision {
  bool requeue = false;
  std::string state_reason;  // Retry | LaunchRetry | NodeFail (the job's state_reason while it waits)
  Timestamp eligible_at{};   // not started before
  int retry = 0;             // the how-manieth retry of this kind this is
  int limit = 0;             // out of how many allowed (0 for LaunchRetry: no limit)
  std::string message;       // for the job's event and pending reason
};

// Longest wait between retries, however many there were.
inline constexpr int kMaxRetryBackoffSeconds = 600;
// A launch that failed for a transient cause (model::Attempt::transient) is
// tried again after 1 s, doubled for each such failure in a row, at most a
// minute: soon enough to catch a short squeeze, slowly enough not to
// hammer a machine that stays out of descriptors.
inline constexpr int kLaunchRetryBaseSeconds = 1;
inline constexpr int kMaxLaunchRetryBackoffSeconds = 60;

// `job`'s current (last) attempt ended in `ended` (kFailed or kNodeFail) at
// `now`. Failures are retried up to the job's max_retries, else the
// queue's, each after retry_backoff_seconds x 2^(retry-1) (capped at
// kMaxRetryBackoffSeconds, or the base when that is longer); node failures
// are requeued at once, up to the queue's max_node_fail_requeues, when the
// queue requeues on node failure. Earlier attempts of the same kind count
// against the limit, so the count survives restarts (it is the history).
// A failure whose attempt is `transient` (its command never ran: the
// launch hit a momentary shortage) is requeued with LaunchRetry after the
// launch backoff above, whatever the limits, and never counts against
// max_retries: the job did nothing wrong.
RetryDecision DecideRetry(const model::QueuePolicy& queue, const model::Job& job, model::JobState ended, Timestamp now);

}  // namespace unisched::policy
