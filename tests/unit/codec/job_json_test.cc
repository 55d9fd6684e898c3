// Tests of the job JSON codec: the contract shape and exact round trips.

#include "unisched/codec/job_json.h"

#include <gtest/gtest.h>

namespace unisched::codec {
namespace {

using nlohmann::json;

model::Job FullJob() {
  model::Job job;
  job.id = 42;
  job.name = "sim-42";
  job.user = "alice";
  job.project = "genomics";
  job.queue = "ai-training";
  job.pool = "gpu-train-pool";
  job.state = model::JobState::kFailed;
  job.state_reason = "NonZeroExit";
  job.workload.kind = model::WorkloadKind::kAiTraining;
  job.workload.features = {{"precision", "fp64"}, {"gpu_memory_gb", "80"}, {"distributed", "true"},
                           {"ratio", "1.5"},      {"padded", "080"},       {"spaced", " 7"}};
  job.resources = {.nodes = 2,
                   .cpus = 8,
                   .memory_mb = 65536,
                   .gpus = 2,
                   .gpu_model = "h100",
                   .walltime_seconds = 7200,
                   .tasks_per_node = 2};
  job.launch = model::LaunchMode::kPerNode;
  job.constraints = {{"interconnect", "ib"}};
  job.command = {"train.sh", "--epochs", "3"};
  job.script = model::ScriptText("#!/bin/bash\n#SBATCH -J sim-42 --gres=gpu:2\nsrun \"python3\" train.py \"$@\"\n");
  job.env = {{"KEY", "value"}, {"OTHER", ""}};
  job.secrets = {{"db-password", ""}, {"aws-key", "AWS_SECRET_ACCESS_KEY"}};
  job.workdir = "/scratch/alice/sim-42";
  job.priority = 17;
  job.routing = {.pool = "gpu-train-pool", .queue = "ai-training", .reason = "rule gpu-jobs"};
  job.exit_code = 3;

  model::Attempt first;
  first.number = 1;
  first.allocation = {{.node = "x86-c32m512g4-train-01", .cpus = 8, .memory_mb = 32768, .gpu_indices = {0, 1}}};
  first.state = model::JobState::kNodeFail;
  first.started_at = FromUnixMillis(1'700'000'001'000);
  first.ended_at = FromUnixMillis(1'700'000'002'500);
  first.exit_code = std::nullopt;
  first.reason = "NodeFail";
  first.usage = std::nullopt;

  model::Attempt second;
  second.number = 2;
  second.allocation = {{.node = "x86-c32m512g4-train-01",
                        .cpus = 8,
                        .memory_mb = 32768,
                        .gpu_indices = {2, 3},
                        .gpu_models = {"h100", "h100"},
                        .cpu_ids = {0, 1, 2, 3, 16, 17, 18, 19}},
                       {.node = "x86-c32m512g4-train-02", .cpus = 8, .memory_mb = 32768, .gpu_indices = {0, 1}}};
  second.state = model::JobState::kFailed;
  second.started_at = FromUnixMillis(1'700'000'003'000);
  second.ended_at = FromUnixMillis(1'700'000'009'123);
  second.exit_code = 3;
  second.reason = "exit 3";
  second.tasks = {{0, "x86-c32m512g4-train-01", model::JobState::kCompleted, 0, ""},
                  {1, "x86-c32m512g4-train-01", model::JobState::kCancelled, 143, "cancelled"},
                  {2, "x86-c32m512g4-train-02", model::JobState::kFailed, 3, "exit status 3"},
                  {3, "x86-c32m512g4-train-02", model::JobState::kFailed, std::nullopt, "lost"}};
  second.usage = model::RunUsage{
      .wall_seconds = 6.123, .user_cpu_seconds = 10.5, .system_cpu_seconds = 0.25, .max_rss_kb = 123456};
  job.attempts = {first, second};

  job.submitted_at = FromUnixMillis(1'700'000'000'000);
  job.started_at = FromUnixMillis(1'700'000'001'000);
  job.ended_at = FromUnixMillis(1'700'000'009'123);
  job.config_version = "sha256:abc";
  job.cancel_requested = true;
  return job;
}

TEST(JobJsonTest, FullyPopulatedJobRoundTrips) {
  const model::Job job = FullJob();
  auto back = JobFromJson(JobToJson(job));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, job);
}

// A job as submitted: defaults everywhere, no timestamps but submitted_at.
model::Job FreshJob() {
  model::Job job;
  job.id = 7;
  job.name = "fresh";
  job.user = "bob";
  job.command = {"true"};
  job.submitted_at = FromUnixMillis(1'700'000'000'000);
  return job;
}

TEST(JobJsonTest, FreshJobWithNullTimestampsRoundTrips) {
  const model::Job job = FreshJob();
  const json doc = JobToJson(job);
  EXPECT_EQ(doc["script"], "");  // a command, no batch script
  EXPECT_EQ(doc["workdir"], "");
  EXPECT_TRUE(doc["started_at"].is_null());
  EXPECT_TRUE(doc["ended_at"].is_null());
  EXPECT_TRUE(doc["exit_code"].is_null());
  EXPECT_EQ(doc["nodes"], json::array());
  EXPECT_EQ(doc["attempts"], json::array());
  auto back = JobFromJson(doc);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, job);
}

