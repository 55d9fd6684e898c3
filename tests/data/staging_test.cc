// Data staging (docs/data.md, issue 23 points 2 and 3) on a real daemon
// against a real S3 server that checks signatures (radosgw, the s3_server
// fixture): input an independent client (curl's own SigV4) uploaded is
// staged into a job's work directory, the job's results are staged out and
// read back intact by that client, a link the job leaves is not followed,
// the bytes are charged as network_bytes_in/out, a second job on the node
// takes the same input from the node cache (nothing fetched), a missing
// object fails the attempt with StageInFailed naming it, and a stage from a
// store or bucket the project may not use is refused at submit.

#include <gtest/gtest.h>
#include <unistd.h>

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

class StagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "staging runs as the root executor beside the supervisor";
    s3_ = S3ServerEnv();
    ASSERT_TRUE(s3_.count("UNISCHED_TEST_S3_URL")) << "no S3 server: run through ctest (the s3_server fixture)";
    dir_ = fs::temp_directory_path() / ("unisched-staging-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    bucket_ = "stage" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}() % 100000);
    other_bucket_ = bucket_ + "-x";
    curl_.emplace(s3_, dir_ + "/curl");
    for (const auto& b : {bucket_, other_bucket_}) ASSERT_EQ(curl_->MakeBucket(b), "200");
    std::string config = ReadFile(std::string(UNISCHED_SOURCE_DIR) + "/config/unisched.yaml");
    const size_t projects = config.find("\nprojects:\n");
    ASSERT_NE(projects, std::string::npos);
    config.insert(projects + 11, "  - name: physics\n    shares: 1\n");
    config += "\nstorage:\n  object_stores:\n    - name: rgw\n      endpoint: " + s3_["UNISCHED_TEST_S3_URL"] +
              "\n      " + kS3CredentialsYaml +
              "\n"
              "      access:\n"
              "        - {projects: [default], bucket: " +
              bucket_ +
              "}\n"
              "        - {projects: [default], bucket: " +
              other_bucket_ + ", prefix: shared/, read_only: true}\n";
    daemon_.UseConfigText(config);
    daemon_.Start();
    for (const std::string& body : S3KeySecretBodies(s3_)) {
      auto made = daemon_.Call("POST", "/v1/secrets", body);
      ASSERT_EQ(made.status, 201) << made.body;
    }
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::string Put(const std::string& key, const std::string& content) { return curl_->Put(bucket_, key, content); }
  std::string Get(const std::string& key, std::string* status = nullptr) { return curl_->Get(bucket_, key, status); }
  std::string Url(const std::string& path) const { return "s3://rgw/" + bucket_ + "/" + path; }

  std::map<std::string, std::string> s3_;
  std::optional<S3Curl> curl_;  // an independent client
  std::string dir_, bucket_, other_bucket_;
  TestDaemon daemon_;
};

