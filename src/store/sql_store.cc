// The engine of both SQL stores (unisched/store/store.h): one writer
// thread that commits queued writes in groups, a small pool of read
// connections for readers, and job ids reserved from the database in
// blocks. The SQL of each concern lives in its own file (sql_jobs.cc,
// sql_events.cc, sql_identity.cc, sql_accounting.cc, sql_sandboxes.cc,
// sql_config.cc, sql_baselines.cc);
// this file only routes calls to it. What differs between SQLite and
// PostgreSQL is below store/sql.h; opening each is sqlite_store.cc and
// pg_store.cc.

#include "store/sql_store.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "store/job_id_pool.h"
#include "store/reader_pool.h"
#include "store/sql_accounting.h"
#include "store/sql_baselines.h"
#include "store/sql_common.h"
#include "store/sql_config.h"
#include "store/sql_events.h"
#include "store/sql_identity.h"
#include "store/sql_jobs.h"
#include "store/sql_lease.h"
#include "store/sql_sandboxes.h"
#include "store/sql_secrets.h"
#include "store/sql_workflows.h"
#include "unisched/store/store.h"

namespace unisched::store {

Result<model::JobId> ReserveIdBlock(Connection& c, int64_t count) {
  auto stmt = c.Prepare("UPDATE id_blocks SET next_id = next_id + ? WHERE name = 'jobs' RETURNING next_id");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, count);
  auto row = stmt->Step();
  if (!row.ok()) return row.error();
  if (!*row) return Error::Internal("store: id_blocks has no row for jobs");
  const model::JobId end = stmt->Int(0);
  if (auto done = stmt->Step(); !done.ok()) return done.error();
  return end - count;
}

namespace {

// The writer thread's nice value (see Start).
constexpr int kWriterNice = -10;

// ---- the write side ----

class SqlTransaction final : public Transaction {
 public:
  // new_id: a job id for an insert without one (the store's id pool).
  SqlTransaction(Connection& c, std::function<Result<model::JobId>()> new_id) : c_(c), new_id_(std::move(new_id)) {}

  Result<model::JobId> InsertJob(const model::Job& job, const std::string& idempotency_key,
                                 const std::string& doc) override {
    model::JobId id = job.id;
    if (id <= 0) {
      auto fresh = new_id_();
      if (!fresh.ok()) return fresh.error();
      id = *fresh;
    }
    return sql::InsertJob(c_, job, id, idempotency_key, doc);
  }
  std::optional<model::JobId> FindIdempotentJob(const std::string& user, const std::string& key) override {
    return sql::FindIdempotentJob(c_, user, key);
  }
  Status UpdateJob(const model::Job& job) override { return sql::UpdateJob(c_, job); }
  Result<model::Job> GetJob(model::JobId id) override { return sql::GetJob(c_, id); }
  Status AppendEvent(model::JobId id, const JobEvent& event) override { return sql::AppendEvent(c_, id, event); }
  Status PutStep(const StepRecord& step) override { return sql::PutStep(c_, step); }
  Result<std::vector<model::JobId>> DeleteJobsEndedBefore(Timestamp cutoff) override {
    return sql::DeleteJobsEndedBefore(c_, cutoff);
  }

  Status AppendAudit(const AuditRecord& record) override { return sql::AppendAudit(c_, record); }
  Result<int64_t> PruneAudit(Timestamp cutoff, int64_t max_rows) override {
    return sql::PruneAudit(c_, cutoff, max_rows);
  }
  Status AppendClusterEvent(const ClusterEvent& event) override { return sql::AppendClusterEvent(c_, event); }
  Status InsertAlert(const AlertRecord& alert) override { return sql::InsertAlert(c_, alert); }
  Status ResolveAlert(const std::string& name, const std::string& object, Timestamp at) override {
    return sql::ResolveAlert(c_, name, object, at);
  }

