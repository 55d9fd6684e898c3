// Launch check 5 of the seed, end to end (issue 23 point 6): "jobs
// read/write shared storage; object storage upload/download and lifecycle
// work". Against radosgw (signatures checked; the s3_server fixture) on a
// real daemon: a job of the HPC pool stages in input that an independent
// client (curl's own SigV4) uploaded and writes to shared storage; a
// sandboxed agent job of another pool reads it there and its results are
// staged out, where the independent client reads them back intact; then the
// lifecycle, listed first with a dry run that moves nothing, archives an
// aged result from shared storage to the cold bucket (its mtime set back)
// and expires an aged object, with events for both.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "testing/daemon.h"
#include "testing/s3_server.h"

namespace unisched::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

class LaunchCheck5Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "staging, project directories and sandboxes need root";
    s3_ = S3ServerEnv();
    ASSERT_TRUE(s3_.count("UNISCHED_TEST_S3_URL")) << "no S3 server: run through ctest (the s3_server fixture)";
    root_ = "/tmp/unisched-check5-" + std::to_string(::getpid());
    fs::remove_all(root_);
    fs::create_directories(root_ + "/shared");
    fs::permissions(root_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    fs::permissions(root_ + "/shared", fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    bucket_ = "check5-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}() % 100000);
    curl_.emplace(s3_, root_ + "-curl");
    ASSERT_EQ(curl_->MakeBucket(bucket_), "200");
    std::string config = ReadFile(std::string(UNISCHED_SOURCE_DIR) + "/config/unisched.yaml");
    // Storage sampled every second: the archive shows up in the cold tier.
    const std::string every = "storage_sample_interval_seconds: 300";
    config.replace(config.find(every), every.size(), "storage_sample_interval_seconds: 1");
    config +=
        "\nstorage:\n  lifecycle_interval_minutes: 0\n"
        "  tiers: [{name: hot, price_per_gb_hour: 0.0001}, {name: cold, price_per_gb_hour: 0.00001}]\n"
        "  shared:\n    - {name: data, path: " +
        root_ +
        "/shared, pools: [cpu-hpc-pool, elastic-light-pool]}\n"
        "  object_stores:\n    - name: rgw\n      endpoint: " +
        s3_["UNISCHED_TEST_S3_URL"] + "\n      " + kS3CredentialsYaml +
        "\n"
        "      access: [{projects: [default], bucket: " +
        bucket_ +
        "}]\n"
        "  lifecycle:\n"
        "    - {name: archive-results, shared: data, older_than_days: 1, archive_to: s3://rgw/" +
        bucket_ +
        "/cold/}\n"
        "    - {name: expire-scratch, objects: s3://rgw/" +
        bucket_ + "/scratch/, older_than_days: 0.00003}\n";
    daemon_.UseConfigText(config);
    daemon_.Start();
    for (const std::string& body : S3KeySecretBodies(s3_)) {
      ASSERT_EQ(daemon_.Call("POST", "/v1/secrets", body).status, 201);
    }
    alice_ = daemon_.CreateUser("alice", "user", {"default"});
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }

  std::string Put(const std::string& key, const std::string& content) { return curl_->Put(bucket_, key, content); }
  std::string Get(const std::string& key, std::string* status = nullptr) { return curl_->Get(bucket_, key, status); }
  std::string Url(const std::string& key) const { return "s3://rgw/" + bucket_ + "/" + key; }
  // As alice, a member of project default (her jobs run with its group).
  json Run(const json& job) {
    auto submitted = daemon_.Call("POST", "/v1/jobs", job.dump(), {}, &alice_);
    EXPECT_EQ(submitted.status, 201) << submitted.body;
    const std::string id = submitted.json.value("id", "");
    json done = daemon_.WaitTerminal(id, std::chrono::seconds(90));
    EXPECT_EQ(done["state"], "COMPLETED") << done.dump() << daemon_.Call("GET", "/v1/jobs/" + id + "/log").body;
    return done;
  }

  std::map<std::string, std::string> s3_;
  std::optional<S3Curl> curl_;  // an independent client
  std::string root_, bucket_, alice_;
  TestDaemon daemon_;
};

