#include "testing/memory_store.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>

namespace unisched::testing {

using namespace unisched::store;  // NOLINT: the records of every concern

namespace {

bool Visible(const std::optional<std::vector<std::string>>& projects, const std::vector<std::string>& queues,
             const std::string& project, const std::string& queue) {
  if (!projects) return true;
  return std::find(projects->begin(), projects->end(), project) != projects->end() ||
         std::find(queues.begin(), queues.end(), queue) != queues.end();
}

}  // namespace

// What the SQLite schema holds, as containers. Sequence numbers stand in
// for SQLite's row ids where an order depends on them.
struct MemoryStore::Tables {
  std::map<model::JobId, model::Job> jobs;
  std::map<model::JobId, std::vector<std::pair<int64_t, JobEvent>>> job_events;  // (seq, event)
  std::map<std::pair<model::JobId, int>, std::string> steps;                     // (job, step) -> doc
  std::map<std::pair<std::string, std::string>, model::JobId> idempotency;
  std::vector<std::pair<int64_t, ClusterEvent>> events;  // (seq, event)
  std::vector<AlertRecord> alerts;
  std::vector<std::pair<int64_t, AuditRecord>> audit;  // (id, record)
  std::map<std::string, UserRecord> users;
  std::map<std::string, TokenRecord> tokens;
  std::map<std::pair<std::string, std::string>, int64_t> unix_ids;  // (kind, name) -> id
  std::map<std::string, NodeStateRecord> node_states;
  std::map<std::string, Timestamp> node_idle;
  std::map<std::string, LedgerEntry> ledger;  // by key
  FairshareUsage fairshare;
  std::map<int64_t, SandboxRow> sandboxes;
  std::map<std::pair<std::string, std::string>, ImageVersionRow> images;
  std::vector<std::tuple<int64_t, std::string, std::string>> image_current;  // (seq, name, version)
  int64_t next_seq = 1;                                                      // events, alerts, audit, image_current
};

struct MemoryStore::Data {
  // What readers see: the tables as the last batch left them. The writer
  // works on a copy and publishes it whole, so a reader (even one called
  // from inside a write) never sees half a batch and never waits for one.
  mutable std::mutex mu;
  std::shared_ptr<const Tables> committed = std::make_shared<Tables>();
  // The next job id (ReserveJobId and inserts without one); never reused,
  // even after a job is deleted.
  std::atomic<model::JobId> next_job_id{1};

  std::shared_ptr<const Tables> Snapshot() const {
    std::lock_guard lock(mu);
    return committed;
  }

  // The leader lease (lease.h), under `mu`.
  int64_t lease_epoch = 0;
  std::string lease_holder;
  std::chrono::steady_clock::time_point lease_expires{};
  // The replicas' directory and the cluster secrets, under `mu`.
  std::map<std::string, std::string> replica_urls;
  std::map<std::string, std::string> cluster_secrets;
  // Config versions (config_versions.h), under `mu`.
  std::vector<ConfigVersionRecord> config_versions;  // version i + 1 at [i]
  ConfigHead config_head;
  // Baseline runs (baselines.h), under `mu`.
  std::vector<BaselineRecord> baselines;  // id i + 1 at [i]
  // Secrets (secrets.h) by (project, name), under `mu`.
  std::map<std::pair<std::string, std::string>, SecretRecord> secrets;
  // Workflows (workflows.h) by id, under `mu`.
  std::map<int64_t, store::WorkflowRecord> workflows;
};

struct MemoryStore::Queue {
  struct Item {
    std::function<Status(Transaction&)> work;
    std::function<void(Status)> done;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Item> items;
  bool closing = false;
  std::mutex join_mu;
  std::thread writer;
  std::thread::id writer_id;
  // FenceWrites: (epoch, replica), and what to call when a batch finds it broken.
  std::optional<std::pair<int64_t, std::string>> fence;
  std::function<void()> on_fenced;
};

namespace {

class MemoryTransaction final : public Transaction {
 public:
  MemoryTransaction(MemoryStore::Tables& t, std::atomic<model::JobId>& next_job_id)
      : t_(t), next_job_id_(next_job_id) {}

  Result<model::JobId> ReserveJobIds(int64_t count) override { return next_job_id_.fetch_add(count); }

