// Bad input gets a clear error with the field, and changes nothing; the
// contract's roles are enforced.

#include <gtest/gtest.h>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;

class ApiErrorsTest : public SharedDaemonTest {
 protected:
  int64_t TotalJobs() { return d().Call("GET", "/v1/jobs?limit=0").json["total"].get<int64_t>(); }
};

TEST_F(ApiErrorsTest, RejectedSubmissionsHaveTheErrorShapeAndChangeNothing) {
  const json ok_job = {{"workload", {{"kind", "hpc"}}}, {"command", {"true"}}};
  struct Case {
    const char* name;
    std::string body;
    int status;
    const char* code;
    const char* field;  // nullptr: no field expected
  };
  auto with = [&](const char* key, json value) {
    json j = ok_job;
    j[key] = std::move(value);
    return j.dump();
  };
  const std::vector<Case> cases = {
      {"malformed JSON", "{\"workload\": ", 400, "malformed_json", nullptr},
      {"not an object", "[1,2]", 400, "malformed_json", nullptr},
      {"wrong type for cpus", with("resources", {{"cpus", "four"}}), 400, "malformed_value", "resources.cpus"},
      {"command not a list", with("command", "echo hi"), 400, "malformed_value", "command"},
      {"unknown field", with("resource", {{"cpus", 1}}), 422, "unknown_field", "resource"},
      // Issue 15: integers that wrapped, NUL bytes and bytes after the JSON.
      {"priority beyond uint64 max",
       R"({"workload":{"kind":"hpc"},"command":["true"],"priority":18446744073709551615})", 400, "malformed_value",
       "priority"},
      {"priority 2^64 - 10^6", R"({"workload":{"kind":"hpc"},"command":["true"],"priority":18446744073708551616})", 400,
       "malformed_value", "priority"},
      {"cpus beyond int64",
       R"({"workload":{"kind":"hpc"},"command":["true"],"resources":{"cpus":18446744073709551615}})", 400,
       "malformed_value", "resources.cpus"},
      {"cpus beyond uint64", R"({"workload":{"kind":"hpc"},"command":["true"],"resources":{"cpus":1e30}})", 400,
       "malformed_value", "resources.cpus"},
      {"NUL in an env value", R"({"workload":{"kind":"hpc"},"command":["true"],"env":{"X":"a\u0000b"}})", 422,
       "invalid_value", "env.X"},
      {"a NUL byte after the JSON", std::string(R"({"workload":{"kind":"hpc"},"command":["true"]})") + '\0', 400,
       "malformed_json", nullptr},
      {"bytes after the JSON", R"({"workload":{"kind":"hpc"},"command":["true"]} {})", 400, "malformed_json", nullptr},
      {"negative cpus", with("resources", {{"cpus", -4}}), 422, "invalid_value", "resources.cpus"},
      {"negative gpus", with("resources", {{"gpus", -1}}), 422, "invalid_value", "resources.gpus"},
      {"empty command", with("command", json::array()), 422, "invalid_value", "command"},
      {"unknown kind", with("workload", {{"kind", "quantum"}}), 422, "invalid_value", "workload.kind"},
      {"unknown queue", with("queue", "no-such-queue"), 422, "unknown_queue", "queue"},
      {"unknown project", with("project", "nope"), 422, "unknown_project", "project"},
      {"16 GPUs on one node",
       json({{"workload", {{"kind", "ai-training"}}}, {"resources", {{"gpus", 16}}}, {"command", {"true"}}}).dump(),
       422, "unsatisfiable", "resources.gpus"},
      {"GPU job to a CPU queue",
       json({{"queue", "hpc-precision"},
             {"workload", {{"kind", "hpc"}}},
             {"resources", {{"gpus", 1}}},
             {"command", {"true"}}})
           .dump(),
       422, nullptr, nullptr},
      {"wrong kind for explicit queue",
       json({{"queue", "ai-training"}, {"workload", {{"kind", "agent"}}}, {"command", {"true"}}}).dump(), 422,
       "queue_mismatch", "queue"},
      {"walltime above the queue maximum", with("resources", {{"walltime_seconds", 73 * 3600}}), 422,
       "walltime_exceeds_max", "resources.walltime_seconds"},
      {"env overriding scheduler variables", with("env", {{"UNISCHED_JOB_ID", "1"}}), 422, "invalid_value",
       "env.UNISCHED_JOB_ID"},
  };
  const int64_t before = TotalJobs();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Reply r = d().Call("POST", "/v1/jobs", c.body);
    EXPECT_EQ(r.status, c.status) << r.body;
    ASSERT_TRUE(r.json.is_object()) << r.body;
    ASSERT_TRUE(r.json.contains("error")) << r.body;
    EXPECT_FALSE(r.json["error"]["message"].get<std::string>().empty());
    if (c.code) {
      EXPECT_EQ(r.json["error"]["code"], c.code) << r.body;
    }
    if (c.field) {
      EXPECT_EQ(r.json["error"]["field"], c.field) << r.body;
    }
  }
  EXPECT_EQ(TotalJobs(), before);
}

