// The attempt's spec and result documents (executor/attempt_files.h), read
// with the one JSON reader (codec/json_reader.h): every field survives a
// round trip, fields written before they existed keep their defaults, and
// a malformed document is refused naming the field at fault.

#include "executor/attempt_files.h"

#include <gtest/gtest.h>

#include <functional>

#include "unisched/executor/wire.h"

namespace unisched::executor::files {
namespace {

using nlohmann::json;

AttemptSpec FullSpec() {
  AttemptSpec spec;
  LaunchSpec& l = spec.launch;
  l.job_id = 123456789012;
  l.attempt = 3;
  l.argv = {"/bin/sh", "-c", "echo hi"};
  l.env = {{"A", "1"}, {"PATH", "/bin"}};
  l.unix_user = "alice";
  l.walltime_seconds = 3600;
  l.kill_grace_seconds = 10;
  l.preempt_grace_seconds = 45;
  l.limits.memory_bytes = int64_t{6} << 30;
  l.limits.cpu_millis = 4000;
  l.limits.pids = 512;
  l.log_cap_bytes = 1 << 20;
  l.isolate = true;
  l.sandbox_uid_base = 200000;
  l.sandbox_uid_count = 1000;
  l.sandbox_uid_lock_dir = "/run/unisched/uids";
  spec.work_dir = "/var/lib/unisched/work/123456789012";
  spec.use_cgroups = false;
  spec.log_dir = "/var/lib/unisched/runs/123456789012/3";
  spec.account = ResolvedAccount{1001, 1001, {27, 1001}};
  l.ids = UnixIds{2000003, 2000001, {2000001, 2000002}};
  l.script = "#!/bin/sh\necho \"$1\"\n";
  l.chdir = "/scratch/alice";
  l.secrets = {{"db-password", "hunter2", ""}, {"aws-key", "AKIA...", "AWS_SECRET_ACCESS_KEY"}};
  return spec;
}

TEST(AttemptFilesTest, ASpecSurvivesARoundTripWithEveryField) {
  const AttemptSpec spec = FullSpec();
  auto back = SpecFromJson(SpecToJson(spec).dump());
  ASSERT_TRUE(back.ok()) << back.error().message;
  const LaunchSpec& l = back->launch;
  EXPECT_EQ(l.job_id, spec.launch.job_id);
  EXPECT_EQ(l.attempt, 3);
  EXPECT_EQ(l.argv, spec.launch.argv);
  EXPECT_EQ(l.script, spec.launch.script);
  EXPECT_EQ(l.chdir, "/scratch/alice");
  EXPECT_EQ(l.env, spec.launch.env);
  EXPECT_EQ(l.unix_user, "alice");
  EXPECT_EQ(l.walltime_seconds, 3600);
  EXPECT_EQ(l.kill_grace_seconds, 10);
  EXPECT_EQ(l.preempt_grace_seconds, 45);
  EXPECT_EQ(l.limits.memory_bytes, int64_t{6} << 30);
  EXPECT_EQ(l.limits.cpu_millis, 4000);
  EXPECT_EQ(l.limits.pids, 512);
  EXPECT_EQ(l.log_cap_bytes, 1 << 20);
  EXPECT_TRUE(l.isolate);
  EXPECT_EQ(l.sandbox_uid_base, 200000);
  EXPECT_EQ(l.sandbox_uid_count, 1000);
  EXPECT_EQ(l.sandbox_uid_lock_dir, "/run/unisched/uids");
  EXPECT_EQ(back->work_dir, spec.work_dir);
  EXPECT_FALSE(back->use_cgroups);
  EXPECT_EQ(back->log_dir, spec.log_dir);
  ASSERT_TRUE(back->account.has_value());
  EXPECT_EQ(back->account->uid, 1001u);
  EXPECT_EQ(back->account->groups, (std::vector<uint32_t>{27, 1001}));
  ASSERT_TRUE(l.ids.has_value());
  EXPECT_EQ(l.ids->uid, 2000003u);
  EXPECT_EQ(l.ids->gid, 2000001u);
  EXPECT_EQ(l.ids->groups, (std::vector<uint32_t>{2000001, 2000002}));
  ASSERT_EQ(l.secrets.size(), 2u);
  EXPECT_EQ(l.secrets[0].name, "db-password");
  EXPECT_EQ(l.secrets[0].value, "hunter2");
  EXPECT_EQ(l.secrets[0].env, "");
  EXPECT_EQ(l.secrets[1].env, "AWS_SECRET_ACCESS_KEY");
}

// What an agent keeps on disk of a launch: everything recovery needs, no
// secret's value.
TEST(AttemptFilesTest, TheCopyKeptOnDiskHoldsNoSecret) {
  const LaunchSpec spec = FullSpec().launch;
  EXPECT_NE(LaunchSpecToJson(spec).dump().find("hunter2"), std::string::npos);  // the wire carries it
  const json kept = LaunchSpecToJson(spec, /*with_secrets=*/false);
  EXPECT_EQ(kept.dump().find("hunter2"), std::string::npos);
  auto back = LaunchSpecFromJson(kept);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(back->secrets.empty());
  EXPECT_EQ(back->argv, spec.argv);
}

TEST(AttemptFilesTest, FieldsOlderSpecsLackKeepTheirDefaults) {
  json doc = SpecToJson(FullSpec());
  for (const char* key :
       {"preempt_grace_seconds", "limits", "isolate", "sandbox_uids", "log_dir", "account", "ids", "script", "chdir"}) {
    doc.erase(key);
  }
  auto back = SpecFromDocument(doc);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->launch.preempt_grace_seconds, 10);  // the kill grace
  EXPECT_EQ(back->launch.limits.memory_bytes, 0);
  EXPECT_FALSE(back->launch.isolate);
  EXPECT_EQ(back->log_dir, "");
  EXPECT_FALSE(back->account.has_value());
  EXPECT_EQ(back->launch.script, "");  // argv runs ...
  EXPECT_EQ(back->launch.chdir, "");   // ... in the work directory
}

TEST(AttemptFilesTest, AMalformedSpecIsRefusedNamingTheField) {
  struct Case {
    const char* name;
    std::function<void(json&)> change;
    std::string message;  // the error message, after "malformed spec: "
  };
  const std::vector<Case> cases = {
      {"no job id", [](json& d) { d.erase("job_id"); }, "job_id: is required"},
      {"null argv", [](json& d) { d["argv"] = nullptr; }, "argv: is required"},
      {"argv of numbers",
       [](json& d) {
         d["argv"] = {1, 2};
       },
       "argv[0]: must be a string"},
      {"env value not text", [](json& d) { d["env"]["A"] = 1; }, "env.A: must be a string"},
      {"attempt as text", [](json& d) { d["attempt"] = "3"; }, "attempt: must be an integer"},
      {"attempt beyond int", [](json& d) { d["attempt"] = int64_t{1} << 40; }, "attempt: is out of range"},
      {"limits not an object", [](json& d) { d["limits"] = 5; }, "limits: must be an object"},
      {"a negative group", [](json& d) { d["account"]["groups"] = {-1}; }, "account.groups[0]: is out of range"},
      {"an account without gid", [](json& d) { d["account"].erase("gid"); }, "account.gid: is required"},
      {"use_cgroups as text", [](json& d) { d["use_cgroups"] = "yes"; }, "use_cgroups: must be a boolean"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    json doc = SpecToJson(FullSpec());
    c.change(doc);
    auto back = SpecFromDocument(doc);
    ASSERT_FALSE(back.ok());
    EXPECT_EQ(back.error().code, "bad_spec");
    EXPECT_EQ(back.error().message, "malformed spec: " + c.message);
  }
  EXPECT_EQ(SpecFromJson("not a spec").error().message, "malformed spec: not JSON");
  EXPECT_EQ(SpecFromJson("[1]").error().message, "malformed spec: not a JSON object");
  json empty_argv = SpecToJson(FullSpec());
  empty_argv["argv"] = json::array();
  EXPECT_EQ(SpecFromDocument(empty_argv).error().message, "argv is empty");
}

TEST(AttemptFilesTest, AResultSurvivesARoundTripAndAMalformedOneIsRefused) {
  RunResult r;
  r.job_id = 42;
  r.attempt = 2;
  r.outcome = RunOutcome::kTimeout;
  r.exit_code = 137;
  r.reason = "wall time";
  r.started_at = FromUnixMillis(1'780'000'000'000);
  r.ended_at = FromUnixMillis(1'780'000'360'500);
  r.usage = model::RunUsage{360.5, 100.25, 3.5, 204800};
  auto back = ResultFromJson(ResultToJson(r).dump());
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->job_id, 42);
  EXPECT_EQ(back->attempt, 2);
  EXPECT_EQ(back->outcome, RunOutcome::kTimeout);
  EXPECT_EQ(back->exit_code, 137);
  EXPECT_EQ(back->reason, "wall time");
  EXPECT_EQ(back->started_at, r.started_at);
  EXPECT_EQ(back->ended_at, r.ended_at);
  EXPECT_DOUBLE_EQ(back->usage.user_cpu_seconds, 100.25);
  EXPECT_EQ(back->usage.max_rss_kb, 204800);

  struct Case {
    const char* text;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"job_id": 1, "attempt": 1})", "malformed result.json: outcome: is required"},
           {R"({"job_id": 1, "attempt": 1, "outcome": "exploded"})",
            "malformed result.json: outcome: unknown value \"exploded\""},
           {R"({"job_id": 1, "attempt": 1, "outcome": "failed", "exit_code": "1"})",
            "malformed result.json: exit_code: must be an integer"},
           {R"({"job_id": 1, "attempt": 1, "outcome": "failed", "usage": {"wall_seconds": "x"}})",
            "malformed result.json: usage.wall_seconds: must be a number"},
           {"{", "malformed result.json: not JSON"},
       }) {
    SCOPED_TRACE(c.text);
    auto bad = ResultFromJson(c.text);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().code, "bad_result");
    EXPECT_EQ(bad.error().message, c.message);
  }
}

}  // namespace
}  // namespace unisched::executor::files