  Result<model::JobId> InsertJob(const model::Job& job, const std::string& key, const std::string& doc) override {
    (void)doc;  // the record is the job itself
    if (!key.empty()) {
      if (auto first = FindIdempotentJob(job.user, key)) {
        return Error::Conflict("idempotency_key_used",
                               "idempotency key already used for job " + std::to_string(*first));
      }
    }
    const model::JobId id = job.id > 0 ? job.id : next_job_id_.fetch_add(1);
    if (t_.jobs.count(id)) return Error::Conflict("job_exists", "job " + std::to_string(id) + " exists already");
    // An id given by the caller: later ids go above it.
    for (model::JobId next = next_job_id_.load(); next <= id && !next_job_id_.compare_exchange_weak(next, id + 1);) {
    }
    model::Job stored = job;
    stored.id = id;
    t_.jobs[id] = std::move(stored);
    if (!key.empty()) t_.idempotency[{job.user, key}] = id;
    return id;
  }
  std::optional<model::JobId> FindIdempotentJob(const std::string& user, const std::string& key) override {
    auto it = t_.idempotency.find({user, key});
    if (it == t_.idempotency.end()) return std::nullopt;
    return it->second;
  }
  Status UpdateJob(const model::Job& job) override {
    auto it = t_.jobs.find(job.id);
    if (it == t_.jobs.end()) return Error::NotFound("job " + std::to_string(job.id) + " not found");
    it->second = job;
    return Status::Ok();
  }
  Result<model::Job> GetJob(model::JobId id) override {
    auto it = t_.jobs.find(id);
    if (it == t_.jobs.end()) return Error::NotFound("job " + std::to_string(id) + " not found");
    return it->second;
  }
  Status AppendEvent(model::JobId id, const JobEvent& event) override {
    if (!t_.jobs.count(id)) return Error::NotFound("job " + std::to_string(id) + " not found");
    t_.job_events[id].emplace_back(t_.next_seq++, event);
    return Status::Ok();
  }
  Status PutStep(const StepRecord& step) override {
    if (!t_.jobs.count(step.job_id)) return Error::NotFound("job " + std::to_string(step.job_id) + " not found");
    t_.steps[{step.job_id, step.step}] = step.doc;
    return Status::Ok();
  }
  Result<std::vector<model::JobId>> DeleteJobsEndedBefore(Timestamp cutoff) override {
    std::vector<model::JobId> ids;
    for (auto it = t_.jobs.begin(); it != t_.jobs.end();) {
      const model::Job& job = it->second;
      if (model::IsTerminal(job.state) && job.ended_at && *job.ended_at < cutoff) {
        ids.push_back(it->first);
        t_.job_events.erase(it->first);
        std::erase_if(t_.steps, [&](const auto& entry) { return entry.first.first == it->first; });
        std::erase_if(t_.idempotency, [&](const auto& entry) { return entry.second == it->first; });
        it = t_.jobs.erase(it);
      } else {
        ++it;
      }
    }
    return ids;
  }

  Status AppendAudit(const AuditRecord& record) override {
    t_.audit.emplace_back(t_.next_seq++, record);
    return Status::Ok();
  }
  Result<int64_t> PruneAudit(Timestamp cutoff, int64_t max_rows) override {
    // As the SQLite store: records before the first at or after the cutoff,
    // and all but the newest max_rows (ids grow with time).
    const size_t before = t_.audit.size();
    auto first_recent =
        std::find_if(t_.audit.begin(), t_.audit.end(), [&](const auto& r) { return r.second.time >= cutoff; });
    t_.audit.erase(t_.audit.begin(), first_recent);
    if (max_rows >= 0 && t_.audit.size() > static_cast<size_t>(max_rows)) {
      t_.audit.erase(t_.audit.begin(), t_.audit.end() - max_rows);
    }
    return static_cast<int64_t>(before - t_.audit.size());
  }
  Status AppendClusterEvent(const ClusterEvent& event) override {
    t_.events.emplace_back(t_.next_seq++, event);
    return Status::Ok();
  }
  Status InsertAlert(const AlertRecord& alert) override {
    AlertRecord stored = alert;
    stored.id = t_.next_seq++;
    stored.resolved_at.reset();
    t_.alerts.push_back(std::move(stored));
    return Status::Ok();
  }
  Status ResolveAlert(const std::string& name, const std::string& object, Timestamp at) override {
    for (auto& alert : t_.alerts) {
      if (alert.name == name && alert.object == object && !alert.resolved_at) alert.resolved_at = at;
    }
    return Status::Ok();
  }

  Status UpsertUser(const UserRecord& user) override {
    t_.users[user.name] = user;
    return Status::Ok();
  }
  Status InsertToken(const TokenRecord& token) override {
    if (t_.tokens.count(token.hash)) return Error::Conflict("token_exists", "a token with this hash already exists");
    t_.tokens[token.hash] = token;
    if (token.id.empty()) t_.tokens[token.hash].id = TokenId(token.hash);
    return Status::Ok();
  }
  Status RevokeToken(const std::string& id, Timestamp at) override {
    for (auto& [hash, token] : t_.tokens) {
      if (token.id != id) continue;
      if (!token.revoked_at) token.revoked_at = at;
      return Status::Ok();
    }
    return Error::NotFound("no token " + id);
  }
  Status AllocateUnixId(const std::string& kind, const std::string& name, int64_t min, int64_t max) override {
    int64_t next = min;
    for (const auto& [key, id] : t_.unix_ids) {
      if (key.first == kind && key.second == name) return Status::Ok();
      if (key.first == kind && id >= min && id <= max) next = std::max(next, id + 1);
    }
    if (next > max) return Error::Conflict("id_range_exhausted", "no " + kind + " id is left");
    t_.unix_ids[{kind, name}] = next;
    return Status::Ok();
  }
  Status TouchTokens(const std::map<std::string, Timestamp>& last_used) override {
    for (const auto& [hash, at] : last_used) {
      auto it = t_.tokens.find(hash);
      if (it != t_.tokens.end() && (!it->second.last_used_at || *it->second.last_used_at < at)) {
        it->second.last_used_at = at;
      }
    }
    return Status::Ok();
  }
  Status SetNodeState(const NodeStateRecord& node) override {
    t_.node_states[node.name] = node;
    return Status::Ok();
  }
  Status SetNodeIdleSince(const std::string& node, std::optional<Timestamp> since) override {
    if (since) {
      t_.node_idle[node] = *since;
    } else {
      t_.node_idle.erase(node);
    }
    return Status::Ok();
  }