  Status UpsertUser(const UserRecord& user) override { return sql::UpsertUser(c_, user); }
  Status InsertToken(const TokenRecord& token) override { return sql::InsertToken(c_, token); }
  Status RevokeToken(const std::string& id, Timestamp at) override { return sql::RevokeToken(c_, id, at); }
  Status TouchTokens(const std::map<std::string, Timestamp>& last_used) override {
    return sql::TouchTokens(c_, last_used);
  }
  Status AllocateUnixId(const std::string& kind, const std::string& name, int64_t min, int64_t max) override {
    return sql::AllocateUnixId(c_, kind, name, min, max);
  }
  Status SetNodeState(const NodeStateRecord& node) override { return sql::SetNodeState(c_, node); }
  Status SetNodeIdleSince(const std::string& node, std::optional<Timestamp> since) override {
    return sql::SetNodeIdleSince(c_, node, since);
  }

  Status AppendLedger(const LedgerEntry& entry) override { return sql::AppendLedger(c_, entry); }
  Status SaveFairshareUsage(const FairshareUsage& usage) override { return sql::SaveFairshareUsage(c_, usage); }

  Status PutSandbox(const SandboxRow& sandbox) override { return sql::PutSandbox(c_, sandbox); }
  Status PutImageVersion(const ImageVersionRow& image) override { return sql::PutImageVersion(c_, image); }
  Status PushImageCurrent(const std::string& name, const std::string& version, Timestamp at) override {
    return sql::PushImageCurrent(c_, name, version, at);
  }
  Status PopImageCurrent(const std::string& name) override { return sql::PopImageCurrent(c_, name); }

  // Reserves `count` job ids in this transaction (SqlStore::ReserveBlockAhead).
  Result<model::JobId> ReserveBlock(int64_t count) { return ReserveIdBlock(c_, count); }
  Result<model::JobId> ReserveJobIds(int64_t count) override { return ReserveIdBlock(c_, count); }

 private:
  Connection& c_;
  std::function<Result<model::JobId>()> new_id_;
};

// ---- the store ----

struct WriteItem {
  std::function<Status(Transaction&)> work;
  std::function<void(Status)> done;
};

Status RunWork(const std::function<Status(Transaction&)>& work, Transaction& txn) {
  try {
    return work(txn);
  } catch (const std::exception& e) {
    return Error::Internal(std::string("store: write failed: ") + e.what());
  } catch (...) {
    return Error::Internal("store: write failed with an unknown exception");
  }
}

void CallDone(const std::function<void(Status)>& done, Status status) {
  if (!done) return;
  // A throwing callback must not take the writer thread (and every later write) down.
  try {
    done(std::move(status));
  } catch (...) {
  }
}

class SqlStore final : public Store {
 public:
  SqlStore(const StoreOptions& options, std::unique_ptr<Connection> writer, ConnectionFactory readers,
           ConnectionFactory lease_connection, int schema_version, model::JobId first_id)
      : options_(options),
        writer_(std::move(writer)),
        schema_version_(schema_version),
        readers_(std::move(readers)),
        open_lease_connection_(std::move(lease_connection)),
        ids_(options.job_id_block) {
    ids_.Grant(first_id, first_id + ids_.block_size());
    Start();
  }

  ~SqlStore() override { Close(); }

  void Write(std::function<Status(Transaction&)> work, std::function<void(Status)> done) override {
    {
      std::lock_guard lock(mu_);
      if (!closing_) {
        queue_.push_back({std::move(work), std::move(done)});
        cv_.notify_one();
        return;
      }
    }
    CallDone(done, Error::Unavailable("store: closed"));
  }

  Status WriteSync(std::function<Status(Transaction&)> work) override {
    if (std::this_thread::get_id() == writer_id_) {
      return Error::Internal("store: WriteSync from the writer thread would wait for itself");
    }
    std::promise<Status> promise;
    auto future = promise.get_future();
    Write(std::move(work), [&promise](Status s) { promise.set_value(std::move(s)); });
    return future.get();
  }

  Result<model::JobId> ReserveJobId() override {
    std::unique_lock lock(ids_mu_);
    for (;;) {
      // Read before a reservation can end (even inline, when the store is
      // closed), so the wait below sees that end.
      const uint64_t generation = reservations_ended_;
      const std::optional<model::JobId> id = ids_.TryTake();
      if (ids_.StartReservation()) {
        lock.unlock();
        ReserveBlockAhead();
        lock.lock();
      }
      if (id) return *id;
      // The writer cannot wait for its own write: in a `done` callback it
      // reserves the id directly (outside a transaction, committed at once).
      if (std::this_thread::get_id() == writer_id_) {
        lock.unlock();
        return ReserveOneOnWriter();
      }
      ids_cv_.wait(lock, [&] { return reservations_ended_ != generation; });
      if (!last_reservation_.ok()) return last_reservation_.error();
    }
  }

