// Quotas and concurrency limits (policy/quota.h): the tally of what each
// scope holds, and the first limit one more job would exceed, worded for the
// user.

#include "unisched/policy/quota.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "testing/builders.h"

namespace unisched::policy {
namespace {

using model::PendingReason;
using model::ResourceLimits;
using testing::MakeRequest;

ResourceLimits Gpus(int64_t n) {
  ResourceLimits l;
  l.gpus = n;
  return l;
}
ResourceLimits Cpus(int64_t n) {
  ResourceLimits l;
  l.cpus = n;
  return l;
}
ResourceLimits MemoryMb(int64_t n) {
  ResourceLimits l;
  l.memory_mb = n;
  return l;
}
ResourceLimits Jobs(int64_t n) {
  ResourceLimits l;
  l.running_jobs = n;
  return l;
}

// What one running job of `request` in `scope` adds to a tally.
void AddRunning(QuotaTally& tally, const JobScope& scope, const model::ResourceRequest& request, int times = 1) {
  for (int i = 0; i < times; ++i) tally.Add(scope, AmountOf(request));
}

TEST(QuotaTallyTest, AddsPerScopeAndRemovesAgain) {
  QuotaTally tally;
  const JobScope a{"ai-training", "genomics", "alice"}, b{"ai-training", "genomics", "bob"},
      c{"ai-inference", "genomics", "alice"};
  AddRunning(tally, a, MakeRequest().Nodes(2).Cpus(4).MemoryMb(1000).Gpus(8));
  AddRunning(tally, b, MakeRequest().Cpus(1).Gpus(1));
  AddRunning(tally, c, MakeRequest().Cpus(2).Gpus(1));

  EXPECT_EQ(tally.QueueProject("ai-training", "genomics").gpus, 17);
  EXPECT_EQ(tally.QueueProject("ai-training", "genomics").cpus, 9);
  EXPECT_EQ(tally.QueueProject("ai-training", "genomics").memory_mb, 3024);
  EXPECT_EQ(tally.QueueProject("ai-training", "genomics").jobs, 2);
  EXPECT_EQ(tally.QueueUser("ai-training", "alice").gpus, 16);
  EXPECT_EQ(tally.QueueUser("ai-inference", "alice").gpus, 1);
  EXPECT_EQ(tally.Project("genomics").gpus, 18);
  EXPECT_EQ(tally.Project("genomics").jobs, 3);
  EXPECT_EQ(tally.QueueJobs("ai-training"), 2);
  EXPECT_EQ(tally.QueueJobs("ai-inference"), 1);
  EXPECT_EQ(tally.Project("climate").gpus, 0);

  tally.Remove(a, AmountOf(MakeRequest().Nodes(2).Cpus(4).MemoryMb(1000).Gpus(8)));
  EXPECT_EQ(tally.QueueProject("ai-training", "genomics").gpus, 1);
  EXPECT_EQ(tally.QueueUser("ai-training", "alice").jobs, 0);
  EXPECT_EQ(tally.QueueJobs("ai-training"), 1);
}

TEST(QuotaTest, AmountCountsEveryNode) {
  const Amount a = AmountOf(MakeRequest().Nodes(3).Cpus(4).MemoryMb(512).Gpus(2));
  EXPECT_EQ(a.cpus, 12);
  EXPECT_EQ(a.memory_mb, 1536);
  EXPECT_EQ(a.gpus, 6);
  EXPECT_EQ(a.jobs, 1);
}

TEST(QuotaTest, CheckLimitsPerScope) {
  struct Running {
    JobScope scope;
    model::ResourceRequest request;
    int times;
  };
  struct Case {
    std::string name;
    model::QueuePolicy queue;
    std::optional<model::ProjectPolicy> project;
    std::vector<Running> running;
    JobScope scope;
    model::ResourceRequest request;
    std::optional<PendingReason> want;
  };
  auto queue = [](auto change) {
    model::QueuePolicy p;
    change(p);
    return p;
  };
  auto project = [](ResourceLimits quota) {
    model::ProjectPolicy p;
    p.name = "genomics";
    p.quota = quota;
    return p;
  };
  const JobScope genomics_alice{"ai-training", "genomics", "alice"};
  const JobScope genomics_bob{"ai-training", "genomics", "bob"};
  const JobScope climate_carol{"ai-training", "climate", "carol"};
  const model::QueuePolicy gpu32 = queue([](model::QueuePolicy& p) { p.project_quota = Gpus(32); });
  const auto eight_gpus = MakeRequest().Cpus(4).Gpus(8).Build();

  const std::vector<Case> cases = {
      {"no limits",
       queue([](model::QueuePolicy&) {}),
       std::nullopt,
       {{genomics_alice, eight_gpus, 100}},
       genomics_alice,
       eight_gpus,
       std::nullopt},
      {"queue+project: the seed's 32 GPUs, at the limit",
       gpu32,
       std::nullopt,
       {{genomics_alice, eight_gpus, 4}},
       genomics_bob,
       eight_gpus,
       PendingReason{"QuotaExceeded",
                     "project genomics uses 32/32 GPUs in ai-training; this job needs 8 (project_quota)"}},
      {"queue+project: exactly reaching the limit is allowed",
       gpu32,
       std::nullopt,
       {{genomics_alice, eight_gpus, 3}},
       genomics_alice,
       eight_gpus,
       std::nullopt},
      {"queue+project: one over",
       gpu32,
       std::nullopt,
       {{genomics_alice, eight_gpus, 3}, {genomics_alice, MakeRequest().Gpus(1), 1}},
       genomics_alice,
       eight_gpus,
       PendingReason{"QuotaExceeded",
                     "project genomics uses 25/32 GPUs in ai-training; this job needs 8 (project_quota)"}},
      {"queue+project: another project is not charged",
       gpu32,
       std::nullopt,
       {{genomics_alice, eight_gpus, 4}},
       climate_carol,
       eight_gpus,
       std::nullopt},
      {"queue+project: the same project in another queue is not charged",
       gpu32,
       std::nullopt,
       {{{"ai-inference", "genomics", "alice"}, eight_gpus, 4}},
       genomics_alice,
       eight_gpus,
       std::nullopt},
      {"queue+project: a multi-node job needs every node's GPUs",
       gpu32,
       std::nullopt,
       {{genomics_alice, eight_gpus, 3}},
       genomics_alice,
       MakeRequest().Nodes(2).Gpus(8),
       PendingReason{"QuotaExceeded",
                     "project genomics uses 24/32 GPUs in ai-training; this job needs 16 (project_quota)"}},
      {"queue+project: running jobs",
       queue([](model::QueuePolicy& p) { p.project_quota = Jobs(2); }),
       std::nullopt,
       {{genomics_alice, MakeRequest(), 2}},
       genomics_bob,
       MakeRequest(),
       PendingReason{"QuotaExceeded",
                     "project genomics uses 2/2 running jobs in ai-training; this job needs 1 (project_quota)"}},
      {"queue+project: one running job, singular",
       queue([](model::QueuePolicy& p) { p.project_quota = Jobs(1); }),
       std::nullopt,
       {{genomics_alice, MakeRequest(), 1}},
       genomics_bob,
       MakeRequest(),
       PendingReason{"QuotaExceeded",
                     "project genomics uses 1/1 running job in ai-training; this job needs 1 (project_quota)"}},
      {"queue+user: cpus",
       queue([](model::QueuePolicy& p) { p.user_quota = Cpus(64); }),
       std::nullopt,
       {{genomics_alice, MakeRequest().Cpus(30), 2}},
       genomics_alice,
       MakeRequest().Cpus(8),
       PendingReason{"QuotaExceeded", "user alice uses 60/64 CPUs in ai-training; this job needs 8 (user_quota)"}},
      {"queue+user: another user of the project is not charged",
       queue([](model::QueuePolicy& p) { p.user_quota = Cpus(64); }),
       std::nullopt,
       {{genomics_alice, MakeRequest().Cpus(30), 2}},
       genomics_bob,
       MakeRequest().Cpus(8),
       std::nullopt},
      {"queue+user: memory",
       queue([](model::QueuePolicy& p) { p.user_quota = MemoryMb(4096); }),
       std::nullopt,
       {{genomics_alice, MakeRequest().MemoryMb(3072), 1}},
       genomics_alice,
       MakeRequest().MemoryMb(2048),
       PendingReason{"QuotaExceeded",
                     "user alice uses 3072/4096 MB of memory in ai-training; this job needs 2048 (user_quota)"}},
      {"project over all queues",
       queue([](model::QueuePolicy&) {}),
       project(Gpus(40)),
       {{genomics_alice, eight_gpus, 4}, {{"ai-inference", "genomics", "bob"}, MakeRequest().Gpus(4), 1}},
       genomics_alice,
       eight_gpus,
       PendingReason{"QuotaExceeded",
                     "project genomics uses 36/40 GPUs over all queues; this job needs 8 (projects quota)"}},
      {"project over all queues: within",
       queue([](model::QueuePolicy&) {}),
       project(Gpus(40)),
       {{genomics_alice, eight_gpus, 4}},
       genomics_alice,
       eight_gpus,
       std::nullopt},
      {"queue+project is checked before the project's own quota",
       gpu32,
       project(Gpus(32)),
       {{genomics_alice, eight_gpus, 4}},
       genomics_alice,
       eight_gpus,
       PendingReason{"QuotaExceeded",
                     "project genomics uses 32/32 GPUs in ai-training; this job needs 8 (project_quota)"}},
      {"GPUs are checked before cpus",
       queue([](model::QueuePolicy& p) {
         p.project_quota.cpus = 4;
         p.project_quota.gpus = 8;
       }),
       std::nullopt,
       {{genomics_alice, MakeRequest().Cpus(4).Gpus(8), 1}},
       genomics_alice,
       MakeRequest().Cpus(4).Gpus(8),
       PendingReason{"QuotaExceeded",
                     "project genomics uses 8/8 GPUs in ai-training; this job needs 8 (project_quota)"}},
      {"max_concurrency: at the cap",
       queue([](model::QueuePolicy& p) { p.max_concurrency = 500; }),
       std::nullopt,
       {{{"agent-sandbox", "default", "alice"}, MakeRequest(), 500}},
       {"agent-sandbox", "default", "bob"},
       MakeRequest(),
       PendingReason{"ConcurrencyLimit", "agent-sandbox runs 500/500 jobs (max_concurrency)"}},
      {"max_concurrency: below the cap",
       queue([](model::QueuePolicy& p) { p.max_concurrency = 500; }),
       std::nullopt,
       {{{"agent-sandbox", "default", "alice"}, MakeRequest(), 499}},
       {"agent-sandbox", "default", "bob"},
       MakeRequest(),
       std::nullopt},
      {"max_concurrency counts the queue only",
       queue([](model::QueuePolicy& p) { p.max_concurrency = 1; }),
       std::nullopt,
       {{{"other", "default", "alice"}, MakeRequest(), 10}},
       {"agent-sandbox", "default", "bob"},
       MakeRequest(),
       std::nullopt},
      {"max_concurrency comes before quotas",
       queue([](model::QueuePolicy& p) {
         p.max_concurrency = 1;
         p.project_quota = Jobs(1);
       }),
       std::nullopt,
       {{{"agent-sandbox", "default", "alice"}, MakeRequest(), 1}},
       {"agent-sandbox", "default", "alice"},
       MakeRequest(),
       PendingReason{"ConcurrencyLimit", "agent-sandbox runs 1/1 jobs (max_concurrency)"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    QuotaTally tally;
    for (const auto& r : c.running) AddRunning(tally, r.scope, r.request, r.times);
    const model::ProjectPolicy* project_policy = c.project ? &*c.project : nullptr;
    EXPECT_EQ(CheckLimits(tally, c.scope, c.request, c.queue, project_policy), c.want);
  }
}

TEST(QuotaTest, ExceedsLimitsAlone) {
  model::QueuePolicy queue;
  queue.project_quota = Gpus(32);
  queue.user_quota = Cpus(16);
  queue.max_concurrency = 0;  // concurrency is about the others, never about the job alone
  model::ProjectPolicy project;
  project.name = "genomics";
  project.quota = MemoryMb(65536);
  const JobScope scope{"ai-training", "genomics", "alice"};

  EXPECT_EQ(ExceedsLimitsAlone(scope, MakeRequest().Cpus(4).Gpus(8), queue, &project), std::nullopt);
  EXPECT_EQ(ExceedsLimitsAlone(scope, MakeRequest().Nodes(4).Cpus(4).Gpus(8), queue, &project), std::nullopt);
  EXPECT_EQ(ExceedsLimitsAlone(scope, MakeRequest().Nodes(5).Cpus(2).Gpus(8), queue, &project),
            (PendingReason{"QuotaExceeded",
                           "project genomics uses 0/32 GPUs in ai-training; this job needs 40 (project_quota)"}));
  EXPECT_EQ(
      ExceedsLimitsAlone(scope, MakeRequest().Cpus(17), queue, &project),
      (PendingReason{"QuotaExceeded", "user alice uses 0/16 CPUs in ai-training; this job needs 17 (user_quota)"}));
  EXPECT_EQ(ExceedsLimitsAlone(scope, MakeRequest().MemoryMb(70000), queue, &project),
            (PendingReason{
                "QuotaExceeded",
                "project genomics uses 0/65536 MB of memory over all queues; this job needs 70000 (projects quota)"}));
  EXPECT_EQ(ExceedsLimitsAlone(scope, MakeRequest().MemoryMb(70000), queue, nullptr), std::nullopt);
}

TEST(BudgetTest, PeriodStartsInUtc) {
  // 2026-12-02 (a Wednesday) 15:30:45.5 UTC.
  const Timestamp t = FromUnixMillis(1'796'225'445'500);
  EXPECT_EQ(FormatRfc3339(PeriodStart(model::BudgetPeriod::kDay, t)), "2026-12-02T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339(PeriodStart(model::BudgetPeriod::kWeek, t)), "2026-11-30T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339(PeriodStart(model::BudgetPeriod::kMonth, t)), "2026-12-01T00:00:00.000Z");
  // A Monday starts its own week.
  const Timestamp monday = *ParseRfc3339("2026-11-30T08:00:00Z");
  EXPECT_EQ(FormatRfc3339(PeriodStart(model::BudgetPeriod::kWeek, monday)), "2026-11-30T00:00:00.000Z");
}

TEST(BudgetTest, ExhaustedAtOrOverTheBudget) {
  model::Budget budget;
  budget.gpu_hours = 100;
  budget.cpu_hours = 1000;
  EXPECT_FALSE(CheckBudget("genomics", budget, {99.9, 10}).has_value());
  const auto gpu = CheckBudget("genomics", budget, {100.4, 10});
  ASSERT_TRUE(gpu.has_value());
  EXPECT_EQ(gpu->code, "BudgetExhausted");
  EXPECT_EQ(gpu->message, "project genomics used 100.4/100.0 GPU-hours this month; new jobs wait until the next month");
  budget.period = model::BudgetPeriod::kWeek;
  const auto cpu = CheckBudget("genomics", budget, {0, 1000});
  ASSERT_TRUE(cpu.has_value());
  EXPECT_NE(cpu->message.find("1000.0/1000.0 CPU-hours this week"), std::string::npos) << cpu->message;
  EXPECT_FALSE(CheckBudget("genomics", model::Budget{}, {1e9, 1e9}).has_value());  // no budget
}

}  // namespace
}  // namespace unisched::policy