TEST_F(ApiErrorsTest, OversizeBodyIs413AndChangesNothing) {
  const int64_t before = TotalJobs();
  json job = {{"workload", {{"kind", "agent"}}}, {"command", {"echo", std::string(2 << 20, 'x')}}};
  Reply r = d().Call("POST", "/v1/jobs", job.dump());
  EXPECT_EQ(r.status, 413);
  ASSERT_TRUE(r.json.is_object()) << r.body.substr(0, 200);
  EXPECT_TRUE(r.json.contains("error"));
  EXPECT_EQ(TotalJobs(), before);
}

TEST_F(ApiErrorsTest, UnknownPathsAndMethods) {
  EXPECT_EQ(d().Call("GET", "/v1/nothing").status, 404);
  EXPECT_EQ(d().Call("PUT", "/v1/jobs", std::string("{}")).status, 405);
  EXPECT_EQ(d().Call("GET", "/v1/jobs/999999").status, 404);
  EXPECT_EQ(d().Call("GET", "/v1/jobs/abc").status, 404);
}

TEST_F(ApiErrorsTest, AuthenticationAndRoles) {
  const std::string none;
  const std::string wrong = "usk_not-a-real-token";
  Reply missing = d().Call("GET", "/v1/jobs", std::string(), {}, &none);
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(missing.json["error"]["code"], "unauthenticated");
  EXPECT_EQ(d().Call("GET", "/v1/jobs", std::string(), {}, &wrong).status, 401);

  const std::string alice = d().CreateUser("alice", "user", {"default"});
  const std::string bob = d().CreateUser("bob", "user", {});
  const json job = {{"workload", {{"kind", "agent"}}}, {"command", {"sleep", "20"}}};

  // A user submits to its project; not to others; not with priority > 0.
  Reply mine = d().Call("POST", "/v1/jobs", job.dump(), {}, &alice);
  ASSERT_EQ(mine.status, 201) << mine.body;
  EXPECT_EQ(mine.json["user"], "alice");
  EXPECT_EQ(mine.json["project"], "default");
  json prio = job;
  prio["priority"] = 10;
  Reply raised = d().Call("POST", "/v1/jobs", prio.dump(), {}, &alice);
  EXPECT_EQ(raised.status, 403);
  EXPECT_EQ(raised.json["error"]["field"], "priority");
  Reply outsider = d().Call("POST", "/v1/jobs", job.dump(), {}, &bob);
  EXPECT_EQ(outsider.status, 403) << outsider.body;

  // bob (no projects) cannot see or cancel alice's job; alice can.
  const std::string id = mine.json["id"];
  EXPECT_EQ(d().Call("GET", "/v1/jobs/" + id, std::string(), {}, &bob).status, 404);
  EXPECT_EQ(d().Call("DELETE", "/v1/jobs/" + id, std::string(), {}, &bob).status, 404);
  EXPECT_EQ(d().Call("GET", "/v1/jobs?limit=0", std::string(), {}, &bob).json["total"], 0);

  // Admin-only calls.
  EXPECT_EQ(d().Call("POST", "/v1/users", json{{"name", "carol"}}.dump(), {}, &alice).status, 403);
  EXPECT_EQ(d().Call("POST", "/v1/nodes/x86-c64m256-hpc-01/drain", std::string(), {}, &alice).status, 403);
  EXPECT_EQ(d().Call("POST", "/v1/users/bob/tokens", std::string(), {}, &alice).status, 403);
  EXPECT_EQ(d().Call("GET", "/v1/audit", std::string(), {}, &alice).status, 403);
  // Everyone reads the cluster.
  EXPECT_EQ(d().Call("GET", "/v1/nodes", std::string(), {}, &bob).status, 200);
  // A user makes its own tokens.
  EXPECT_EQ(d().Call("POST", "/v1/users/alice/tokens", std::string(), {}, &alice).status, 201);

  EXPECT_EQ(d().Call("DELETE", "/v1/jobs/" + id, std::string(), {}, &alice).status, 200);

  // Every mutating call is audited, rejected ones included.
  Reply audit = d().Call("GET", "/v1/audit?limit=1000");
  ASSERT_EQ(audit.status, 200);
  bool saw_forbidden_drain = false, saw_submit = false;
  for (const auto& a : audit.json["audit"]) {
    if (a["actor"] == "alice" && a["action"] == "POST /v1/nodes/{name}/drain" && a["result"] == "403") {
      saw_forbidden_drain = true;
    }
    if (a["actor"] == "alice" && a["action"] == "POST /v1/jobs" && a["target"] == "job/" + id) saw_submit = true;
  }
  EXPECT_TRUE(saw_forbidden_drain) << audit.body;
  EXPECT_TRUE(saw_submit) << audit.body;
}

}  // namespace
}  // namespace unisched::testing
