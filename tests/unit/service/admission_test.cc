// Admission (service/admission.h): tables of cases over the default config,
// with the controller's view built by hand.

#include "unisched/service/admission.h"

#include <gtest/gtest.h>

#include "testing/config_text.h"

namespace unisched::service {
namespace {

using unisched::testing::DefaultConfigText;

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  return unisched::testing::ReplaceOnce(std::move(text), from, to);
}

config::Config Load(const std::string& text) {
  auto loaded = config::LoadConfigText(text);
  EXPECT_TRUE(std::holds_alternative<config::Config>(loaded));
  return std::get<config::Config>(loaded);
}

// The default config, where project default may hold one running job or
// sandbox, and agent-sandbox refuses work over quota at once.
config::Config OneSlotConfig() {
  std::string text =
      Replace(DefaultConfigText(), "shares: 1                    # fair share relative to other projects",
              "shares: 1\n    quota: {running_jobs: 1}");
  return Load(Replace(text, "max_concurrency: 500", "max_concurrency: 500\n      quota_action: reject"));
}

auth::Principal Alice() {
  return {"alice", auth::Role::kUser, {"default"}, {}, "", ""};
}

JobRequest AgentJob() {
  JobRequest r;
  r.workload.kind = model::WorkloadKind::kAgent;
  r.command = {"true"};
  return r;
}

// No API sandbox anywhere.
SandboxHolds NoSandboxes() {
  return {};
}

TEST(AdmitJobTest, ChecksProjectRouteAndPriorityNamingTheField) {
  const config::Config config = Load(DefaultConfigText());
  const ClusterView view;
  struct Case {
    std::string name;
    JobRequest request;
    auth::Principal who;
    ErrorKind kind;
    std::string code, field;
  };
  JobRequest unknown_project = AgentJob();
  unknown_project.project = "nope";
  JobRequest raised = AgentJob();
  raised.priority = 5;
  JobRequest too_big = AgentJob();
  too_big.resources.cpus = 100000;
  JobRequest mismatch = AgentJob();
  mismatch.queue = "hpc-precision";
  auth::Principal outsider = Alice();
  outsider.projects = {};  // defaults to project default, of which it is no member
  const std::vector<Case> cases = {
      {"unknown project", unknown_project, Alice(), ErrorKind::kUnprocessable, "unknown_project", "project"},
      {"not a member", AgentJob(), outsider, ErrorKind::kForbidden, "forbidden", "project"},
      {"priority from a user", raised, Alice(), ErrorKind::kForbidden, "forbidden", "priority"},
      {"no node that big", too_big, Alice(), ErrorKind::kUnprocessable, "unsatisfiable", "resources.cpus"},
      {"queue of another kind", mismatch, Alice(), ErrorKind::kUnprocessable, "queue_mismatch", "queue"},
  };
  for (const Case& c : cases) {
    auto admitted = AdmitJob(config, view, NoSandboxes, c.who, c.request);
    ASSERT_FALSE(admitted.ok()) << c.name;
    EXPECT_EQ(admitted.error().kind, c.kind) << c.name;
    EXPECT_EQ(admitted.error().code, c.code) << c.name;
    EXPECT_EQ(admitted.error().field, c.field) << c.name;
  }
  auto admitted = AdmitJob(config, view, NoSandboxes, Alice(), AgentJob());
  ASSERT_TRUE(admitted.ok()) << admitted.error().message;
  EXPECT_EQ(admitted->project, "default");
  EXPECT_EQ(admitted->route.queue, "agent-sandbox");
  EXPECT_EQ(admitted->route.resources.walltime_seconds, 900);  // the queue's default_walltime_hours: 0.25
}

// A batch script names a queue (-p) and no kind: the job takes the kind
// the queue serves; relative -o/-e files are under its workdir (Slurm's rule).
TEST(AdmitJobTest, AScriptsQueueGivesItsKindAndItsWorkdirHoldsRelativeOutput) {
  const config::Config config = Load(DefaultConfigText());
  const ClusterView view;
  const auth::Principal admin{"root", auth::Role::kPlatformAdmin, {"default"}, {}, "", ""};
  JobRequest script;
  script.command = {"train.sh"};
  script.script = "#!/bin/sh\ntrue\n";
  script.workload_from_queue = true;  // kind hpc until the queue says otherwise
  script.queue = "ai-training";
  script.resources.gpus = 1;
  script.workdir = "/scratch/alice";
  script.output_file = "slurm-%j.out";
  auto admitted = AdmitJob(config, view, NoSandboxes, admin, script);
  ASSERT_TRUE(admitted.ok()) << admitted.error().message;
  EXPECT_EQ(admitted->kind, model::WorkloadKind::kAiTraining);
  EXPECT_EQ(admitted->route.queue, "ai-training");
  EXPECT_EQ(admitted->output_file, "/scratch/alice/slurm-%j.out");
  // A queue serving hpc keeps it; a job that gave its kind keeps it (and
  // meets the queue's refusal).
  script.queue = "hpc-precision";
  script.resources.gpus = 0;
  EXPECT_EQ(AdmitJob(config, view, NoSandboxes, admin, script)->kind, model::WorkloadKind::kHpc);
  script.workload_from_queue = false;
  script.queue = "ai-training";
  script.resources.gpus = 1;
  auto mismatch = AdmitJob(config, view, NoSandboxes, admin, script);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.error().code, "queue_mismatch");
}