  // ---- reads (any thread) ----
  Result<model::Job> GetJob(model::JobId id) const override {
    auto lease = readers_.Acquire();
    if (!lease.ok()) return lease.error();
    return sql::GetJob(**lease, id);
  }
  std::vector<WaitingJob> ListWaitingJobs(const JobFilter& visibility) const override {
    return OrThrow(sql::ListWaitingJobs(*OrThrow(readers_.Acquire()), visibility));
  }
  JobPage ListJobs(const JobFilter& filter) const override {
    return OrThrow(sql::ListJobs(*OrThrow(readers_.Acquire()), filter));
  }
  std::vector<model::Job> LoadActiveJobs() const override {
    return OrThrow(sql::LoadActiveJobs(*OrThrow(readers_.Acquire())));
  }
  Result<StepRecord> GetStep(model::JobId job, int step) const override {
    auto lease = readers_.Acquire();
    if (!lease.ok()) return lease.error();
    return sql::GetStep(**lease, job, step);
  }
  std::vector<StepRecord> LoadActiveSteps() const override {
    return OrThrow(sql::LoadActiveSteps(*OrThrow(readers_.Acquire())));
  }
  std::vector<model::Job> LoadLatestEndedJobs(int per_key) const override {
    return OrThrow(sql::LoadLatestEndedJobs(*OrThrow(readers_.Acquire()), per_key));
  }
  std::map<std::tuple<model::JobState, std::string, std::string>, int64_t> CountJobs() const override {
    return sql::CountJobs(*OrThrow(readers_.Acquire()));
  }
  std::vector<JobEvent> ListEvents(model::JobId id) const override {
    return sql::ListEvents(*OrThrow(readers_.Acquire()), id);
  }

  std::vector<ClusterEvent> ListClusterEvents(const EventFilter& filter) const override {
    return sql::ListClusterEvents(*OrThrow(readers_.Acquire()), filter);
  }
  std::vector<AlertRecord> ListAlerts(std::optional<bool> firing, int limit) const override {
    return sql::ListAlerts(*OrThrow(readers_.Acquire()), firing, limit);
  }
  std::vector<AuditRecord> ListAudit(int limit) const override {
    return sql::ListAudit(*OrThrow(readers_.Acquire()), limit);
  }

  std::optional<TokenRecord> FindToken(const std::string& hash) const override {
    return sql::FindToken(*OrThrow(readers_.Acquire()), hash);
  }
  std::optional<TokenRecord> FindTokenById(const std::string& id) const override {
    return sql::FindTokenById(*OrThrow(readers_.Acquire()), id);
  }
  std::vector<TokenRecord> ListTokens(const TokenFilter& filter) const override {
    return sql::ListTokens(*OrThrow(readers_.Acquire()), filter);
  }
  std::optional<int64_t> FindUnixId(const std::string& kind, const std::string& name) const override {
    return sql::FindUnixId(*OrThrow(readers_.Acquire()), kind, name);
  }
  std::vector<UnixIdRecord> ListUnixIds() const override { return sql::ListUnixIds(*OrThrow(readers_.Acquire())); }
  std::optional<UserRecord> GetUser(const std::string& name) const override {
    return sql::GetUser(*OrThrow(readers_.Acquire()), name);
  }
  std::vector<UserRecord> ListUsers() const override { return sql::ListUsers(*OrThrow(readers_.Acquire())); }
  std::vector<NodeStateRecord> LoadNodeStates() const override {
    return sql::LoadNodeStates(*OrThrow(readers_.Acquire()));
  }
  std::map<std::string, Timestamp> LoadNodeIdleSince() const override {
    return sql::LoadNodeIdleSince(*OrThrow(readers_.Acquire()));
  }