TEST(JobJsonTest, RunningAttemptWithoutEndOrUsageRoundTrips) {
  model::Job job = FullJob();
  job.state = model::JobState::kRunning;
  job.ended_at.reset();
  job.exit_code.reset();
  job.attempts.back().state = model::JobState::kRunning;
  job.attempts.back().ended_at.reset();
  job.attempts.back().exit_code.reset();
  job.attempts.back().usage.reset();
  const json doc = JobToJson(job);
  EXPECT_TRUE(doc["attempts"][1]["usage"].is_null());
  EXPECT_TRUE(doc["attempts"][1]["ended_at"].is_null());
  auto back = JobFromJson(doc);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, job);
}

// A transient launch failure stays one across a restart (the store keeps
// the job as this document), so it is still not counted against
// max_retries; an attempt stored before the field existed was none.
TEST(JobJsonTest, ATransientLaunchFailureRoundTripsAndItsAbsenceMeansPermanent) {
  model::Job job = FullJob();
  job.attempts.back().transient = true;
  job.attempts.back().exit_code.reset();
  job.attempts.back().reason = "cannot look up user 'unisched-job': Too many open files";
  const json doc = JobToJson(job);
  EXPECT_EQ(doc["attempts"][1]["transient"], true);
  EXPECT_FALSE(doc["attempts"][0].contains("transient")) << "only where it is true";
  auto back = JobFromJson(json::parse(doc.dump()));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, job);
  EXPECT_EQ(JobDocument(job), doc.dump());

  json old = doc;
  old["attempts"][1].erase("transient");
  auto permanent = JobFromJson(old);
  ASSERT_TRUE(permanent.ok()) << permanent.error().message;
  EXPECT_FALSE(permanent->attempts[1].transient);
}

TEST(JobJsonTest, ContractShape) {
  const json doc = JobToJson(FullJob());
  EXPECT_EQ(doc["id"], "42");
  EXPECT_EQ(doc["state"], "FAILED");
  EXPECT_EQ(doc["workload"], json({{"kind", "ai-training"},
                                   {"precision", "fp64"},
                                   {"gpu_memory_gb", 80},
                                   {"distributed", true},
                                   {"ratio", 1.5},
                                   {"padded", "080"},
                                   {"spaced", " 7"}}));
  EXPECT_EQ(doc["resources"], json({{"nodes", 2},
                                    {"cpus", 8},
                                    {"memory_mb", 65536},
                                    {"gpus", 2},
                                    {"gpu_model", "h100"},
                                    {"tasks_per_node", 2},
                                    {"walltime_seconds", 7200}}));
  EXPECT_EQ(doc["launch"], "per_node");
  EXPECT_EQ(doc["constraints"], json({{"interconnect", "ib"}}));
  EXPECT_EQ(doc["command"], json({"train.sh", "--epochs", "3"}));
  EXPECT_EQ(doc["script"], "#!/bin/bash\n#SBATCH -J sim-42 --gres=gpu:2\nsrun \"python3\" train.py \"$@\"\n");
  EXPECT_EQ(doc["workdir"], "/scratch/alice/sim-42");
  EXPECT_EQ(doc["routing"], json({{"pool", "gpu-train-pool"}, {"queue", "ai-training"}, {"reason", "rule gpu-jobs"}}));
  EXPECT_EQ(doc["nodes"], json({"x86-c32m512g4-train-01", "x86-c32m512g4-train-02"}));
  EXPECT_EQ(doc["exit_code"], 3);
  EXPECT_EQ(doc["pending_reasons"], json::array());
  EXPECT_EQ(doc["submitted_at"], "2023-11-14T22:13:20.000Z");
  EXPECT_EQ(doc["ended_at"], "2023-11-14T22:13:29.123Z");
  EXPECT_EQ(doc["config_version"], "sha256:abc");
  EXPECT_EQ(doc["cancel_requested"], true);

  const json& a = doc["attempts"][1];
  EXPECT_EQ(a["attempt"], 2);
  EXPECT_EQ(a["nodes"], json({"x86-c32m512g4-train-01", "x86-c32m512g4-train-02"}));
  EXPECT_EQ(a["state"], "FAILED");
  EXPECT_EQ(a["exit_code"], 3);
  EXPECT_EQ(a["reason"], "exit 3");
  EXPECT_EQ(a["tasks"][2], json({{"rank", 2},
                                 {"node", "x86-c32m512g4-train-02"},
                                 {"state", "FAILED"},
                                 {"exit_code", 3},
                                 {"reason", "exit status 3"}}));
  EXPECT_EQ(a["tasks"][3]["exit_code"], nullptr);
  EXPECT_EQ(a["started_at"], "2023-11-14T22:13:23.000Z");
  EXPECT_EQ(a["allocation"][0], json({{"node", "x86-c32m512g4-train-01"},
                                      {"cpus", 8},
                                      {"memory_mb", 32768},
                                      {"gpus", {2, 3}},
                                      {"gpu_models", {"h100", "h100"}},
                                      {"cpu_ids", {0, 1, 2, 3, 16, 17, 18, 19}}}));
  EXPECT_EQ(
      a["usage"],
      json(
          {{"wall_seconds", 6.123}, {"user_cpu_seconds", 10.5}, {"system_cpu_seconds", 0.25}, {"max_rss_kb", 123456}}));
  EXPECT_TRUE(doc["attempts"][0]["exit_code"].is_null());
  EXPECT_TRUE(doc["attempts"][0]["usage"].is_null());
}