  Status AppendLedger(const LedgerEntry& entry) override {
    t_.ledger.emplace(entry.key, entry);  // an existing key keeps its entry
    return Status::Ok();
  }
  Status SaveFairshareUsage(const FairshareUsage& usage) override {
    t_.fairshare = usage;
    return Status::Ok();
  }

  Status PutSandbox(const SandboxRow& sandbox) override {
    t_.sandboxes[sandbox.id] = sandbox;
    return Status::Ok();
  }
  Status PutImageVersion(const ImageVersionRow& image) override {
    t_.images.emplace(std::pair{image.name, image.version}, image);
    return Status::Ok();
  }
  Status PushImageCurrent(const std::string& name, const std::string& version, Timestamp at) override {
    (void)at;
    t_.image_current.emplace_back(t_.next_seq++, name, version);
    return Status::Ok();
  }
  Status PopImageCurrent(const std::string& name) override {
    for (auto it = t_.image_current.rbegin(); it != t_.image_current.rend(); ++it) {
      if (std::get<1>(*it) == name) {
        t_.image_current.erase(std::next(it).base());
        break;
      }
    }
    return Status::Ok();
  }

 private:
  MemoryStore::Tables& t_;
  std::atomic<model::JobId>& next_job_id_;
};

Status RunWork(const std::function<Status(Transaction&)>& work, Transaction& txn) {
  try {
    return work(txn);
  } catch (const std::exception& e) {
    return Error::Internal(std::string("store: write failed: ") + e.what());
  }
}

}  // namespace

MemoryStore::MemoryStore() : MemoryStore(std::make_shared<Data>()) {}

MemoryStore::MemoryStore(std::shared_ptr<Data> data) : data_(std::move(data)), queue_(std::make_unique<Queue>()) {
  queue_->writer = std::thread([this] { WriterLoop(); });
  queue_->writer_id = queue_->writer.get_id();
}

MemoryStore::~MemoryStore() {
  Close();
  std::lock_guard join(queue_->join_mu);
  if (queue_->writer.joinable()) queue_->writer.join();
}

std::unique_ptr<MemoryStore> MemoryStore::Reopen() const {
  return std::unique_ptr<MemoryStore>(new MemoryStore(data_));
}

void MemoryStore::Write(std::function<Status(Transaction&)> work, std::function<void(Status)> done) {
  {
    std::lock_guard lock(queue_->mu);
    if (!queue_->closing) {
      queue_->items.push_back({std::move(work), std::move(done)});
      queue_->cv.notify_one();
      return;
    }
  }
  if (done) done(Error::Unavailable("store: closed"));
}

Status MemoryStore::WriteSync(std::function<Status(Transaction&)> work) {
  if (std::this_thread::get_id() == queue_->writer_id) {
    return Error::Internal("store: WriteSync from the writer thread would wait for itself");
  }
  std::promise<Status> promise;
  auto future = promise.get_future();
  Write(std::move(work), [&promise](Status s) { promise.set_value(std::move(s)); });
  return future.get();
}

Result<model::JobId> MemoryStore::ReserveJobId() {
  return data_->next_job_id.fetch_add(1);
}

void MemoryStore::Close() {
  {
    std::lock_guard lock(queue_->mu);
    queue_->closing = true;
  }
  queue_->cv.notify_all();
  if (std::this_thread::get_id() == queue_->writer_id) return;  // from `done`: the destructor joins
  std::lock_guard join(queue_->join_mu);
  if (queue_->writer.joinable()) queue_->writer.join();
}

Result<store::LeaseState> MemoryStore::AcquireOrRenewLease(const std::string& replica, std::chrono::milliseconds ttl) {
  std::lock_guard lock(data_->mu);
  const auto now = std::chrono::steady_clock::now();
  if (data_->lease_holder == replica || data_->lease_expires <= now) {
    if (data_->lease_holder != replica) ++data_->lease_epoch;
    data_->lease_holder = replica;
    data_->lease_expires = now + ttl;
  }
  store::LeaseState state;
  state.epoch = data_->lease_epoch;
  state.holder = data_->lease_holder;
  state.expires_in_ms = std::chrono::duration_cast<std::chrono::milliseconds>(data_->lease_expires - now).count();
  state.ours = state.holder == replica && state.expires_in_ms > 0;
  return state;
}

Status MemoryStore::ReleaseLease(const std::string& replica) {
  std::lock_guard lock(data_->mu);
  if (data_->lease_holder == replica) data_->lease_expires = {};
  return Status::Ok();
}

void MemoryStore::FenceWrites(int64_t epoch, const std::string& replica, std::function<void()> on_fenced) {
  std::lock_guard lock(queue_->mu);
  queue_->fence = std::pair{epoch, replica};
  queue_->on_fenced = std::move(on_fenced);
}

Status MemoryStore::AnnounceReplica(const std::string& replica, const std::string& url) {
  std::lock_guard lock(data_->mu);
  data_->replica_urls[replica] = url;
  return Status::Ok();
}

Result<std::string> MemoryStore::ReplicaUrl(const std::string& replica) {
  std::lock_guard lock(data_->mu);
  auto it = data_->replica_urls.find(replica);
  return it == data_->replica_urls.end() ? std::string() : it->second;
}

Result<std::string> MemoryStore::ClusterSecret(const std::string& name, const std::string& proposed) {
  std::lock_guard lock(data_->mu);
  return data_->cluster_secrets.emplace(name, proposed).first->second;
}

Result<ConfigHead> MemoryStore::ReadConfigHead() {
  std::lock_guard lock(data_->mu);
  return data_->config_head;
}

Result<std::optional<ConfigVersionRecord>> MemoryStore::ReadConfigVersion(int64_t version) {
  std::lock_guard lock(data_->mu);
  const auto& versions = data_->config_versions;
  if (version < 1 || version > static_cast<int64_t>(versions.size())) return std::optional<ConfigVersionRecord>();
  return std::optional<ConfigVersionRecord>(versions[version - 1]);
}

Result<std::vector<ConfigVersionRecord>> MemoryStore::ListConfigVersions(int limit) {
  std::lock_guard lock(data_->mu);
  std::vector<ConfigVersionRecord> newest_first;
  for (auto it = data_->config_versions.rbegin();
       it != data_->config_versions.rend() && static_cast<int>(newest_first.size()) < limit; ++it) {
    newest_first.push_back(*it);
    newest_first.back().text.clear();
  }
  return newest_first;
}

Result<ConfigHead> MemoryStore::ChangeConfig(const ConfigChange& change) {
  std::lock_guard lock(data_->mu);
  ConfigHead& head = data_->config_head;
  if (head.changes != change.expected_changes) {
    return Error::Conflict("config_changed", "the config changed meanwhile; read it again and retry");
  }
  const Timestamp now = std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
  int64_t added = 0;
  if (change.add) {
    ConfigVersionRecord record = *change.add;
    record.version = added = static_cast<int64_t>(data_->config_versions.size()) + 1;
    record.created_at = now;
    data_->config_versions.push_back(std::move(record));
  }
  auto resolve = [added](int64_t v) { return v == kAddedVersion ? added : v; };
  const int64_t changes = head.changes + 1;
  head = change.head;
  head.current = resolve(head.current);
  head.previous = resolve(head.previous);
  head.canary = resolve(head.canary);
  if (head.canary == 0) head.canary_queue.clear();
  head.changes = changes;
  head.changed_at = now;
  return head;
}

Result<int64_t> MemoryStore::InsertBaseline(const BaselineRecord& baseline) {
  std::lock_guard lock(data_->mu);
  BaselineRecord stored = baseline;
  stored.id = static_cast<int64_t>(data_->baselines.size()) + 1;
  data_->baselines.push_back(std::move(stored));
  return data_->baselines.back().id;
}

Result<std::optional<BaselineRecord>> MemoryStore::GetBaseline(int64_t id) {
  std::lock_guard lock(data_->mu);
  if (id < 1 || id > static_cast<int64_t>(data_->baselines.size())) return std::optional<BaselineRecord>();
  return std::optional<BaselineRecord>(data_->baselines[id - 1]);
}

Result<std::vector<BaselineRecord>> MemoryStore::ListBaselines(const std::string& pools, int limit) {
  std::lock_guard lock(data_->mu);
  std::vector<BaselineRecord> newest_first;
  for (auto it = data_->baselines.rbegin();
       it != data_->baselines.rend() && static_cast<int>(newest_first.size()) < limit; ++it) {
    if (pools.empty() || it->pools == pools) newest_first.push_back(*it);
  }
  return newest_first;
}

Result<int64_t> MemoryStore::InsertWorkflow(const store::WorkflowRecord& workflow) {
  std::lock_guard lock(data_->mu);
  const int64_t id = data_->workflows.empty() ? 1 : data_->workflows.rbegin()->first + 1;
  store::WorkflowRecord stored = workflow;
  stored.id = id;
  data_->workflows[id] = std::move(stored);
  return id;
}

Status MemoryStore::UpdateWorkflow(const store::WorkflowRecord& workflow) {
  std::lock_guard lock(data_->mu);
  auto it = data_->workflows.find(workflow.id);
  if (it == data_->workflows.end()) return Error::NotFound("no workflow " + std::to_string(workflow.id));
  const auto created = it->second.created_at;
  const auto project = it->second.project;
  const auto user = it->second.user;
  it->second = workflow;
  it->second.created_at = created;
  it->second.project = project;
  it->second.user = user;
  return Status::Ok();
}

Result<std::optional<store::WorkflowRecord>> MemoryStore::GetWorkflow(int64_t id) {
  std::lock_guard lock(data_->mu);
  auto it = data_->workflows.find(id);
  if (it == data_->workflows.end()) return std::optional<store::WorkflowRecord>();
  return std::optional<store::WorkflowRecord>(it->second);
}

Result<std::vector<store::WorkflowRecord>> MemoryStore::ListWorkflows(const store::WorkflowFilter& filter) {
  std::lock_guard lock(data_->mu);
  std::vector<store::WorkflowRecord> out;
  auto it = filter.before_id > 0 ? std::make_reverse_iterator(data_->workflows.lower_bound(filter.before_id))
                                 : data_->workflows.rbegin();
  for (; it != data_->workflows.rend() && static_cast<int>(out.size()) < filter.limit; ++it) {
    const store::WorkflowRecord& w = it->second;
    if ((filter.active_only && w.ended_at) || (!filter.state.empty() && w.state != filter.state) ||
        (!filter.project.empty() && w.project != filter.project)) {
      continue;
    }
    out.push_back(w);
    if (!filter.with_documents) out.back().document.clear();
  }
  return out;
}

Status MemoryStore::InsertSecret(const SecretRecord& secret) {
  std::lock_guard lock(data_->mu);
  SecretRecord stored = secret;
  stored.version = 1;
  stored.updated_by = secret.created_by;
  stored.updated_at = secret.created_at;
  if (!data_->secrets.emplace(std::make_pair(secret.project, secret.name), std::move(stored)).second) {
    return Error::Conflict("secret_exists", "project " + secret.project + " already has a secret named " + secret.name);
  }
  return Status::Ok();
}

Result<std::optional<SecretRecord>> MemoryStore::RotateSecret(const SecretRecord& secret) {
  std::lock_guard lock(data_->mu);
  auto it = data_->secrets.find({secret.project, secret.name});
  if (it == data_->secrets.end()) return std::optional<SecretRecord>();
  SecretRecord& stored = it->second;
  ++stored.version;
  stored.sealed = secret.sealed;
  if (!secret.description.empty()) stored.description = secret.description;
  stored.updated_by = secret.updated_by;
  stored.updated_at = secret.updated_at;
  return std::optional<SecretRecord>(stored);
}

Result<std::optional<SecretRecord>> MemoryStore::GetSecret(const std::string& project, const std::string& name) {
  std::lock_guard lock(data_->mu);
  auto it = data_->secrets.find({project, name});
  if (it == data_->secrets.end()) return std::optional<SecretRecord>();
  return std::optional<SecretRecord>(it->second);
}

Result<std::vector<SecretRecord>> MemoryStore::ListSecrets(const std::string& project) {
  std::lock_guard lock(data_->mu);
  std::vector<SecretRecord> secrets;
  for (const auto& [key, secret] : data_->secrets) {
    if (project.empty() || key.first == project) secrets.push_back(secret);
  }
  return secrets;
}

Result<bool> MemoryStore::DeleteSecret(const std::string& project, const std::string& name) {
  std::lock_guard lock(data_->mu);
  return data_->secrets.erase({project, name}) > 0;
}

void MemoryStore::WriterLoop() {
  for (;;) {
    std::deque<Queue::Item> batch;
    {
      std::unique_lock lock(queue_->mu);
      queue_->cv.wait(lock, [&] { return queue_->closing || !queue_->items.empty(); });
      if (queue_->items.empty()) return;
      batch.swap(queue_->items);
    }
    std::optional<std::pair<int64_t, std::string>> fence;
    {
      std::lock_guard lock(queue_->mu);
      fence = queue_->fence;
    }
    // The fence check and the publication of the batch under one hold of
    // data_->mu would be the SQL stores' row lock; here a takeover between
    // the two is possible but harmless for the tests that use this store.
    if (fence) {
      std::unique_lock lock(data_->mu);
      if (data_->lease_epoch != fence->first || data_->lease_holder != fence->second) {
        lock.unlock();
        std::function<void()> report;
        {
          std::lock_guard queue_lock(queue_->mu);
          report = std::exchange(queue_->on_fenced, nullptr);
        }
        if (report) report();
        const Error not_leader{
            ErrorKind::kUnavailable, "not_leader", "store: this replica no longer leads: nothing was written", {}};
        for (auto& item : batch) {
          if (item.done) item.done(not_leader);
        }
        continue;
      }
    }
    std::vector<Status> results;
    auto tables = std::make_shared<Tables>(*data_->Snapshot());
    MemoryTransaction txn(*tables, data_->next_job_id);
    for (auto& item : batch) {
      // A savepoint: the tables as they were, put back if the write fails.
      Tables before = *tables;
      results.push_back(RunWork(item.work, txn));
      if (!results.back().ok()) *tables = std::move(before);
    }
    {
      std::lock_guard lock(data_->mu);
      data_->committed = std::move(tables);
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!batch[i].done) continue;
      try {
        batch[i].done(results[i]);
      } catch (...) {
      }
    }
  }
}

// ---- reads ----

Result<model::Job> MemoryStore::GetJob(model::JobId id) const {
  const auto snapshot = data_->Snapshot();
  auto it = snapshot->jobs.find(id);
  if (it == snapshot->jobs.end()) return Error::NotFound("job " + std::to_string(id) + " not found");
  return it->second;
}

JobPage MemoryStore::ListJobs(const JobFilter& f) const {
  const auto snapshot = data_->Snapshot();
  JobPage page;
  const int limit = std::max(f.limit, 0);
  for (auto it = snapshot->jobs.rbegin(); it != snapshot->jobs.rend(); ++it) {
    const model::Job& job = it->second;
    if ((f.state && job.state != *f.state) || (f.queue && job.queue != *f.queue) || (f.pool && job.pool != *f.pool) ||
        (f.project && job.project != *f.project) || (f.user && job.user != *f.user) ||
        !Visible(f.visible_projects, f.visible_queues, job.project, job.queue) ||
        (f.ids && (job.id < f.ids->first || job.id >= f.ids->second))) {
      continue;
    }
    ++page.total;
    if (f.cursor && job.id >= *f.cursor) continue;
    if (page.jobs.size() < static_cast<size_t>(limit)) {
      page.jobs.push_back(job);
    } else if (limit > 0 && !page.next_cursor) {
      page.next_cursor = page.jobs.back().id;
    }
  }
  return page;
}

std::vector<WaitingJob> MemoryStore::ListWaitingJobs(const JobFilter& f) const {
  const auto snapshot = data_->Snapshot();
  std::vector<WaitingJob> out;
  for (const auto& [id, job] : snapshot->jobs) {
    if (job.state != model::JobState::kPending && job.state != model::JobState::kHeld) continue;
    if (!Visible(f.visible_projects, f.visible_queues, job.project, job.queue)) continue;
    out.push_back({job.id, job.name, job.user, job.project, job.queue, job.pool, job.state, job.submitted_at});
  }
  std::stable_sort(out.begin(), out.end(),  // ids ascending already: ties stay in id order
                   [](const WaitingJob& a, const WaitingJob& b) { return a.submitted_at < b.submitted_at; });
  return out;
}

std::vector<model::Job> MemoryStore::LoadActiveJobs() const {
  const auto snapshot = data_->Snapshot();
  std::vector<model::Job> out;
  for (const auto& [id, job] : snapshot->jobs) {
    if (!model::IsTerminal(job.state)) out.push_back(job);
  }
  return out;
}

Result<store::StepRecord> MemoryStore::GetStep(model::JobId job, int step) const {
  const auto snapshot = data_->Snapshot();
  auto it = snapshot->steps.find({job, step});
  if (it == snapshot->steps.end()) {
    return Error::NotFound("job " + std::to_string(job) + " has no step " + std::to_string(step));
  }
  return store::StepRecord{job, step, it->second};
}

std::vector<store::StepRecord> MemoryStore::LoadActiveSteps() const {
  const auto snapshot = data_->Snapshot();
  std::vector<store::StepRecord> out;
  for (const auto& [key, doc] : snapshot->steps) {
    auto job = snapshot->jobs.find(key.first);
    if (job != snapshot->jobs.end() && !model::IsTerminal(job->second.state))
      out.push_back({key.first, key.second, doc});
  }
  return out;
}

std::vector<model::Job> MemoryStore::LoadLatestEndedJobs(int per_key) const {
  const auto snapshot = data_->Snapshot();
  std::vector<const model::Job*> ended;
  for (const auto& [id, job] : snapshot->jobs) {
    if (job.ended_at) ended.push_back(&job);
  }
  auto later = [](const model::Job* a, const model::Job* b) {
    return std::tie(*a->ended_at, a->id) > std::tie(*b->ended_at, b->id);
  };
  std::sort(ended.begin(), ended.end(), later);
  std::map<std::string, int> by_user;
  std::map<std::pair<std::string, std::string>, int> by_name;
  std::vector<model::Job> out;
  for (const model::Job* job : ended) {
    const bool user_latest = ++by_user[job->user] <= per_key;
    const bool name_latest = ++by_name[{job->user, job->name}] <= per_key;
    if (user_latest || name_latest) out.push_back(*job);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::map<std::tuple<model::JobState, std::string, std::string>, int64_t> MemoryStore::CountJobs() const {
  const auto snapshot = data_->Snapshot();
  std::map<std::tuple<model::JobState, std::string, std::string>, int64_t> counts;
  for (const auto& [id, job] : snapshot->jobs) ++counts[{job.state, job.queue, job.pool}];
  return counts;
}

std::vector<JobEvent> MemoryStore::ListEvents(model::JobId id) const {
  const auto snapshot = data_->Snapshot();
  std::vector<JobEvent> out;
  auto it = snapshot->job_events.find(id);
  if (it != snapshot->job_events.end()) {
    for (const auto& [seq, event] : it->second) out.push_back(event);
  }
  return out;
}

std::vector<ClusterEvent> MemoryStore::ListClusterEvents(const EventFilter& f) const {
  const auto snapshot = data_->Snapshot();
  const Tables& t = *snapshot;
  // (time, source: 1 cluster / 0 job, seq) orders as the SQLite store does.
  std::vector<std::tuple<Timestamp, int, int64_t, ClusterEvent>> all;
  const bool prefix = f.object && !f.object->empty() && f.object->back() == '/';
  auto object_matches = [&](const std::string& object) {
    if (!f.object) return true;
    return prefix ? object.rfind(*f.object, 0) == 0 : object == *f.object;
  };
  for (const auto& [seq, e] : t.events) {
    if ((f.since && e.time < *f.since) || (f.kind && e.kind != *f.kind) || !object_matches(e.object)) continue;
    all.emplace_back(e.time, 1, seq, e);
  }
  for (const auto& [id, events] : t.job_events) {
    const std::string object = "job/" + std::to_string(id);
    if (f.object && (prefix ? *f.object != "job/" : *f.object != object)) continue;
    if (f.visible_projects) {
      auto job = t.jobs.find(id);
      if (job == t.jobs.end() ||
          !Visible(f.visible_projects, f.visible_queues, job->second.project, job->second.queue)) {
        continue;
      }
    }
    for (const auto& [seq, e] : events) {
      if ((f.since && e.time < *f.since) || (f.kind && e.kind != *f.kind)) continue;
      all.emplace_back(
          e.time, 0, seq,
          ClusterEvent{e.time, e.kind, object, e.kind == "ledger_discrepancy" ? "warning" : "info", e.message});
    }
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a), std::get<2>(a)) >
           std::tie(std::get<0>(b), std::get<1>(b), std::get<2>(b));
  });
  if (all.size() > static_cast<size_t>(std::max(f.limit, 0))) all.resize(static_cast<size_t>(std::max(f.limit, 0)));
  std::vector<ClusterEvent> out;
  for (auto it = all.rbegin(); it != all.rend(); ++it) out.push_back(std::get<3>(*it));
  return out;
}