TEST(AdmitSandboxTest, TheRoutersRefusalsNameTheSandboxsFields) {
  const config::Config config = Load(DefaultConfigText());
  const ClusterView view;
  struct Case {
    std::string name;
    SandboxRequest request;
    std::string code, field;
  };
  SandboxRequest cpus, memory, timeout, queue, kind, project;
  cpus.cpus = 1000;
  memory.memory_mb = 10'000'000;
  timeout.timeout_seconds = 999'999;
  queue.queue = "nope";
  kind.queue = "hpc-precision";
  project.project = "nope";
  const std::vector<Case> cases = {
      {"cpus", cpus, "unsatisfiable", "limits.cpus"},
      {"memory", memory, "unsatisfiable", "limits.memory_mb"},
      {"timeout", timeout, "walltime_exceeds_max", "limits.timeout_seconds"},
      {"unknown queue", queue, "unknown_queue", "queue"},
      {"queue of another kind", kind, "queue_mismatch", "queue"},
      {"unknown project", project, "unknown_project", "project"},
  };
  for (const Case& c : cases) {
    auto admitted = AdmitSandbox(config, view, NoSandboxes, Alice(), c.request);
    ASSERT_FALSE(admitted.ok()) << c.name;
    EXPECT_EQ(admitted.error().kind, ErrorKind::kUnprocessable) << c.name;
    EXPECT_EQ(admitted.error().code, c.code) << c.name << ": " << admitted.error().message;
    EXPECT_EQ(admitted.error().field, c.field) << c.name;
  }
  EXPECT_NE(AdmitSandbox(config, view, NoSandboxes, Alice(), timeout).error().message.find("limits.timeout_seconds"),
            std::string::npos);
}

TEST(AdmitSandboxTest, DefaultsComeFromTheQueueAndTheSandboxSettings) {
  const config::Config config = Load(DefaultConfigText());
  auto admitted = AdmitSandbox(config, ClusterView{}, NoSandboxes, Alice(), {});
  ASSERT_TRUE(admitted.ok()) << admitted.error().message;
  EXPECT_EQ(admitted->queue, "agent-sandbox");
  EXPECT_EQ(DefaultSandboxQueue(config), "agent-sandbox");  // where the router sends agent jobs
  EXPECT_EQ(admitted->pool, "elastic-light-pool");
  EXPECT_EQ(admitted->project, "default");
  EXPECT_EQ(admitted->limits, (SandboxLimits{1, 512, 900}));
  SandboxRequest two;
  two.cpus = 2;
  admitted = AdmitSandbox(config, ClusterView{}, NoSandboxes, Alice(), two);
  ASSERT_TRUE(admitted.ok());
  EXPECT_EQ(admitted->limits, (SandboxLimits{2, 1024, 900}));  // default_memory_mb_per_cpu: 512
}

