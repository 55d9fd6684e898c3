#pragma once
// The daemon's predicted run times, for pools that plan with them
// (`backfill: easy-predicted` or `conservative-predicted`;
// docs/policy/backfill.md "Predicted run times"): the predictor learned from
// ended jobs, and each active job's prediction. A job is predicted once, the
// first time a cycle asks, and keeps that prediction while it waits and
// runs, as the simulator predicts once at submission; a running job that
// outlives it is planned longer by the scheduler (policy::CorrectedPrediction).
//
// The predictor's state is the store's: at start (or when a pool first
// plans with predictions) it replays each user's and each (user, name)'s
// latest ended jobs from the store, which leaves it as the whole history
// would. Owned by JobLifecycle on the control thread.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "unisched/model/job.h"
#include "unisched/policy/run_time.h"

namespace unisched::daemon {

class RunTimeBook {
 public:
  // How many latest ended jobs per user and per (user, name) Learn needs:
  // the predictor averages two; the rest covers jobs that ended without a
  // run (cancelled while pending), which teach nothing.
  static constexpr int kLatestPerKey = 8;

  bool learned() const { return learned_; }
  // Forgets what it knew and replays `ended`, oldest end first
  // (store::JobReads::LoadLatestEndedJobs(kLatestPerKey)).
  void Learn(const std::vector<model::Job>& ended);
  // A job reached a terminal state: its last run teaches the predictor (once
  // learned: before, the store holds it for Learn) and its prediction goes.
  void Ended(const model::Job& job);
  // The job's predicted run in seconds, 0 where its user has no run yet:
  // made on the first call, the same on every later one.
  int64_t PredictionFor(const model::Job& job);
  size_t predictions() const { return predictions_.size(); }

 private:
  bool learned_ = false;
  policy::RunTimePredictor predictor_;
  std::unordered_map<model::JobId, int64_t> predictions_;
};

// What a job's runs are remembered by besides its user: its name, else its
// command line (the script it runs).
std::string RunTimeKey(const model::Job& job);
// The run of a job's last attempt in whole seconds (rounded up), as its
// supervisor measured it where it reported; 0 when it never ran.
int64_t RunSecondsOf(const model::Job& job);

}  // namespace unisched::daemon