std::vector<AlertRecord> MemoryStore::ListAlerts(std::optional<bool> firing, int limit) const {
  const auto snapshot = data_->Snapshot();
  std::vector<AlertRecord> out;
  for (auto it = snapshot->alerts.rbegin(); it != snapshot->alerts.rend(); ++it) {
    if (out.size() >= static_cast<size_t>(std::max(limit, 0))) break;
    if (firing && *firing == it->resolved_at.has_value()) continue;
    out.push_back(*it);
  }
  return out;
}

std::vector<AuditRecord> MemoryStore::ListAudit(int limit) const {
  const auto snapshot = data_->Snapshot();
  std::vector<AuditRecord> out;
  for (auto it = snapshot->audit.rbegin();
       it != snapshot->audit.rend() && out.size() < static_cast<size_t>(std::max(limit, 0)); ++it) {
    out.push_back(it->second);
  }
  return out;
}

std::optional<TokenRecord> MemoryStore::FindToken(const std::string& hash) const {
  const auto snapshot = data_->Snapshot();
  auto it = snapshot->tokens.find(hash);
  if (it == snapshot->tokens.end()) return std::nullopt;
  return it->second;
}

std::optional<TokenRecord> MemoryStore::FindTokenById(const std::string& id) const {
  const auto snapshot = data_->Snapshot();
  for (const auto& [hash, token] : snapshot->tokens) {
    if (token.id == id) return token;
  }
  return std::nullopt;
}