// One quota for both: what a sandbox holds refuses an agent job, and what an
// agent job holds refuses a sandbox.
TEST(AdmissionTest, ASandboxAndAnAgentJobOfOneProjectShareOneQuota) {
  const config::Config config = OneSlotConfig();
  const policy::Amount one{1, 512, 0, 1};
  SandboxHolds bobs_sandbox;
  bobs_sandbox[{"agent-sandbox", "default", "bob"}] = one;
  auto sandbox_source = [&] { return bobs_sandbox; };

  // The controller's view has not heard of the sandbox yet (it learns of it
  // a moment after its 201): the manager's count decides.
  auto job = AdmitJob(config, ClusterView{}, sandbox_source, Alice(), AgentJob());
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.error().kind, ErrorKind::kForbidden);
  EXPECT_EQ(job.error().code, "quota_exceeded");
  EXPECT_NE(job.error().message.find("project default"), std::string::npos) << job.error().message;

  // The view has it too: counted once, not twice (a quota of 2 is not full).
  ClusterView caught_up;
  caught_up.running_usage.Add({"agent-sandbox", "default", "bob"}, one);
  caught_up.sandbox_holds = std::make_shared<SandboxHolds>(bobs_sandbox);
  const policy::JobScope scope{"agent-sandbox", "default", "alice"};
  EXPECT_EQ(HeldFor(caught_up, bobs_sandbox, scope).Project("default").jobs, 1);
  // The view still has a sandbox that ended (the manager no longer does).
  EXPECT_EQ(HeldFor(caught_up, {}, scope).Project("default").jobs, 0);
  EXPECT_TRUE(AdmitJob(config, caught_up, NoSandboxes, Alice(), AgentJob()).ok());

  ClusterView with_job;
  with_job.running_usage.Add({"agent-sandbox", "default", "bob"}, one);
  auto sandbox = AdmitSandbox(config, with_job, NoSandboxes, Alice(), {});
  ASSERT_FALSE(sandbox.ok());
  EXPECT_EQ(sandbox.error().code, "quota_exceeded");

  EXPECT_TRUE(AdmitJob(config, ClusterView{}, NoSandboxes, Alice(), AgentJob()).ok());
}

TEST(AdmissionTest, TheSlotCountsJobsFromTheViewAndSandboxesFromTheManager) {
  const config::Config config = OneSlotConfig();
  const policy::Amount one{1, 512, 0, 1};
  const policy::JobScope scope{"agent-sandbox", "default", "alice"};
  const SandboxLimits limits{1, 512, 900};
  EXPECT_FALSE(SandboxSlotLimit(config.cluster, HeldFor(ClusterView{}, {}, scope), scope, limits));
  SandboxHolds carols;
  carols[{"agent-sandbox", "default", "carol"}] = one;
  auto limit = SandboxSlotLimit(config.cluster, HeldFor(ClusterView{}, carols, scope), scope, limits);
  ASSERT_TRUE(limit);
  EXPECT_EQ(limit->code, "QuotaExceeded");
  // A job of the project running elsewhere fills the project's quota too.
  ClusterView with_job;
  with_job.running_usage.Add({"ai-inference", "default", "dave"}, one);
  limit = SandboxSlotLimit(config.cluster, HeldFor(with_job, {}, scope), scope, limits);
  ASSERT_TRUE(limit);
  EXPECT_EQ(limit->code, "QuotaExceeded");
}

