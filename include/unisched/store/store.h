#pragma once
// The durable store, by concern (each header documents its records and the
// idempotency of each write):
//   jobs.h        job records with their attempts, job events, idempotency keys
//   events.h      cluster events, alerts, the audit trail
//   identity.h    users and token hashes
//   nodes.h       node states that outlive a restart
//   accounting.h  the ledger, usage queries, fairshare usage
//   sandboxes.h   sandboxes and image versions
// A Transaction offers every concern's writes, a Store every concern's
// reads; code that needs one concern takes that part (e.g. JobReads&).
//   config_versions.h  accepted config texts by version, the running one
//   baselines.h   performance baseline runs
//   secrets.h     secrets, sealed
//   lease.h       the leader lease of daemon replicas
//   workflows.h   workflows: their spec and task instances
//
// Two implementations share one engine (sql_store.cc: one writer thread,
// numbered schema migrations, a pool of readers) and one SQL (store/sql.h):
// SQLite (sqlite_store.cc), one file in WAL mode under the state directory,
// the default; and PostgreSQL (pg_store.cc), for replicas of the daemon on
// several machines (docs/store.md). No database type or SQL appears outside
// src/store. tests/testing/memory_store.h
// is a second implementation, and tests/unit/store/store_contract_test.cc is
// what every implementation must pass (ADR 0005).
//
// Writes go through Write(): the writer gathers every write queued while the
// previous commit was syncing and runs them in one transaction (group
// commit). A write that fails rolls back alone: the other writes of its batch
// still commit. `done` runs on the writer thread after the commit is durable
// (synchronous=FULL by default), so a caller that answers 201 from `done` has
// committed first.
//
// Reads may come from any thread and see every committed write.

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "unisched/common/status.h"
#include "unisched/model/job.h"
#include "unisched/store/accounting.h"
#include "unisched/store/baselines.h"
#include "unisched/store/config_versions.h"
#include "unisched/store/events.h"
#include "unisched/store/identity.h"
#include "unisched/store/jobs.h"
#include "unisched/store/lease.h"
#include "unisched/store/nodes.h"
#include "unisched/store/sandboxes.h"
#include "unisched/store/secrets.h"
#include "unisched/store/workflows.h"

namespace unisched::store {

// What a read without an error channel (ListJobs, GetUser, ...) throws
// when the database fails under it: rare on SQLite's local disk, expected
// while a PostgreSQL server is down or failing over. The API answers it 503
// with its error; a write inside Write() that throws fails just that write.
class StoreFailure : public std::runtime_error {
 public:
  explicit StoreFailure(Error error) : std::runtime_error(error.message), error_(std::move(error)) {}
  const Error& error() const { return error_; }

 private:
  Error error_;
};

enum class StoreBackend { kSqlite, kPostgresql };

struct StoreOptions {
  std::string path;                  // SQLite: the database file
  std::string synchronous = "full";  // SQLite: full | normal | off
  int max_batch = 1024;              // writes per transaction at most
  // Job ids are reserved from the database this many at a time
  // (ReserveJobId); the ids of a block not used before a restart are skipped.
  int job_id_block = 4096;
  StoreBackend backend = StoreBackend::kSqlite;
  // PostgreSQL: a libpq connection string or URI (several hosts with
  // target_session_attrs=read-write follow a failover), and the password,
  // which the config reads from a file or the environment.
  std::string conninfo{};
  std::string password{};
  // Called on the writer thread after each batch: how long the batch took
  // (its transaction from the first write to the commit, the rerun with
  // savepoints when a write failed, and the writes' `done` callbacks, which
  // only hand results on), and how many writes it held. The daemon
  // observes unisched_store_commit_seconds and _batch_size with it.
  std::function<void(double seconds, size_t writes)> on_commit{};
};

// The write-side view handed to Write() callbacks. Valid only inside the callback.
class Transaction : public JobWrites,
                    public EventWrites,
                    public IdentityWrites,
                    public NodeWrites,
                    public AccountingWrites,
                    public SandboxWrites {};

class Store : public LeaderLease,
              public ConfigVersions,
              public Baselines,
              public Secrets,
              public Workflows,
              public JobReads,
              public EventReads,
              public IdentityReads,
              public NodeReads,
              public AccountingReads,
              public SandboxReads {
 public:
  // Opens (creating if needed) and migrates the database of options.backend.
  static Result<std::unique_ptr<Store>> Open(const StoreOptions& options);
  ~Store() override = default;

  // Queues `work` for the writer's next transaction; `done` gets the status
  // after the commit (or the error of `work`, whose changes are rolled back
  // alone).
  //
  // The effects of `work` on the store commit at most once, but `work` may
  // be called more than once: an implementation may roll a whole batch back
  // (SQLite does when one of its writes fails, then runs the batch again
  // with one savepoint per write). So `work` must only write through the
  // transaction and overwrite what it reports (an id, a flag); changes in
  // memory belong in `done`, which is called exactly once.
  virtual void Write(std::function<Status(Transaction&)> work, std::function<void(Status)> done) = 0;
  // Write() and wait for the commit. From the writer thread (a `done`
  // callback) it fails rather than wait for itself.
  virtual Status WriteSync(std::function<Status(Transaction&)> work) = 0;
  // A job id no committed or reserved job has had, from any thread: lets the
  // API build a job's JSON (and its 201 answer) before queueing the insert,
  // so the single writer only writes. Ids come from the database in blocks
  // (StoreOptions::job_id_block) reserved ahead of need, so callers do not
  // wait for the writer. An id whose insert never commits is never used;
  // ids are unique, and increasing within one process, not gap-free.
  // kUnavailable when no block could be reserved (the store is closed or
  // failing). Not from inside `work` (InsertJob without an id does that).
  virtual Result<model::JobId> ReserveJobId() = 0;

  virtual int SchemaVersion() const = 0;

  // Stops the writer after draining what is queued; later writes fail
  // (kUnavailable).
  virtual void Close() = 0;
};

}  // namespace unisched::store