std::vector<TokenRecord> MemoryStore::ListTokens(const TokenFilter& filter) const {
  const auto snapshot = data_->Snapshot();
  std::vector<TokenRecord> out;
  for (const auto& [hash, token] : snapshot->tokens) {
    if ((filter.user.empty() || token.user == filter.user) && (filter.kind.empty() || token.kind == filter.kind)) {
      out.push_back(token);
    }
  }
  std::sort(out.begin(), out.end(), [](const TokenRecord& a, const TokenRecord& b) {
    return std::tie(a.created_at, a.id) < std::tie(b.created_at, b.id);
  });
  return out;
}

std::optional<int64_t> MemoryStore::FindUnixId(const std::string& kind, const std::string& name) const {
  const auto snapshot = data_->Snapshot();
  auto it = snapshot->unix_ids.find({kind, name});
  if (it == snapshot->unix_ids.end()) return std::nullopt;
  return it->second;
}

std::vector<UnixIdRecord> MemoryStore::ListUnixIds() const {
  const auto snapshot = data_->Snapshot();
  std::vector<UnixIdRecord> out;
  for (const auto& [key, id] : snapshot->unix_ids) out.push_back({key.first, key.second, id});
  std::sort(out.begin(), out.end(), [](const UnixIdRecord& a, const UnixIdRecord& b) {
    return std::tie(a.kind, a.id) < std::tie(b.kind, b.id);
  });
  return out;
}

