// Handlers without a socket (api_fixture.h).

#include "unisched/api/api.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "api/submission.h"
#include "api_fixture.h"

namespace unisched::api {
namespace {

using nlohmann::json;

using ApiTest = ApiFixture;

TEST_F(ApiTest, SubmitRoutesCommitsAndHandsOver) {
  auto r = Do("POST", "/v1/jobs",
              json{{"workload", {{"kind", "hpc"}, {"precision", "fp64"}}}, {"command", {"true"}}}.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  json job = json::parse(r.body);
  EXPECT_EQ(job["pool"], "cpu-hpc-pool");
  EXPECT_EQ(job["queue"], "hpc-precision");
  EXPECT_EQ(job["state"], "PENDING");
  EXPECT_EQ(job["user"], "admin");
  EXPECT_EQ(job["config_version"], config_.version);
  ASSERT_EQ(control_.committed.size(), 1u);
  EXPECT_EQ(std::to_string(control_.committed[0].id), job["id"].get<std::string>());
  // Read your write.
  auto got = Do("GET", "/v1/jobs/" + job["id"].get<std::string>());
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(json::parse(got.body)["id"], job["id"]);
}

TEST_F(ApiTest, ErrorsHaveTheContractShape) {
  struct Case {
    const char* name;
    std::string method, path, body, token;
    int status;
    const char* code;
  };
  const std::vector<Case> cases = {
      {"no token", "GET", "/v1/jobs", "", "", 401, "unauthenticated"},
      {"bad token", "GET", "/v1/jobs", "", "nope", 401, "unauthenticated"},
      {"malformed", "POST", "/v1/jobs", "{", "admin-token", 400, "malformed_json"},
      {"user creating users", "POST", "/v1/users", R"({"name":"x"})", "alice-token", 403, "forbidden"},
      {"unknown endpoint", "GET", "/v2/jobs", "", "admin-token", 404, "not_found"},
      {"wrong method", "PATCH", "/v1/jobs", "", "admin-token", 405, "method_not_allowed"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = Do(c.method, c.path, c.body, c.token);
    EXPECT_EQ(r.status, c.status) << r.body;
    json body = json::parse(r.body);
    EXPECT_EQ(body["error"]["code"], c.code);
    EXPECT_FALSE(body["error"]["message"].get<std::string>().empty());
  }
  EXPECT_TRUE(control_.committed.empty());
}

TEST_F(ApiTest, HealthNeedsNoToken) {
  auto r = Do("GET", "/healthz", "", "");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["status"], "ok");
}

TEST(SubmissionTest, FieldsAndDefaults) {
  auto ok = ParseSubmission(json{{"workload", {{"kind", "ai-training"}, {"gpu_memory_gb", 80}}},
                                 {"resources", {{"gpus", 2}, {"nodes", 2}}},
                                 {"constraints", {{"interconnect", "ib"}}},
                                 {"command", {"python3", "train.py"}},
                                 {"env", {{"A", "b"}}}});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->workload.kind, model::WorkloadKind::kAiTraining);
  EXPECT_EQ(ok->workload.features.at("gpu_memory_gb"), "80");
  EXPECT_EQ(ok->resources.gpus, 2);
  EXPECT_EQ(ok->resources.nodes, 2);
  EXPECT_EQ(ok->resources.cpus, 1);
  EXPECT_EQ(ok->resources.memory_mb, 0);  // the queue's default applies later
  EXPECT_EQ(ok->constraints.at("interconnect"), "ib");
  EXPECT_FALSE(ok->queue.has_value());
}

TEST(SubmissionTest, RejectionsNameTheField) {
  const json base = {{"workload", {{"kind", "hpc"}}}, {"command", {"true"}}};
  struct Case {
    const char* name;
    json patch;
    ErrorKind kind;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"name too long", {{"name", std::string(256, 'n')}}, ErrorKind::kUnprocessable, "name"},
      {"float cpus", {{"resources", {{"cpus", 1.5}}}}, ErrorKind::kBadRequest, "resources.cpus"},
      {"zero nodes", {{"resources", {{"nodes", 0}}}}, ErrorKind::kUnprocessable, "resources.nodes"},
      {"walltime zero",
       {{"resources", {{"walltime_seconds", 0}}}},
       ErrorKind::kUnprocessable,
       "resources.walltime_seconds"},
      {"command with number", {{"command", {"echo", 1}}}, ErrorKind::kBadRequest, "command[1]"},
      {"env bad name", {{"env", {{"1X", "v"}}}}, ErrorKind::kUnprocessable, "env.1X"},
      {"env not string", {{"env", {{"X", 1}}}}, ErrorKind::kBadRequest, "env.X"},
      {"feature object", {{"workload", {{"kind", "hpc"}, {"x", {{"a", 1}}}}}}, ErrorKind::kBadRequest, "workload.x"},
      {"priority text", {{"priority", "high"}}, ErrorKind::kBadRequest, "priority"},
      {"empty project", {{"project", ""}}, ErrorKind::kUnprocessable, "project"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    json body = base;
    body.merge_patch(c.patch);
    auto r = ParseSubmission(body);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind, c.kind);
    EXPECT_EQ(r.error().field, c.field);
  }
}

}  // namespace
}  // namespace unisched::api
