#pragma once
// Predicted run times for backfilling (docs/policy/backfill.md, "Predicted
// run times"). Users' wall-time requests are mostly far too long, so a
// backfill that plans with them finds fewer holes than there are and
// promises reservations too late. EASY++ (Tsafrir, Etsion and Feitelson,
// "Backfilling using system-generated predictions rather than user runtime
// estimates", IEEE TPDS 18(6), 2007) predicts a job's run as the mean of its
// user's last two runs, never above the request, and lengthens a prediction
// the job outlives. This is that rule, per (user, job name) first, then per
// user. Pure: runs in, predictions out; callers keep and feed it.

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

namespace unisched::policy {

class RunTimePredictor {
 public:
  // `history`: how many of the latest runs a prediction averages (EASY++: 2).
  explicit RunTimePredictor(size_t history = 2);

  // A job of `user` named `name` (may be empty) ran for run_seconds (> 0;
  // others are ignored), whatever its end: a job killed at its limit is as
  // telling as one that finished.
  void Record(std::string_view user, std::string_view name, int64_t run_seconds);

  // In seconds: the mean of the latest runs of (user, name), else of the
  // user's (rounded down, at least 1); 0 when the user has no run yet (plan
  // with the request). Never above request_seconds when that is > 0.
  int64_t Predict(std::string_view user, std::string_view name, int64_t request_seconds) const;

 private:
  int64_t Mean(const std::deque<int64_t>& runs) const;
  void Push(std::deque<int64_t>& runs, int64_t run_seconds) const;
  static std::string NameKey(std::string_view user, std::string_view name);

  size_t history_;
  std::unordered_map<std::string, std::deque<int64_t>> by_user_;
  std::unordered_map<std::string, std::deque<int64_t>> by_name_;  // user '\n' name
};

// A running job planned to run `predicted` seconds, `elapsed` seconds after
// its start: that while the job has not outlived it; then, as EASY++
// corrects, the first of predicted + 1 min, + 5 min, + 15 min, + 30 min,
// + 1 h, + 2 h, + 5 h, + 10 h, + 20 h, + 50 h, + 100 h (then + 200 h,
// + 300 h, ...) that lies beyond `elapsed`. Never above request_seconds when
// that is > 0 (the job is killed there).
int64_t CorrectedPrediction(int64_t predicted, int64_t elapsed, int64_t request_seconds);

}  // namespace unisched::policy