TEST_F(StagingTest, InputArrivesResultsLeaveAndTheBytesAreCharged) {
  const std::string a = "alpha\n", b = std::string(300'000, 'b') + "\n";
  ASSERT_EQ(Put("inputs/a.txt", a), "200");
  ASSERT_EQ(Put("inputs/sub/b.txt", b), "200");
  const std::string script =
      "set -e; ls -l input/sub; mkdir -p output/deep; cat input/a.txt input/sub/b.txt > output/deep/joined.txt; "
      "echo done > output/status.txt; ln -s /etc/shadow output/leak; echo phase-check; sleep 2";
  const std::string id = daemon_.Submit(
      {{"workload", {{"kind", "hpc"}}},
       {"command", {"/bin/sh", "-c", script}},
       {"data",
        {{"stage_in", {{{"from", Url("inputs/")}, {"to", "input/"}}}},
         {"stage_out", {{{"from", "output/"}, {"to", Url("results/{job_id}/")}, {"when", "success"}}}}}}});
  daemon_.WaitJob(id, [](const json& j) { return j["state"] == "RUNNING"; });
  const json seen =
      daemon_.WaitJob(id, [](const json& j) { return j["phase"] == "running" || j["state"] != "RUNNING"; });
  EXPECT_EQ(seen["phase"], "running") << seen.dump();
  const json done = daemon_.WaitTerminal(id);
  ASSERT_EQ(done["state"], "COMPLETED") << done.dump() << daemon_.Call("GET", "/v1/jobs/" + id + "/log").body;
  EXPECT_TRUE(done["phase"].is_null());
  EXPECT_EQ(done["data"]["stage_out"][0]["to"], Url("results/{job_id}/"));

  // The results, read back by the independent client, intact; the link is not followed.
  EXPECT_EQ(Get("results/" + id + "/deep/joined.txt"), a + b);
  EXPECT_EQ(Get("results/" + id + "/status.txt"), "done\n");
  std::string status;
  Get("results/" + id + "/leak", &status);
  EXPECT_EQ(status, "404");

  const json usage = done["attempts"][0]["usage"];
  EXPECT_EQ(usage["network_bytes_in"], static_cast<int64_t>(a.size() + b.size())) << usage.dump();
  EXPECT_EQ(usage["network_bytes_out"], static_cast<int64_t>(a.size() + b.size() + 5)) << usage.dump();
  const auto charged = daemon_.Call("GET", "/v1/usage?group_by=job");
  ASSERT_EQ(charged.status, 200) << charged.body;
  bool found = false;
  for (const auto& row : charged.json["rows"]) {
    if (row["job"] != id) continue;
    found = true;
    EXPECT_EQ(row["network_bytes_in"], static_cast<double>(a.size() + b.size())) << row.dump();
    EXPECT_EQ(row["network_bytes"], static_cast<double>(2 * (a.size() + b.size()) + 5)) << row.dump();
  }
  EXPECT_TRUE(found) << charged.body;

  // The same input again on the node: from its cache, nothing fetched.
  const std::string again =
      daemon_.Submit({{"workload", {{"kind", "hpc"}}},
                      {"command", {"/bin/sh", "-c", "cmp input/a.txt - <<EOF\nalpha\nEOF"}},
                      {"data", {{"stage_in", {{{"from", Url("inputs/a.txt")}, {"to", "input/"}}}}}}});
  const json cached = daemon_.WaitTerminal(again);
  ASSERT_EQ(cached["state"], "COMPLETED") << cached.dump() << daemon_.Call("GET", "/v1/jobs/" + again + "/log").body;
  EXPECT_EQ(cached["attempts"][0]["usage"].value("network_bytes_in", int64_t{-1}), -1)
      << cached.dump();  // none fetched
}

TEST_F(StagingTest, AMissingObjectFailsTheAttemptNamingIt) {
  const std::string id =
      daemon_.Submit({{"workload", {{"kind", "hpc"}}},
                      {"command", {"/bin/true"}},
                      {"max_retries", 0},
                      {"data", {{"stage_in", {{{"from", Url("nothing/here.dat")}, {"to", "in/"}}}}}}});
  const json done = daemon_.WaitTerminal(id);
  EXPECT_EQ(done["state"], "FAILED") << done.dump();
  const std::string reason = done["attempts"][0].value("reason", "");
  EXPECT_NE(reason.find("StageInFailed"), std::string::npos) << done.dump();
  EXPECT_NE(reason.find(Url("nothing/here.dat")), std::string::npos) << done.dump();
  // The command never ran: the attempt has no process start.
  EXPECT_TRUE(done["attempts"][0]["process_started_at"].is_null()) << done.dump();
}

TEST_F(StagingTest, ALinkTheJobLeftIsNotFollowedByTheNextStageIn) {
  ASSERT_EQ(Put("inputs/a.txt", "alpha\n"), "200");
  // A root-owned directory the job cannot write to: a stage-in that
  // followed the job's link would write there as root.
  const std::string trap = dir_ + "/trap";
  fs::create_directories(trap);
  fs::permissions(trap, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec | fs::perms::group_read |
                            fs::perms::others_read);
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  // The first attempt replaces its input directory by a link to the trap and
  // fails; the retry stages in again into the same work directory.
  const std::string id =
      daemon_.Submit({{"workload", {{"kind", "hpc"}}},
                      {"command", {"/bin/sh", "-c", "rm -rf input && ln -s " + trap + " input && exit 3"}},
                      {"max_retries", 1},
                      {"data", {{"stage_in", {{{"from", Url("inputs/")}, {"to", "input/"}}}}}}});
  const json done = daemon_.WaitTerminal(id, std::chrono::seconds(120));
  EXPECT_EQ(done["state"], "FAILED") << done.dump();
  ASSERT_EQ(done["attempts"].size(), 2u) << done.dump();
  EXPECT_EQ(done["attempts"][0]["exit_code"], 3) << done.dump();
  const std::string reason = done["attempts"][1].value("reason", "");
  EXPECT_NE(reason.find("StageInFailed"), std::string::npos) << done.dump();
  EXPECT_FALSE(fs::exists(trap + "/a.txt"));
  EXPECT_TRUE(fs::is_empty(trap));
}

TEST_F(StagingTest, AJobShowsItsStageInUnderWayAndACancelStopsIt) {
  // Large enough that its transfer takes a while on loopback (about a
  // second per 300 MB here), in 8 objects: a cancel stops the transfers
  // under way and starts no other.
  const std::string chunk(48 << 20, 'z');
  for (int i = 0; i < 8; ++i) ASSERT_EQ(Put("big/part-" + std::to_string(i), chunk), "200");
  const int64_t total = 8 * static_cast<int64_t>(chunk.size());
  const std::string id = daemon_.Submit({{"workload", {{"kind", "hpc"}}},
                                         {"command", {"/bin/sleep", "30"}},
                                         {"data", {{"stage_in", {{{"from", Url("big/")}, {"to", "big/"}}}}}}});
  json seen;
  for (int i = 0; i < 3000; ++i) {
    seen = daemon_.Call("GET", "/v1/jobs/" + id).json;
    // Bytes under way, not only queued for a staging thread: a cancel before
    // the first byte ends it "while waiting to stage in" instead.
    const bool under_way = seen["phase"] == "staging_in" && seen["progress"].is_object() &&
                           seen["progress"].value("bytes_done", int64_t{0}) > 0;
    if (under_way || (seen["state"] != "PENDING" && seen["state"] != "RUNNING")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(seen["phase"], "staging_in") << seen.dump();
  EXPECT_EQ(seen["state"], "RUNNING");
  EXPECT_LE(seen["progress"]["bytes_done"].get<int64_t>(), seen["progress"]["bytes_total"].get<int64_t>());
  EXPECT_LE(seen["progress"]["bytes_total"].get<int64_t>(), total);  // the listing may not be complete yet
  ASSERT_EQ(daemon_.Call("DELETE", "/v1/jobs/" + id).status, 200);
  const json done = daemon_.WaitTerminal(id);
  EXPECT_EQ(done["state"], "CANCELLED") << done.dump();
  EXPECT_EQ(done["attempts"][0].value("reason", ""), "cancelled while staging in") << done.dump();
  EXPECT_TRUE(done["attempts"][0]["process_started_at"].is_null()) << done.dump();  // the command never ran
  // Stopped part-way: not every object reached the work directory.
  int landed = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(daemon_.state_dir() + "/work/" + id + "/big", ec);
       !ec && it != fs::directory_iterator(); ++it) {
    ++landed;
  }
  EXPECT_LT(landed, 8);
}

TEST_F(StagingTest, WhatTheProjectMayNotUseIsRefusedAtSubmit) {
  auto submit = [&](const json& data, const std::string* token = nullptr) {
    return daemon_.Call("POST", "/v1/jobs",
                        json{{"workload", {{"kind", "hpc"}}}, {"command", {"/bin/true"}}, {"data", data}}.dump(), {},
                        token);
  };
  struct Case {
    json data;
    std::string code, field;
  };
  const std::string other = "s3://rgw/" + other_bucket_ + "/";
  const std::vector<Case> cases = {
      {{{"stage_in", {{{"from", "s3://nowhere/" + bucket_ + "/x"}, {"to", "in/"}}}}},
       "unknown_object_store",
       "data.stage_in[0].from"},
      {{{"stage_in", {{{"from", other + "private/x"}, {"to", "in/"}}}}},
       "object_store_forbidden",
       "data.stage_in[0].from"},
      {{{"stage_out", {{{"from", "out/"}, {"to", other + "shared/results/"}}}}},
       "object_store_forbidden",
       "data.stage_out[0].to"},
      {{{"stage_in", {{{"from", Url("x")}, {"to", "../escape"}}}}}, "invalid_value", "data.stage_in[0].to"},
      {{{"stage_out", {{{"from", "/etc"}, {"to", Url("x/")}}}}}, "invalid_value", "data.stage_out[0].from"},
      {{{"stage_out", {{{"from", "out"}, {"to", Url("x/")}, {"when", "sometimes"}}}}},
       "invalid_value",
       "data.stage_out[0].when"},
      {{{"stage_in", {{{"from", "https://example.com/x"}, {"to", "in/"}}}}}, "invalid_value", "data.stage_in[0].from"},
      {{{"stage_later", json::array()}}, "unknown_field", "data.stage_later"},
  };
  for (const auto& c : cases) {
    auto reply = submit(c.data);
    EXPECT_EQ(reply.status, 422) << c.data.dump() << " " << reply.body;
    EXPECT_EQ(reply.json["error"]["code"], c.code) << reply.body;
    EXPECT_EQ(reply.json["error"]["field"], c.field) << reply.body;
  }
  // Read-only means read: a stage-in from the shared prefix is accepted.
  EXPECT_EQ(submit({{"stage_in", {{{"from", other + "shared/ref.fa"}, {"to", "in/"}}}}}).status, 201);
  // Another project's member may use nothing of this store.
  const std::string bob = daemon_.CreateUser("bob", "user", {"physics"});
  auto refused = submit({{"stage_in", {{{"from", Url("inputs/")}, {"to", "in/"}}}}}, &bob);
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_EQ(refused.json["error"]["code"], "object_store_forbidden");
}

}  // namespace
}  // namespace unisched::testing