TEST(QuotaRefusalTest, WorkThatAloneExceedsALimitIsRefusedEvenWhereWorkWaits) {
  std::string text =
      Replace(DefaultConfigText(), "shares: 1                    # fair share relative to other projects",
              "shares: 1\n    quota: {cpus: 2}");
  const config::Config config = Load(text);  // agent-sandbox: quota_action wait
  model::ResourceRequest four;
  four.cpus = 4;
  auto nothing = [] { return policy::QuotaTally{}; };
  auto refused = QuotaRefusal(config.cluster, ClusterView{}, nothing, {"agent-sandbox", "default", "a"}, four);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, "quota_exceeded");
  EXPECT_NE(refused->message.find("can never run"), std::string::npos) << refused->message;
  model::ResourceRequest two;
  two.cpus = 2;
  policy::QuotaTally full;
  full.Add({"agent-sandbox", "default", "b"}, {2, 1024, 0, 1});
  // Over the quota with what runs: a waiting queue lets it wait.
  EXPECT_FALSE(QuotaRefusal(
      config.cluster, ClusterView{}, [&] { return full; }, {"agent-sandbox", "default", "a"}, two));
}

}  // namespace
}  // namespace unisched::service

namespace unisched::service {
namespace {

// storage.object_stores: store "rgw" with bucket "genomics" for project
// default, and the "refs/" prefix of bucket "public" read-only for everyone.
config::StorageSettings Stores() {
  config::ObjectStore store;
  store.name = "rgw";
  store.endpoint = "http://127.0.0.1:7480";
  store.access = {{{"default"}, "genomics", "", false}, {{"*"}, "public", "refs/", true}};
  config::StorageSettings storage;
  storage.object_stores.push_back(store);
  return storage;
}

TEST(StagingRefusalTest, StoresBucketsPrefixesAndPathsByProject) {
  struct Case {
    std::string project;
    model::DataStaging data;
    std::string code, field;  // "" : accepted
  };
  auto in = [](std::string from, std::string to = "in/") {
    return model::DataStaging{{{std::move(from), std::move(to)}}, {}};
  };
  auto out = [](std::string to, std::string from = "out/") {
    return model::DataStaging{{}, {{std::move(from), std::move(to), model::StageWhen::kSuccess}}};
  };
  const Case cases[] = {
      {"default", in("s3://rgw/genomics/samples/"), "", ""},
      {"default", out("s3://rgw/genomics/results/{job_id}/"), "", ""},
      {"physics", in("s3://rgw/public/refs/genome.fa"), "", ""},  // "*", read-only: reading is allowed
      {"physics", in("s3://rgw/genomics/samples/"), "object_store_forbidden", "data.stage_in[0].from"},
      {"default", out("s3://rgw/public/refs/mine/"), "object_store_forbidden", "data.stage_out[0].to"},
      {"default", in("s3://rgw/public/other/x"), "object_store_forbidden", "data.stage_in[0].from"},
      {"default", in("s3://cold/genomics/x"), "unknown_object_store", "data.stage_in[0].from"},
      {"default", in("file:///etc/passwd"), "invalid_value", "data.stage_in[0].from"},
      {"default", in("s3://rgw/genomics/x", "/abs"), "invalid_value", "data.stage_in[0].to"},
      {"default", out("s3://rgw/genomics/r/", "../up"), "invalid_value", "data.stage_out[0].from"},
  };
  for (const Case& c : cases) {
    auto refused = StagingRefusal(Stores(), c.project, c.data);
    if (c.code.empty()) {
      EXPECT_FALSE(refused) << c.project << ": " << refused->message;
      continue;
    }
    ASSERT_TRUE(refused) << c.project << " " << c.field;
    EXPECT_EQ(refused->code, c.code) << refused->message;
    EXPECT_EQ(refused->field, c.field) << refused->message;
  }
  // The refusal says what the project may use.
  auto refused = StagingRefusal(Stores(), "physics", in("s3://rgw/genomics/samples/"));
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->message.find("s3://rgw/public/refs/ (read-only)"), std::string::npos) << refused->message;
}

}  // namespace
}  // namespace unisched::service
