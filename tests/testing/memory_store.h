#pragma once
// A second implementation of store::Store, in memory: what the controller's
// unit tests run on, and the proof that the store contract
// (tests/unit/store/store_contract_test.cc) can be met by something other
// than SQLite (ADR 0005).
//
// Like the SQLite store it has one writer thread that runs queued writes
// in batches, each write rolled back alone when it fails, and calls `done`
// after the batch is visible; readers never see half a batch. Its data can
// outlive one MemoryStore: Reopen() is a restart over the same data.

#include <memory>

#include "unisched/store/store.h"

namespace unisched::testing {

class MemoryStore final : public store::Store {
 public:
  struct Tables;  // everything stored
  struct Data;    // the tables and their lock; shared with the stores reopened over it

  MemoryStore();
  ~MemoryStore() override;

  // A new store over this one's data, as after a restart (close this one
  // first: one writer at a time, as the daemon's state lock ensures).
  std::unique_ptr<MemoryStore> Reopen() const;

  void Write(std::function<Status(store::Transaction&)> work, std::function<void(Status)> done) override;
  Status WriteSync(std::function<Status(store::Transaction&)> work) override;
  Result<model::JobId> ReserveJobId() override;
  // The lease lapses by this process's steady clock (one process: the
  // stores reopened over the same data share it).
  Result<store::LeaseState> AcquireOrRenewLease(const std::string& replica, std::chrono::milliseconds ttl) override;
  Status ReleaseLease(const std::string& replica) override;
  void FenceWrites(int64_t epoch, const std::string& replica, std::function<void()> on_fenced) override;
  Status AnnounceReplica(const std::string& replica, const std::string& url) override;
  Result<std::string> ReplicaUrl(const std::string& replica) override;
  Result<std::string> ClusterSecret(const std::string& name, const std::string& proposed) override;
  Result<store::ConfigHead> ReadConfigHead() override;
  Result<std::optional<store::ConfigVersionRecord>> ReadConfigVersion(int64_t version) override;
  Result<std::vector<store::ConfigVersionRecord>> ListConfigVersions(int limit) override;
  Result<store::ConfigHead> ChangeConfig(const store::ConfigChange& change) override;
  Result<int64_t> InsertBaseline(const store::BaselineRecord& baseline) override;
  Result<std::optional<store::BaselineRecord>> GetBaseline(int64_t id) override;
  Result<std::vector<store::BaselineRecord>> ListBaselines(const std::string& pools, int limit) override;
  Result<int64_t> InsertWorkflow(const store::WorkflowRecord& workflow) override;
  Status UpdateWorkflow(const store::WorkflowRecord& workflow) override;
  Result<std::optional<store::WorkflowRecord>> GetWorkflow(int64_t id) override;
  Result<std::vector<store::WorkflowRecord>> ListWorkflows(const store::WorkflowFilter& filter) override;
  Status InsertSecret(const store::SecretRecord& secret) override;
  Result<std::optional<store::SecretRecord>> RotateSecret(const store::SecretRecord& secret) override;
  Result<std::optional<store::SecretRecord>> GetSecret(const std::string& project, const std::string& name) override;
  Result<std::vector<store::SecretRecord>> ListSecrets(const std::string& project) override;
  Result<bool> DeleteSecret(const std::string& project, const std::string& name) override;
  int SchemaVersion() const override { return 1; }
  void Close() override;

  Result<model::Job> GetJob(model::JobId id) const override;
  store::JobPage ListJobs(const store::JobFilter& filter) const override;
  std::vector<store::WaitingJob> ListWaitingJobs(const store::JobFilter& visibility) const override;
  std::vector<model::Job> LoadActiveJobs() const override;
  std::vector<model::Job> LoadLatestEndedJobs(int per_key) const override;
  Result<store::StepRecord> GetStep(model::JobId job, int step) const override;
  std::vector<store::StepRecord> LoadActiveSteps() const override;
  std::map<std::tuple<model::JobState, std::string, std::string>, int64_t> CountJobs() const override;
  std::vector<store::JobEvent> ListEvents(model::JobId id) const override;

  std::vector<store::ClusterEvent> ListClusterEvents(const store::EventFilter& filter) const override;
  std::vector<store::AlertRecord> ListAlerts(std::optional<bool> firing, int limit) const override;
  std::vector<store::AuditRecord> ListAudit(int limit) const override;

  std::optional<store::TokenRecord> FindToken(const std::string& hash) const override;
  std::optional<store::TokenRecord> FindTokenById(const std::string& id) const override;
  std::optional<int64_t> FindUnixId(const std::string& kind, const std::string& name) const override;
  std::vector<store::UnixIdRecord> ListUnixIds() const override;
  std::vector<store::TokenRecord> ListTokens(const store::TokenFilter& filter) const override;
  std::optional<store::UserRecord> GetUser(const std::string& name) const override;
  std::vector<store::UserRecord> ListUsers() const override;
  std::vector<store::NodeStateRecord> LoadNodeStates() const override;
  std::map<std::string, Timestamp> LoadNodeIdleSince() const override;

  store::LedgerCharged LoadLedgerCharged(model::JobId job, int attempt) const override;
  std::map<std::pair<model::JobId, int>, store::LedgerCharged> LoadAllLedgerCharged() const override;
  std::vector<store::UsageRow> QueryUsage(const store::UsageQuery& query) const override;
  store::FairshareUsage LoadFairshareUsage() const override;

  std::optional<store::SandboxRow> GetSandbox(int64_t id) const override;
  std::vector<store::SandboxRow> ListSandboxes(bool active_only, int limit) const override;
  int64_t MaxSandboxId() const override;
  std::vector<store::ImageVersionRow> ListImageVersions() const override;
  std::map<std::string, std::vector<std::string>> ImageCurrentStacks() const override;

 private:
  explicit MemoryStore(std::shared_ptr<Data> data);
  void WriterLoop();

  struct Queue;
  std::shared_ptr<Data> data_;
  std::unique_ptr<Queue> queue_;
};

}  // namespace unisched::testing
