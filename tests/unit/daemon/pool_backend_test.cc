// The pool-backend port end to end (docs/adr/0006-pool-backend-port.md): a
// daemon built in this process, over real HTTP and a real SQLite store, with
// a pool served by a backend that places jobs itself (tests/testing's
// PlacingBackend, which runs each command as a real process on a "node" of
// its own). The daemon admits by queue order and quotas, hands jobs over
// with no allocation, and takes the backend's results, nodes and output.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "daemon/daemon.h"
#include "testing/fake_executor.h"
#include "testing/load_config.h"
#include "testing/placing_backend.h"
#include "unisched/client/http_client.h"

namespace unisched::daemon {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Eventually;
using testing::PlacingBackend;

constexpr const char* kToken = "pool-backend-test-admin-token";

// Pool `remote` has no nodes: backend `elsewhere` places its jobs. A
// project may run one job at a time in its queue.
constexpr const char* kConfig = R"yaml(
server:
  scheduler_tick_seconds: 0.05
pools:
  - name: remote
    kind: cpu
    backend: elsewhere
    nodes: []
  - name: cpu
    kind: cpu
    nodes: [x86-c2m4-local-01]
nodes:
  - {name: x86-c2m4-local-01, cpus: 2, memory_mb: 4096}
queues:
  - name: remote
    pool: remote
    workload_kinds: [hpc]
    policy:
      type: fifo
      project_quota: {running_jobs: 1}
  - name: local
    pool: cpu
projects:
  - name: default
)yaml";

class PoolBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_dir_ = fs::temp_directory_path() / ("unisched-pool-backend-" + std::to_string(::getpid()));
    fs::remove_all(state_dir_);
    config::Config config = testing::LoadConfigOrFail(kConfig);
    config.server.state_dir = state_dir_.string();
    ::setenv("UNISCHED_ADMIN_TOKEN", kToken, 1);
    DaemonOptions options;
    options.http.host = "127.0.0.1";
    options.http.port = 0;
    options.backends["elsewhere"] = [this](backend::PoolBackend::ResultSink sink) {
      auto made = std::make_unique<PlacingBackend>(std::vector<std::string>{"far-01", "far-02"}, std::move(sink));
      backend_ = made.get();
      return made;
    };
    auto started = Daemon::Start(std::move(config), std::move(options));
    ASSERT_TRUE(started.ok()) << started.error().message;
    daemon_ = std::move(*started);
    const std::string url = daemon_->url();
    const auto colon = url.rfind(':');
    client_ =
        std::make_unique<client::HttpClient>("127.0.0.1", static_cast<uint16_t>(std::stoi(url.substr(colon + 1))));
    client_->SetBearerToken(kToken);
  }
  void TearDown() override {
    client_.reset();
    if (daemon_) daemon_->Stop();
    daemon_.reset();
    fs::remove_all(state_dir_);
  }

  json Call(const std::string& method, const std::string& target, const json& body = nullptr) {
    auto reply = client_->Request(method, target, body.is_null() ? std::string() : body.dump());
    EXPECT_TRUE(reply.ok());
    if (!reply.ok()) return nullptr;
    last_status_ = reply->status;
    return json::parse(reply->body, nullptr, false);
  }
  std::string Submit(const std::string& shell) {
    json job = Call("POST", "/v1/jobs",
                    {{"queue", "remote"},
                     {"workload", {{"kind", "hpc"}}},
                     {"resources", {{"cpus", 2}, {"memory_mb", 512}, {"walltime_seconds", 600}}},
                     {"command", {"/bin/sh", "-c", shell}}});
    EXPECT_EQ(last_status_, 201) << job.dump();
    return job.value("id", "");
  }
  json WaitForState(const std::string& id, const std::string& state) {
    json job;
    EXPECT_TRUE(Eventually([&] {
      job = Call("GET", "/v1/jobs/" + id);
      return job.value("state", "") == state;
    })) << "job "
        << id << " is " << job.dump();
    return job;
  }

  fs::path state_dir_;
  std::unique_ptr<Daemon> daemon_;
  PlacingBackend* backend_ = nullptr;
  std::unique_ptr<client::HttpClient> client_;
  int last_status_ = 0;
};

