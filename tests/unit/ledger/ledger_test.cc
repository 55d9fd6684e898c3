// Charges of an allocation over an interval, an attempt's whole usage, and
// reconciliation verdicts.

#include "unisched/ledger/ledger.h"

#include <gtest/gtest.h>

namespace unisched::ledger {
namespace {

const Timestamp kT0 = FromUnixMillis(1'780'000'000'000);

model::ClusterSpec Cluster() {
  model::ClusterSpec c;
  model::NodeSpec gpu{"x86-c8m16g2-train-01", "gpus", {}, 8, 16384, {{0, "h100", 80}, {1, "a100", 40}}};
  model::NodeSpec cpu{"x86-c8m16-agent-01", "agents", {}, 8, 16384, {}};
  c.nodes = {gpu, cpu};
  c.pools = {{"gpus", model::PoolKind::kGpu, {}, {gpu.name}}, {"agents", model::PoolKind::kElastic, {}, {cpu.name}}};
  return c;
}

model::Job JobIn(const std::string& pool) {
  model::Job j;
  j.id = 7;
  j.pool = pool;
  return j;
}

double Sum(const std::vector<Charge>& charges, const std::string& metric, const std::string& detail = "") {
  double total = 0;
  for (const auto& c : charges) {
    if (c.metric == metric && c.detail == detail) total += c.quantity;
  }
  return total;
}

TEST(LedgerTest, AllocatedChargesPerMetricAndGpuModel) {
  model::Attempt a;
  a.allocation = {{"x86-c8m16g2-train-01", 4, 1024, {0, 1}}};
  const auto charges = AllocatedCharges(Cluster(), JobIn("gpus"), a, kT0, kT0 + std::chrono::seconds(10));
  EXPECT_DOUBLE_EQ(Sum(charges, kCpuCoreSeconds), 40);
  EXPECT_DOUBLE_EQ(Sum(charges, kMemoryMbSeconds), 10240);
  EXPECT_DOUBLE_EQ(Sum(charges, kGpuSeconds, "h100"), 10);
  EXPECT_DOUBLE_EQ(Sum(charges, kGpuSeconds, "a100"), 10);
  EXPECT_DOUBLE_EQ(Sum(charges, kInstanceSeconds), 0);  // not an elastic pool
  EXPECT_TRUE(AllocatedCharges(Cluster(), JobIn("gpus"), a, kT0, kT0).empty());
}

TEST(LedgerTest, GpuSecondsGoToTheModelsTheFitChoseEvenIfTheNodeChangedSince) {
  model::Attempt a;
  // Both chosen as a100s; the node's config now says device 0 is an h100.
  a.allocation = {{"x86-c8m16g2-train-01", 4, 1024, {0, 1}, {"a100", "a100"}}};
  const auto charges = AllocatedCharges(Cluster(), JobIn("gpus"), a, kT0, kT0 + std::chrono::seconds(10));
  EXPECT_DOUBLE_EQ(Sum(charges, kGpuSeconds, "a100"), 20);
  EXPECT_DOUBLE_EQ(Sum(charges, kGpuSeconds, "h100"), 0);
  // Stored before the models were kept: looked up by index on the node (0 is its h100).
  a.allocation[0].gpu_models.clear();
  a.allocation[0].gpu_indices = {0};
  EXPECT_DOUBLE_EQ(
      Sum(AllocatedCharges(Cluster(), JobIn("gpus"), a, kT0, kT0 + std::chrono::seconds(10)), kGpuSeconds, "h100"), 10);
}

TEST(LedgerTest, ElasticJobsAreChargedInstanceSeconds) {
  model::Attempt a;
  a.allocation = {{"x86-c8m16-agent-01", 1, 256, {}}};
  const auto charges = AllocatedCharges(Cluster(), JobIn("agents"), a, kT0, kT0 + std::chrono::milliseconds(1500));
  EXPECT_DOUBLE_EQ(Sum(charges, kInstanceSeconds), 1.5);
}

TEST(LedgerTest, AttemptUsageIsItsRunPlusCpuUsed) {
  model::Attempt a;
  a.allocation = {{"x86-c8m16-agent-01", 2, 256, {}}};
  EXPECT_TRUE(AttemptUsage(Cluster(), JobIn("agents"), a).empty());  // never started
  a.started_at = kT0;
  a.ended_at = kT0 + std::chrono::seconds(3);
  a.usage = model::RunUsage{3, 1.25, 0.25, 1000};
  const auto usage = AttemptUsage(Cluster(), JobIn("agents"), a);
  EXPECT_DOUBLE_EQ(usage.at({kCpuCoreSeconds, "", "x86-c8m16-agent-01"}), 6);
  EXPECT_DOUBLE_EQ(usage.at({kCpuSecondsUsed, "", "x86-c8m16-agent-01"}), 1.5);
}

// Data staging (docs/data.md): the attempt started at kT0, fetched its
// input for 20 s, ran 10 s, and sent its results after its end. GPUs (and
// the rest of the allocation) are charged for the run only, from the
// command's start; the bytes moved are metrics of their own.
TEST(LedgerTest, AStagingAttemptIsChargedItsRunAndItsBytes) {
  model::Attempt a;
  a.allocation = {{"x86-c8m16g2-train-01", 4, 1024, {0, 1}}};
  a.started_at = kT0;
  a.process_started_at = kT0 + std::chrono::seconds(20);
  a.ended_at = kT0 + std::chrono::seconds(30);
  a.usage = model::RunUsage{10, 5, 1, 1000, 3'000'000'000, 42'000};
  const auto usage = AttemptUsage(Cluster(), JobIn("gpus"), a);
  const std::string node = "x86-c8m16g2-train-01";
  EXPECT_DOUBLE_EQ(usage.at({kGpuSeconds, "h100", node}), 10);
  EXPECT_DOUBLE_EQ(usage.at({kGpuSeconds, "a100", node}), 10);
  EXPECT_DOUBLE_EQ(usage.at({kCpuCoreSeconds, "", node}), 40);
  EXPECT_DOUBLE_EQ(usage.at({kNetworkBytesIn, "", node}), 3e9);
  EXPECT_DOUBLE_EQ(usage.at({kNetworkBytesOut, "", node}), 42'000);
  // Nothing staged: no network metric at all (absent, not zero).
  a.usage->network_bytes_in = a.usage->network_bytes_out = 0;
  EXPECT_EQ(AttemptUsage(Cluster(), JobIn("gpus"), a).count({kNetworkBytesIn, "", node}), 0u);
}

TEST(LedgerTest, AJobOfABackendPlacedPoolIsChargedItsRequestToTheBackend) {
  model::ClusterSpec cluster = Cluster();
  model::PoolSpec far;
  far.name = "far";
  far.backend = "slurm-west";
  cluster.pools.push_back(far);
  model::Job job = JobIn("far");
  job.resources.nodes = 2;
  job.resources.cpus = 4;
  job.resources.memory_mb = 1000;
  job.resources.gpus = 1;
  job.resources.gpu_model = "h100";
  model::Attempt a;  // no allocation: the backend chose its nodes
  a.placed_on = {"far-01", "far-02"};
  a.started_at = kT0;
  a.ended_at = kT0 + std::chrono::seconds(10);
  a.usage = model::RunUsage{10, 3, 1, 1000};
  const auto usage = AttemptUsage(cluster, job, a);
  // Per node times nodes, over 10 s.
  EXPECT_DOUBLE_EQ(usage.at({kCpuCoreSeconds, "", "slurm-west"}), 2 * 4 * 10);
  EXPECT_DOUBLE_EQ(usage.at({kMemoryMbSeconds, "", "slurm-west"}), 2 * 1000 * 10);
  EXPECT_DOUBLE_EQ(usage.at({kGpuSeconds, "h100", "slurm-west"}), 2 * 1 * 10);
  EXPECT_DOUBLE_EQ(usage.at({kCpuSecondsUsed, "", "slurm-west"}), 4);
  job.resources.gpu_model.clear();
  EXPECT_DOUBLE_EQ(Sum(AllocatedCharges(cluster, job, a, kT0, kT0 + std::chrono::seconds(1)), kGpuSeconds, "any"), 2);
}

TEST(LedgerTest, ReconcileSaysMissingDuplicatedMismatched) {
  const std::map<ChargeKey, double> expected = {{{kCpuCoreSeconds, "", "n"}, 60}, {{kGpuSeconds, "h100", "n"}, 15}};
  struct Case {
    const char* name;
    std::map<ChargeKey, double> recorded;
    int64_t duplicated;
    int64_t want_missing, want_duplicated, want_mismatched;
  };
  for (const Case& c : {
           Case{"all there", expected, 0, 0, 0, 0},
           Case{
               "within tolerance", {{{kCpuCoreSeconds, "", "n"}, 60.05}, {{kGpuSeconds, "h100", "n"}, 15}}, 0, 0, 0, 0},
           Case{"one missing", {{{kCpuCoreSeconds, "", "n"}, 60}}, 0, 1, 0, 0},
           Case{"doubled", {{{kCpuCoreSeconds, "", "n"}, 120}, {{kGpuSeconds, "h100", "n"}, 15}}, 1, 0, 1, 1},
           Case{"charged for nothing",
                {{{kCpuCoreSeconds, "", "n"}, 60}, {{kGpuSeconds, "h100", "n"}, 15}, {{kInstanceSeconds, "", "n"}, 5}},
                0,
                0,
                0,
                1},
       }) {
    SCOPED_TRACE(c.name);
    Reconciliation r;
    ReconcileAttempt(7, 1, expected, c.recorded, c.duplicated, 0.001, r);
    EXPECT_EQ(r.attempts_checked, 1);
    EXPECT_EQ(r.missing, c.want_missing);
    EXPECT_EQ(r.duplicated, c.want_duplicated);
    EXPECT_EQ(r.mismatched, c.want_mismatched);
  }
}

}  // namespace
}  // namespace unisched::ledger

namespace unisched::ledger {
namespace {

// One builder of entries for every subject; a job's keys keep the shape the
// ledger has always had ("<job>/<attempt>/<metric>/<detail>/<node>/<from|final>").
TEST(LedgerEntryTest, OneBuilderNamesTheSubjectTheChargeAndTheInterval) {
  model::Job job;
  job.id = 7;
  job.user = "alice";
  job.project = "genomics";
  job.queue = "ai-training";
  job.pool = "gpu-train-pool";
  job.workload.kind = model::WorkloadKind::kAiTraining;
  const Charge charge{kGpuSeconds, "A100", "gpu-01", 360};
  const Timestamp from = FromUnixMillis(1'000), to = FromUnixMillis(61'000), now = FromUnixMillis(62'000);
  Entry interim = MakeEntry(JobSubject(job, 2), charge, from, to, false, now);
  EXPECT_EQ(interim.key, "7/2/gpu_seconds/A100/gpu-01/1000");
  EXPECT_EQ(interim.job, 7);
  EXPECT_EQ(interim.attempt, 2);
  EXPECT_EQ(interim.project, "genomics");
  EXPECT_EQ(interim.workload_kind, "ai-training");
  EXPECT_EQ(interim.detail, "A100");
  EXPECT_EQ(interim.quantity, 360);
  EXPECT_EQ(interim.start, from);
  EXPECT_EQ(interim.end, to);
  EXPECT_EQ(interim.recorded_at, now);
  EXPECT_FALSE(interim.final);
  Entry last = MakeEntry(JobSubject(job, 2), charge, from, to, true, now);
  EXPECT_EQ(last.key, "7/2/gpu_seconds/A100/gpu-01/final");
  EXPECT_TRUE(last.final);

  const Subject sandbox{"sandbox/3", 0, 3, "bob", "default", "agent-sandbox", "elastic-light-pool", "agent"};
  Entry instance = MakeEntry(sandbox, {kInstanceSeconds, "host:1", "node-a", 60}, from, to, false, now);
  EXPECT_EQ(instance.key, "sandbox/3/instance_seconds/host:1/node-a/1000");
  EXPECT_EQ(instance.job, 0);
  EXPECT_EQ(instance.attempt, 3);
}

}  // namespace
}  // namespace unisched::ledger
