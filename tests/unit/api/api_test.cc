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

// A batch script's directives through the API: the 201 answer carries
// their warnings; a queue named by -p gives the job its kind.
TEST_F(ApiTest, SubmitsABatchScriptWithItsWarnings) {
  const std::string script =
      "#!/bin/bash\n#SBATCH -J train -p ai-training --gres=gpu:1 -t 30\n#SBATCH --mail-type=END\npython3 train.py\n";
  auto r = Do("POST", "/v1/jobs", json{{"script", script}, {"command", {"train.sh", "--epochs", "3"}}}.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  json job = json::parse(r.body);
  EXPECT_EQ(job["name"], "train");
  EXPECT_EQ(job["queue"], "ai-training");
  EXPECT_EQ(job["workload"]["kind"], "ai-training");  // the queue's kind: a script names none
  EXPECT_EQ(job["resources"]["gpus"], 1);
  EXPECT_EQ(job["resources"]["walltime_seconds"], 1800);
  EXPECT_EQ(job["script"], script);
  EXPECT_EQ(job["command"], json({"train.sh", "--epochs", "3"}));
  ASSERT_EQ(job["warnings"].size(), 1u) << job["warnings"].dump();
  EXPECT_EQ(job["warnings"][0]["line"], 3);
  EXPECT_EQ(job["warnings"][0]["option"], "--mail-type=END");
  EXPECT_NE(job["warnings"][0]["message"].get<std::string>().find("sends no mail"), std::string::npos);
  // The warnings are the answer's, not the job's.
  auto got = Do("GET", "/v1/jobs/" + job["id"].get<std::string>());
  ASSERT_EQ(got.status, 200);
  EXPECT_FALSE(json::parse(got.body).contains("warnings"));
  EXPECT_EQ(json::parse(got.body)["script"], script);
  ASSERT_EQ(control_.committed.size(), 1u);
  EXPECT_EQ(control_.committed[0].script.str(), script);
  // A job without a script has none, and no warnings.
  auto plain = Do("POST", "/v1/jobs", json{{"workload", {{"kind", "hpc"}}}, {"command", {"true"}}}.dump());
  ASSERT_EQ(plain.status, 201) << plain.body;
  EXPECT_EQ(json::parse(plain.body)["script"], "");
  EXPECT_FALSE(json::parse(plain.body).contains("warnings"));
}

TEST(SubmissionTest, ScriptDirectivesFillWhatTheBodyLeavesOut) {
  std::vector<model::BatchWarning> warnings;
  const std::string script =
      "#!/bin/bash\n"
      "#SBATCH -J sim -t 0:05 --mem=1G -n 2 -D /scratch/sim -o out-%j.txt\n"
      "#SBATCH --mail-type=END --export=MODE=fast\n"
      "./sim\n";
  auto ok = ParseSubmission(json{{"script", script}, {"resources", {{"memory_mb", 512}}}, {"name", "mine"}}, &warnings);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->name, "mine");              // the body's own field wins ...
  EXPECT_EQ(ok->resources.memory_mb, 512);  // ... field by field in resources
  EXPECT_EQ(ok->resources.walltime_seconds, 5);
  EXPECT_EQ(ok->resources.cpus, 2);
  EXPECT_EQ(ok->resources.tasks_per_node, 2);
  EXPECT_EQ(ok->workdir, "/scratch/sim");
  EXPECT_EQ(ok->output_file, "out-%j.txt");  // relative: under the workdir when admitted
  EXPECT_EQ(ok->env, (std::map<std::string, std::string>{{"MODE", "fast"}}));
  EXPECT_EQ(ok->command, std::vector<std::string>{"script"});
  EXPECT_EQ(ok->script, script);
  EXPECT_EQ(ok->workload.kind, model::WorkloadKind::kHpc);
  EXPECT_TRUE(ok->workload_from_queue);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].source, (model::OptionSource{3, "--mail-type=END"}));
  // A body that gives the fields decides them: a directive it overrides is
  // not even read (sbatch sends a relative -D made absolute).
  auto given = ParseSubmission(json{{"script", "#!/bin/sh\n#SBATCH -D relative --mem=bad\ntrue\n"},
                                    {"workdir", "/abs"},
                                    {"resources", {{"memory_mb", 64}}},
                                    {"workload", {{"kind", "agent"}}}},
                               &warnings);
  ASSERT_TRUE(given.ok()) << given.error().message;
  EXPECT_EQ(given->workdir, "/abs");
  EXPECT_FALSE(given->workload_from_queue);
  // --mem-per-cpu multiplies the CPUs the job gets: the body's own.
  auto per_cpu = ParseSubmission(
      json{{"script", "#!/bin/sh\n#SBATCH -c 4 --mem-per-cpu=1G\ntrue\n"}, {"resources", {{"cpus", 2}}}});
  ASSERT_TRUE(per_cpu.ok()) << per_cpu.error().message;
  EXPECT_EQ(per_cpu->resources.cpus, 2);
  EXPECT_EQ(per_cpu->resources.memory_mb, 2048);
}

TEST(SubmissionTest, ScriptRefusalsNameTheLine) {
  struct Case {
    const char* name;
    json body;
    ErrorKind kind;
    const char* field;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"not a string", {{"script", 7}}, ErrorKind::kBadRequest, "script", "a batch script"},
      {"no #!",
       {{"script", "echo hi\n"}},
       ErrorKind::kUnprocessable,
       "script",
       "line 1: a batch script starts with #!"},
      {"bad value",
       {{"script", "#!/bin/sh\n#SBATCH -t soon\n"}},
       ErrorKind::kUnprocessable,
       "script",
       "line 2: -t soon: 'soon' is not a time"},
      {"a bad array",
       {{"script", "#!/bin/sh\n#SBATCH --array=5-1\n"}},
       ErrorKind::kUnprocessable,
       "script",
       "line 2: --array=5-1: '5-1' is not an array"},
      {"an array's body field",
       {{"command", {"true"}}, {"workload", {{"kind", "hpc"}}}, {"array", {{"indices", "1-4%2"}, {"max_running", 3}}}},
       ErrorKind::kUnprocessable,
       "array.max_running",
       "give the cap once"},
      {"a bad dependency",
       {{"script", "#!/bin/sh\n#SBATCH -d afterok:x\n"}},
       ErrorKind::kUnprocessable,
       "dependency",
       "(from the script's line 2: -d afterok:x)"},
      {"relative -D",
       {{"script", "#!/bin/sh\n#SBATCH -D out\n"}},
       ErrorKind::kUnprocessable,
       "script",
       "'out' is relative and the API has no submit directory"},
      {"a directive's value the body rules refuse",
       {{"script", "#!/bin/sh\n#SBATCH -n 2 --gres=gpu:1\n"}},
       ErrorKind::kUnprocessable,
       "resources.gpus",
       "(from the script's line 2: --gres=gpu:1)"},
      {"relative workdir",
       {{"script", "#!/bin/sh\n"}, {"workdir", "rel"}},
       ErrorKind::kUnprocessable,
       "workdir",
       "is relative"},
      {"an array that is not an object",
       {{"script", "#!/bin/sh\n"}, {"array", "1-2"}},
       ErrorKind::kBadRequest,
       "array",
       "an object"},
      {"unknown field", {{"script", "#!/bin/sh\n"}, {"arrays", "1-2"}}, ErrorKind::kUnprocessable, "arrays", ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = ParseSubmission(c.body);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind, c.kind);
    EXPECT_EQ(r.error().field, c.field);
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
  }
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