TEST_F(LaunchCheck5Test, SharedStorageObjectStorageAndLifecycleEndToEnd) {
  std::string sample;
  for (int i = 0; i < 20000; ++i) sample += "read-" + std::to_string(i) + " ACGTTGCA\n";
  ASSERT_EQ(Put("inputs/sample.txt", sample), "200");

  // 1. An HPC job stages the input in and writes to shared storage.
  const json first = Run(
      {{"workload", {{"kind", "hpc"}}},
       {"command", {"/bin/sh", "-c", "umask 027; grep -c ACGT input/sample.txt > $UNISCHED_SHARED_DATA/stage1.txt"}},
       {"data", {{"stage_in", {{{"from", Url("inputs/sample.txt")}, {"to", "input/"}}}}}}});
  EXPECT_EQ(first["pool"], "cpu-hpc-pool");
  EXPECT_EQ(ReadFile(root_ + "/shared/default/stage1.txt"), "20000\n");

  // 2. A sandboxed agent job of another pool reads it and its results are staged out.
  const json second = Run(
      {{"workload", {{"kind", "agent"}}},
       {"command",
        {"/bin/sh", "-c", "mkdir -p out && cp $UNISCHED_SHARED_DATA/stage1.txt out/count.txt && echo ok > out/done"}},
       {"data", {{"stage_out", {{{"from", "out/"}, {"to", Url("results/{job_id}/")}}}}}}});
  EXPECT_EQ(second["pool"], "elastic-light-pool");
  const std::string id = second.value("id", "");
  EXPECT_EQ(Get("results/" + id + "/count.txt"), "20000\n");
  EXPECT_EQ(Get("results/" + id + "/done"), "ok\n");
  EXPECT_GT(second["attempts"][0]["usage"]["network_bytes_out"].get<int64_t>(), 0) << second.dump();

  // 3. The lifecycle: an aged result and an aged object.
  ASSERT_EQ(std::system(("touch -d '3 days ago' " + root_ + "/shared/default/stage1.txt").c_str()), 0);
  std::ofstream(root_ + "/shared/default/fresh.txt") << "keep me\n";
  ASSERT_EQ(Put("scratch/old.tmp", "scratch\n"), "200");
  std::this_thread::sleep_for(3s);  // older than the rule's 0.00003 days (2.6 s)
  auto dry = daemon_.Call("POST", "/v1/storage/lifecycle/run?dry_run=true");
  ASSERT_EQ(dry.status, 200) << dry.body;
  ASSERT_EQ(dry.json["actions"].size(), 2u) << dry.body;
  EXPECT_TRUE(fs::exists(root_ + "/shared/default/stage1.txt"));  // nothing moved
  std::string status;
  Get("cold/default/stage1.txt", &status);
  EXPECT_EQ(status, "404");

  auto run = daemon_.Call("POST", "/v1/storage/lifecycle/run");
  ASSERT_EQ(run.status, 200) << run.body;
  EXPECT_EQ(run.json["failed"], 0) << run.body;
  std::map<std::string, json> by_action;
  for (const auto& a : run.json["actions"]) by_action[a["action"].get<std::string>()] = a;
  EXPECT_EQ(by_action["archive"]["target"], Url("cold/default/stage1.txt")) << run.body;
  EXPECT_EQ(by_action["expire"]["source"], Url("scratch/old.tmp")) << run.body;
  EXPECT_EQ(Get("cold/default/stage1.txt"), "20000\n");                   // archived intact
  EXPECT_FALSE(fs::exists(root_ + "/shared/default/stage1.txt"));         // then removed
  EXPECT_EQ(ReadFile(root_ + "/shared/default/fresh.txt"), "keep me\n");  // young: kept
  Get("scratch/old.tmp", &status);
  EXPECT_EQ(status, "404");  // expired
  const json events = daemon_.Call("GET", "/v1/events?object=lifecycle/").json;
  std::set<std::string> kinds;
  for (const auto& e : events["events"]) kinds.insert(e["kind"].get<std::string>());
  EXPECT_EQ(kinds, (std::set<std::string>{"storage_archived", "storage_expired"})) << events.dump();

  // 4. Storage per tier: the project's shared directory is charged hot and,
  // from the next sample on, what it archived cold, each at its price.
  json cold;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (cold.is_null() && std::chrono::steady_clock::now() < deadline) {
    const json usage = daemon_.Call("GET", "/v1/usage?group_by=project,tier").json;
    for (const auto& row : usage["rows"]) {
      // Sampled before the archive too, at zero bytes: wait for a sample after it.
      if (row["project"] == "default" && row["tier"] == "cold" && row.value("storage_gb_hours", 0.0) > 0) cold = row;
    }
    if (cold.is_null()) std::this_thread::sleep_for(200ms);
  }
  ASSERT_FALSE(cold.is_null()) << "the archive was never charged";
  EXPECT_NEAR(cold["cost"].get<double>(), cold["storage_gb_hours"].get<double>() * 0.00001, 1e-18) << cold.dump();
  const std::string csv = daemon_.Call("GET", "/v1/usage?group_by=tier&format=csv").body;
  EXPECT_EQ(csv.rfind("tier,", 0), 0u) << csv;
  EXPECT_NE(csv.find("\ncold,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\nhot,"), std::string::npos) << csv;
  // Reading the store's keys to measure it is a use of the secrets, audited.
  const json audit = daemon_.Call("GET", "/v1/audit?limit=10000").json;
  bool sampling_audited = false;
  for (const auto& a : audit.value("audit", json::array())) {
    sampling_audited = sampling_audited || (a["action"] == "secret.use" &&
                                            a.value("result", "").find("storage sampling") != std::string::npos);
  }
  EXPECT_TRUE(sampling_audited) << audit.dump();
}

}  // namespace
}  // namespace unisched::testing
