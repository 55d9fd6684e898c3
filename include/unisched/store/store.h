#pragma once
// The durable store: one SQLite file in WAL mode under the state directory,
// numbered schema migrations, one writer thread.
//
// Writes go through Write(): the writer thread gathers every write queued
// while the previous commit was syncing and runs them in one transaction
// (group commit), each inside its own savepoint so one failing write rolls
// back alone. `done` runs on the writer thread after the commit is durable
// (synchronous=FULL by default), so a caller that answers 201 from `done`
// has committed first.
//
// Reads may come from any thread; they use a small pool of read connections
// and see every committed write.
//
// No SQLite type appears in this header.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/ledger/ledger.h"
#include "unisched/model/job.h"

namespace unisched::store {

struct StoreOptions {
  std::string path;                  // the database file
  std::string synchronous = "full";  // full | normal | off
  int max_batch = 1024;              // writes per transaction at most
};

struct JobEvent {
  Timestamp time{};
  std::string kind;  // submitted, started, completed, failed, cancel_requested, ...
  std::string message;
};

// An event of the cluster (GET /v1/events): a job's events appear there
// with object "job/ID"; nodes' and alerts' events are stored as these.
struct ClusterEvent {
  Timestamp time{};
  std::string kind;               // drain, resume, down, up, registered, alert_firing, alert_resolved, ...
  std::string object;             // node/NAME, alert/NAME/OBJECT, job/ID
  std::string severity = "info";  // info | warning | critical
  std::string message;
};

// One alert (docs/alerts.md): fired when its rule's condition began to hold
// for its object, resolved when it stopped.
struct AlertRecord {
  int64_t id = 0;
  std::string name;    // the rule's name
  std::string kind;    // the rule's kind
  std::string object;  // node/NAME, queue/NAME, ledger, store
  std::string severity;
  std::string message;
  Timestamp fired_at{};
  std::optional<Timestamp> resolved_at{};
};

struct EventFilter {
  std::optional<std::string> kind;
  std::optional<std::string> object;  // exact, or a prefix when it ends with '/' ("node/")
  std::optional<Timestamp> since;     // events at or after
  int limit = 1000;                   // the newest this many
  // Visibility of jobs' events: unset sees all; else jobs of these projects or queues.
  std::optional<std::vector<std::string>> visible_projects;
  std::vector<std::string> visible_queues;
};

struct AuditRecord {
  Timestamp time{};
  std::string actor;   // user name, or "system"
  std::string action;  // e.g. "POST /v1/jobs"
  std::string target;  // e.g. "job/42"
  std::string result;  // e.g. "201" or "403 forbidden"
};

struct UserRecord {
  std::string name;
  std::string role;  // platform-admin | queue-admin | user
  std::vector<std::string> projects;
  std::vector<std::string> queues;
  std::string unix_user;
  bool from_config = false;
};

struct TokenRecord {
  std::string hash;  // hex SHA-256 of the token; the token itself is never stored
  std::string user;
  std::string kind = "user";  // user | node
  std::string pool;           // for node tokens
  Timestamp created_at{};
};

struct NodeStateRecord {
  std::string name;
  model::NodeState state = model::NodeState::kUp;
  std::string reason;
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
  std::vector<std::string> group_by;  // of user, project, queue, pool, workload_kind
  // Visibility: unset sees all; else entries of these projects or queues.
  std::optional<std::vector<std::string>> visible_projects;
  std::vector<std::string> visible_queues;
};
struct UsageRow {
  std::map<std::string, std::string> group;  // group key -> value
  std::map<std::string, double> metrics;     // metric -> total (only metrics with entries)
};

struct JobFilter {
  std::optional<model::JobState> state;
  std::optional<std::string> queue, pool, project, user;
  // Visibility: when set, only jobs whose project is in `projects` or whose
  // queue is in `queues` match (an empty list matches nothing).
  std::optional<std::vector<std::string>> visible_projects;
  std::vector<std::string> visible_queues;
  int limit = 100;                     // 0: count only
  std::optional<model::JobId> cursor;  // return jobs with id < cursor (newest first)
};

struct JobPage {
  std::vector<model::Job> jobs;  // newest first
  int64_t total = 0;             // all matches, ignoring limit and cursor
  std::optional<model::JobId> next_cursor;
};

// The write-side view handed to Write() callbacks. Valid only inside the callback.
// A sandbox (docs/sandboxes.md): its JSON record and the columns queries need.
struct SandboxRow {
  int64_t id = 0;
  std::string state;   // running | deleted | reclaimed | lost | failed
  std::string record;  // JSON
  Timestamp created_at{};
  std::optional<Timestamp> ended_at{};
};

// One version of an image; `spec` is JSON (rootfs, binds).
struct ImageVersionRow {
  std::string name, version, spec, created_by;
  Timestamp created_at{};
};

class Transaction {
 public:
  virtual ~Transaction() = default;
  // Inserts a job and returns its id: job.id when it is set (from
  // Store::ReserveJobId), else a new one. `doc` is the job's JSON
  // (codec::JobToJson) when the caller already has it, else empty. If
  // idempotency_key is non-empty it is recorded for (job.user, key).
  virtual Result<model::JobId> InsertJob(const model::Job& job, const std::string& idempotency_key,
                                         const std::string& doc = {}) = 0;
  // The job id a (user, key) pair was first used for, if any.
  virtual std::optional<model::JobId> FindIdempotentJob(const std::string& user, const std::string& key) = 0;
  // Rewrites a job's mutable part (state, reasons, attempts, times, ...).
  virtual Status UpdateJob(const model::Job& job) = 0;
  virtual Result<model::Job> GetJob(model::JobId id) = 0;
  virtual Status AppendEvent(model::JobId id, const JobEvent& event) = 0;
  virtual Status AppendAudit(const AuditRecord& record) = 0;
  // Deletes audit records older than `cutoff` and, beyond those, the oldest
  // past the newest `max_rows`; returns how many went.
  virtual Result<int64_t> PruneAudit(Timestamp cutoff, int64_t max_rows) = 0;
  virtual Status AppendClusterEvent(const ClusterEvent& event) = 0;
  // Records a firing alert (id assigned) or resolves the firing one of the
  // same name and object.
  virtual Status InsertAlert(const AlertRecord& alert) = 0;
  virtual Status ResolveAlert(const std::string& name, const std::string& object, Timestamp at) = 0;
  virtual Status UpsertUser(const UserRecord& user) = 0;
  virtual Status InsertToken(const TokenRecord& token) = 0;
  virtual Status SetNodeState(const NodeStateRecord& node) = 0;
  // Appends a ledger entry; an entry whose key exists already adds nothing.
  virtual Status AppendLedger(const LedgerEntry& entry) = 0;
  // Replaces the stored fairshare usage with `usage`.
  virtual Status SaveFairshareUsage(const FairshareUsage& usage) = 0;
  // Inserts or replaces a sandbox by id.
  virtual Status PutSandbox(const SandboxRow& sandbox) = 0;
  // Adds an image version (an existing name:version is left as it is).
  virtual Status PutImageVersion(const ImageVersionRow& image) = 0;
  // Makes `version` the image's current one (pushed on its stack); PopImageCurrent
  // takes the top off again (rollback).
  virtual Status PushImageCurrent(const std::string& name, const std::string& version, Timestamp at) = 0;
  virtual Status PopImageCurrent(const std::string& name) = 0;
  // Deletes terminal jobs that ended before `cutoff`; returns their ids.
  virtual Result<std::vector<model::JobId>> DeleteJobsEndedBefore(Timestamp cutoff) = 0;
};

class Store {
 public:
  // Opens (creating if needed) and migrates the database.
  static Result<std::unique_ptr<Store>> Open(const StoreOptions& options);
  virtual ~Store() = default;

