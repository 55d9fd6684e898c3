#pragma once
// The store's accounting: the ledger (docs/ledger.md), the usage queries
// over it, and the decayed fairshare usage the scheduler starts from.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/ledger/ledger.h"
#include "unisched/model/job.h"

namespace unisched::store {

// One ledger entry (docs/ledger.md). `key` is unique: appending an entry
// whose key exists adds nothing.
using LedgerEntry = ledger::Entry;

// What the ledger holds for one attempt: how far interim charging got and
// the sums per (metric, detail, node).
struct LedgerCharged {
  std::optional<Timestamp> until;  // latest interval end of its interim entries
  bool closed = false;             // a final entry exists
  std::map<std::tuple<std::string, std::string, std::string>, double> sums;
  // Entries beyond the first for the same (metric, detail, node, interval,
  // final): never written by the daemon (keys are unique), so each is a row
  // added behind its back.
  int64_t duplicated_entries = 0;
};

struct UsageQuery {
  std::optional<Timestamp> from, to;  // entries whose interval ends in (from, to]
  // Of user, project, queue, pool, workload_kind, tier (storage's; "" for
  // other metrics), hour and job (the job's id: summed from the ledger's
  // entries, not the hourly rollup).
  std::vector<std::string> group_by;
  // Visibility: unset sees all; else entries of these projects or queues.
  std::optional<std::vector<std::string>> visible_projects;
  std::vector<std::string> visible_queues;
};
struct UsageRow {
  std::map<std::string, std::string> group;  // group key -> value
  std::map<std::string, double> metrics;     // metric -> total (only metrics with entries)
};

// Decayed fairshare usage of one (project, user) as of a time.
struct FairshareUsageRecord {
  std::string project;
  std::string user;
  double usage = 0;  // CPU-second equivalents, decayed to as_of
};
struct FairshareUsage {
  Timestamp as_of{};
  std::vector<FairshareUsageRecord> entries;
};

class AccountingWrites {
 public:
  virtual ~AccountingWrites() = default;
  // Appends a ledger entry. Idempotent by key: an entry whose key exists
  // already adds nothing (and succeeds), so charging may be retried.
  virtual Status AppendLedger(const LedgerEntry& entry) = 0;
  // Replaces the stored fairshare usage with `usage`. Idempotent.
  virtual Status SaveFairshareUsage(const FairshareUsage& usage) = 0;
};

class AccountingReads {
 public:
  virtual ~AccountingReads() = default;
  // The ledger's sums of one attempt (recovery of interim charging).
  virtual LedgerCharged LoadLedgerCharged(model::JobId job, int attempt) const = 0;
  // Every attempt's ledger sums, for reconciliation.
  virtual std::map<std::pair<model::JobId, int>, LedgerCharged> LoadAllLedgerCharged() const = 0;
  // Sums by group and metric, ordered by group; throws std::invalid_argument
  // for a group_by column not listed on UsageQuery.
  virtual std::vector<UsageRow> QueryUsage(const UsageQuery& query) const = 0;
  virtual FairshareUsage LoadFairshareUsage() const = 0;
};

}  // namespace unisched::store