std::optional<UserRecord> MemoryStore::GetUser(const std::string& name) const {
  const auto snapshot = data_->Snapshot();
  auto it = snapshot->users.find(name);
  if (it == snapshot->users.end()) return std::nullopt;
  return it->second;
}

std::vector<UserRecord> MemoryStore::ListUsers() const {
  const auto snapshot = data_->Snapshot();
  std::vector<UserRecord> out;
  for (const auto& [name, user] : snapshot->users) out.push_back(user);
  return out;
}

std::vector<NodeStateRecord> MemoryStore::LoadNodeStates() const {
  const auto snapshot = data_->Snapshot();
  std::vector<NodeStateRecord> out;
  for (const auto& [name, node] : snapshot->node_states) out.push_back(node);
  return out;
}

std::map<std::string, Timestamp> MemoryStore::LoadNodeIdleSince() const {
  return data_->Snapshot()->node_idle;
}

namespace {

std::map<std::pair<model::JobId, int>, LedgerCharged> Sums(const std::map<std::string, LedgerEntry>& ledger,
                                                           std::optional<std::pair<model::JobId, int>> only) {
  std::map<std::pair<model::JobId, int>, LedgerCharged> out;
  // Per (attempt, metric, detail, node): the intervals seen, to count repeats.
  std::map<std::tuple<model::JobId, int, std::string, std::string, std::string>,
           std::set<std::tuple<Timestamp, Timestamp, bool>>>
      intervals;
  for (const auto& [key, e] : ledger) {
    if (only && std::pair{e.job, e.attempt} != *only) continue;
    LedgerCharged& a = out[{e.job, e.attempt}];
    a.sums[{e.metric, e.detail, e.node}] += e.quantity;
    if (!intervals[{e.job, e.attempt, e.metric, e.detail, e.node}].insert({e.start, e.end, e.final}).second) {
      ++a.duplicated_entries;
    }
    if (e.final) a.closed = true;
    if (!e.final && (!a.until || e.end > *a.until)) a.until = e.end;
  }
  return out;
}

}  // namespace

