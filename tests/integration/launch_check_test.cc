// The seed's launch check 1 and the basic life of jobs, through the real
// daemon: real HTTP, real SQLite, real processes.

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;

class JobsTest : public SharedDaemonTest {};

TEST_F(JobsTest, LaunchCheckOneJobOfEachKindRoutedAndCompleted) {
  struct Case {
    const char* name;
    json job;
    const char* pool;
    const char* queue;
  };
  const std::vector<Case> cases = {
      {"fp64 cpu simulation",
       {{"name", "sim"},
        {"workload", {{"kind", "hpc"}, {"precision", "fp64"}}},
        {"resources", {{"cpus", 4}, {"memory_mb", 1024}}},
        {"command", {"/bin/sh", "-c", "echo simulating; echo $OMP_NUM_THREADS"}}},
       "cpu-hpc-pool",
       "hpc-precision"},
      {"single-GPU training",
       {{"name", "train"},
        {"workload", {{"kind", "ai-training"}}},
        {"resources", {{"cpus", 2}, {"gpus", 1}, {"memory_mb", 2048}}},
        {"command", {"/bin/sh", "-c", "echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"}}},
       "gpu-train-pool",
       "ai-training"},
      {"agent tool call",
       {{"name", "tool"}, {"workload", {{"kind", "agent"}}}, {"command", {"/bin/echo", "tool result"}}},
       "elastic-light-pool",
       "agent-sandbox"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string id = d().Submit(c.job);
    ASSERT_FALSE(id.empty());
    json job = d().WaitTerminal(id);
    EXPECT_EQ(job["state"], "COMPLETED") << job.dump();
    EXPECT_EQ(job["pool"], c.pool);
    EXPECT_EQ(job["queue"], c.queue);
    EXPECT_EQ(job["routing"]["pool"], c.pool);
    EXPECT_FALSE(job["routing"]["reason"].get<std::string>().empty());
    EXPECT_EQ(job["exit_code"], 0);
    ASSERT_EQ(job["attempts"].size(), 1u);
    EXPECT_EQ(job["attempts"][0]["state"], "COMPLETED");
    EXPECT_FALSE(job["nodes"].empty());
  }
}

TEST_F(JobsTest, GpuJobLogShowsItsDevices) {
  const std::string id =
      d().Submit({{"workload", {{"kind", "ai-training"}}},
                  {"resources", {{"gpus", 2}}},
                  {"command", {"/bin/sh", "-c", "echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"}}});
  json job = d().WaitTerminal(id);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump();
  Reply log = d().Call("GET", "/v1/jobs/" + id + "/log?stream=stdout");
  EXPECT_EQ(log.status, 200);
  EXPECT_NE(log.body.find("CUDA_VISIBLE_DEVICES="), std::string::npos) << log.body;
  // Two distinct device indices.
  const auto value = log.body.substr(log.body.find('=') + 1);
  EXPECT_NE(value.find(','), std::string::npos) << value;
}

TEST_F(JobsTest, FailingCommandIsFailedWithItsExitCode) {
  json job = d().WaitTerminal(
      d().Submit({{"workload", {{"kind", "agent"}}}, {"command", {"/bin/sh", "-c", "echo oops >&2; exit 3"}}}));
  EXPECT_EQ(job["state"], "FAILED");
  EXPECT_EQ(job["exit_code"], 3);
  Reply err = d().Call("GET", "/v1/jobs/" + job["id"].get<std::string>() + "/log?stream=stderr");
  EXPECT_NE(err.body.find("oops"), std::string::npos);
}

TEST_F(JobsTest, CommandThatCannotStartIsFailedWithTheReason) {
  json job = d().WaitTerminal(d().Submit({{"workload", {{"kind", "agent"}}}, {"command", {"/no/such/program"}}}));
  EXPECT_EQ(job["state"], "FAILED");
  EXPECT_TRUE(job["exit_code"].is_null()) << job.dump();
  EXPECT_NE(job["state_reason"].get<std::string>().find("/no/such/program"), std::string::npos) << job.dump();
}

TEST_F(JobsTest, WallTimeExceededIsTimeout) {
  json job = d().WaitTerminal(d().Submit(
      {{"workload", {{"kind", "hpc"}}}, {"resources", {{"walltime_seconds", 1}}}, {"command", {"sleep", "30"}}}));
  EXPECT_EQ(job["state"], "TIMEOUT") << job.dump();
}

TEST_F(JobsTest, CancelRunningJobEndsCancelled) {
  const std::string id = d().Submit({{"workload", {{"kind", "hpc"}}}, {"command", {"sleep", "30"}}});
  // Wait until it runs (bounded generously: a slow host may start it late).
  const auto running_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < running_by) {
    if (d().Call("GET", "/v1/jobs/" + id).json["state"] == "RUNNING") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Reply r = d().Call("DELETE", "/v1/jobs/" + id);
  EXPECT_EQ(r.status, 200) << r.body;
  json job = d().WaitTerminal(id);
  EXPECT_EQ(job["state"], "CANCELLED") << job.dump();
  // A terminal job cannot be cancelled again.
  EXPECT_EQ(d().Call("DELETE", "/v1/jobs/" + id).status, 409);
}

TEST_F(JobsTest, CancelPendingJobAndHoldRelease) {
  // Ask for a whole hpc node's cpus on every node so later jobs wait, then hold/release/cancel one.
  const std::string big = d().Submit(
      {{"workload", {{"kind", "hpc"}}}, {"resources", {{"nodes", 4}, {"cpus", 64}}}, {"command", {"sleep", "30"}}});
  const std::string waiting =
      d().Submit({{"workload", {{"kind", "hpc"}}}, {"resources", {{"cpus", 64}}}, {"command", {"true"}}});
  json pending;
  const auto pending_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < pending_by) {
    pending = d().Call("GET", "/v1/jobs/" + waiting).json;
    if (pending["state"] == "PENDING" && !pending["pending_reasons"].empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(pending["state"], "PENDING") << pending.dump();
  ASSERT_FALSE(pending["pending_reasons"].empty()) << pending.dump();
  EXPECT_EQ(pending["pending_reasons"][0]["code"], "Resources") << pending.dump();

  EXPECT_EQ(d().Call("POST", "/v1/jobs/" + waiting + "/hold", std::string()).json["state"], "HELD");
  EXPECT_EQ(d().Call("POST", "/v1/jobs/" + waiting + "/hold", std::string()).status, 409);
  EXPECT_EQ(d().Call("POST", "/v1/jobs/" + waiting + "/release", std::string()).json["state"], "PENDING");
  Reply cancelled = d().Call("DELETE", "/v1/jobs/" + waiting);
  EXPECT_EQ(cancelled.status, 200);
  EXPECT_EQ(cancelled.json["state"], "CANCELLED");
  EXPECT_TRUE(cancelled.json["exit_code"].is_null());
  d().Call("DELETE", "/v1/jobs/" + big);
  EXPECT_EQ(d().WaitTerminal(big)["state"], "CANCELLED");
}

TEST_F(JobsTest, IdempotencyKeyReturnsTheFirstJob) {
  json job = {{"workload", {{"kind", "agent"}}}, {"command", {"true"}}};
  Reply first = d().Call("POST", "/v1/jobs", job.dump(), {{"Idempotency-Key", "retry-123"}});
  Reply second = d().Call("POST", "/v1/jobs", job.dump(), {{"Idempotency-Key", "retry-123"}});
  ASSERT_EQ(first.status, 201);
  ASSERT_EQ(second.status, 201);
  EXPECT_EQ(first.json["id"], second.json["id"]);
  Reply other = d().Call("POST", "/v1/jobs", job.dump(), {{"Idempotency-Key", "retry-456"}});
  EXPECT_NE(other.json["id"], first.json["id"]);
}

TEST_F(JobsTest, ListFiltersAndCounts) {
  const std::string id = d().Submit({{"name", "listed"}, {"workload", {{"kind", "agent"}}}, {"command", {"true"}}});
  d().WaitTerminal(id);
  Reply all = d().Call("GET", "/v1/jobs?queue=agent-sandbox&limit=0");
  EXPECT_EQ(all.status, 200);
  EXPECT_TRUE(all.json["jobs"].empty());
  EXPECT_GE(all.json["total"].get<int>(), 1);
  Reply page = d().Call("GET", "/v1/jobs?state=COMPLETED&limit=1");
  ASSERT_EQ(page.json["jobs"].size(), 1u);
  EXPECT_EQ(page.json["jobs"][0]["state"], "COMPLETED");
  Reply bad = d().Call("GET", "/v1/jobs?state=DONE");
  EXPECT_EQ(bad.status, 422);
  EXPECT_EQ(bad.json["error"]["field"], "state");
  Reply events = d().Call("GET", "/v1/jobs/" + id + "/events");
  ASSERT_EQ(events.status, 200);
  EXPECT_GE(events.json["events"].size(), 3u);  // submitted, started, completed
}

TEST_F(JobsTest, ClusterViews) {
  Reply pools = d().Call("GET", "/v1/pools");
  ASSERT_EQ(pools.status, 200);
  EXPECT_EQ(pools.json["pools"].size(), 4u);
  Reply queues = d().Call("GET", "/v1/queues");
  ASSERT_EQ(queues.status, 200);
  EXPECT_EQ(queues.json["queues"].size(), 4u);
  Reply nodes = d().Call("GET", "/v1/nodes");
  ASSERT_EQ(nodes.status, 200);
  for (const auto& n : nodes.json["nodes"]) EXPECT_EQ(n["state"], "up");

  // Drain a node without jobs: drained at once; resume: up.
  const std::string name = "x86-c16m128g4-infer-01";
  Reply drained = d().Call("POST", "/v1/nodes/" + name + "/drain", json{{"reason", "maintenance"}});
  EXPECT_EQ(drained.status, 200) << drained.body;
  EXPECT_EQ(drained.json["state"], "drained");
  EXPECT_EQ(d().Call("POST", "/v1/nodes/" + name + "/resume", std::string()).json["state"], "up");
  EXPECT_EQ(d().Call("POST", "/v1/nodes/no-such-node/drain", std::string()).status, 404);
}

TEST_F(JobsTest, MetricsExposeContractSeries) {
  d().WaitTerminal(d().Submit({{"workload", {{"kind", "agent"}}}, {"command", {"true"}}}));
  // The job gauges are set when the controller publishes, just after the
  // commit the job's terminal state is read from: poll briefly.
  const std::string completed =
      "unisched_jobs{pool=\"elastic-light-pool\",queue=\"agent-sandbox\",state=\"COMPLETED\"} ";
  Reply m;
  const auto published_by = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < published_by) {
    m = d().Call("GET", "/metrics", std::string(), {}, nullptr);
    if (m.status == 200 && m.body.find(completed) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(m.status, 200);
  for (const char* series : {"unisched_jobs{", "unisched_job_submissions_total{", "unisched_scheduler_cycle_seconds",
                             "unisched_http_request_duration_seconds", "unisched_nodes{"}) {
    EXPECT_NE(m.body.find(series), std::string::npos) << series;
  }
  // At least the job above (the suite's other tests may have completed more).
  const auto at = m.body.find(completed);
  ASSERT_NE(at, std::string::npos) << m.body;
  EXPECT_GE(std::stod(m.body.substr(at + completed.size())), 1.0) << m.body;
  const std::string no_token;
  EXPECT_EQ(d().Call("GET", "/healthz", std::string(), {}, &no_token).json["status"], "ok");
}

}  // namespace
}  // namespace unisched::testing