  LedgerCharged LoadLedgerCharged(model::JobId job, int attempt) const override {
    auto all = sql::LedgerSums(*OrThrow(readers_.Acquire()), std::pair{job, attempt});
    auto it = all.find({job, attempt});
    return it == all.end() ? LedgerCharged{} : it->second;
  }
  std::map<std::pair<model::JobId, int>, LedgerCharged> LoadAllLedgerCharged() const override {
    return sql::LedgerSums(*OrThrow(readers_.Acquire()), std::nullopt);
  }
  std::vector<UsageRow> QueryUsage(const UsageQuery& query) const override {
    return sql::QueryUsage(*OrThrow(readers_.Acquire()), query);
  }
  FairshareUsage LoadFairshareUsage() const override { return sql::LoadFairshareUsage(*OrThrow(readers_.Acquire())); }

  std::optional<SandboxRow> GetSandbox(int64_t id) const override {
    return sql::GetSandbox(*OrThrow(readers_.Acquire()), id);
  }
  std::vector<SandboxRow> ListSandboxes(bool active_only, int limit) const override {
    return sql::ListSandboxes(*OrThrow(readers_.Acquire()), active_only, limit);
  }
  int64_t MaxSandboxId() const override { return sql::MaxSandboxId(*OrThrow(readers_.Acquire())); }
  std::vector<ImageVersionRow> ListImageVersions() const override {
    return sql::ListImageVersions(*OrThrow(readers_.Acquire()));
  }
  std::map<std::string, std::vector<std::string>> ImageCurrentStacks() const override {
    return sql::ImageCurrentStacks(*OrThrow(readers_.Acquire()));
  }

  int SchemaVersion() const override { return schema_version_; }

  // ---- the leader lease (lease.h) ----
  Result<LeaseState> AcquireOrRenewLease(const std::string& replica, std::chrono::milliseconds ttl) override {
    return OnLease([&](Connection& c) { return sql::AcquireOrRenewLease(c, replica, ttl); });
  }

  Status ReleaseLease(const std::string& replica) override {
    return OnLease([&](Connection& c) { return sql::ReleaseLease(c, replica); });
  }

  void FenceWrites(int64_t epoch, const std::string& replica, std::function<void()> on_fenced) override {
    std::lock_guard lock(fence_mu_);
    fence_ = Fence{epoch, replica, std::move(on_fenced), false};
  }

  Status AnnounceReplica(const std::string& replica, const std::string& url) override {
    return OnLease([&](Connection& c) { return sql::AnnounceReplica(c, replica, url); });
  }

  Result<std::string> ReplicaUrl(const std::string& replica) override {
    return OnLease([&](Connection& c) { return sql::ReplicaUrl(c, replica); });
  }

  Result<std::string> ClusterSecret(const std::string& name, const std::string& proposed) override {
    return OnLease([&](Connection& c) { return sql::ClusterSecret(c, name, proposed); });
  }

  // ---- config versions (config_versions.h) ----
  Result<ConfigHead> ReadConfigHead() override {
    return OnLease([&](Connection& c) { return sql::ReadConfigHead(c); });
  }
  Result<std::optional<ConfigVersionRecord>> ReadConfigVersion(int64_t version) override {
    return OnLease([&](Connection& c) { return sql::ReadConfigVersion(c, version); });
  }
  Result<std::vector<ConfigVersionRecord>> ListConfigVersions(int limit) override {
    return OnLease([&](Connection& c) { return sql::ListConfigVersions(c, limit); });
  }
  Result<ConfigHead> ChangeConfig(const ConfigChange& change) override {
    return OnLease([&](Connection& c) { return sql::ChangeConfig(c, change); });
  }

  // ---- secrets (secrets.h) ----
  Status InsertSecret(const SecretRecord& secret) override {
    return OnLease([&](Connection& c) { return sql::InsertSecret(c, secret); });
  }
  Result<std::optional<SecretRecord>> RotateSecret(const SecretRecord& secret) override {
    return OnLease([&](Connection& c) { return sql::RotateSecret(c, secret); });
  }
  Result<std::optional<SecretRecord>> GetSecret(const std::string& project, const std::string& name) override {
    return OnLease([&](Connection& c) { return sql::GetSecret(c, project, name); });
  }
  Result<std::vector<SecretRecord>> ListSecrets(const std::string& project) override {
    return OnLease([&](Connection& c) { return sql::ListSecrets(c, project); });
  }
  Result<bool> DeleteSecret(const std::string& project, const std::string& name) override {
    return OnLease([&](Connection& c) { return sql::DeleteSecret(c, project, name); });
  }

