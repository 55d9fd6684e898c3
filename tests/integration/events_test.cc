// GET /v1/events through the real daemon: nodes' events and jobs' events in
// one feed, filtered by kind, object and time, jobs' events only for those
// who may read the job.

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;

// The default config with a second project.
class EventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ifstream file(std::string(UNISCHED_SOURCE_DIR) + "/config/unisched.yaml");
    std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    const size_t end_of_projects = text.find("\n# Users created");
    ASSERT_NE(end_of_projects, std::string::npos);
    text.insert(end_of_projects, "\n  - name: other");
    daemon_.UseConfigText(text);
    daemon_.Start();
  }
  TestDaemon& d() { return daemon_; }
  TestDaemon daemon_;
};

bool Has(const json& events, const std::string& kind, const std::string& object) {
  for (const auto& e : events["events"]) {
    if (e["kind"] == kind && e["object"] == object) return true;
  }
  return false;
}

TEST_F(EventsTest, NodeAndJobEventsInOneFeedWithFilters) {
  const std::string node = "x86-c64m256-hpc-01";
  ASSERT_EQ(d().Call("POST", "/v1/nodes/" + node + "/drain", json{{"reason", "disk check"}}).status, 200);
  ASSERT_EQ(d().Call("POST", "/v1/nodes/" + node + "/resume", json::object()).status, 200);
  const std::string id = d().Submit({{"workload", {{"kind", "agent"}}}, {"command", {"true"}}});
  d().WaitTerminal(id);

  const json all = d().Call("GET", "/v1/events").json;
  EXPECT_TRUE(Has(all, "drain", "node/" + node)) << all.dump();
  EXPECT_TRUE(Has(all, "resume", "node/" + node));
  EXPECT_TRUE(Has(all, "submitted", "job/" + id));
  EXPECT_TRUE(Has(all, "completed", "job/" + id));
  // Oldest first.
  const auto& list = all["events"];
  for (size_t i = 1; i < list.size(); ++i) EXPECT_LE(list[i - 1]["time"], list[i]["time"]);

  const json drains = d().Call("GET", "/v1/events?kind=drain").json;
  ASSERT_EQ(drains["events"].size(), 1u) << drains.dump();
  EXPECT_NE(drains["events"][0]["message"].get<std::string>().find("disk check"), std::string::npos);
  const json of_job = d().Call("GET", "/v1/events?object=job/" + id).json;
  for (const auto& e : of_job["events"]) EXPECT_EQ(e["object"], "job/" + id);
  EXPECT_GE(of_job["events"].size(), 3u) << of_job.dump();  // submitted, started, completed
  const json nodes = d().Call("GET", "/v1/events?object=node/").json;
  EXPECT_EQ(nodes["events"].size(), 2u) << nodes.dump();
  const json future = d().Call("GET", "/v1/events?since=2999-01-01T00:00:00Z").json;
  EXPECT_TRUE(future["events"].empty());
  EXPECT_EQ(d().Call("GET", "/v1/events?since=yesterday").status, 400);

  // A user of another project sees the node's events, not the job's.
  const std::string token = d().CreateUser("eve", "user", {"other"});
  const json hers = d().Call("GET", "/v1/events", "", {}, &token).json;
  EXPECT_TRUE(Has(hers, "drain", "node/" + node)) << hers.dump();
  EXPECT_FALSE(Has(hers, "submitted", "job/" + id)) << hers.dump();
}

// A job that stays pending is stored whole from its first commit: its
// event says where the router sent it, filters find it, and an
// Idempotency-Key is its submitter's alone.
TEST_F(EventsTest, APendingJobIsStoredWholeAndItsSubmittedEventSaysWhereItWent) {
  const std::string bob = d().CreateUser("bob", "user", {"default"});
  // More CPUs than any hpc node has free while the first one runs: pending.
  const json big = {{"workload", {{"kind", "hpc"}}}, {"resources", {{"cpus", 64}}}, {"command", {"sleep", "30"}}};
  const Reply first = d().Call("POST", "/v1/jobs", big.dump(), {{"Idempotency-Key", "same-key"}});
  ASSERT_EQ(first.status, 201) << first.body;
  std::vector<std::string> ids = {first.json["id"]};
  for (int i = 0; i < 5; ++i) ids.push_back(d().Submit(big));
  const Reply bobs = d().Call("POST", "/v1/jobs", big.dump(), {{"Idempotency-Key", "same-key"}}, &bob);
  ASSERT_EQ(bobs.status, 201) << bobs.body;
  EXPECT_NE(bobs.json["id"], first.json["id"]) << "another user's key is another key";
  EXPECT_EQ(bobs.json["user"], "bob");

  const json events = d().Call("GET", "/v1/jobs/" + ids.back() + "/events").json;
  ASSERT_FALSE(events["events"].empty());
  EXPECT_EQ(events["events"][0]["kind"], "submitted");
  EXPECT_EQ(events["events"][0]["message"], "rule hpc-default: kind=hpc -> hpc-precision (cpu-hpc-pool)");
  const json pending = d().Call("GET", "/v1/jobs?state=PENDING&queue=hpc-precision&user=admin").json;
  EXPECT_FALSE(pending["jobs"].empty()) << "pending jobs are found by queue and user";
  for (const auto& id : ids) d().Call("DELETE", "/v1/jobs/" + id);
  d().Call("DELETE", "/v1/jobs/" + bobs.json["id"].get<std::string>(), "", {}, &bob);
}

// A drain that failed (no such node) changed nothing: no event, no log line.
TEST_F(EventsTest, AFailedDrainLeavesNoEventAndNoLogLine) {
  const Reply missing = d().Call("POST", "/v1/nodes/x86-c1m1-hpc-99/drain", json{{"reason", "typo"}});
  EXPECT_EQ(missing.status, 404) << missing.body;
  const std::string node = "x86-c64m256-hpc-02";
  ASSERT_EQ(d().Call("POST", "/v1/nodes/" + node + "/drain", json{{"reason", "real"}}).status, 200);
  std::ifstream log(d().state_dir() + "/daemon.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find("x86-c1m1-hpc-99"), std::string::npos) << text;
  EXPECT_NE(text.find("node " + node + ": drain by admin"), std::string::npos) << text;
  EXPECT_FALSE(Has(d().Call("GET", "/v1/events?kind=drain").json, "drain", "node/x86-c1m1-hpc-99"));
}

}  // namespace
}  // namespace unisched::testing
