#include "executor/attempt_results.h"

#include "executor/attempt_files.h"

namespace unisched::executor {

// The name result.json gives the outcome, so that logs and the API say it
// the same way.
std::string_view ToString(RunOutcome outcome) {
  return files::OutcomeName(outcome);
}

std::optional<RunResult> ReadResult(const AttemptKey& key, const std::string& dir) {
  auto text = files::ReadWholeFile(dir + "/" + files::kResult);
  if (!text) return std::nullopt;
  auto result = files::ResultFromJson(*text);
  if (!result.ok()) return Lost(key, result.error().message);
  result->job_id = key.job_id;
  result->attempt = key.attempt;
  result->task = key.task;
  return std::move(result).value();
}

RunResult Lost(const AttemptKey& key, std::string reason) {
  RunResult r;
  r.job_id = key.job_id;
  r.attempt = key.attempt;
  r.task = key.task;
  r.outcome = RunOutcome::kLost;
  r.reason = std::move(reason);
  return r;
}

RunResult Unclaimed(const AttemptKey& key, std::string reason, bool transient) {
  RunResult r;
  r.job_id = key.job_id;
  r.attempt = key.attempt;
  r.task = key.task;
  r.outcome = RunOutcome::kLaunchFailed;
  r.reason = std::move(reason);
  r.transient = transient;
  return r;
}

std::string LastLine(const std::string& path) {
  auto text = files::ReadWholeFile(path);
  if (!text) return {};
  while (!text->empty() && text->back() == '\n') text->pop_back();
  const size_t nl = text->find_last_of('\n');
  return nl == std::string::npos ? *text : text->substr(nl + 1);
}

}  // namespace unisched::executor
