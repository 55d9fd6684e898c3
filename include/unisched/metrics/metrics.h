#pragma once
// Prometheus series of the daemon (prometheus-cpp core; the text exposition
// is served by our own HTTP listener, so there is one HTTP stack).
//
// Adding a metric: add a family member below, create it in the constructor
// with a help text, add a method that updates it. Every name starts with
// "unisched_". Series of the public contract must never be renamed.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace unisched::metrics {

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // unisched_jobs{state,queue,pool}: jobs known to the store, by state (gauge).
  void SetJobs(const std::string& state, const std::string& queue, const std::string& pool, double count);
  // unisched_job_submissions_total{queue}: accepted submissions (counter).
  void CountSubmission(const std::string& queue);
  // unisched_scheduler_cycle_seconds: duration of one scheduling cycle
  // (histogram); unisched_scheduler_passes_total{pass}: cycles by pass,
  // full or event (counter).
  void ObserveCycle(double seconds, bool full = true);
  // unisched_http_request_duration_seconds{route,method,code} (histogram).
  // route is the route template ("/v1/jobs/{id}"), never the raw path.
  void ObserveHttp(const std::string& route, const std::string& method, int code, double seconds);
  // unisched_nodes{state,pool}: nodes by state (gauge).
  void SetNodes(const std::string& state, const std::string& pool, double count);
  // unisched_jobs_started_total{pool}, unisched_jobs_finished_total{state,pool} (counters).
  void CountStart(const std::string& pool);
  void CountFinish(const std::string& state, const std::string& pool);
  // unisched_preemptions_total{pool,queue}: running jobs preempted, by the victim's queue (counter).
  void CountPreemption(const std::string& pool, const std::string& queue);
  // unisched_pending_reasons{pool,code}: pending jobs by their first reason after the last cycle (gauge).
  void SetPendingByReason(const std::string& pool, const std::string& code, double count);
  // unisched_ledger_entries_total{kind}: ledger entries written, kind interim|final|sample (counter);
  // unisched_ledger_charged_{seconds,byte_seconds,bytes}_total{resource}: their quantities in base
  // units (counters), negative ones (final corrections) in unisched_ledger_corrected_*_total;
  // unisched_ledger_charged{metric}: deprecated, the same in the ledger's units (gauge).
  void CountLedgerEntry(const std::string& kind, const std::string& metric, double quantity);
  // unisched_ledger_discrepancies{kind}: what the last reconciliation found, kind
  // missing|duplicated|mismatched|unverifiable (gauge); unisched_ledger_reconciled_timestamp_seconds:
  // when it ran (gauge, Unix seconds).
  void SetLedgerReconciliation(int64_t missing, int64_t duplicated, int64_t mismatched, int64_t unverifiable,
                               double unix_seconds);
  // unisched_alerts_firing{alert}: alerts of a rule firing now (gauge).
  void SetAlertsFiring(const std::string& alert, double count);
  // unisched_sandboxes{state,image}: sandbox instances, state active|warm (gauge).
  void SetSandboxes(const std::string& state, const std::string& image, double count);
  // unisched_sandbox_execs_total{queue}: tool calls run in sandboxes (counter).
  void CountSandboxExec(const std::string& queue);
  // unisched_sandbox_create_seconds{start}: create latency, start warm|cold (histogram).
  void ObserveSandboxCreate(const std::string& start, double seconds);
  // unisched_http_unauthenticated_requests_total{reason}: requests refused for
  // their credentials, reason missing|invalid (counter).
  void CountUnauthenticated(const std::string& reason);
  // unisched_http_connections_refused_total{limit}: connections answered 503
  // at a cap, limit total|per_client (counter).
  void CountConnectionRefused(const std::string& limit);
  // unisched_replica_leader (gauge, 1 while this replica leads) and
  // unisched_leader_epoch (gauge, the lease's epoch as last read). A daemon
  // without replicas leads alone: 1, epoch 0.
  void SetLeadership(bool leading, int64_t epoch);
  // unisched_config_version{role}: the config version in force, role
  // current or canary (0: no canary) (gauge; docs/config-versions.md).
  void SetConfigVersion(int64_t current, int64_t canary);
  // unisched_leader_takeovers_total: times this replica took the lease (counter).
  void CountTakeover();
  // unisched_store_commit_seconds (histogram) and unisched_store_batch_size (histogram).
  void ObserveCommit(double seconds, double batch_size);

  // Every series whose labels the config names, at 0 (Prometheus'
  // practice: a counter that exists before its first increment makes that
  // increment a rate an alert sees; a dashboard finds each series). Pools
  // get their start and end counters (each terminal state), queues their
  // submission and preemption counters (and, on sandbox pools, their exec
  // counter), alert rules their firing gauge. Called at start and for each
  // new config version; series of names no longer configured stay.
  struct KnownQueue {
    std::string name, pool;
    bool sandbox_pool = false;
  };
  void DeclareConfigured(const std::vector<std::string>& pools, const std::vector<KnownQueue>& queues,
                         const std::vector<std::string>& alert_rules);

  // The Prometheus text format (version 0.0.4) of every series.
  std::string Serialize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace unisched::metrics
