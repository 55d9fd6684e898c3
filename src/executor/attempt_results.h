#pragma once
// An attempt's end as the RunResult the executor hands on: the one its
// supervisor wrote (result.json), or the one the executor makes when the
// supervisor could not write it (lost, or never claimed). Every way an
// attempt can end, whoever noticed it, yields its result through here, so
// the results of one attempt read alike on every path.

#include <optional>
#include <string>
#include <utility>

#include "unisched/executor/executor.h"

namespace unisched::executor {

// One launch of an attempt: (job id, attempt, task); task 0 is the attempt's
// only one unless it is a gang (LaunchSpec::task).
struct AttemptKey {
  model::JobId job_id = 0;
  int attempt = 0;
  int task = 0;
  auto operator<=>(const AttemptKey&) const = default;
};

// result.json of the attempt in `dir` as a RunResult, nullopt if there is
// none (yet); a malformed one makes the attempt lost.
std::optional<RunResult> ReadResult(const AttemptKey& key, const std::string& dir);

// kLost: the supervisor is gone without a result, so whether and how the
// job ran is unknown.
RunResult Lost(const AttemptKey& key, std::string reason);

// An attempt its supervisor could not claim: it never ran, so it failed to
// launch (and may be launched again as a new attempt), rather than `lost`.
RunResult Unclaimed(const AttemptKey& key, std::string reason, bool transient);

// The last non-empty line of a small diagnostics file, for "lost" reasons.
std::string LastLine(const std::string& path);

}  // namespace unisched::executor
