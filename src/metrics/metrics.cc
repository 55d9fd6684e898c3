// The daemon's Prometheus series on a prometheus-cpp registry. Families are
// created once; label sets are added on first use (Family::Add returns the
// existing series for known labels), and every update is thread-safe because
// prometheus-cpp guards families with a mutex and metric values are atomic
// or mutex-protected.

#include "unisched/metrics/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace unisched::metrics {
namespace {

// start * 2^i for i in [0, count): multiplying by a power of two is exact, so
// the bucket labels print as short decimals ("0.0064", not "0.00640000001").
prometheus::Histogram::BucketBoundaries PowersOfTwo(double start, int count) {
  prometheus::Histogram::BucketBoundaries bounds;
  double value = start;
  for (int i = 0; i < count; ++i) {
    bounds.push_back(value);
    value *= 2;
  }
  return bounds;
}

}  // namespace

struct Metrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();

  // 50us .. 6.55s: a cycle or commit of a few microseconds up to a stalled disk.
  const prometheus::Histogram::BucketBoundaries latency_buckets = PowersOfTwo(50e-6, 18);
  // 100us .. 13.1s: HTTP requests include a write's commit wait.
  const prometheus::Histogram::BucketBoundaries http_buckets = PowersOfTwo(100e-6, 18);
  // 1 .. 4096 records per commit.
  const prometheus::Histogram::BucketBoundaries batch_buckets = PowersOfTwo(1, 13);

  prometheus::Family<prometheus::Gauge>& jobs = prometheus::BuildGauge()
                                                    .Name("unisched_jobs")
                                                    .Help("Jobs known to the store, by state, queue and pool.")
                                                    .Register(*registry);
  prometheus::Family<prometheus::Counter>& submissions = prometheus::BuildCounter()
                                                             .Name("unisched_job_submissions_total")
                                                             .Help("Accepted job submissions, by queue.")
                                                             .Register(*registry);
  prometheus::Family<prometheus::Histogram>& cycle = prometheus::BuildHistogram()
                                                         .Name("unisched_scheduler_cycle_seconds")
                                                         .Help("Duration of one scheduling cycle in seconds.")
                                                         .Register(*registry);
  prometheus::Family<prometheus::Counter>& passes =
      prometheus::BuildCounter()
          .Name("unisched_scheduler_passes_total")
          .Help(
              "Scheduling cycles by pass: full (every pending job ranked and explained) or event (the head of "
              "the queue only).")
          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& http =
      prometheus::BuildHistogram()
          .Name("unisched_http_request_duration_seconds")
          .Help("HTTP request duration in seconds, by route template, method and status code.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& nodes =
      prometheus::BuildGauge().Name("unisched_nodes").Help("Nodes by state and pool.").Register(*registry);
  prometheus::Family<prometheus::Counter>& started = prometheus::BuildCounter()
                                                         .Name("unisched_jobs_started_total")
                                                         .Help("Job attempts started, by pool.")
                                                         .Register(*registry);
  prometheus::Family<prometheus::Counter>& preemptions =
      prometheus::BuildCounter()
          .Name("unisched_preemptions_total")
          .Help("Running jobs preempted to make room for higher-priority ones, by pool and the victim's queue.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& pending_reasons =
      prometheus::BuildGauge()
          .Name("unisched_pending_reasons")
          .Help("Pending jobs by pool and the code of their first pending reason, after the last cycle.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& ledger_entries =
      prometheus::BuildCounter()
          .Name("unisched_ledger_entries_total")
          .Help("Ledger entries written, by kind (interim, final or sample).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& ledger_discrepancies =
      prometheus::BuildGauge()
          .Name("unisched_ledger_discrepancies")
          .Help(
              "Discrepancies the last ledger reconciliation found, by kind (missing, duplicated, mismatched; "
              "unverifiable: attempts whose job record is gone).")
          .Register(*registry);
  prometheus::Gauge& ledger_reconciled =
      prometheus::BuildGauge()
          .Name("unisched_ledger_reconciled_timestamp_seconds")
          .Help("When the last ledger reconciliation ran (Unix seconds; 0: not yet).")
          .Register(*registry)
          .Add({});
  prometheus::Family<prometheus::Gauge>& ledger_charged =
      prometheus::BuildGauge()
          .Name("unisched_ledger_charged")
          .Help(
              "Deprecated (one release; docs/metrics.md): quantities charged to the ledger since the daemon "
              "started, by metric, in the ledger's mixed units.")
          .Register(*registry);
  // The same in base units (Prometheus' conventions), as counters: what
  // was charged and, apart, what final entries took back (a correction of
  // interim charging on the daemon's clock), so each only grows.
  prometheus::Family<prometheus::Counter>& charged_seconds = LedgerCounter(
      "unisched_ledger_charged_seconds_total",
      "Resource-seconds charged to the ledger, by resource: cpu_core (allocated cores), cpu_used (CPU time used), "
      "gpu (allocated cards), instance (elastic and sandbox instances).");
  prometheus::Family<prometheus::Counter>& corrected_seconds = LedgerCounter(
      "unisched_ledger_corrected_seconds_total",
      "Resource-seconds final ledger entries took back from interim charging, by resource (as charged_seconds).");
  prometheus::Family<prometheus::Counter>& charged_byte_seconds =
      LedgerCounter("unisched_ledger_charged_byte_seconds_total",
                    "Byte-seconds charged to the ledger, by resource: memory (allocated), storage (sampled on disk).");
  prometheus::Family<prometheus::Counter>& corrected_byte_seconds =
      LedgerCounter("unisched_ledger_corrected_byte_seconds_total",
                    "Byte-seconds final ledger entries took back from interim charging, by resource.");
  prometheus::Family<prometheus::Counter>& charged_bytes = LedgerCounter(
      "unisched_ledger_charged_bytes_total", "Bytes charged to the ledger, by resource: network (moved).");
  prometheus::Family<prometheus::Counter>& corrected_bytes =
      LedgerCounter("unisched_ledger_corrected_bytes_total", "Bytes final ledger entries took back, by resource.");

  prometheus::Family<prometheus::Counter>& LedgerCounter(const char* name, const char* help) {
    return prometheus::BuildCounter().Name(name).Help(help).Register(*registry);
  }
  prometheus::Family<prometheus::Gauge>& alerts_firing =
      prometheus::BuildGauge()
          .Name("unisched_alerts_firing")
          .Help("Alerts firing now, by alert rule name (docs/alerts.md).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& sandboxes =
      prometheus::BuildGauge()
          .Name("unisched_sandboxes")
          .Help("Sandbox instances by state (active: in use; warm: pre-started, idle) and image.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& sandbox_execs = prometheus::BuildCounter()
                                                               .Name("unisched_sandbox_execs_total")
                                                               .Help("Tool calls (exec) run in sandboxes, by queue.")
                                                               .Register(*registry);
  prometheus::Family<prometheus::Counter>& unauthenticated =
      prometheus::BuildCounter()
          .Name("unisched_http_unauthenticated_requests_total")
          .Help("Requests refused for their credentials, by reason: missing or invalid token.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& connections_refused =
      prometheus::BuildCounter()
          .Name("unisched_http_connections_refused_total")
          .Help("Connections answered 503 at a cap, by limit: total or per_client.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& replica_leader =
      prometheus::BuildGauge()
          .Name("unisched_replica_leader")
          .Help("1 while this replica leads (holds the store's lease), 0 while it stands by (docs/replicas.md).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& leader_epoch =
      prometheus::BuildGauge()
          .Name("unisched_leader_epoch")
          .Help("The lease's epoch as this replica last read it: raised by one at every change of leader.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& takeovers =
      prometheus::BuildCounter()
          .Name("unisched_leader_takeovers_total")
          .Help("Times this replica took the lease and started leading.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& config_version =
      prometheus::BuildGauge()
          .Name("unisched_config_version")
          .Help("The config version in force (docs/config-versions.md), by role: current, or canary (0: none).")
          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& sandbox_create =
      prometheus::BuildHistogram()
          .Name("unisched_sandbox_create_seconds")
          .Help("Sandbox create latency in seconds, by start: warm (from the warm pool) or cold.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& finished =
      prometheus::BuildCounter()
          .Name("unisched_jobs_finished_total")
          .Help("Jobs that reached a terminal state, by state and pool.")
          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& commit =
      prometheus::BuildHistogram()
          .Name("unisched_store_commit_seconds")
          .Help("Duration of one store commit (a batch of writes) in seconds.")
          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& batch =
      prometheus::BuildHistogram()
          .Name("unisched_store_batch_size")
          .Help("Number of writes committed together in one store transaction.")
          .Register(*registry);

  // The unlabelled histograms have exactly one series; create it up front so
  // the exposition shows it (with zero counts) before the first observation.
  prometheus::Histogram& cycle_series = cycle.Add({}, latency_buckets);
  prometheus::Counter& full_passes = passes.Add({{"pass", "full"}});
  prometheus::Counter& event_passes = passes.Add({{"pass", "event"}});
  prometheus::Histogram& commit_series = commit.Add({}, latency_buckets);
  prometheus::Histogram& batch_series = batch.Add({}, batch_buckets);

  // Family<Histogram>::Add builds a throw-away histogram even for a known
  // label set; HTTP observations are hot, so known series are cached.
  std::mutex http_mu;
  std::map<std::string, prometheus::Histogram*> http_series;  // GUARDED_BY(http_mu)
  // The submissions counter of each queue, found once: Family::Add builds a
  // label map and hashes it, on every submission otherwise.
  std::mutex submissions_mu;
  std::map<std::string, prometheus::Counter*, std::less<>> submission_series;  // GUARDED_BY(submissions_mu)
};

Metrics::Metrics() : impl_(std::make_unique<Impl>()) {
  // Present from the start, as Prometheus' conventions ask of a gauge an
  // alert reads: no discrepancy known, never reconciled (timestamp 0).
  SetLedgerReconciliation(0, 0, 0, 0, 0);
  // Series whose label values are fixed by the code, at 0 (DeclareConfigured
  // says why).
  for (const char* reason : {"missing", "invalid", "revoked", "expired"})
    impl_->unauthenticated.Add({{"reason", reason}});
  for (const char* limit : {"total", "per_client"}) impl_->connections_refused.Add({{"limit", limit}});
  for (const char* start : {"warm", "cold"}) impl_->sandbox_create.Add({{"start", start}}, impl_->latency_buckets);
  for (const char* kind : {"interim", "final", "sample"}) impl_->ledger_entries.Add({{"kind", kind}});
  for (const char* resource : {"cpu_core", "cpu_used", "gpu", "instance"}) {
    impl_->charged_seconds.Add({{"resource", resource}});
    impl_->corrected_seconds.Add({{"resource", resource}});
  }
  for (const char* resource : {"memory", "storage"}) {
    impl_->charged_byte_seconds.Add({{"resource", resource}});
    impl_->corrected_byte_seconds.Add({{"resource", resource}});
  }
  impl_->charged_bytes.Add({{"resource", "network"}});
  impl_->corrected_bytes.Add({{"resource", "network"}});
}

void Metrics::DeclareConfigured(const std::vector<std::string>& pools, const std::vector<KnownQueue>& queues,
                                const std::vector<std::string>& alert_rules) {
  static constexpr const char* kTerminal[] = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"};
  for (const auto& pool : pools) {
    impl_->started.Add({{"pool", pool}});
    for (const char* state : kTerminal) impl_->finished.Add({{"state", state}, {"pool", pool}});
  }
  for (const auto& q : queues) {
    {
      std::lock_guard<std::mutex> lock(impl_->submissions_mu);
      if (!impl_->submission_series.count(q.name)) {
        impl_->submission_series.emplace(q.name, &impl_->submissions.Add({{"queue", q.name}}));
      }
    }
    impl_->preemptions.Add({{"pool", q.pool}, {"queue", q.name}});
    if (q.sandbox_pool) impl_->sandbox_execs.Add({{"queue", q.name}});
  }
  // A rule not firing is 0, not absent (the alert book sets them as they change).
  for (const auto& rule : alert_rules) impl_->alerts_firing.Add({{"alert", rule}});
}
Metrics::~Metrics() = default;

void Metrics::SetJobs(const std::string& state, const std::string& queue, const std::string& pool, double count) {
  impl_->jobs.Add({{"state", state}, {"queue", queue}, {"pool", pool}}).Set(count);
}

void Metrics::CountSubmission(const std::string& queue) {
  prometheus::Counter* series = nullptr;
  {
    std::lock_guard<std::mutex> lock(impl_->submissions_mu);
    auto it = impl_->submission_series.find(queue);
    if (it == impl_->submission_series.end()) {
      it = impl_->submission_series.emplace(queue, &impl_->submissions.Add({{"queue", queue}})).first;
    }
    series = it->second;
  }
  series->Increment();
}

void Metrics::ObserveCycle(double seconds, bool full) {
  impl_->cycle_series.Observe(seconds);
  (full ? impl_->full_passes : impl_->event_passes).Increment();
}

void Metrics::ObserveHttp(const std::string& route, const std::string& method, int code, double seconds) {
  std::string code_text = std::to_string(code);
  std::string key = route + '\0' + method + '\0' + code_text;
  prometheus::Histogram* series = nullptr;
  {
    std::lock_guard<std::mutex> lock(impl_->http_mu);
    auto it = impl_->http_series.find(key);
    if (it == impl_->http_series.end()) {
      series = &impl_->http.Add({{"route", route}, {"method", method}, {"code", code_text}}, impl_->http_buckets);
      impl_->http_series.emplace(std::move(key), series);
    } else {
      series = it->second;
    }
  }
  series->Observe(seconds);
}

void Metrics::SetNodes(const std::string& state, const std::string& pool, double count) {
  impl_->nodes.Add({{"state", state}, {"pool", pool}}).Set(count);
}

void Metrics::CountStart(const std::string& pool) {
  impl_->started.Add({{"pool", pool}}).Increment();
}

void Metrics::CountPreemption(const std::string& pool, const std::string& queue) {
  impl_->preemptions.Add({{"pool", pool}, {"queue", queue}}).Increment();
}

void Metrics::SetPendingByReason(const std::string& pool, const std::string& code, double count) {
  impl_->pending_reasons.Add({{"pool", pool}, {"code", code}}).Set(count);
}

void Metrics::CountLedgerEntry(const std::string& kind, const std::string& metric, double quantity) {
  impl_->ledger_entries.Add({{"kind", kind}}).Increment();
  impl_->ledger_charged.Add({{"metric", metric}}).Increment(quantity);
  // A ledger metric (its names: unisched/ledger/ledger.h and the contract's
  // usage columns) in base units: the family, the resource, the factor.
  // memory_mb_seconds: MB are MiB (the cgroup limit is memory_mb x 2^20);
  // storage_gb_hours: GB are 10^9 bytes (the sampler divides by 1e9), hours 3600 s.
  struct BaseUnit {
    const char* metric;
    prometheus::Family<prometheus::Counter>* charged;
    prometheus::Family<prometheus::Counter>* corrected;
    const char* resource;
    double factor;
  };
  const BaseUnit units[] = {
      {"cpu_core_seconds", &impl_->charged_seconds, &impl_->corrected_seconds, "cpu_core", 1},
      {"cpu_seconds_used", &impl_->charged_seconds, &impl_->corrected_seconds, "cpu_used", 1},
      {"gpu_seconds", &impl_->charged_seconds, &impl_->corrected_seconds, "gpu", 1},
      {"instance_seconds", &impl_->charged_seconds, &impl_->corrected_seconds, "instance", 1},
      {"memory_mb_seconds", &impl_->charged_byte_seconds, &impl_->corrected_byte_seconds, "memory", 1048576.0},
      {"storage_gb_hours", &impl_->charged_byte_seconds, &impl_->corrected_byte_seconds, "storage", 1e9 * 3600},
      {"network_bytes_in", &impl_->charged_bytes, &impl_->corrected_bytes, "network_in", 1},
      {"network_bytes_out", &impl_->charged_bytes, &impl_->corrected_bytes, "network_out", 1},
  };
  for (const BaseUnit& u : units) {
    if (metric != u.metric) continue;
    auto* family = quantity >= 0 ? u.charged : u.corrected;
    family->Add({{"resource", u.resource}}).Increment(std::abs(quantity) * u.factor);
  }
}

void Metrics::SetLedgerReconciliation(int64_t missing, int64_t duplicated, int64_t mismatched, int64_t unverifiable,
                                      double unix_seconds) {
  const std::pair<const char*, int64_t> counts[] = {
      {"missing", missing}, {"duplicated", duplicated}, {"mismatched", mismatched}, {"unverifiable", unverifiable}};
  for (const auto& [kind, n] : counts) impl_->ledger_discrepancies.Add({{"kind", kind}}).Set(static_cast<double>(n));
  impl_->ledger_reconciled.Set(unix_seconds);
}

void Metrics::SetAlertsFiring(const std::string& alert, double count) {
  impl_->alerts_firing.Add({{"alert", alert}}).Set(count);
}

void Metrics::SetSandboxes(const std::string& state, const std::string& image, double count) {
  impl_->sandboxes.Add({{"state", state}, {"image", image}}).Set(count);
}

void Metrics::CountSandboxExec(const std::string& queue) {
  impl_->sandbox_execs.Add({{"queue", queue}}).Increment();
}

void Metrics::CountUnauthenticated(const std::string& reason) {
  impl_->unauthenticated.Add({{"reason", reason}}).Increment();
}

void Metrics::CountConnectionRefused(const std::string& limit) {
  impl_->connections_refused.Add({{"limit", limit}}).Increment();
}

void Metrics::SetLeadership(bool leading, int64_t epoch) {
  impl_->replica_leader.Add({}).Set(leading ? 1 : 0);
  impl_->leader_epoch.Add({}).Set(static_cast<double>(epoch));
  // The counter exists at 0 from the first report, so a takeover is an
  // increase Prometheus sees (docs/prometheus/alerts.yml).
  impl_->takeovers.Add({});
}

void Metrics::SetConfigVersion(int64_t current, int64_t canary) {
  impl_->config_version.Add({{"role", "current"}}).Set(static_cast<double>(current));
  impl_->config_version.Add({{"role", "canary"}}).Set(static_cast<double>(canary));
}

void Metrics::CountTakeover() {
  impl_->takeovers.Add({}).Increment();
}

void Metrics::ObserveSandboxCreate(const std::string& start, double seconds) {
  impl_->sandbox_create.Add({{"start", start}}, impl_->latency_buckets).Observe(seconds);
}

void Metrics::CountFinish(const std::string& state, const std::string& pool) {
  impl_->finished.Add({{"state", state}, {"pool", pool}}).Increment();
}

void Metrics::ObserveCommit(double seconds, double batch_size) {
  impl_->commit_series.Observe(seconds);
  impl_->batch_series.Observe(batch_size);
}

std::string Metrics::Serialize() const {
  return prometheus::TextSerializer{}.Serialize(impl_->registry->Collect());
}

}  // namespace unisched::metrics