  // ---- workflows (workflows.h) ----
  Result<int64_t> InsertWorkflow(const WorkflowRecord& workflow) override {
    return OnLease([&](Connection& c) { return sql::InsertWorkflow(c, workflow); });
  }
  Status UpdateWorkflow(const WorkflowRecord& workflow) override {
    return OnLease([&](Connection& c) { return sql::UpdateWorkflow(c, workflow); });
  }
  Result<std::optional<WorkflowRecord>> GetWorkflow(int64_t id) override {
    return OnLease([&](Connection& c) { return sql::GetWorkflow(c, id); });
  }
  Result<std::vector<WorkflowRecord>> ListWorkflows(const WorkflowFilter& filter) override {
    return OnLease([&](Connection& c) { return sql::ListWorkflows(c, filter); });
  }

  // ---- baseline runs (baselines.h) ----
  Result<int64_t> InsertBaseline(const BaselineRecord& baseline) override {
    return OnLease([&](Connection& c) { return sql::InsertBaseline(c, baseline); });
  }
  Result<std::optional<BaselineRecord>> GetBaseline(int64_t id) override {
    return OnLease([&](Connection& c) { return sql::GetBaseline(c, id); });
  }
  Result<std::vector<BaselineRecord>> ListBaselines(const std::string& pools, int limit) override {
    return OnLease([&](Connection& c) { return sql::ListBaselines(c, pools, limit); });
  }

  void Close() override {
    {
      std::lock_guard lock(mu_);
      closing_ = true;
    }
    cv_.notify_all();
    // From a `done` callback the writer cannot join itself; it stops after
    // this batch and the destructor joins it.
    if (std::this_thread::get_id() == writer_id_) return;
    std::lock_guard join_lock(join_mu_);
    if (writer_thread_.joinable()) writer_thread_.join();
  }

 private:
  struct Fence {
    int64_t epoch = 0;
    std::string replica;
    std::function<void()> on_fenced;
    bool reported = false;
  };

  // Runs `work` on the lease's connection, one call at a time (lease.h).
  template <typename Work>
  auto OnLease(Work work) -> decltype(work(std::declval<Connection&>())) {
    std::lock_guard lock(lease_mu_);
    auto c = LeaseConnection();
    if (!c.ok()) return c.error();
    return work(**c);
  }

  Result<Connection*> LeaseConnection() {
    if (!lease_connection_) {
      auto opened = open_lease_connection_();
      if (!opened.ok()) return opened.error();
      lease_connection_ = std::move(*opened);
    }
    return lease_connection_.get();
  }

  // Inside the batch's transaction: whether this replica still holds the
  // lease at its fenced epoch (lease.h). The row stays locked until the
  // batch commits, so no takeover lands in between.
  Status CheckFence(Connection& c) {
    std::unique_lock lock(fence_mu_);
    if (!fence_) return Status::Ok();
    const Fence fence = *fence_;
    lock.unlock();
    auto read = c.Prepare("SELECT epoch, holder FROM leader_lease WHERE name = 'leader'" + c.LockReadRows());
    if (!read.ok()) return read.error();
    auto row = read->Step();
    if (!row.ok()) return row.error();
    if (*row && read->Int(0) == fence.epoch && read->Text(1) == fence.replica) return Status::Ok();
    const std::string now = *row ? "epoch " + std::to_string(read->Int(0)) + " of " + read->Text(1) : "no lease";
    lock.lock();
    std::function<void()> report;
    if (fence_ && !fence_->reported) {
      fence_->reported = true;
      report = fence_->on_fenced;
    }
    lock.unlock();
    if (report) report();
    return Error{ErrorKind::kUnavailable,
                 "not_leader",
                 "store: this replica led at epoch " + std::to_string(fence.epoch) +
                     " and no longer leads (the lease is at " + now + "): nothing was written; send it to the leader",
                 {}};
  }