LedgerCharged MemoryStore::LoadLedgerCharged(model::JobId job, int attempt) const {
  const auto snapshot = data_->Snapshot();
  auto all = Sums(snapshot->ledger, std::pair{job, attempt});
  auto it = all.find({job, attempt});
  return it == all.end() ? LedgerCharged{} : it->second;
}

std::map<std::pair<model::JobId, int>, LedgerCharged> MemoryStore::LoadAllLedgerCharged() const {
  const auto snapshot = data_->Snapshot();
  return Sums(snapshot->ledger, std::nullopt);
}

std::vector<UsageRow> MemoryStore::QueryUsage(const UsageQuery& q) const {
  static const std::set<std::string> kGroupColumns = {"user",          "project", "queue", "pool",
                                                      "workload_kind", "tier",    "job",   "hour"};
  for (const auto& g : q.group_by) {
    if (!kGroupColumns.count(g)) throw std::invalid_argument("unknown group_by column " + g);
  }
  auto padded = [](int64_t n) {
    std::string text = std::to_string(n);
    return std::string(20 - text.size(), '0') + text;
  };
  auto unpadded = [](const std::string& text) { return std::to_string(std::stoll(text)); };
  // A job id or hour sorts as a number (SQL orders the integer column): padded here.
  auto column = [&padded](const LedgerEntry& e, const std::string& name) -> std::string {
    if (name == "job") return padded(e.job);
    if (name == "hour") return padded(ToUnixMillis(e.end) / 3'600'000);
    if (name == "user") return e.user;
    if (name == "project") return e.project;
    if (name == "queue") return e.queue;
    if (name == "pool") return e.pool;
    if (name == "tier") return e.tier;
    return e.workload_kind;
  };
  const auto snapshot = data_->Snapshot();
  // Ordered by the group's values in group_by order, as SQL's ORDER BY.
  std::map<std::vector<std::string>, UsageRow> rows;
  for (const auto& [key, e] : snapshot->ledger) {
    if ((q.from && e.end <= *q.from) || (q.to && e.end > *q.to) ||
        !Visible(q.visible_projects, q.visible_queues, e.project, e.queue)) {
      continue;
    }
    std::vector<std::string> values;
    for (const auto& g : q.group_by) values.push_back(column(e, g));
    UsageRow& row = rows[values];
    for (size_t i = 0; i < q.group_by.size(); ++i) {
      row.group[q.group_by[i]] = q.group_by[i] == "job" || q.group_by[i] == "hour" ? unpadded(values[i]) : values[i];
    }
    row.metrics[e.metric] += e.quantity;
  }
  std::vector<UsageRow> out;
  for (auto& [values, row] : rows) out.push_back(std::move(row));
  return out;
}