TEST(JobJsonTest, SurvivesTextSerialization) {
  const model::Job job = FullJob();
  auto back = JobFromJson(json::parse(JobToJson(job).dump()));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, job);
}

// JobDocument is a faster spelling of JobToJson(job).dump(): byte for byte
// the same text, for every shape of job and every kind of string.
TEST(JobDocumentTest, SameBytesAsDump) {
  struct Case {
    const char* what;
    model::Job job;
  };
  std::vector<Case> cases;
  cases.push_back({"fully populated, attempts with usage", FullJob()});
  cases.push_back({"fresh, defaults and nulls", FreshJob()});
  {
    model::Job escapes = FullJob();
    escapes.name = std::string("quote\" backslash\\ nl\n cr\r tab\t bs\b ff\f nul") + '\0' + "\x01\x1f\x7f end";
    escapes.state_reason = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";  // é € 😀
    escapes.env = {{"K\"EY", "v\\al\nue"}, {"\xc3\xa9", ""}};
    escapes.command = {"sh", "-c", "printf '%s\\n' \"$X\""};
    cases.push_back({"escapes and UTF-8", escapes});
  }
  {
    model::Job features = FullJob();
    // Keys around "kind" in byte order, and one named "kind" (the kind wins).
    features.workload.features = {{"a", "1"},
                                  {"kind", "ignored"},
                                  {"kinda", "true"},
                                  {"Z", "x"},
                                  {"zz", "-0.5"},
                                  {"num", "1e3"},
                                  {"big", "12345678901234567890"}};
    cases.push_back({"features around kind", features});
  }
  {
    model::Job preempted = FullJob();
    preempted.preempting_for = 99;
    preempted.preempted_by = {5, 6};
    preempted.stop_requested_at = FromUnixMillis(1'700'000'010'000);
    preempted.eligible_at = FromUnixMillis(1'700'000'020'000);
    preempted.max_retries = 4;
    preempted.priority = -3;
    preempted.workload.features.clear();
    cases.push_back({"preemption, retries, negative priority, no features", preempted});
  }
  {
    model::Job invalid = FullJob();
    invalid.name = "bad \xff\xfe utf-8 \xc3";  // falls back to dump() with U+FFFD
    invalid.state_reason = "\xed\xa0\x80 surrogate";
    cases.push_back({"invalid UTF-8", invalid});
  }
  for (const auto& c : cases) {
    EXPECT_EQ(JobDocument(c.job), JobToJson(c.job).dump(-1, ' ', false, json::error_handler_t::replace)) << c.what;
  }
}

