#include "daemon/run_time_book.h"

#include <chrono>

namespace unisched::daemon {

std::string RunTimeKey(const model::Job& job) {
  if (!job.name.empty()) return job.name;
  std::string line;
  for (const std::string& word : job.command) {
    if (!line.empty()) line += ' ';
    line += word;
  }
  return line;
}

int64_t RunSecondsOf(const model::Job& job) {
  const model::Attempt* attempt = job.CurrentAttempt();
  if (!attempt || !attempt->ended_at) return 0;
  const std::optional<Timestamp> start = attempt->RunStart();
  if (!start || *attempt->ended_at <= *start) return 0;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*attempt->ended_at - *start).count();
  return (ms + 999) / 1000;
}

void RunTimeBook::Learn(const std::vector<model::Job>& ended) {
  predictor_ = policy::RunTimePredictor();
  for (const model::Job& job : ended) predictor_.Record(job.user, RunTimeKey(job), RunSecondsOf(job));
  learned_ = true;
}

void RunTimeBook::Ended(const model::Job& job) {
  predictions_.erase(job.id);
  if (learned_) predictor_.Record(job.user, RunTimeKey(job), RunSecondsOf(job));
}

int64_t RunTimeBook::PredictionFor(const model::Job& job) {
  auto [it, made] = predictions_.try_emplace(job.id, 0);
  if (made) it->second = predictor_.Predict(job.user, RunTimeKey(job), job.resources.walltime_seconds);
  return it->second;
}

}  // namespace unisched::daemon
