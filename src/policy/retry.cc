#include "unisched/policy/retry.h"

#include <algorithm>

namespace unisched::policy {

RetryDecision DecideRetry(const model::QueuePolicy& queue, const model::Job& job, model::JobState ended,
                          Timestamp now) {
  RetryDecision d;
  if (ended != model::JobState::kFailed && ended != model::JobState::kNodeFail) return d;
  const int number = job.attempts.empty() ? 0 : job.attempts.back().number;
  if (ended == model::JobState::kFailed && !job.attempts.empty() && job.attempts.back().transient) {
    // The how-manieth transient launch failure in a row this is: the wait
    // grows while the shortage lasts and starts over once a launch got
    // through.
    int in_a_row = 0;
    for (auto a = job.attempts.rbegin(); a != job.attempts.rend() && a->state == ended && a->transient; ++a) {
      ++in_a_row;
    }
    const int64_t backoff = std::min<int64_t>(kMaxLaunchRetryBackoffSeconds,
                                              int64_t{kLaunchRetryBaseSeconds} << std::min(in_a_row - 1, 20));
    d.requeue = true;
    d.state_reason = "LaunchRetry";
    d.retry = in_a_row;
    d.eligible_at = now + std::chrono::seconds(backoff);
    const std::string& why = job.attempts.back().reason;
    d.message = "attempt " + std::to_string(number) + " could not be launched" +
                (why.empty() ? std::string(" for a transient cause") : " (" + why + ")") + "; launch retry " +
                std::to_string(in_a_row) + " after " + std::to_string(backoff) + " s (at " +
                FormatRfc3339(d.eligible_at) + "), not counted against max_retries";
    return d;
  }
  // Earlier attempts that ended the same way (the current one is the last);
  // transient launch failures are not the job's and do not count.
  int before = 0;
  for (size_t i = 0; i + 1 < job.attempts.size(); ++i) {
    before += job.attempts[i].state == ended && !job.attempts[i].transient ? 1 : 0;
  }
  if (ended == model::JobState::kNodeFail) {
    if (!queue.requeue_on_node_fail) return d;
    d.limit = queue.max_node_fail_requeues;
    d.retry = before + 1;
    if (d.retry > d.limit) return d;
    d.requeue = true;
    d.state_reason = "NodeFail";
    d.eligible_at = now;
    d.message = "the node of attempt " + std::to_string(number) + " failed; requeued (" + std::to_string(d.retry) +
                " of " + std::to_string(d.limit) + " node-failure requeues)";
    return d;
  }
  d.limit = job.max_retries.value_or(queue.max_retries);
  d.retry = before + 1;
  if (d.retry > d.limit) return d;
  // base x 2^(retry-1): 10, 20, 40, ... seconds, so a job failing on a
  // transient cause retries soon and one failing persistently backs off.
  const int64_t base = std::max(0, queue.retry_backoff_seconds);
  const int64_t cap = std::max<int64_t>(base, kMaxRetryBackoffSeconds);
  const int64_t backoff = std::min<int64_t>(cap, base << std::min(d.retry - 1, 20));
  d.requeue = true;
  d.state_reason = "Retry";
  d.eligible_at = now + std::chrono::seconds(backoff);
  d.message = "attempt " + std::to_string(number) + " failed; retry " + std::to_string(d.retry) + " of " +
              std::to_string(d.limit) + " after " + std::to_string(backoff) + " s (at " + FormatRfc3339(d.eligible_at) +
              ")";
  return d;
}

}  // namespace unisched::policy
