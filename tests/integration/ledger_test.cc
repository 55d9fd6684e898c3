// The seed's launch check 3 through the real daemon: jobs with known usage
// produce ledger totals on the right user/project/queue; a kill -9 during
// interim charging leaves the ledger reconciling after restart; rows removed
// or duplicated behind the daemon's back are each reported.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "testing/daemon.h"
#include "unisched/common/time.h"

namespace unisched::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Interim charging every second, so a few-second job has interim entries;
// reconciliation every second; storage sampling off (StorageTest turns it on).
constexpr const char* kLedgerConfig = R"yaml(
server:
  scheduler_tick_seconds: 0.2
store:
  accounting_interval_seconds: 1
  reconcile_interval_seconds: 1
  storage_sample_interval_seconds: 0
alerts:
  rules:
    - {name: LedgerDiscrepancy, kind: ledger_discrepancy}
pools:
  - name: gpu-pool
    kind: gpu
    nodes: [x86-c8m16g2-train-01]
    prices: {gpu_seconds: 3600, cpu_core_seconds: 36}   # 1 per GPU-second, 0.01 per core-second
    target_share_percent: 70
  - name: agents
    kind: elastic
    nodes: [x86-c8m16-agent-01]
    target_share_percent: 30
nodes:
  - name: x86-c8m16g2-train-01
    cpus: 8
    memory_mb: 16384
    gpus: {count: 2, model: h100, memory_gb: 80}
  - name: x86-c8m16-agent-01
    cpus: 8
    memory_mb: 16384
queues:
  - name: train
    pool: gpu-pool
    workload_kinds: [ai-training, hpc]
  - name: agent
    pool: agents
    workload_kinds: [agent]
projects:
  - name: default
  - name: genomics
  - name: tiny
    budget: {cpu_hours: 0.0005, period: month}   # 1.8 core-seconds a month
)yaml";

class LedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<TestDaemon>();
    daemon_->UseConfigText(kLedgerConfig);
    daemon_->Start();
  }
  void TearDown() override { daemon_.reset(); }
  TestDaemon& d() { return *daemon_; }

  // Usage rows grouped by job-identifying keys.
  json Usage(const std::string& query) { return d().Call("GET", "/v1/usage?" + query).json; }
  json Reconcile() { return d().Call("GET", "/v1/usage/reconcile").json; }
  std::string SqliteCommand(const std::string& sql) {
    return "sqlite3 '" + d().state_dir() + "/unisched.db' \"" + sql + "\"";
  }
  int Sqlite(const std::string& sql) { return std::system(SqliteCommand(sql).c_str()); }
  // The first column of the first row of a query.
  std::string SqliteValue(const std::string& sql) {
    std::string out;
    if (FILE* p = ::popen(SqliteCommand(sql).c_str(), "r")) {
      char buf[256];
      while (std::fgets(buf, sizeof buf, p)) out += buf;
      ::pclose(p);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out.substr(0, out.find('\n'));
  }

  // The known allocated seconds of a finished job's only attempt: from its
  // processes' start to its end, both as the supervisor recorded them.
  static double RunSeconds(const json& job) {
    const auto start = ParseRfc3339(job["attempts"][0]["process_started_at"].get<std::string>());
    const auto end = ParseRfc3339(job["attempts"][0]["ended_at"].get<std::string>());
    return std::chrono::duration<double>(*end - *start).count();
  }

  std::unique_ptr<TestDaemon> daemon_;
};

