#pragma once
// Sandbox metering (docs/sandboxes.md, Metering): instance_seconds ledger entries, interim and final.
// Apart from the manager: how a sandbox is charged is said once here, the manager decides when.

#include <vector>

#include "daemon/sandbox_registry.h"
#include "unisched/common/time.h"
#include "unisched/metrics/metrics.h"
#include "unisched/store/store.h"

namespace unisched::daemon {

// One ledger entry of its instance_seconds over [from, to): of no job,
// `attempt` holds the sandbox's number, `detail` its image:version.
store::LedgerEntry SandboxChargeEntry(const Sandbox& s, Timestamp from, Timestamp to, bool final, Timestamp now);

// Interim entries of every running sandbox not being ended, from where it
// was charged to `now`; each one's charged_until moves to `now` (before the
// write: an end meanwhile charges only the rest). REQUIRES: the manager's
// lock.
std::vector<store::LedgerEntry> InterimCharges(const SandboxRegistry::Running& running, Timestamp now);

// Appends them to the ledger (one transaction, without waiting) and counts
// them in the metrics once committed.
void RecordInterimCharges(store::Store& store, metrics::Metrics& metrics, std::vector<store::LedgerEntry> entries);

}  // namespace unisched::daemon
