// Predicted run times (run_time.h; docs/policy/backfill.md).

#include "unisched/policy/run_time.h"

#include <algorithm>
#include <array>
#include <numeric>

namespace unisched::policy {

RunTimePredictor::RunTimePredictor(size_t history) : history_(std::max<size_t>(1, history)) {}

std::string RunTimePredictor::NameKey(std::string_view user, std::string_view name) {
  std::string key;
  key.reserve(user.size() + 1 + name.size());
  key.append(user).append(1, '\n').append(name);
  return key;
}

void RunTimePredictor::Push(std::deque<int64_t>& runs, int64_t run_seconds) const {
  runs.push_back(run_seconds);
  while (runs.size() > history_) runs.pop_front();
}

int64_t RunTimePredictor::Mean(const std::deque<int64_t>& runs) const {
  const int64_t n = static_cast<int64_t>(runs.size());
  return std::max<int64_t>(1, std::accumulate(runs.begin(), runs.end(), int64_t{0}) / n);
}

void RunTimePredictor::Record(std::string_view user, std::string_view name, int64_t run_seconds) {
  if (run_seconds <= 0) return;
  Push(by_user_[std::string(user)], run_seconds);
  if (!name.empty()) Push(by_name_[NameKey(user, name)], run_seconds);
}

int64_t RunTimePredictor::Predict(std::string_view user, std::string_view name, int64_t request_seconds) const {
  int64_t predicted = 0;
  if (!name.empty()) {
    if (auto it = by_name_.find(NameKey(user, name)); it != by_name_.end()) predicted = Mean(it->second);
  }
  if (predicted == 0) {
    if (auto it = by_user_.find(std::string(user)); it != by_user_.end()) predicted = Mean(it->second);
  }
  if (predicted > 0 && request_seconds > 0) predicted = std::min(predicted, request_seconds);
  return predicted;
}

int64_t CorrectedPrediction(int64_t predicted, int64_t elapsed, int64_t request_seconds) {
  constexpr int64_t kMinute = 60, kHour = 3600;
  constexpr std::array<int64_t, 11> kExtensions = {kMinute,    5 * kMinute, 15 * kMinute, 30 * kMinute,
                                                   kHour,      2 * kHour,   5 * kHour,    10 * kHour,
                                                   20 * kHour, 50 * kHour,  100 * kHour};
  predicted = std::max<int64_t>(predicted, 1);
  int64_t corrected = predicted;
  for (size_t k = 0; corrected <= elapsed; ++k) {
    // Past the last extension, another 100 h each time.
    corrected =
        predicted + (k < kExtensions.size() ? kExtensions[k]
                                            : kExtensions.back() * static_cast<int64_t>(k - kExtensions.size() + 2));
  }
  if (request_seconds > 0) corrected = std::min(corrected, request_seconds);
  return corrected;
}

}  // namespace unisched::policy