TEST_F(LedgerTest, KnownUsageIsChargedToTheRightProjectAndQueue) {
  const std::string gpu_job = d().Submit({{"workload", {{"kind", "ai-training"}}},
                                          {"project", "genomics"},
                                          {"resources", {{"cpus", 4}, {"gpus", 1}, {"memory_mb", 1024}}},
                                          {"command", {"sleep", "2"}}});
  // A CPU burner: a shell loop, all of its time on the CPU.
  const std::string burner =
      d().Submit({{"workload", {{"kind", "agent"}}},
                  {"resources", {{"cpus", 1}, {"memory_mb", 256}}},
                  {"command", {"/bin/sh", "-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done"}}});
  const json g = d().WaitTerminal(gpu_job);
  const json b = d().WaitTerminal(burner);
  ASSERT_EQ(g["state"], "COMPLETED") << g.dump();
  ASSERT_EQ(b["state"], "COMPLETED") << b.dump();

  const json rows = Usage("group_by=project,queue,workload_kind")["rows"];
  json genomics, agent;
  for (const auto& r : rows) {
    if (r["project"] == "genomics") genomics = r;
    if (r["queue"] == "agent") agent = r;
  }
  ASSERT_FALSE(genomics.is_null()) << rows.dump();
  ASSERT_FALSE(agent.is_null()) << rows.dump();
  const double seconds = RunSeconds(g);
  // sleep 2 from its fork to its reaping: about 2 s, and on a slow host
  // (sanitizers, cold caches) its start and end may add a second or more.
  EXPECT_GE(seconds, 1.5);
  EXPECT_LE(seconds, 5.0);
  EXPECT_NEAR(genomics["cpu_core_seconds"].get<double>(), 4 * seconds, 0.02 * 4 * seconds) << genomics.dump();
  EXPECT_NEAR(genomics["gpu_seconds"].get<double>(), seconds, 0.02 * seconds) << genomics.dump();
  EXPECT_NEAR(genomics["memory_mb_seconds"].get<double>(), 1024 * seconds, 0.02 * 1024 * seconds);
  EXPECT_EQ(genomics["queue"], "train");
  EXPECT_EQ(genomics["workload_kind"], "ai-training");
  EXPECT_FALSE(genomics.contains("instance_seconds")) << "not an elastic pool: absent, not zero";
  // Cost from the pool's prices per hour of each metric.
  EXPECT_NEAR(genomics["cost"].get<double>(),
              genomics["gpu_seconds"].get<double>() + 0.01 * genomics["cpu_core_seconds"].get<double>(), 1e-9);
  EXPECT_DOUBLE_EQ(agent["cost"].get<double>(), 0);  // the agents pool has no prices
  EXPECT_FALSE(genomics.contains("storage_gb_hours")) << "sampling is off: absent, not zero";
  EXPECT_FALSE(genomics.contains("network_bytes")) << "not measured: absent, not zero";
  // The job's own usage: its entries, the same figures as its project's
  // row (the only job of genomics), priced and in instance-minutes alike.
  const json gpu_usage = d().Call("GET", "/v1/jobs/" + gpu_job).json["usage"];
  for (const char* metric : {"cpu_core_seconds", "gpu_seconds", "memory_mb_seconds", "cpu_seconds_used", "cost"}) {
    SCOPED_TRACE(metric);
    ASSERT_TRUE(gpu_usage.contains(metric)) << gpu_usage.dump();
    EXPECT_NEAR(gpu_usage[metric].get<double>(), genomics[metric].get<double>(), 1e-9);
  }
  EXPECT_FALSE(gpu_usage.contains("instance_seconds")) << gpu_usage.dump();
  const json burn_usage = d().Call("GET", "/v1/jobs/" + burner).json["usage"];
  EXPECT_NEAR(burn_usage["instance_seconds"].get<double>(), agent["instance_seconds"].get<double>(), 1e-9);
  EXPECT_DOUBLE_EQ(burn_usage["instance_minutes"].get<double>(), agent["instance_minutes"].get<double>());
  EXPECT_FALSE(burn_usage.contains("cost")) << "the agents pool has no prices";

  const double burn_seconds = RunSeconds(b);
  EXPECT_NEAR(agent["instance_seconds"].get<double>(), burn_seconds, 0.02 * burn_seconds) << agent.dump();
  // Reported in instance-minutes too: the row's seconds / 60 to the nearest hundredth.
  EXPECT_DOUBLE_EQ(agent["instance_minutes"].get<double>(),
                   std::round(agent["instance_seconds"].get<double>() / 60.0 * 100.0) / 100.0);
  // cpu_seconds_used is the supervisor's rusage (user + system) of the run.
  const double used = agent["cpu_seconds_used"].get<double>();
  const json& usage = b["attempts"][0]["usage"];
  SCOPED_TRACE(b.dump());
  EXPECT_NEAR(used, usage["user_cpu_seconds"].get<double>() + usage["system_cpu_seconds"].get<double>(), 1e-6);
  // The loop's work is fixed, so its CPU time does not depend on how busy the host is (its share
  // of the wall clock does: a loaded CI host gave it under half). A sleeper beside it uses next to
  // none, which shows the figure is the process's CPU and not its allocation or wall time.
  EXPECT_GT(used, 0.1) << agent.dump();
  ASSERT_TRUE(genomics.contains("cpu_seconds_used")) << genomics.dump();
  EXPECT_LT(genomics["cpu_seconds_used"].get<double>(), 0.2 * used) << genomics.dump();
  EXPECT_LE(used, burn_seconds * 1.02) << agent.dump();

  const json report = Reconcile();
  EXPECT_EQ(report["missing"], 0) << report.dump();
  EXPECT_EQ(report["duplicated"], 0) << report.dump();
  EXPECT_EQ(report["mismatched"], 0) << report.dump();
  EXPECT_EQ(report["attempts_checked"], 2);

  // The ledger's series count what was written.
  const std::string metrics = d().Call("GET", "/metrics").body;
  EXPECT_NE(metrics.find("unisched_ledger_entries_total{kind=\"final\"}"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("unisched_ledger_charged{metric=\"gpu_seconds\"}"), std::string::npos);
  // In base units, as counters: charged less what final entries took back
  // is the ledger's total (the daemon's first run: all of it).
  auto sample = [&metrics](const std::string& series) {
    const size_t at = metrics.find("\n" + series + " ");
    return at == std::string::npos ? 0.0 : std::stod(metrics.substr(at + series.size() + 2));
  };
  auto net = [&sample](const std::string& unit, const std::string& resource) {
    const std::string label = "{resource=\"" + resource + "\"}";
    return sample("unisched_ledger_charged_" + unit + "_total" + label) -
           sample("unisched_ledger_corrected_" + unit + "_total" + label);
  };
  EXPECT_GT(sample("unisched_ledger_charged_seconds_total{resource=\"gpu\"}"), 0) << metrics;
  EXPECT_NEAR(net("seconds", "gpu"), genomics["gpu_seconds"].get<double>(), 1e-6);
  EXPECT_NEAR(net("seconds", "cpu_core"),
              genomics["cpu_core_seconds"].get<double>() + agent.value("cpu_core_seconds", 0.0), 1e-6);
  EXPECT_NEAR(net("seconds", "instance"), agent["instance_seconds"].get<double>(), 1e-6);
  EXPECT_NEAR(net("byte_seconds", "memory"),
              (genomics["memory_mb_seconds"].get<double>() + agent.value("memory_mb_seconds", 0.0)) * 1048576.0,
              1e-6 * 1048576.0);

  // CSV: a header, then one line per group.
  Reply csv = d().Call("GET", "/v1/usage?group_by=project&format=csv");
  EXPECT_EQ(csv.status, 200);
  EXPECT_EQ(csv.body.rfind("project,", 0), 0u) << csv.body;
  EXPECT_EQ(d().Call("GET", "/v1/usage?group_by=colour").status, 422);  // unknown: parsed, out of range
}

// GET /v1/reports/cost: the unit cost per workload kind from the ledger at
// the pools' prices, and the top spenders with their shares; it agrees with
// /v1/usage, and a user sees only their projects'.
TEST_F(LedgerTest, TheCostReportGivesUnitCostsPerWorkloadKindAndTheTopSpenders) {
  auto gpu = [&](const std::string& project) {
    return d().Submit({{"workload", {{"kind", "ai-training"}}},
                       {"project", project},
                       {"resources", {{"cpus", 2}, {"gpus", 1}, {"memory_mb", 512}}},
                       {"command", {"sleep", "1"}}});
  };
  const std::string a = gpu("genomics"), b = gpu("genomics"), c = gpu("default");
  for (const auto& id : {a, b, c}) ASSERT_EQ(d().WaitTerminal(id)["state"], "COMPLETED");
  const std::string burner = d().Submit(
      {{"workload", {{"kind", "agent"}}}, {"resources", {{"cpus", 1}, {"memory_mb", 256}}}, {"command", {"true"}}});
  ASSERT_EQ(d().WaitTerminal(burner)["state"], "COMPLETED");

  const Reply r = d().Call("GET", "/v1/reports/cost?top=5");
  ASSERT_EQ(r.status, 200) << r.body;
  const json& report = r.json;
  json training, agent;
  for (const auto& k : report["by_workload_kind"]) {
    if (k["workload_kind"] == "ai-training") training = k;
    if (k["workload_kind"] == "agent") agent = k;
  }
  ASSERT_FALSE(training.is_null()) << report.dump(2);
  EXPECT_EQ(training["jobs"], 3) << report.dump(2);
  // The same totals as /v1/usage's, and each unit cost is cost / units.
  json usage;
  const json by_kind = Usage("group_by=workload_kind");
  for (const auto& row : by_kind["rows"]) {
    if (row["workload_kind"] == "ai-training") usage = row;
  }
  ASSERT_FALSE(usage.is_null()) << by_kind.dump(2);
  ASSERT_TRUE(training["cost"].is_number() && training["cpu_hours"].is_number() && training["gpu_hours"].is_number())
      << report.dump(2);
  const double cost = training["cost"];
  EXPECT_NEAR(cost, usage["cost"].get<double>(), 1e-9);
  EXPECT_GT(cost, 0);
  EXPECT_NEAR(training["gpu_hours"].get<double>(), usage["gpu_seconds"].get<double>() / 3600, 1e-9);
  EXPECT_NEAR(training["cost_per_job"].get<double>(), cost / 3, 1e-9);
  EXPECT_NEAR(training["cost_per_gpu_hour"].get<double>(), cost / training["gpu_hours"].get<double>(), 1e-9);
  EXPECT_NEAR(training["cost_per_cpu_hour"].get<double>(), cost / training["cpu_hours"].get<double>(), 1e-9);
  EXPECT_TRUE(training["cost_per_instance_minute"].is_null()) << "no instance-minutes: no unit cost";
  ASSERT_FALSE(agent.is_null()) << report.dump(2);
  EXPECT_EQ(agent["cost"], 0);  // the agents pool has no prices
  EXPECT_NEAR(report["total_cost"].get<double>(), cost, 1e-9);
  // Genomics ran two of the three GPU jobs: it spends most.
  ASSERT_GE(report["top_projects"].size(), 2u) << report.dump(2);
  EXPECT_EQ(report["top_projects"][0]["project"], "genomics");
  double shares = 0;
  for (const auto& p : report["top_projects"]) shares += p["share"].get<double>();
  EXPECT_NEAR(shares, 1.0, 1e-9);
  EXPECT_EQ(report["top_users"][0]["user"], "admin");

  // A user of another project sees none of it.
  const std::string outsider = d().CreateUser("outsider", "user", {"tiny"});
  const Reply theirs = d().Call("GET", "/v1/reports/cost", std::string(), {}, &outsider);
  ASSERT_EQ(theirs.status, 200) << theirs.body;
  EXPECT_EQ(theirs.json["total_cost"], 0);
  EXPECT_TRUE(theirs.json["by_workload_kind"].empty()) << theirs.body;
  EXPECT_EQ(d().Call("GET", "/v1/reports/cost?top=0").status, 422);
}

// Usage by hour, and GET /v1/reports/capacity: each pool's utilisation per
// hour against its capacity, its peak and average, the headroom left, and
// the nodes idle now.
TEST_F(LedgerTest, TheCapacityReportGivesUtilisationPerHourPeakHeadroomAndIdleNodes) {
  const Timestamp before = SystemClock().Now();
  const std::string id = d().Submit({{"workload", {{"kind", "ai-training"}}},
                                     {"resources", {{"cpus", 2}, {"gpus", 2}, {"memory_mb", 512}}},
                                     {"command", {"sleep", "1"}}});
  ASSERT_EQ(d().WaitTerminal(id)["state"], "COMPLETED");
  const std::string from = FormatRfc3339(before - std::chrono::hours(2));

  // GPU-seconds by the hour they ended in (one hour, or two when the job
  // ran across an hour's end).
  const json by_hour = Usage("group_by=pool,hour&from=" + from);
  std::map<std::string, double> gpu_seconds;
  for (const auto& row : by_hour["rows"]) {
    if (row["pool"] != "gpu-pool") continue;
    const std::string hour = row["hour"];
    const auto start = ParseRfc3339(hour);
    ASSERT_TRUE(start.has_value()) << hour;
    EXPECT_EQ(ToUnixMillis(*start) % 3'600'000, 0) << hour;
    gpu_seconds[hour] = row["gpu_seconds"].get<double>();
  }
  ASSERT_FALSE(gpu_seconds.empty()) << by_hour.dump(2);

  const Reply r = d().Call("GET", "/v1/reports/capacity?target_headroom_percent=30&from=" + from);
  ASSERT_EQ(r.status, 200) << r.body;
  json gpu, agents;
  for (const auto& p : r.json["pools"]) {
    if (p["pool"] == "gpu-pool") gpu = p;
    if (p["pool"] == "agents") agents = p;
  }
  ASSERT_FALSE(gpu.is_null()) << r.body;
  EXPECT_EQ(gpu["resource"], "gpu");
  EXPECT_EQ(gpu["gpus"], 2);
  EXPECT_EQ(gpu["cpus"], 8);
  ASSERT_EQ(gpu["hours"].size(), gpu_seconds.size()) << gpu.dump(2);
  double peak = 0, total = 0;
  for (const auto& h : gpu["hours"]) {
    const double utilisation = gpu_seconds.at(h["hour"].get<std::string>()) / (2 * 3600.0);
    EXPECT_NEAR(h["gpu_utilisation"].get<double>(), utilisation, 1e-12);
    peak = std::max(peak, utilisation);
    total += gpu_seconds.at(h["hour"].get<std::string>());
  }
  EXPECT_NEAR(gpu["peak_utilisation"].get<double>(), peak, 1e-12);
  EXPECT_NEAR(gpu["headroom"].get<double>(), 1 - peak, 1e-12);
  EXPECT_EQ(gpu["meets_target"], true);
  const double window = std::chrono::duration<double>(*ParseRfc3339(r.json["to"].get<std::string>()) -
                                                      *ParseRfc3339(r.json["from"].get<std::string>()))
                            .count();
  EXPECT_NEAR(gpu["average_utilisation"].get<double>(), total / (2 * window), 1e-9);
  // Both nodes run nothing now: idle since the job ended (gpu) or the start (agents).
  ASSERT_EQ(gpu["idle_nodes"].size(), 1u) << gpu.dump(2);
  EXPECT_EQ(gpu["idle_nodes"][0]["node"], "x86-c8m16g2-train-01");
  EXPECT_GE(*ParseRfc3339(gpu["idle_nodes"][0]["idle_since"].get<std::string>()), before);
  ASSERT_FALSE(agents.is_null()) << r.body;
  EXPECT_EQ(agents["resource"], "cpu");
  EXPECT_TRUE(agents["hours"].empty());
  EXPECT_EQ(agents["peak_utilisation"], 0);
  EXPECT_EQ(agents["idle_nodes"].size(), 1u);
  // The ratio between pools, in nodes: half the nodes each, all the busy
  // ones the GPU pool's, against targets of 70 and 30.
  EXPECT_EQ(gpu["share_of_nodes_percent"], 50.0);
  EXPECT_EQ(gpu["share_of_busy_nodes_percent"], 100.0);
  EXPECT_EQ(gpu["target_share_percent"], 70.0);
  EXPECT_EQ(agents["share_of_busy_nodes_percent"], 0.0);
  EXPECT_EQ(agents["target_share_percent"], 30.0);

  EXPECT_EQ(d().Call("GET", "/v1/reports/capacity?from=" + FormatRfc3339(before) + "&to=" + from).status, 422);
  EXPECT_EQ(d().Call("GET", "/v1/reports/capacity?target_headroom_percent=95").status, 422);

  // Idle times outlive a crash: once a tick has stored the GPU node's, a
  // kill -9 and a restart report the same times, not the restart's.
  const std::string gpu_idle = gpu["idle_nodes"][0]["idle_since"];
  const std::string agents_idle = agents["idle_nodes"][0]["idle_since"];
  const std::string stored_ms = std::to_string(ToUnixMillis(*ParseRfc3339(gpu_idle)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (SqliteValue("SELECT since FROM node_idle WHERE name = 'x86-c8m16g2-train-01'") != stored_ms) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the idle time was never stored";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  d().Kill9();
  d().Start();
  const Reply again = d().Call("GET", "/v1/reports/capacity?from=" + from);
  ASSERT_EQ(again.status, 200) << again.body;
  for (const auto& p : again.json["pools"]) {
    ASSERT_EQ(p["idle_nodes"].size(), 1u) << p.dump(2);
    EXPECT_EQ(p["idle_nodes"][0]["idle_since"], p["pool"] == "gpu-pool" ? gpu_idle : agents_idle) << p.dump(2);
  }
}

TEST_F(LedgerTest, Kill9DuringInterimChargingReconcilesAfterRestart) {
  const std::string id = d().Submit({{"workload", {{"kind", "ai-training"}}},
                                     {"resources", {{"cpus", 2}, {"gpus", 2}, {"memory_mb", 512}}},
                                     {"command", {"sleep", "4"}}});
  // Let interim intervals be charged (over half a GPU-second), then crash.
  // Polled, not slept: a slow host may start the job late.
  json before;
  const auto charged_by = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < charged_by) {
    before = Usage("group_by=project")["rows"];
    if (!before.empty() && before[0].value("gpu_seconds", 0.0) > 0.5) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_FALSE(before.empty()) << "interim charges show before the job ends";
  EXPECT_GT(before[0]["gpu_seconds"].get<double>(), 0.5);
  d().Kill9();
  d().Start();
  const json job = d().WaitTerminal(id);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump();

  const double seconds = RunSeconds(job);
  const json rows = Usage("group_by=project")["rows"];
  ASSERT_EQ(rows.size(), 1u) << rows.dump();
  EXPECT_NEAR(rows[0]["gpu_seconds"].get<double>(), 2 * seconds, 0.02 * 2 * seconds) << rows.dump();
  EXPECT_NEAR(rows[0]["cpu_core_seconds"].get<double>(), 2 * seconds, 0.02 * 2 * seconds) << rows.dump();
  const json report = Reconcile();
  EXPECT_EQ(report["missing"], 0) << report.dump();
  EXPECT_EQ(report["duplicated"], 0) << report.dump();
  EXPECT_EQ(report["mismatched"], 0) << report.dump();
}

TEST_F(LedgerTest, RowsRemovedOrDuplicatedBehindItsBackAreReported) {
  // Long enough to be charged: a `true` can start and end within one
  // millisecond, and then has no usage row to lose.
  const std::string a = d().Submit({{"workload", {{"kind", "hpc"}}},
                                    {"resources", {{"cpus", 1}, {"memory_mb", 128}}},
                                    {"command", {"sleep", "0.2"}}});
  const std::string b = d().Submit(
      {{"workload", {{"kind", "hpc"}}}, {"resources", {{"cpus", 2}, {"memory_mb", 128}}}, {"command", {"sleep", "1"}}});
  d().WaitTerminal(a);
  d().WaitTerminal(b);
  ASSERT_EQ(Reconcile()["mismatched"], 0);

  // The ledger refuses updates and deletes...
  EXPECT_NE(Sqlite("DELETE FROM ledger WHERE job_id = " + a), 0);
  // ...so a tamperer drops the guard first: job a loses its cpu rows, and one
  // of job b's memory rows is copied under another key.
  ASSERT_EQ(Sqlite("DROP TRIGGER ledger_no_delete; DELETE FROM ledger WHERE job_id = " + a +
                   " AND metric = 'cpu_core_seconds'; INSERT INTO ledger(key, job_id, attempt, user, project, queue, "
                   "pool, workload_kind, node, metric, detail, quantity, interval_start, interval_end, final, "
                   "recorded_at) SELECT key || '-copy', job_id, attempt, user, project, queue, pool, workload_kind, "
                   "node, metric, detail, quantity, interval_start, interval_end, final, recorded_at FROM ledger "
                   "WHERE job_id = " +
                   b + " AND metric = 'memory_mb_seconds' LIMIT 1;"),
            0);
  const json report = Reconcile();
  EXPECT_EQ(report["missing"], 1) << report.dump();  // a's cpu_core_seconds
  EXPECT_EQ(report["duplicated"], 1) << report.dump();
  EXPECT_EQ(report["mismatched"], 1) << report.dump();  // b's memory total is now off
  bool names_a = false;
  for (const auto& detail : report["details"]) {
    if (detail["kind"] == "missing" && detail["job"] == a && detail["metric"] == "cpu_core_seconds") names_a = true;
  }
  EXPECT_TRUE(names_a) << report.dump();

  // The periodic reconciliation (every second here) finds them too: a
  // warning event on each job concerned, and the counts as a metric.
  bool event_seen = false;
  std::string metrics;
  const auto seen_by = std::chrono::steady_clock::now() + 60s;
  while (!event_seen && std::chrono::steady_clock::now() < seen_by) {
    const json events = d().Call("GET", "/v1/jobs/" + a + "/events").json;
    for (const auto& e : events["events"]) {
      if (e["kind"] == "ledger_discrepancy") event_seen = true;
    }
    if (!event_seen) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(event_seen) << d().Call("GET", "/v1/jobs/" + a + "/events").body;
  metrics = d().Call("GET", "/metrics").body;
  EXPECT_NE(metrics.find("unisched_ledger_discrepancies{kind=\"missing\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("unisched_ledger_discrepancies{kind=\"duplicated\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("unisched_ledger_discrepancies{kind=\"mismatched\"} 1"), std::string::npos);
  // ...and the ledger_discrepancy alert fires.
  json alerts;
  const auto fired_by = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < fired_by) {
    alerts = d().Call("GET", "/v1/alerts?state=firing").json;
    if (!alerts["alerts"].empty()) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(alerts["alerts"].size(), 1u) << alerts.dump();
  EXPECT_EQ(alerts["alerts"][0]["name"], "LedgerDiscrepancy");
  EXPECT_EQ(alerts["alerts"][0]["object"], "ledger");
}

TEST_F(LedgerTest, AProjectOverItsBudgetWaitsWithBudgetExhausted) {
  const json hpc = {{"workload", {{"kind", "hpc"}}},
                    {"project", "tiny"},
                    {"resources", {{"cpus", 2}, {"memory_mb", 128}}},
                    {"command", {"sleep", "1"}}};
  const std::string first = d().Submit(hpc);  // ~2 core-seconds: over the 1.8 of the budget
  ASSERT_EQ(d().WaitTerminal(first)["state"], "COMPLETED");
  const std::string second = d().Submit(hpc);
  json job;
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < until) {
    job = d().Call("GET", "/v1/jobs/" + second).json;
    if (job["state"] != "PENDING") break;  // it ran: the assertions below say so
    if (!job["pending_reasons"].empty() && job["pending_reasons"][0]["code"] == "BudgetExhausted") break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(job["state"], "PENDING") << job.dump();
  ASSERT_FALSE(job["pending_reasons"].empty()) << job.dump();
  EXPECT_EQ(job["pending_reasons"][0]["code"], "BudgetExhausted") << job.dump();
  EXPECT_NE(job["pending_reasons"][0]["message"].get<std::string>().find("project tiny used"), std::string::npos);
  // Other projects are not held back.
  json other = hpc;
  other["project"] = "default";
  EXPECT_EQ(d().WaitTerminal(d().Submit(other))["state"], "COMPLETED");
}

// Storage GB-hours: each project's storage_paths and each running job's work
// directory are sampled every second here and charged by what is on disk.
TEST_F(LedgerTest, StorageIsSampledForProjectPathsAndJobWorkDirectories) {
  char tmpl[] = "/tmp/unisched-storage-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  {
    std::ofstream data(dir + "/data.bin", std::ios::binary);
    const std::string chunk(1 << 20, 'x');
    for (int i = 0; i < 5; ++i) data << chunk;  // 5 MiB, all of it allocated
  }
  std::string config = kLedgerConfig;
  config.replace(config.find("storage_sample_interval_seconds: 0"), 34, "storage_sample_interval_seconds: 1");
  config.replace(config.find("  - name: genomics\n"), 19, "  - name: genomics\n    storage_paths: [" + dir + "]\n");
  // Priced per tier: the project's path is hot, a work directory scratch.
  config +=
      "storage:\n  tiers:\n    - {name: hot, price_per_gb_hour: 1000}\n"
      "    - {name: scratch, price_per_gb_hour: 3000}\n";
  daemon_ = std::make_unique<TestDaemon>();
  daemon_->UseConfigText(config);
  daemon_->Start();

  // The job writes 3 MB into its work directory (its working directory), then waits.
  const std::string id = d().Submit({{"workload", {{"kind", "hpc"}}},
                                     {"project", "genomics"},
                                     {"resources", {{"cpus", 1}, {"memory_mb", 128}}},
                                     {"command", {"/bin/sh", "-c", "head -c 3000000 /dev/zero > big && sleep 3"}}});
  ASSERT_EQ(d().WaitTerminal(id)["state"], "COMPLETED");
  std::this_thread::sleep_for(1200ms);  // at least one project sample after the job

  const std::string project_gb_hours = SqliteValue(
      "SELECT MAX(quantity) FROM ledger WHERE metric = 'storage_gb_hours' AND job_id = 0 AND project = 'genomics'");
  ASSERT_FALSE(project_gb_hours.empty());
  const double five_mib_second = 5.0 * (1 << 20) / 1e9 / 3600.0;  // GB-hours of 5 MiB held for one second
  EXPECT_NEAR(std::stod(project_gb_hours), five_mib_second, 0.01 * five_mib_second);
  const std::string job_gb_hours = SqliteValue(
      "SELECT MAX(quantity) FROM ledger WHERE metric = 'storage_gb_hours' AND detail = 'workdir' AND job_id = " + id);
  ASSERT_FALSE(job_gb_hours.empty()) << "a sample while the job ran";
  const double three_mb_second = 3e6 / 1e9 / 3600.0;
  EXPECT_NEAR(std::stod(job_gb_hours), three_mb_second, 0.02 * three_mb_second);

  // In the usage of the project; and sampled metrics stay out of reconciliation.
  double total = 0;
  const json usage = Usage("group_by=project");
  for (const auto& row : usage["rows"]) {
    if (row["project"] == "genomics") total = row.value("storage_gb_hours", 0.0);
  }
  EXPECT_GE(total, 2 * five_mib_second);
  // Per tier, each priced at its tier's price per GB-hour; compute has tier "".
  std::map<std::string, json> tiers;
  const json by_tier = Usage("group_by=project,tier");
  for (const auto& row : by_tier["rows"]) {
    if (row["project"] == "genomics") tiers[row["tier"].get<std::string>()] = row;
  }
  ASSERT_TRUE(tiers.count("hot") && tiers.count("scratch") && tiers.count("")) << by_tier.dump();
  for (const auto& [tier, price] : {std::pair<std::string, double>{"hot", 1000}, {"scratch", 3000}}) {
    const double gb_hours = tiers[tier]["storage_gb_hours"].get<double>();
    EXPECT_GT(gb_hours, 0) << tier;
    EXPECT_NEAR(tiers[tier]["cost"].get<double>(), gb_hours * price, 1e-9 * gb_hours * price) << tier;
  }
  EXPECT_FALSE(tiers[""].contains("storage_gb_hours")) << tiers[""].dump();
  const json report = Reconcile();
  EXPECT_EQ(report["missing"], 0) << report.dump();
  EXPECT_EQ(report["mismatched"], 0) << report.dump();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace unisched::testing