TEST(FeatureValueTest, TextToJson) {
  struct Case {
    std::string text;
    json want;
  };
  const std::vector<Case> cases = {
      {"80", 80},       {"-3", -3},       {"1.5", 1.5},     {"true", true},
      {"false", false}, {"fp64", "fp64"}, {"080", "080"},   {"1.50", "1.50"},
      {"1e5", "1e5"},   {"-0", "-0"},     {" 80", " 80"},   {"null", "null"},
      {"[1]", "[1]"},   {"", ""},         {"True", "True"}, {"99999999999999999999", "99999999999999999999"},
  };
  for (const auto& c : cases) {
    const json got = FeatureValueToJson(c.text);
    EXPECT_EQ(got, c.want) << "text '" << c.text << "'";
    EXPECT_EQ(got.is_string(), c.want.is_string()) << "text '" << c.text << "'";
    EXPECT_EQ(got.is_number(), c.want.is_number()) << "text '" << c.text << "'";
    // Whatever the JSON form, the text comes back unchanged.
    EXPECT_EQ(FeatureValueFromJson(got), c.text);
  }
}

TEST(FeatureValueTest, JsonToText) {
  EXPECT_EQ(FeatureValueFromJson(json(80)), "80");
  EXPECT_EQ(FeatureValueFromJson(json(true)), "true");
  EXPECT_EQ(FeatureValueFromJson(json(false)), "false");
  EXPECT_EQ(FeatureValueFromJson(json("fp64")), "fp64");
  EXPECT_EQ(FeatureValueFromJson(json(nullptr)), std::nullopt);
  EXPECT_EQ(FeatureValueFromJson(json::array()), std::nullopt);
}

TEST(JobJsonTest, IgnoresDerivedAndUnknownFields) {
  json doc = JobToJson(FullJob());
  doc["pending_reasons"] = json::array({{{"code", "Resources"}, {"message", "x"}}});
  doc["nodes"] = json::array({"elsewhere"});
  doc["priority_factors"] = {{"age", 1}};
  auto back = JobFromJson(doc);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, FullJob());
}

// Documents stored before batch scripts have neither field: a command, in
// the work directory.
TEST(JobJsonTest, ADocumentWithoutScriptOrWorkdirRunsItsCommandInTheWorkDirectory) {
  json doc = JobToJson(FullJob());
  doc.erase("script");
  doc.erase("workdir");
  auto back = JobFromJson(doc);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(back->script.empty());
  EXPECT_EQ(back->workdir, "");
  EXPECT_EQ(back->command, FullJob().command);
}

TEST(JobJsonTest, WrongTypesAreErrorsNamingTheField) {
  struct Case {
    std::string name;
    std::function<void(json&)> mutate;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"id not numeric", [](json& d) { d["id"] = "4x2"; }, "id"},
      {"empty id", [](json& d) { d["id"] = ""; }, "id"},
      {"name number", [](json& d) { d["name"] = 5; }, "name"},
      {"unknown state", [](json& d) { d["state"] = "SLEEPING"; }, "state"},
      {"unknown kind", [](json& d) { d["workload"]["kind"] = "quantum"; }, "workload.kind"},
      {"feature array", [](json& d) { d["workload"]["precision"] = json::array(); }, "workload.precision"},
      {"cpus string", [](json& d) { d["resources"]["cpus"] = "8"; }, "resources.cpus"},
      {"cpus too big", [](json& d) { d["resources"]["cpus"] = int64_t{1} << 40; }, "resources.cpus"},
      {"command string", [](json& d) { d["command"] = "ls"; }, "command"},
      {"command item", [](json& d) { d["command"][1] = 1; }, "command[1]"},
      {"env value", [](json& d) { d["env"]["KEY"] = 1; }, "env.KEY"},
      {"bad time", [](json& d) { d["submitted_at"] = "yesterday"; }, "submitted_at"},
      {"attempt gpu", [](json& d) { d["attempts"][1]["allocation"][0]["gpus"][0] = "a"; },
       "attempts[1].allocation[0].gpus[0]"},
      {"attempt cpu",
       [](json& d) {
         d["attempts"][1]["allocation"][0]["cpu_ids"] = {0, 1.5};
       },
       "attempts[1].allocation[0].cpu_ids[1]"},
      {"usage rss", [](json& d) { d["attempts"][1]["usage"]["max_rss_kb"] = 1.5; }, "attempts[1].usage.max_rss_kb"},
      {"cancel flag", [](json& d) { d["cancel_requested"] = "yes"; }, "cancel_requested"},
  };
  for (const auto& c : cases) {
    json doc = JobToJson(FullJob());
    c.mutate(doc);
    auto r = JobFromJson(doc);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.error().kind, ErrorKind::kBadRequest) << c.name;
    EXPECT_EQ(r.error().field, c.field) << c.name;
  }
  EXPECT_FALSE(JobFromJson(json::array()).ok());
}

}  // namespace
}  // namespace unisched::codec