  // Every write of a batch refused by the fence gets its error.
  void FailBatch(std::vector<WriteItem>& batch, const Status& why) {
    for (auto& item : batch) CallDone(item.done, why);
  }

  // Queues the reservation of the next block of job ids; its ids join the
  // pool once committed. Called with a reservation marked in flight.
  void ReserveBlockAhead() {
    auto first = std::make_shared<model::JobId>(0);
    const int64_t count = ids_.block_size();
    Write(
        [first, count](Transaction& t) -> Status {
          auto reserved = static_cast<SqlTransaction&>(t).ReserveBlock(count);
          if (!reserved.ok()) return reserved.error();
          *first = *reserved;
          return Status::Ok();
        },
        [this, first, count](Status status) {
          {
            std::lock_guard lock(ids_mu_);
            if (status.ok()) ids_.Grant(*first, *first + count);
            last_reservation_ = status;
            ids_.EndReservation();
            ++reservations_ended_;
          }
          ids_cv_.notify_all();
        });
  }

  // A job id for the writer thread when the pool is empty: from the pool
  // if a block has landed, else one id reserved on the writer's connection.
  // Inside a transaction (an InsertJob without an id) the reservation
  // commits or rolls back with the job that uses it, so a rolled-back id
  // was never used; outside one (a `done` callback) it commits at once.
  Result<model::JobId> ReserveOneOnWriter() {
    {
      std::lock_guard lock(ids_mu_);
      if (auto id = ids_.TryTake()) return *id;
    }
    return ReserveIdBlock(*writer_, 1);
  }