  // Queues `work` for the writer's next transaction; `done` gets the status
  // after the commit (or the error of `work`, whose changes are rolled back
  // alone: the other writes of its batch still commit).
  //
  // `work` may run more than once: a batch first runs without savepoints,
  // and when one of its writes fails the whole transaction is rolled back
  // and the batch runs again, each write in its own savepoint. So `work`
  // must not consume or change what it captured, apart from results it
  // overwrites (an id, a flag); changes in memory belong in `done`.
  virtual void Write(std::function<Status(Transaction&)> work, std::function<void(Status)> done) = 0;
  // Write() and wait for the commit.
  virtual Status WriteSync(std::function<Status(Transaction&)> work) = 0;
  // A job id no committed or reserved job has had, from any thread. Lets the
  // API build a job's JSON (and its 201 answer) before queueing the insert,
  // so the single writer only writes. An id whose insert never commits is
  // simply never used; ids are unique and increasing, not gap-free.
  virtual model::JobId ReserveJobId() = 0;

  // ---- reads (any thread) ----
  virtual Result<model::Job> GetJob(model::JobId id) const = 0;
  virtual JobPage ListJobs(const JobFilter& filter) const = 0;
  // PENDING, HELD and RUNNING jobs, oldest first: what the controller loads at start.
  virtual std::vector<model::Job> LoadActiveJobs() const = 0;
  // Job counts by (state, queue, pool), for metrics at start-up.
  virtual std::map<std::tuple<model::JobState, std::string, std::string>, int64_t> CountJobs() const = 0;
  virtual std::vector<JobEvent> ListEvents(model::JobId id) const = 0;
  // Cluster and job events, oldest first (the newest filter.limit of them).
  virtual std::vector<ClusterEvent> ListClusterEvents(const EventFilter& filter) const = 0;
  // Alerts, newest first; `firing`: only unresolved (true) or resolved (false).
  virtual std::vector<AlertRecord> ListAlerts(std::optional<bool> firing, int limit) const = 0;
  virtual std::vector<AuditRecord> ListAudit(int limit) const = 0;
  virtual std::optional<TokenRecord> FindToken(const std::string& hash) const = 0;
  virtual std::optional<UserRecord> GetUser(const std::string& name) const = 0;
  virtual std::vector<UserRecord> ListUsers() const = 0;
  virtual std::vector<NodeStateRecord> LoadNodeStates() const = 0;
  virtual FairshareUsage LoadFairshareUsage() const = 0;
  // The ledger's sums of one attempt (recovery of interim charging).
  virtual LedgerCharged LoadLedgerCharged(model::JobId job, int attempt) const = 0;
  // Every attempt's ledger sums, for reconciliation.
  virtual std::map<std::pair<model::JobId, int>, LedgerCharged> LoadAllLedgerCharged() const = 0;
  virtual std::vector<UsageRow> QueryUsage(const UsageQuery& query) const = 0;
  virtual int SchemaVersion() const = 0;
  virtual std::optional<SandboxRow> GetSandbox(int64_t id) const = 0;
  // Newest first; active_only: not ended.
  virtual std::vector<SandboxRow> ListSandboxes(bool active_only, int limit) const = 0;
  virtual int64_t MaxSandboxId() const = 0;
  virtual std::vector<ImageVersionRow> ListImageVersions() const = 0;
  // Each image's stack of current versions, oldest first (the last is current).
  virtual std::map<std::string, std::vector<std::string>> ImageCurrentStacks() const = 0;

  // Stops the writer after draining what is queued.
  virtual void Close() = 0;
};

}  // namespace unisched::store