FairshareUsage MemoryStore::LoadFairshareUsage() const {
  const auto snapshot = data_->Snapshot();
  // As the SQLite store, whose as_of lives on each row: no rows, no time.
  if (snapshot->fairshare.entries.empty()) return {};
  return snapshot->fairshare;
}

std::optional<SandboxRow> MemoryStore::GetSandbox(int64_t id) const {
  const auto snapshot = data_->Snapshot();
  auto it = snapshot->sandboxes.find(id);
  if (it == snapshot->sandboxes.end()) return std::nullopt;
  return it->second;
}

std::vector<SandboxRow> MemoryStore::ListSandboxes(bool active_only, int limit) const {
  const auto snapshot = data_->Snapshot();
  std::vector<SandboxRow> out;
  for (auto it = snapshot->sandboxes.rbegin();
       it != snapshot->sandboxes.rend() && out.size() < static_cast<size_t>(std::max(limit, 0)); ++it) {
    if (active_only && it->second.ended_at) continue;
    out.push_back(it->second);
  }
  return out;
}

int64_t MemoryStore::MaxSandboxId() const {
  const auto snapshot = data_->Snapshot();
  return snapshot->sandboxes.empty() ? 0 : snapshot->sandboxes.rbegin()->first;
}

std::vector<ImageVersionRow> MemoryStore::ListImageVersions() const {
  const auto snapshot = data_->Snapshot();
  std::vector<ImageVersionRow> out;
  for (const auto& [key, image] : snapshot->images) out.push_back(image);
  std::stable_sort(out.begin(), out.end(), [](const ImageVersionRow& a, const ImageVersionRow& b) {
    return std::tie(a.name, a.created_at) < std::tie(b.name, b.created_at);
  });
  return out;
}

std::map<std::string, std::vector<std::string>> MemoryStore::ImageCurrentStacks() const {
  const auto snapshot = data_->Snapshot();
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [seq, name, version] : snapshot->image_current) out[name].push_back(version);
  return out;
}

}  // namespace unisched::testing