  void Start() {
    writer_thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "us-store");
      // The writer is the daemon's one serial stage: every submission and
      // every job state change waits for its commit. Under CFS each runnable
      // thread gets an equal share, so with the HTTP threads, the control
      // thread and any jobs on the host runnable, the writer got less CPU
      // than its work needed and commits queued. A higher priority (nice
      // -10 weighs about nine times nice 0) lets it run whenever it has
      // work; it spends most of its time waiting for work or for fsync.
      // Only root may raise a priority; otherwise the writer keeps the
      // daemon's.
      if (::geteuid() == 0) ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kWriterNice);
      WriterLoop();
    });
    writer_id_ = writer_thread_.get_id();
  }

  void WriterLoop() {
    const size_t max_batch = static_cast<size_t>(std::max(options_.max_batch, 1));
    std::vector<WriteItem> batch;
    for (;;) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return closing_ || !queue_.empty(); });
        if (queue_.empty()) return;  // closing, and everything queued is written
        const size_t n = std::min(queue_.size(), max_batch);
        batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.begin() + n));
        queue_.erase(queue_.begin(), queue_.begin() + n);
      }
      RunBatch(batch);
      batch.clear();
    }
  }

  void RunBatch(std::vector<WriteItem>& batch) {
    const auto began = std::chrono::steady_clock::now();
    if (!RunBatchAtOnce(batch)) RunBatchWithSavepoints(batch);
    if (options_.on_commit) {
      options_.on_commit(std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count(), batch.size());
    }
  }

  // The common case: every write succeeds, and the batch is one transaction
  // without savepoints. A savepoint makes SQLite copy each page a write
  // changes first into a sub-journal (~11 pages, 44 KiB, for a submission:
  // the job row, its six indexes, the event and the audit row), which was
  // the writer's largest single cost after SQL itself. Returns false, with
  // the transaction rolled back and no callback called, when a write
  // failed or the commit did not happen; the caller then runs the batch
  // again with savepoints, so each write gets its own outcome.
  bool RunBatchAtOnce(std::vector<WriteItem>& batch) {
    Connection& c = *writer_;
    if (!c.BeginWrite()) return false;
    if (Status fenced = CheckFence(c); !fenced) {
      if (c.InTransaction()) c.Run("ROLLBACK");
      FailBatch(batch, fenced);
      return true;
    }
    // The batch's statements travel pipelined (sql.h): any failure, seen
    // now or at EndPipeline, redoes the batch with savepoints anyway.
    if (!c.BeginPipeline()) {
      c.Run("ROLLBACK");
      return false;
    }
    SqlTransaction txn(c, [this] { return ReserveOneOnWriter(); });
    for (auto& item : batch) {
      if (!RunWork(item.work, txn) || !c.InTransaction()) {
        c.EndPipeline();
        if (c.InTransaction()) c.Run("ROLLBACK");
        return false;
      }
    }
    if (!c.EndPipeline()) {
      if (c.InTransaction()) c.Run("ROLLBACK");
      return false;
    }
    if (Status commit = c.Run("COMMIT"); !commit) {
      if (!c.Lost()) {
        if (c.InTransaction()) c.Run("ROLLBACK");
        return false;
      }
      // The connection went away during COMMIT (a database server that
      // stopped or failed over): the batch may or may not have committed,
      // so running it again could apply it twice. Each write learns that
      // its outcome is unknown; a client retries with its Idempotency-Key.
      for (auto& item : batch) {
        CallDone(item.done, Error::Unavailable("store: the database connection was lost during the commit, which "
                                               "may or may not have happened; retry with the same Idempotency-Key (" +
                                               commit.error().message + ")"));
      }
      return true;
    }
    for (auto& item : batch) CallDone(item.done, Status::Ok());
    return true;
  }

  // One transaction for the whole batch, one savepoint per write.
  void RunBatchWithSavepoints(std::vector<WriteItem>& batch) {
    Connection& c = *writer_;
    std::vector<Status> results(batch.size());
    Status whole = c.BeginWrite();
    if (whole) whole = CheckFence(c);
    if (whole) {
      SqlTransaction txn(c, [this] { return ReserveOneOnWriter(); });
      for (size_t i = 0; i < batch.size() && whole; ++i) {
        if (Status s = c.Run("SAVEPOINT w"); !s) {
          whole = s;
          break;
        }
        results[i] = RunWork(batch[i].work, txn);
        if (!results[i]) {
          if (Status s = c.Run("ROLLBACK TO w"); !s) whole = s;
        }
        if (Status s = c.Run("RELEASE w"); !s && whole) whole = s;
        // Some errors (a full disk, I/O, a lost connection) roll the
        // whole transaction back; then nothing of the batch is left.
        if (whole && !c.InTransaction()) {
          whole = Error::Unavailable("store: the transaction was rolled back by the database after: " +
                                     (results[i] ? std::string("a write") : results[i].error().message));
        }
      }
      if (whole) whole = c.Run("COMMIT");
      if (!whole && c.InTransaction()) c.Run("ROLLBACK");
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      // A write that failed on its own reports its own error; the others
      // share the fate of the commit.
      CallDone(batch[i].done, results[i] ? whole : results[i]);
    }
  }

  const StoreOptions options_;
  std::unique_ptr<Connection> writer_;  // used only by the writer thread once started
  const int schema_version_;
  mutable ReaderPool readers_;
  const ConnectionFactory open_lease_connection_;
  std::mutex lease_mu_;  // guards lease_connection_, used by one call at a time
  std::unique_ptr<Connection> lease_connection_;
  std::mutex fence_mu_;
  std::optional<Fence> fence_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<WriteItem> queue_;
  bool closing_ = false;
  std::mutex join_mu_;
  std::thread writer_thread_;
  std::thread::id writer_id_;  // set before the store is handed out, constant after

  // Job ids (ReserveJobId): guarded by ids_mu_; ids_cv_ wakes callers
  // waiting for a block.
  std::mutex ids_mu_;
  std::condition_variable ids_cv_;
  JobIdPool ids_;
  uint64_t reservations_ended_ = 0;
  Status last_reservation_ = Status::Ok();
};

}  // namespace

std::unique_ptr<Store> MakeSqlStore(const StoreOptions& options, std::unique_ptr<Connection> writer,
                                    ConnectionFactory readers, ConnectionFactory lease_connection, int schema_version,
                                    model::JobId first_id) {
  return std::make_unique<SqlStore>(options, std::move(writer), std::move(readers), std::move(lease_connection),
                                    schema_version, first_id);
}

Result<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  if (options.backend == StoreBackend::kPostgresql) return OpenPostgresStore(options);
  return OpenSqliteStore(options);
}

}  // namespace unisched::store
