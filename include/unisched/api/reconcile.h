#pragma once
// Reconciliation of the whole ledger against the job records
// (docs/ledger.md, "Reconciliation"): what GET /v1/usage/reconcile answers
// and what the daemon runs periodically.

#include "unisched/ledger/ledger.h"
#include "unisched/model/cluster.h"
#include "unisched/store/store.h"

namespace unisched::api {

// Relative difference above which a recorded sum is mismatched.
inline constexpr double kReconcileTolerance = 0.001;

// Every finished attempt of every job on record, recomputed from the job
// record with the ledger's own charge functions (ledger::AttemptUsage), is
// compared with the ledger's sums. Sampled metrics (storage) are not
// derived from the job record and are left out. Attempts charged in the
// ledger whose job record is gone (deleted after job_retention_days) cannot
// be recomputed: they are counted in `unverifiable_attempts`.
ledger::Reconciliation ReconcileLedger(const store::Store& store, const model::ClusterSpec& cluster);

}  // namespace unisched::api