TEST_F(PoolBackendTest, AJobOfABackendPlacedPoolRunsWhereTheBackendChoseAndIsCharged) {
  const std::string id = Submit("sleep 0.2; echo ran as job $UNISCHED_JOB_ID on $UNISCHED_NODELIST");
  const json done = WaitForState(id, "COMPLETED");
  EXPECT_EQ(done["exit_code"], 0);
  EXPECT_EQ(done["pool"], "remote");
  // Where the backend ran it, in the job's views.
  ASSERT_EQ(done["attempts"].size(), 1u);
  ASSERT_EQ(done["attempts"][0]["nodes"].size(), 1u);
  const std::string node = done["attempts"][0]["nodes"][0];
  EXPECT_TRUE(node == "far-01" || node == "far-02") << done.dump();
  EXPECT_EQ(done["attempts"][0]["placed_on"], done["attempts"][0]["nodes"]);
  EXPECT_EQ(done["nodes"], done["attempts"][0]["nodes"]);
  EXPECT_FALSE(backend_->saw_allocation());
  // What the job asked for reached the backend, for it to place by.
  const backend::AttemptLaunch launch = backend_->last_launch();
  EXPECT_EQ(launch.resources.cpus, 2);
  EXPECT_EQ(launch.resources.memory_mb, 512);
  EXPECT_EQ(launch.resources.walltime_seconds, 600);
  EXPECT_EQ(launch.spec.limits.cpu_millis, 2000);
  EXPECT_EQ(launch.spec.limits.memory_bytes, 512LL << 20);

  // Its output, read through the backend.
  auto log = client_->Request("GET", "/v1/jobs/" + id + "/log");
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->body, "ran as job " + id + " on " + node + "\n");

  // Charged for what it asked for (2 CPUs, 512 MB) over its run, to the
  // backend, and the ledger reconciles with the job record.
  const json usage = Call("GET", "/v1/usage?group_by=pool");
  ASSERT_EQ(usage["rows"].size(), 1u) << usage.dump();
  EXPECT_EQ(usage["rows"][0]["pool"], "remote");
  const double cpu = usage["rows"][0].value("cpu_core_seconds", -1.0);
  const double memory = usage["rows"][0].value("memory_mb_seconds", -1.0);
  EXPECT_GE(cpu, 2 * 0.2);                                       // 2 CPUs for at least the 0.2 s it slept
  EXPECT_NEAR(memory, cpu * 256, 1e-3 * std::max(1.0, memory));  // 512 MB per 2 CPUs
  const json reconcile = Call("GET", "/v1/usage/reconcile");
  EXPECT_EQ(reconcile["missing"], 0) << reconcile.dump();
  EXPECT_EQ(reconcile["mismatched"], 0) << reconcile.dump();
  EXPECT_EQ(reconcile["duplicated"], 0) << reconcile.dump();
}

TEST_F(PoolBackendTest, TheDaemonAdmitsByQuotaAndCancelsThroughTheBackend) {
  // The queue lets a project run one job at a time: the second waits on
  // the quota, not on nodes (the pool has none), until the first ends.
  const std::string first = Submit("sleep 600");
  WaitForState(first, "RUNNING");
  const std::string second = Submit("echo second");
  json waiting;
  ASSERT_TRUE(Eventually([&] {
    waiting = Call("GET", "/v1/jobs/" + second);
    return waiting["pending_reasons"].size() > 0;
  })) << waiting.dump();
  EXPECT_EQ(waiting["state"], "PENDING");
  EXPECT_EQ(waiting["pending_reasons"][0]["code"], "QuotaExceeded") << waiting.dump();
  EXPECT_EQ(backend_->launches(), 1);

  // A cancel reaches the backend, which stops the process; the quota frees.
  Call("DELETE", "/v1/jobs/" + first);
  EXPECT_EQ(last_status_, 200);
  const json cancelled = WaitForState(first, "CANCELLED");
  EXPECT_EQ(cancelled["exit_code"], 128 + SIGTERM);
  WaitForState(second, "COMPLETED");
  EXPECT_EQ(backend_->launches(), 2);
}

TEST_F(PoolBackendTest, AJobNoLocalNodeCouldHoldIsAcceptedForTheBackendToPlace) {
  // 64 CPUs: more than any node here; the backend's nodes are its to judge.
  json job = Call("POST", "/v1/jobs",
                  {{"queue", "remote"},
                   {"workload", {{"kind", "hpc"}}},
                   {"resources", {{"cpus", 64}, {"memory_mb", 1024}, {"walltime_seconds", 60}}},
                   {"command", {"/bin/true"}}});
  ASSERT_EQ(last_status_, 201) << job.dump();
  WaitForState(job["id"], "COMPLETED");
}

// A pool naming a backend the daemon does not have stops the start with the
// pool and the name, and leaves nothing running.
TEST(PoolBackendStartTest, AnUnknownBackendStopsTheStart) {
  const fs::path dir = fs::temp_directory_path() / ("unisched-unknown-backend-" + std::to_string(::getpid()));
  config::Config config = testing::LoadConfigOrFail(kConfig);
  config.server.state_dir = dir.string();
  DaemonOptions options;
  options.http.host = "127.0.0.1";
  options.http.port = 0;
  auto started = Daemon::Start(std::move(config), std::move(options));
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.error().message.find("pool remote names backend 'elsewhere'"), std::string::npos)
      << started.error().message;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace unisched::daemon
