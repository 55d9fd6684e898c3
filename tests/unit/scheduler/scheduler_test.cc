// Tests of the scheduling cycle (scheduler.h): ordering by multifactor
// priority, quotas and concurrency caps, backfill (EASY, conservative,
// fcfs), reservations and estimated starts, preemption, and pending
// reasons. Every case is a snapshot built by hand and a fixed `now`.

#include "unisched/scheduler/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "testing/builders.h"

namespace unisched::scheduler {
namespace {

using model::BackfillMode;
using model::NodeState;
using model::PendingReason;
using std::chrono::hours;
using std::chrono::minutes;
using ::testing::ElementsAre;
using testing::EmptyUsage;
using ::testing::IsEmpty;
using testing::MakeCluster;
using testing::MakeNode;
using testing::MakePending;
using testing::MakeQueue;
using testing::MakeRunning;
using testing::MakeSnapshot;
using testing::TestEpoch;

// Later than every builder's default submit time (TestEpoch() + id seconds).
const Timestamp kNow = TestEpoch() + hours(100);

std::vector<model::JobId> StartedIds(const Plan& plan) {
  std::vector<model::JobId> ids;
  for (const auto& s : plan.starts) ids.push_back(s.job);
  return ids;
}

std::vector<PendingReason> Reasons(const Plan& plan, model::JobId id) {
  auto it = plan.pending.find(id);
  return it == plan.pending.end() ? std::vector<PendingReason>{{"<not pending>", ""}} : it->second.Reasons();
}

std::optional<Timestamp> EstimatedStart(const Plan& plan, model::JobId id) {
  auto it = plan.pending.find(id);
  return it == plan.pending.end() ? std::nullopt : it->second.estimated_start;
}

std::map<model::JobId, Timestamp> EstimatedStarts(const Plan& plan) {
  std::map<model::JobId, Timestamp> out;
  for (const auto& [id, info] : plan.pending) {
    if (info.estimated_start) out.emplace(id, *info.estimated_start);
  }
  return out;
}

const Start* StartOf(const Plan& plan, model::JobId id) {
  for (const auto& s : plan.starts) {
    if (s.job == id) return &s;
  }
  return nullptr;
}

Scheduler SchedulerFor(const model::ClusterSpec& cluster) {
  return Scheduler(SchedulerConfig::From(cluster));
}

testing::NodeBuilder Node(std::string name, int cpus = 8) {
  return MakeNode(std::move(name)).Pool("p").Cpus(cpus).MemoryMb(65536);
}

// One pool "p" of `nodes`, one fifo queue "q" (priority = the job's own
// adjustment), the given backfill mode.
model::ClusterSpec FifoPool(std::vector<testing::NodeBuilder> nodes, BackfillMode mode = BackfillMode::kEasy,
                            int depth = 0) {
  auto b = MakeCluster();
  b.Pool("p").Backfill("p", mode, depth);
  for (const auto& n : nodes) b.Node(n);
  b.Queue(MakeQueue("q").Pool("p"));
  return b.Build();
}

// ---- ordering: priority, then submit time, then id ----

TEST(SchedulerOrderTest, PriorityThenFirstComeFirstServed) {
  struct Case {
    std::string name;
    std::vector<PendingJob> pending;  // each asks for the whole node
    model::JobId want_started;
    std::map<std::pair<std::string, std::string>, double> fairshare = {};
  };
  auto job = [](model::JobId id) { return MakePending(id).Cpus(8); };
  const std::vector<Case> cases = {
      {"higher adjustment first", {job(1).Priority(0), job(2).Priority(5).SubmittedAfter(9)}, 2},
      {"a negative adjustment goes last", {job(1).Priority(-1), job(2).SubmittedAfter(100)}, 2},
      {"earlier submission on equal priority", {job(9).SubmittedAfter(1), job(1).SubmittedAfter(2)}, 9},
      {"lower id on equal priority and submission", {job(2).SubmittedAfter(5), job(1).SubmittedAfter(5)}, 1},
      {"a higher queue tier outranks an adjustment", {job(1).Priority(500), job(2).Queue("gold")}, 2},
      {"fairshare: the lighter project first",
       {job(1).Queue("fs").Project("genomics"), job(2).Queue("fs").Project("climate").User("bob")},
       2,
       {{{"genomics", "alice"}, 0.2}, {{"climate", "bob"}, 0.9}}},
      {"fairshare: a pair without a factor counts as 1",
       {job(1).Queue("fs").Project("genomics"), job(2).Queue("fs").Project("physics").User("eve")},
       2,
       {{{"genomics", "alice"}, 0.99}}},
      {"age: a week of waiting outweighs a smaller adjustment",
       {job(1).Queue("quota").SubmittedAt(kNow - hours(168)), job(2).Queue("quota").SubmittedAt(kNow).Priority(999)},
       1},
      {"age: ... but not a larger one",
       {job(1).Queue("quota").SubmittedAt(kNow - hours(168)), job(2).Queue("quota").SubmittedAt(kNow).Priority(1001)},
       2},
  };
  auto b = MakeCluster();
  b.Node(Node("n1"));
  b.Queue(MakeQueue("q").Pool("p"));
  b.Queue(MakeQueue("gold").Pool("p").Tier(1));
  b.Queue(MakeQueue("fs").Pool("p").PolicyType("fairshare"));
  b.Queue(MakeQueue("quota").Pool("p").PolicyType("priority-with-quota"));
  const model::ClusterSpec cluster = b.Build();
  const Scheduler scheduler = SchedulerFor(cluster);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Snapshot snapshot = MakeSnapshot(EmptyUsage(cluster), c.pending);
    snapshot.fairshare = c.fairshare;
    const Plan plan = scheduler.Decide(snapshot, kNow);
    EXPECT_THAT(StartedIds(plan), ElementsAre(c.want_started));
  }
}

TEST(SchedulerOrderTest, PendingJobsShowTheirPriorityFactors) {
  // hpc-precision-like: fairshare defaults (fairshare 10000, age 1000 over a
  // week, tier 10000, size 100). The pool has 64 cpus, all busy.
  auto b = MakeCluster();
  b.Node(Node("n1", 64));
  b.Queue(MakeQueue("hpc").Pool("p").PolicyType("fairshare"));
  const model::ClusterSpec cluster = b.Build();
  Snapshot snapshot =
      MakeSnapshot(EmptyUsage(cluster),
                   {MakePending(7).Queue("hpc").Project("genomics").Cpus(16).SubmittedAt(kNow - hours(84)).Priority(3)},
                   {MakeRunning(1).Queue("hpc").Cpus(64).On("n1").ExpectedEnd(kNow + hours(1))});
  snapshot.fairshare = {{{"genomics", "alice"}, 0.25}};
  const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
  ASSERT_TRUE(plan.pending.count(7));
  // fairshare 0.25 -> 2500; waited half a week -> 500; tier 0 of 0 -> 0;
  // 16 of 64 cpus -> 25; adjustment 3.
  EXPECT_EQ(plan.pending.at(7).priority, (model::PriorityFactors{2500, 500, 0, 25, 3}));
  EXPECT_EQ(plan.pending.at(7).priority.Total(), 3028);
}

// ---- one cycle, table-driven: fitting, reasons, queue position ----

TEST(SchedulerTest, Decisions) {
  using R = PendingReason;
  struct Case {
    std::string name;
    std::vector<model::NodeUsage> nodes;
    std::vector<PendingJob> pending;
    std::vector<model::JobId> want_started;  // in decision order
    std::map<model::JobId, std::vector<R>> want_reasons;
  };
  auto node = [](std::string name) { return MakeNode(std::move(name)).Pool("p").Cpus(8).MemoryMb(16384); };
  const std::vector<Case> cases = {
      {"priority first, then first come first served",
       {node("n1")},
       {MakePending(1).Cpus(8).SubmittedAfter(1), MakePending(2).Cpus(8).SubmittedAfter(2).Priority(10),
        MakePending(3).Cpus(8).SubmittedAfter(0)},
       {2},
       {{3, {{"Resources", "needs 8 cpus on 1 node, at most 0 free on any node of p"}}},
        {1,
         {{"Resources", "needs 8 cpus on 1 node, at most 0 free on any node of p"},
          {"Priority", "1 job ahead in p"}}}}},
      {"a blocked big job does not stop a small one",
       {node("n1").Used(4, 0)},
       {MakePending(1).Cpus(8), MakePending(2).Cpus(2)},
       {2},
       {{1, {{"Resources", "needs 8 cpus on 1 node, at most 4 free on any node of p"}}}}},
      {"a cycle never over-commits a node",
       {node("n1")},
       {MakePending(1).Cpus(4), MakePending(2).Cpus(4), MakePending(3).Cpus(4)},
       {1, 2},
       {{3, {{"Resources", "needs 4 cpus on 1 node, at most 0 free on any node of p"}}}}},
      {"multi-node is all or nothing and leaves the nodes to others",
       {node("n1"), node("n2"), node("n3").Used(2, 0)},
       {MakePending(1).Nodes(3).Cpus(8), MakePending(2).Nodes(2).Cpus(8)},
       {2},
       {{1, {{"Resources", "needs 3 nodes with 8 cpus free, 2 available in p"}}}}},
      // Jobs of one shape share the reason first found in the cycle, even
      // after a start shrank what is free (8 -> 4 here): by design, so that
      // thousands of identical waiting jobs cost one fit; the next cycle
      // refreshes it.
      {"the queue position counts only jobs ahead that wait",
       {node("n1")},
       {MakePending(1).Cpus(16), MakePending(2).Cpus(4), MakePending(3).Cpus(16), MakePending(4).Cpus(16)},
       {2},
       {{1, {{"Resources", "needs 16 cpus on 1 node, at most 8 free on any node of p"}}},
        {3,
         {{"Resources", "needs 16 cpus on 1 node, at most 8 free on any node of p"}, {"Priority", "1 job ahead in p"}}},
        {4,
         {{"Resources", "needs 16 cpus on 1 node, at most 8 free on any node of p"},
          {"Priority", "2 jobs ahead in p"}}}}},
      {"pools are ordered and counted apart",
       {node("n1"), MakeNode("m1").Pool("other").Cpus(4).MemoryMb(8192)},
       {MakePending(1).Cpus(8).Priority(1), MakePending(2).Cpus(8), MakePending(3).Pool("other").Cpus(4),
        MakePending(4).Pool("other").Cpus(8)},
       {3, 1},
       {{2, {{"Resources", "needs 8 cpus on 1 node, at most 0 free on any node of p"}}},
        {4, {{"Resources", "needs 8 cpus on 1 node, at most 0 free on any node of other"}}}}},
      {"nodes that are not up take nothing",
       {node("n1").State(NodeState::kDraining), node("n2").State(NodeState::kDown)},
       {MakePending(1)},
       {},
       {{1, {{"Resources", "needs 1 node, 0 of 2 nodes of p up (n1 draining, n2 down)"}}}}},
      {"constraints pick the node",
       {node("n1").Label("interconnect", "ethernet"), node("n2").Label("interconnect", "ib")},
       {MakePending(1).Cpus(8).Constraint("interconnect", "ib"), MakePending(2).Cpus(8).Constraint("zone", "a")},
       {1},
       {{2, {{"NodeLabelsMismatch", "requires zone=a; no node of p has label zone"}}}}},
      {"a pool with no nodes",
       {node("n1")},
       {MakePending(1).Pool("nowhere")},
       {},
       {{1, {{"Resources", "needs 1 node, nowhere has no nodes"}}}}},
      {"nothing pending", {node("n1")}, {}, {}, {}},
  };
  const Scheduler scheduler;  // no config: every pool easy, every queue fifo
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const Plan plan = scheduler.Decide(MakeSnapshot(c.nodes, c.pending), kNow);
    EXPECT_EQ(StartedIds(plan), c.want_started);
    std::map<model::JobId, std::vector<R>> reasons;
    for (const auto& [id, info] : plan.pending) reasons[id] = info.Reasons();
    EXPECT_EQ(reasons, c.want_reasons);
    EXPECT_EQ(plan.report.considered, static_cast<int>(c.pending.size()));
    EXPECT_EQ(plan.report.started, static_cast<int>(c.want_started.size()));
  }
}

TEST(SchedulerTest, GpuIndicesAreNeverHandedOutTwiceInACycle) {
  const Snapshot snapshot =
      MakeSnapshot({MakeNode("g1").Pool("p").Cpus(32).MemoryMb(65536).Gpus(4, "h100").BusyGpus({1})},
                   {MakePending(1).Gpus(1), MakePending(2).Gpus(2), MakePending(3).Gpus(1)});
  const Plan plan = Scheduler().Decide(snapshot, kNow);
  ASSERT_EQ(plan.starts.size(), 2u);
  EXPECT_THAT(plan.starts[0].allocation[0].gpu_indices, ElementsAre(0));
  EXPECT_THAT(plan.starts[1].allocation[0].gpu_indices, ElementsAre(2, 3));
  EXPECT_EQ(Reasons(plan, 3),
            (std::vector<PendingReason>{{"Resources", "needs 1 GPU on 1 node, at most 0 free on any node of p"}}));
}

// ---- quotas and concurrency caps ----

// The seed's ai-training queue: 32 GPUs per project, never preempted. Six
// nodes of 8 h100; genomics runs four 8-GPU jobs (32 GPUs) on g1..g4.
model::ClusterSpec TrainingCluster(BackfillMode mode = BackfillMode::kEasy) {
  auto b = MakeCluster();
  b.Pool("gpu", model::PoolKind::kGpu).Backfill("gpu", mode);
  for (int i = 1; i <= 6; ++i) {
    b.Node(MakeNode(std::string("g").append(std::to_string(i))).Pool("gpu").Cpus(32).MemoryMb(524288).Gpus(8, "h100"));
  }
  b.Queue(
      MakeQueue("ai-training").Pool("gpu").PolicyType("priority-with-quota").GpuQuotaPerProject(32).Preemptible(false));
  return b.Build();
}

testing::PendingBuilder TrainingJob(model::JobId id, std::string project, int gpus = 8) {
  return MakePending(id)
      .Pool("gpu")
      .Queue("ai-training")
      .Project(std::move(project))
      .Cpus(4)
      .Gpus(gpus)
      .SubmittedAt(kNow);
}

RunningJob RunningTraining(model::JobId id, std::string project, std::string node, Timestamp end) {
  return MakeRunning(id)
      .Pool("gpu")
      .Queue("ai-training")
      .Project(std::move(project))
      .Cpus(4)
      .Gpus(8)
      .StartedAt(kNow - hours(1))
      .ExpectedEnd(end)
      .On(std::move(node));
}

TEST(SchedulerQuotaTest, OverQuotaJobsWaitAndDoNotBlockOthers) {
  const model::ClusterSpec cluster = TrainingCluster();
  std::vector<RunningJob> running;
  for (int i = 1; i <= 4; ++i) {
    running.push_back(
        RunningTraining(100 + i, "genomics", std::string("g").append(std::to_string(i)), kNow + hours(i)));
  }
  const Snapshot snapshot = MakeSnapshot(EmptyUsage(cluster),
                                         {TrainingJob(10, "genomics").Priority(10), TrainingJob(11, "climate"),
                                          TrainingJob(12, "climate"), TrainingJob(13, "climate")},
                                         running);
  const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
  EXPECT_THAT(StartedIds(plan), ElementsAre(11, 12));
  EXPECT_EQ(
      Reasons(plan, 10),
      (std::vector<PendingReason>{
          {"QuotaExceeded", "project genomics uses 32/32 GPUs in ai-training; this job needs 8 (project_quota)"}}));
  // An over-quota job holds nothing: no reservation for it.
  EXPECT_EQ(EstimatedStart(plan, 10), std::nullopt);
  // The first job blocked on resources gets the reservation instead.
  EXPECT_EQ(Reasons(plan, 13),
            (std::vector<PendingReason>{{"Resources", "needs 8 GPUs on 1 node, at most 0 free on any node of gpu"},
                                        {"Priority", "1 job ahead in gpu"}}));
  EXPECT_EQ(EstimatedStart(plan, 13), kNow + hours(1));
}

TEST(SchedulerQuotaTest, StartsInTheSameCycleCountTowardTheQuota) {
  const model::ClusterSpec cluster = TrainingCluster();
  std::vector<RunningJob> running;
  for (int i = 1; i <= 3; ++i)
    running.push_back(
        RunningTraining(100 + i, "genomics", std::string("g").append(std::to_string(i)), kNow + hours(1)));
  const Snapshot snapshot =
      MakeSnapshot(EmptyUsage(cluster),
                   {TrainingJob(20, "genomics"), TrainingJob(21, "genomics"), TrainingJob(22, "genomics", 4)}, running);
  const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
  EXPECT_THAT(StartedIds(plan), ElementsAre(20));
  EXPECT_EQ(
      Reasons(plan, 21),
      (std::vector<PendingReason>{
          {"QuotaExceeded", "project genomics uses 32/32 GPUs in ai-training; this job needs 8 (project_quota)"}}));
  EXPECT_EQ(Reasons(plan, 22),
            (std::vector<PendingReason>{
                {"QuotaExceeded", "project genomics uses 32/32 GPUs in ai-training; this job needs 4 (project_quota)"},
                {"Priority", "1 job ahead in gpu"}}));
}

TEST(SchedulerQuotaTest, AnOverQuotaHeadDoesNotBlockAStrictFifoPool) {
  const model::ClusterSpec cluster = TrainingCluster(BackfillMode::kFcfs);
  std::vector<RunningJob> running;
  for (int i = 1; i <= 4; ++i)
    running.push_back(
        RunningTraining(100 + i, "genomics", std::string("g").append(std::to_string(i)), kNow + hours(1)));
  const Snapshot snapshot = MakeSnapshot(
      EmptyUsage(cluster), {TrainingJob(10, "genomics").Priority(10), TrainingJob(11, "climate")}, running);
  const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
  EXPECT_THAT(StartedIds(plan), ElementsAre(11));
  EXPECT_EQ(Reasons(plan, 10).front().code, "QuotaExceeded");
}

// Project genomics, limited to 16 CPUs over all queues.
model::ProjectPolicy GenomicsOf16Cpus() {
  model::ProjectPolicy genomics;
  genomics.name = "genomics";
  genomics.quota.cpus = 16;
  return genomics;
}

TEST(SchedulerQuotaTest, UserAndProjectQuotas) {
  model::ResourceLimits two_jobs;
  two_jobs.running_jobs = 2;
  auto b = MakeCluster();
  b.Node(Node("n1", 64)).Node(Node("n2", 64));
  b.Queue(MakeQueue("q").Pool("p").UserQuota(two_jobs));
  b.Queue(MakeQueue("other").Pool("p"));
  b.Project(GenomicsOf16Cpus());
  const model::ClusterSpec cluster = b.Build();
  const Snapshot snapshot =
      MakeSnapshot(EmptyUsage(cluster),
                   {MakePending(1).User("alice"), MakePending(2).User("alice"), MakePending(3).User("alice"),
                    MakePending(4).User("bob"), MakePending(5).Queue("other").Project("genomics").Cpus(10),
                    MakePending(6).Queue("other").Project("genomics").Cpus(8)},
                   {MakeRunning(50).Queue("q").Project("genomics").User("carol").Cpus(4).On("n1")});
  const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
  EXPECT_THAT(StartedIds(plan), ElementsAre(1, 2, 4, 5));
  EXPECT_EQ(Reasons(plan, 3),
            (std::vector<PendingReason>{
                {"QuotaExceeded", "user alice uses 2/2 running jobs in q; this job needs 1 (user_quota)"}}));
  // carol's 4 cpus in q count toward genomics over all queues: 4 + 10 + 8 > 16.
  EXPECT_EQ(
      Reasons(plan, 6),
      (std::vector<PendingReason>{
          {"QuotaExceeded", "project genomics uses 14/16 CPUs over all queues; this job needs 8 (projects quota)"},
          {"Priority", "1 job ahead in p"}}));
}

// The cycle tallies a running job only where a limit reads it (its queue's
// or its project's): a job in a queue without limits still counts toward
// its project's quota.
TEST(SchedulerQuotaTest, ARunningJobCountsTowardItsProjectsQuotaFromAQueueWithoutLimits) {
  auto b = MakeCluster();
  b.Node(Node("n1", 64));
  b.Queue(MakeQueue("free").Pool("p"));
  b.Project(GenomicsOf16Cpus());
  const model::ClusterSpec cluster = b.Build();
  const Snapshot snapshot = MakeSnapshot(EmptyUsage(cluster),
                                         {MakePending(1).Queue("free").Project("genomics").Cpus(8),
                                          MakePending(2).Queue("free").Project("climate").Cpus(8)},
                                         {MakeRunning(50).Queue("free").Project("genomics").Cpus(10).On("n1"),
                                          MakeRunning(51).Queue("free").Project("climate").Cpus(30).On("n1")});
  const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
  EXPECT_THAT(StartedIds(plan), ElementsAre(2));
  EXPECT_EQ(
      Reasons(plan, 1),
      (std::vector<PendingReason>{
          {"QuotaExceeded", "project genomics uses 10/16 CPUs over all queues; this job needs 8 (projects quota)"}}));
}

TEST(SchedulerQuotaTest, MaxConcurrencyCapsTheQueueOnly) {
  auto b = MakeCluster();
  b.Node(MakeNode("e1").Pool("el").Cpus(256).MemoryMb(1048576));
  b.Queue(MakeQueue("agent-sandbox").Pool("el").PolicyType("elastic").MaxConcurrency(3));
  b.Queue(MakeQueue("other").Pool("el"));
  const model::ClusterSpec cluster = b.Build();
  auto agent = [](model::JobId id) { return MakePending(id).Pool("el").Queue("agent-sandbox"); };
  const Snapshot snapshot =
      MakeSnapshot(EmptyUsage(cluster), {agent(1), agent(2), agent(3), MakePending(4).Pool("el").Queue("other")},
                   {MakeRunning(90).Pool("el").Queue("agent-sandbox").On("e1"),
                    MakeRunning(91).Pool("el").Queue("agent-sandbox").On("e1")});
  const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
  EXPECT_THAT(StartedIds(plan), ElementsAre(1, 4));
  EXPECT_EQ(Reasons(plan, 2),
            (std::vector<PendingReason>{{"ConcurrencyLimit", "agent-sandbox runs 3/3 jobs (max_concurrency)"}}));
  EXPECT_EQ(Reasons(plan, 3),
            (std::vector<PendingReason>{{"ConcurrencyLimit", "agent-sandbox runs 3/3 jobs (max_concurrency)"},
                                        {"Priority", "1 job ahead in el"}}));
  EXPECT_EQ(EstimatedStart(plan, 2), std::nullopt);
}

// ---- pools whose backend places jobs (docs/adr/0006-pool-backend-port.md) ----

TEST(SchedulerBackendPlacementTest, AdmittedJobsStartWithNoAllocationAndLimitsStillHold) {
  auto b = MakeCluster();
  b.Pool("far");
  b.Queue(MakeQueue("q").Pool("far").MaxConcurrency(2));
  model::ClusterSpec cluster = b.Build();
  cluster.pools.at(0).backend = "slurm-west";  // no nodes here: the backend places
  auto job = [](model::JobId id) { return MakePending(id).Pool("far").Queue("q").Cpus(512); };
  const Snapshot snapshot = MakeSnapshot(EmptyUsage(cluster), {job(1), job(2), job(3)}, {});
  const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
  // Far more CPUs than any node here has: what fits is the backend's call.
  EXPECT_THAT(StartedIds(plan), ElementsAre(1, 2));
  ASSERT_NE(StartOf(plan, 1), nullptr);
  EXPECT_TRUE(StartOf(plan, 1)->allocation.empty());
  EXPECT_EQ(Reasons(plan, 3), (std::vector<PendingReason>{{"ConcurrencyLimit", "q runs 2/2 jobs (max_concurrency)"}}));
  EXPECT_EQ(EstimatedStart(plan, 3), std::nullopt);
  EXPECT_TRUE(plan.reservations.empty());
}

// ---- backfill ----

TEST(SchedulerBackfillTest, EasyShortJobsBackfillLongOnesWait) {
  // n1 has 12 cpus; a running job holds 4 until +1 h. The head needs all 12
  // for 2 h: reserved at +1 h. Free now: 8 cpus, until +1 h.
  const model::ClusterSpec cluster = FifoPool({Node("n1", 12)});
  const Snapshot snapshot = MakeSnapshot(EmptyUsage(cluster),
                                         {
                                             MakePending(1).Cpus(12).WalltimeSeconds(7200).Priority(10),  // head
                                             MakePending(2).Cpus(4).WalltimeSeconds(7200).Priority(5),    // too long
                                             MakePending(3).Cpus(1).WalltimeSeconds(0).Priority(3),       // no limit
                                             MakePending(4).Cpus(4).WalltimeSeconds(1800).Priority(0),    // short
                                             MakePending(5).Cpus(4).WalltimeSeconds(3600).Priority(-1),  // ends at +1 h
                                         },
                                         {MakeRunning(90).Cpus(4).On("n1").ExpectedEnd(kNow + hours(1))});
  const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
  EXPECT_THAT(StartedIds(plan), ElementsAre(4, 5));
  EXPECT_EQ(EstimatedStarts(plan), (std::map<model::JobId, Timestamp>{{1, kNow + hours(1)}}));
  EXPECT_EQ(Reasons(plan, 1),
            (std::vector<PendingReason>{{"Resources", "needs 12 cpus on 1 node, at most 8 free on any node of p"}}));
  const PendingReason reserved{"ReservedForJob",
                               "the room it fits in now is reserved from its start for job 1 (a higher-priority job); "
                               "it would not end before that start"};
  EXPECT_EQ(Reasons(plan, 2), (std::vector<PendingReason>{reserved, {"Priority", "1 job ahead in p"}}));
  EXPECT_EQ(Reasons(plan, 3), (std::vector<PendingReason>{reserved, {"Priority", "2 jobs ahead in p"}}));
  EXPECT_EQ(plan.report.reservations, 1);
}

TEST(SchedulerBackfillTest, AJobThatFitsNowhereIsToldWhatIsShortNotThatThePoolIsEmpty) {
  // n1: 2 of 8 cpus free until +1 h, then reserved for the head. A 4-cpu
  // job fits neither now nor before the reservation: its reason must say
  // how much is free, as it would without any reservation.
  const model::ClusterSpec cluster = FifoPool({Node("n1")});
  const Snapshot snapshot = MakeSnapshot(
      EmptyUsage(cluster), {MakePending(1).Cpus(8).Priority(10), MakePending(2).Cpus(4).WalltimeSeconds(1800)},
      {MakeRunning(90).Cpus(6).On("n1").ExpectedEnd(kNow + hours(1))});
  const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
  EXPECT_THAT(StartedIds(plan), IsEmpty());
  EXPECT_EQ(Reasons(plan, 2),
            (std::vector<PendingReason>{{"Resources", "needs 4 cpus on 1 node, at most 2 free on any node of p"},
                                        {"Priority", "1 job ahead in p"}}));
}

TEST(SchedulerBackfillTest, FcfsNothingPassesABlockedHead) {
  const model::ClusterSpec cluster = FifoPool({Node("n1"), Node("n2")}, BackfillMode::kFcfs);
  const Snapshot snapshot = MakeSnapshot(
      EmptyUsage(cluster),
      {MakePending(1).Cpus(2), MakePending(2).Nodes(2).Cpus(8), MakePending(3).Cpus(1).WalltimeSeconds(60)},
      {MakeRunning(90).Cpus(4).On("n1").ExpectedEnd(kNow + hours(1))});
  const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
  EXPECT_THAT(StartedIds(plan), ElementsAre(1));  // the head of the queue starts; then 2 blocks it
  EXPECT_EQ(Reasons(plan, 2),
            (std::vector<PendingReason>{{"Resources", "needs 2 nodes with 8 cpus free, 1 available in p"}}));
  EXPECT_EQ(Reasons(plan, 3), (std::vector<PendingReason>{{"Priority", "1 job ahead in p"}}));
  EXPECT_THAT(EstimatedStarts(plan), IsEmpty());  // fcfs makes no reservations
}

// Conservative backfill. n1: 8 cpus busy until +60 min. n2: 4 of 8 busy
// until +90 min. A (8 cpus, 1 h) fits first on n1 at +60; B (8 cpus, 1 h)
// then on n2 at +90; C (4 cpus, 3 h) after A on n1 at +120; D (4 cpus,
// 30 min) fits in n2's hole now.
TEST(SchedulerBackfillTest, ConservativeReservesForEveryBlockedJobUpToTheDepth) {
  struct Case {
    std::string name;
    BackfillMode mode;
    int depth;
    std::vector<model::JobId> want_started;
    std::map<model::JobId, Timestamp> want_estimates;
  };
  const std::vector<Case> cases = {
      {"easy: only A is protected, so C takes n2", BackfillMode::kEasy, 0, {3}, {{1, kNow + minutes(60)}}},
      {"conservative, every job",
       BackfillMode::kConservative,
       0,
       {4},
       {{1, kNow + minutes(60)}, {2, kNow + minutes(90)}, {3, kNow + minutes(120)}}},
      {"conservative, depth 1 is EASY", BackfillMode::kConservative, 1, {3}, {{1, kNow + minutes(60)}}},
      {"conservative, depth 2",
       BackfillMode::kConservative,
       2,
       {4},
       {{1, kNow + minutes(60)}, {2, kNow + minutes(90)}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const model::ClusterSpec cluster = FifoPool({Node("n1"), Node("n2")}, c.mode, c.depth);
    const Snapshot snapshot = MakeSnapshot(EmptyUsage(cluster),
                                           {MakePending(1).Cpus(8).WalltimeSeconds(3600).Priority(30),
                                            MakePending(2).Cpus(8).WalltimeSeconds(3600).Priority(20),
                                            MakePending(3).Cpus(4).WalltimeSeconds(3 * 3600).Priority(10),
                                            MakePending(4).Cpus(4).WalltimeSeconds(1800).Priority(0)},
                                           {MakeRunning(90).Cpus(8).On("n1").ExpectedEnd(kNow + minutes(60)),
                                            MakeRunning(91).Cpus(4).On("n2").ExpectedEnd(kNow + minutes(90))});
    const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
    EXPECT_EQ(StartedIds(plan), c.want_started);
    EXPECT_EQ(EstimatedStarts(plan), c.want_estimates);
    EXPECT_EQ(plan.report.reservations, static_cast<int>(c.want_estimates.size()));
    for (model::JobId id : {3, 4}) {
      if (StartOf(plan, id) == nullptr) {
        // Waiting while it would fit now: the room is held for a reservation.
        const std::string code = Reasons(plan, id).front().code;
        EXPECT_TRUE(code == "ReservedForJob" || code == "Resources") << id << ": " << code;
      }
    }
  }
}

// A job whose previous reservation blocked an identical request earlier in
// the walk gets its room back when its turn comes, and starts now if it fits
// there. n1 (4 cpus) is empty. Job 2 (4 cpus, 30 min) holds a reservation from
// +10 min; job 1, the same request with a higher priority, cannot start now
// (it would run into that reservation) and is reserved at +40. Job 2 gives its
// room back and fits now: it starts (the trace replay's job 580 of KTH, which
// pyss starts at 897652 s). A cycle that took job 1's failure for every job of
// its shape left job 2 waiting with an estimated start of now.
TEST(SchedulerBackfillTest, AJobGivingBackItsReservationStartsWhereAnIdenticalRequestCouldNot) {
  const model::ClusterSpec cluster = FifoPool({Node("n1", 4)}, BackfillMode::kConservative);
  for (bool move : {true, false}) {
    SCOPED_TRACE(move ? "reservations move" : "reservations stay (an arrival in the replay)");
    Snapshot snapshot = MakeSnapshot(EmptyUsage(cluster), {MakePending(1).Cpus(4).WalltimeSeconds(1800).Priority(10),
                                                           MakePending(2).Cpus(4).WalltimeSeconds(1800)});
    snapshot.pending[1].reserved_start = kNow + minutes(10);
    snapshot.pending[1].reserved_nodes = {"n1"};
    snapshot.move_reservations = move;
    const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
    if (move) {
      EXPECT_THAT(StartedIds(plan), ElementsAre(2));
      EXPECT_EQ(EstimatedStarts(plan), (std::map<model::JobId, Timestamp>{{1, kNow + minutes(40)}}));
    } else {
      // Kept where it was: job 2 waits for +10 min, job 1 after it.
      EXPECT_THAT(StartedIds(plan), IsEmpty());
      EXPECT_EQ(EstimatedStarts(plan),
                (std::map<model::JobId, Timestamp>{{1, kNow + minutes(40)}, {2, kNow + minutes(10)}}));
    }
  }
}

// Previous reservations are held again at once when they all still fit, and
// one by one, in priority order, when they do not. n1 (4 cpus) is busy until
// +30 min: job 90's time limit was raised since job 1 (4 cpus, 20 min) was
// reserved from +10, which now overlaps it. Job 2 (2 cpus, 10 min, from +50)
// and job 3 (2 cpus, 10 min, from +70) still fit. Job 1 is placed afresh at
// +30; jobs 2 and 3 keep theirs.
TEST(SchedulerBackfillTest, PreviousReservationsThatNoLongerFitTogetherArePlacedAfresh) {
  const model::ClusterSpec cluster = FifoPool({Node("n1", 4)}, BackfillMode::kConservative);
  for (bool move : {true, false}) {
    for (bool replay : {false, true}) {
      SCOPED_TRACE(move ? "reservations move" : "reservations stay");
      // As a replay hands it: in the caller's order, nothing explained (job 1
      // is then ranked without its scope and shape, found when it is not kept).
      SCOPED_TRACE(replay ? "in the caller's order, unexplained" : "ranked here");
      Snapshot snapshot = MakeSnapshot(EmptyUsage(cluster),
                                       {MakePending(1).Cpus(4).WalltimeSeconds(1200).Priority(30),
                                        MakePending(2).Cpus(2).WalltimeSeconds(600).Priority(20),
                                        MakePending(3).Cpus(2).WalltimeSeconds(600).Priority(10)},
                                       {MakeRunning(90).Cpus(4).On("n1").ExpectedEnd(kNow + minutes(30))});
      const std::vector<minutes> previous = {minutes(10), minutes(50), minutes(70)};
      for (size_t k = 0; k < previous.size(); ++k) {
        snapshot.pending[k].reserved_start = kNow + previous[k];
        snapshot.pending[k].reserved_nodes = {"n1"};
      }
      snapshot.move_reservations = move;
      if (replay) {
        snapshot.pending_order = {0, 1, 2};
        snapshot.explain = false;
      }
      const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
      EXPECT_THAT(StartedIds(plan), IsEmpty());
      std::map<model::JobId, Timestamp> reserved;
      for (const auto& r : plan.reservations) reserved.emplace(r.job, r.start);
      // Moving, jobs 2 and 3 fit beside each other from +50 (each 2 of 4 cpus).
      const std::map<model::JobId, Timestamp> want = {
          {1, kNow + minutes(30)}, {2, kNow + minutes(50)}, {3, kNow + (move ? minutes(50) : minutes(70))}};
      EXPECT_EQ(reserved, want);
      if (!replay) {
        EXPECT_EQ(EstimatedStarts(plan), want);
      }
    }
  }
}

// Predicted run times (PoolSpec::predict_run_times; planned_share 1 here so
// the figures read directly). n1 (8 cpus): job 90 holds 4 of them, asked for
// 10 h, predicted to run 1 h. Head H (8 cpus, 1 h) waits for job 90; B (4
// cpus, 2 h asked, 90 min predicted) and the two short ones S1 (4 cpus, 40 min
// predicted) and S2 (4 cpus, 10 min predicted, lower priority) compete for the
// 4 free cpus.
TEST(SchedulerBackfillTest, PredictedRunTimesPlanHolesAndShadowsAndBackfillTheShortestFirst) {
  struct Case {
    std::string name;
    bool predicts;
    int started_minutes_ago;  // job 90
    std::vector<model::JobId> want_started;
    Timestamp want_head_estimate;
  };
  constexpr model::JobId kHead = 1, kB = 2, kS1 = 3, kS2 = 4;
  const std::vector<Case> cases = {
      {"requests: the head waits for job 90's 10 h; B, first in order, fits before that",
       false,
       10,
       {kB},
       kNow + hours(10) - minutes(10)},
      {"predictions: the head waits 50 min; B would run past that; the shortest first: S2",
       true,
       10,
       {kS2},
       kNow + minutes(50)},
      {"job 90 outlived its 1 h by 10 min: planned to 1 h 15 (+ 15 min), so the head waits 5 min and "
       "nothing fits before",
       true,
       70,
       {},
       kNow + minutes(5)},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    model::ClusterSpec cluster = FifoPool({Node("n1")}, BackfillMode::kEasy);
    cluster.pools[0].predict_run_times = c.predicts;
    cluster.pools[0].planned_share = 1.0;
    const Snapshot snapshot =
        MakeSnapshot(EmptyUsage(cluster),
                     {MakePending(kHead).Cpus(8).WalltimeSeconds(3600).Priority(40),
                      MakePending(kB).Cpus(4).WalltimeSeconds(7200).PredictedRunSeconds(5400).Priority(30),
                      MakePending(kS1).Cpus(4).WalltimeSeconds(7200).PredictedRunSeconds(2400).Priority(20),
                      MakePending(kS2).Cpus(4).WalltimeSeconds(7200).PredictedRunSeconds(600).Priority(10)},
                     {MakeRunning(90)
                          .Cpus(4)
                          .On("n1")
                          .StartedAt(kNow - minutes(c.started_minutes_ago))
                          .WalltimeSeconds(10 * 3600)
                          .PredictedRunSeconds(3600)});
    const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
    EXPECT_EQ(StartedIds(plan), c.want_started);
    EXPECT_EQ(EstimatedStart(plan, kHead), c.want_head_estimate);
    // What a pending job is planned with is shown beside its estimate, and
    // only where the pool plans with predictions.
    ASSERT_TRUE(plan.pending.count(kS1));
    EXPECT_EQ(plan.pending.at(kS1).predicted_run_seconds, c.predicts ? 2400 : 0);
  }
}

// The share of a prediction a pool plans with: a fifth by default.
TEST(SchedulerBackfillTest, APoolPlansWithItsShareOfEachPrediction) {
  model::ClusterSpec cluster = FifoPool({Node("n1")}, BackfillMode::kEasy);
  cluster.pools[0].predict_run_times = true;  // planned_share: the default
  const Snapshot snapshot =
      MakeSnapshot(EmptyUsage(cluster), {MakePending(1).Cpus(8).WalltimeSeconds(3600)},
                   {MakeRunning(90).Cpus(8).On("n1").StartedAt(kNow).WalltimeSeconds(36000).PredictedRunSeconds(5000)});
  const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
  EXPECT_EQ(EstimatedStart(plan, 1), kNow + std::chrono::seconds(1000));  // 0.2 x 5000 s
}

// ReservedForJob names the first reservation of the cycle, not the one whose
// room the job would take. In conservative mode these differ: job 3 fits now
// on n2 and waits because of job 2's reservation there, yet is told job 1.
// Known issue, reported; enable once reservations remember their owner per node.
TEST(SchedulerBackfillTest, ReservedForJobNamesTheReservationInTheWay) {
  const model::ClusterSpec cluster = FifoPool({Node("n1"), Node("n2")}, BackfillMode::kConservative, 2);
  const Snapshot snapshot = MakeSnapshot(EmptyUsage(cluster),
                                         {MakePending(1).Cpus(8).WalltimeSeconds(3600).Priority(30),
                                          MakePending(2).Cpus(8).WalltimeSeconds(3600).Priority(20),
                                          MakePending(3).Cpus(4).WalltimeSeconds(3 * 3600).Priority(10)},
                                         {MakeRunning(90).Cpus(8).On("n1").ExpectedEnd(kNow + minutes(60)),
                                          MakeRunning(91).Cpus(4).On("n2").ExpectedEnd(kNow + minutes(90))});
  const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
  ASSERT_EQ(Reasons(plan, 3).front().code, "ReservedForJob");
  EXPECT_THAT(Reasons(plan, 3).front().message, ::testing::HasSubstr("for job 2 "));
}

TEST(SchedulerBackfillTest, AJobBlockedOnOneGpuModelNeverStallsOtherModels) {
  // Kueue users' complaint: one blocked head leaving GPUs of another model
  // idle. h1's h100s are busy for 2 h; a1 and a2's a100s are free.
  struct Case {
    BackfillMode mode;
    std::vector<model::JobId> want_started;
  };
  for (const auto& c : std::vector<Case>{
           {BackfillMode::kEasy, {2, 3, 4}}, {BackfillMode::kConservative, {2, 3, 4}}, {BackfillMode::kFcfs, {}}}) {
    SCOPED_TRACE(std::string(model::ToString(c.mode)));
    auto b = MakeCluster();
    b.Pool("gpu", model::PoolKind::kGpu).Backfill("gpu", c.mode);
    b.Node(MakeNode("h1").Pool("gpu").Cpus(32).MemoryMb(262144).Gpus(8, "h100"));
    b.Node(MakeNode("a1").Pool("gpu").Cpus(32).MemoryMb(262144).Gpus(8, "a100"));
    b.Node(MakeNode("a2").Pool("gpu").Cpus(32).MemoryMb(262144).Gpus(8, "a100"));
    b.Queue(MakeQueue("q").Pool("gpu"));
    const model::ClusterSpec cluster = b.Build();
    auto job = [](model::JobId id) { return MakePending(id).Pool("gpu").Cpus(4); };
    const Snapshot snapshot = MakeSnapshot(
        EmptyUsage(cluster),
        {job(1).Gpus(8, "h100").WalltimeSeconds(3600).Priority(10), job(2).Gpus(4, "a100").WalltimeSeconds(24 * 3600),
         job(3).Gpus(8, "a100").WalltimeSeconds(0), job(4).Gpus(4).WalltimeSeconds(48 * 3600)},
        {MakeRunning(90).Pool("gpu").Cpus(4).Gpus(8, "h100").On("h1").ExpectedEnd(kNow + hours(2))});
    const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
    EXPECT_EQ(StartedIds(plan), c.want_started);
    if (c.mode != BackfillMode::kFcfs) {
      EXPECT_EQ(EstimatedStart(plan, 1), kNow + hours(2));
      EXPECT_EQ(StartOf(plan, 2)->allocation[0].node, "a1");
      EXPECT_EQ(StartOf(plan, 3)->allocation[0].node, "a2");
      EXPECT_EQ(StartOf(plan, 4)->allocation[0].node, "a1");
    }
  }
}

// A node with two GPU models: its h100s are busy for 1 h, its a100s free.
// The h100 job cannot start before +1 h, but availability counts GPUs of
// any model, so its estimated start comes out as now. Known issue,
// reported; enable once availability counts GPUs per model.
TEST(SchedulerBackfillTest, DISABLED_EstimatedStartOnAMixedGpuNodeWaitsForTheRightModel) {
  auto b = MakeCluster();
  b.Node(MakeNode("m1").Pool("p").Cpus(32).MemoryMb(262144).Gpus(4, "h100").Gpus(4, "a100"));
  b.Queue(MakeQueue("q").Pool("p"));
  const model::ClusterSpec cluster = b.Build();
  const Snapshot snapshot =
      MakeSnapshot(EmptyUsage(cluster), {MakePending(1).Cpus(4).Gpus(4, "h100")},
                   {MakeRunning(90).Cpus(4).Gpus(4, "h100").On("m1", {0, 1, 2, 3}).ExpectedEnd(kNow + hours(1))});
  const Plan plan = SchedulerFor(cluster).Decide(snapshot, kNow);
  EXPECT_EQ(EstimatedStart(plan, 1), kNow + hours(1));
}

TEST(SchedulerBackfillTest, MultiNodeReservationsAreAllOrNothing) {
  // n1 busy until +1 h, n2 until +2 h, n3 free.
  const std::vector<RunningJob> running = {MakeRunning(90).Cpus(8).On("n1").ExpectedEnd(kNow + hours(1)),
                                           MakeRunning(91).Cpus(8).On("n2").ExpectedEnd(kNow + hours(2))};
  const model::ClusterSpec cluster = FifoPool({Node("n1"), Node("n2"), Node("n3")});
  const Scheduler scheduler = SchedulerFor(cluster);
  {
    SCOPED_TRACE("three nodes: all free at +2 h; n3 is free until then");
    const Plan plan = scheduler.Decide(MakeSnapshot(EmptyUsage(cluster),
                                                    {MakePending(1).Nodes(3).Cpus(8).Priority(10),
                                                     MakePending(2).Cpus(8).WalltimeSeconds(3 * 3600).Priority(5),
                                                     MakePending(3).Cpus(8).WalltimeSeconds(2 * 3600)},
                                                    running),
                                       kNow);
    EXPECT_THAT(StartedIds(plan), ElementsAre(3));
    EXPECT_EQ(StartOf(plan, 3)->allocation[0].node, "n3");
    EXPECT_EQ(EstimatedStart(plan, 1), kNow + hours(2));
    EXPECT_EQ(Reasons(plan, 2).front().code, "ReservedForJob");
  }
  {
    SCOPED_TRACE("two nodes: n1 and n3 at +1 h, and n3 is held from then");
    const Plan plan = scheduler.Decide(MakeSnapshot(EmptyUsage(cluster),
                                                    {MakePending(1).Nodes(2).Cpus(8).Priority(10),
                                                     MakePending(2).Cpus(8).WalltimeSeconds(2 * 3600).Priority(5),
                                                     MakePending(3).Cpus(8).WalltimeSeconds(3600)},
                                                    running),
                                       kNow);
    EXPECT_THAT(StartedIds(plan), ElementsAre(3));
    EXPECT_EQ(EstimatedStart(plan, 1), kNow + hours(1));
    EXPECT_EQ(Reasons(plan, 2).front().code, "ReservedForJob");
  }
  {
    SCOPED_TRACE("more nodes than the pool has: no reservation, nothing held");
    const Plan plan = scheduler.Decide(
        MakeSnapshot(EmptyUsage(cluster),
                     {MakePending(1).Nodes(4).Cpus(8).Priority(10), MakePending(2).Cpus(8).WalltimeSeconds(0)},
                     running),
        kNow);
    EXPECT_THAT(StartedIds(plan), ElementsAre(2));
    EXPECT_EQ(EstimatedStart(plan, 1), std::nullopt);
  }
}

TEST(SchedulerBackfillTest, AnOverrunningJobCountsAsEndingNow) {
  // The running job's end is in the past (it is in its kill grace): the
  // head's estimated start is now, not in the past.
  const model::ClusterSpec cluster = FifoPool({Node("n1")});
  const Plan plan =
      SchedulerFor(cluster).Decide(MakeSnapshot(EmptyUsage(cluster), {MakePending(1).Cpus(8)},
                                                {MakeRunning(90).Cpus(8).On("n1").ExpectedEnd(kNow - minutes(5))}),
                                   kNow);
  EXPECT_THAT(StartedIds(plan), IsEmpty());
  EXPECT_EQ(EstimatedStart(plan, 1), kNow);
}

// A job asking for more nodes than its pool has, without constraints, is
// told "NodeLabelsMismatch: needs 4 nodes with , 3 in p" by model::Fit:
// wrong code and an empty label list. Known issue in src/model/fit.cc,
// reported; enable once the fitter explains it as a Resources shortfall.
TEST(SchedulerTest, MoreNodesThanThePoolHasIsAResourcesShortfall) {
  const model::ClusterSpec cluster = FifoPool({Node("n1"), Node("n2"), Node("n3")});
  const Plan plan = SchedulerFor(cluster).Decide(MakeSnapshot(EmptyUsage(cluster), {MakePending(1).Nodes(4)}), kNow);
  ASSERT_EQ(Reasons(plan, 1).size(), 1u);
  EXPECT_EQ(Reasons(plan, 1)[0].code, "Resources");
  EXPECT_THAT(Reasons(plan, 1)[0].message, ::testing::Not(::testing::HasSubstr("with ,")));
}

TEST(SchedulerBackfillTest, AReservationFromNowIsHeldToo) {
  // n1's job is past its end (in its kill grace): the profile frees its room
  // now, but it still holds it. The 2-node head cannot start, and is
  // reserved from now on n1 and n2. A long job must not take n2 meanwhile.
  const model::ClusterSpec cluster = FifoPool({Node("n1"), Node("n2")});
  const Plan plan = SchedulerFor(cluster).Decide(
      MakeSnapshot(EmptyUsage(cluster),
                   {MakePending(1).Nodes(2).Cpus(8).Priority(10), MakePending(2).Cpus(4).WalltimeSeconds(7200),
                    MakePending(3).Cpus(4).WalltimeSeconds(0)},
                   {MakeRunning(90).Cpus(8).On("n1").ExpectedEnd(kNow - minutes(5))}),
      kNow);
  EXPECT_THAT(StartedIds(plan), IsEmpty());
  EXPECT_EQ(EstimatedStart(plan, 1), kNow);
  EXPECT_EQ(Reasons(plan, 2).front().code, "ReservedForJob");
  EXPECT_EQ(Reasons(plan, 3).front().code, "ReservedForJob");
}

// ---- preemption ----

// Pool p: n1, n2 of 8 cpus. Queues (all fifo, so priority = adjustment):
//   urgent  may preempt
//   batch   preemptible, requeue after 45 s of grace
//   scratch preemptible, cancelled after 5 s
//   train   not preemptible
model::ClusterSpec PreemptionCluster() {
  auto b = MakeCluster();
  b.Node(Node("n1")).Node(Node("n2"));
  b.Queue(MakeQueue("urgent").Pool("p").CanPreempt(true));
  b.Queue(MakeQueue("batch").Pool("p").PreemptGraceSeconds(45));
  b.Queue(MakeQueue("scratch").Pool("p").PreemptAction(model::PreemptAction::kCancel).PreemptGraceSeconds(5));
  b.Queue(MakeQueue("train").Pool("p").Preemptible(false));
  return b.Build();
}

testing::RunningBuilder Victim(model::JobId id, std::string queue, int cpus, std::string node, int adjustment = 0) {
  return MakeRunning(id)
      .Queue(std::move(queue))
      .Cpus(cpus)
      .Priority(adjustment)
      .StartedAt(kNow - hours(1))
      .ExpectedEnd(kNow + hours(5))
      .On(std::move(node));
}

std::vector<std::pair<model::JobId, model::JobId>> VictimPairs(const Plan& plan) {
  std::vector<std::pair<model::JobId, model::JobId>> out;
  for (const auto& p : plan.preemptions) out.emplace_back(p.victim, p.preemptor);
  return out;
}

TEST(SchedulerPreemptionTest, WhoIsPreempted) {
  using Pairs = std::vector<std::pair<model::JobId, model::JobId>>;
  struct Case {
    std::string name;
    std::vector<PendingJob> pending;
    std::vector<RunningJob> running;
    Pairs want;
    std::vector<model::JobId> want_started = {};
  };
  auto urgent = [](model::JobId id) { return MakePending(id).Queue("urgent").Cpus(8).Priority(100); };
  const std::vector<Case> cases = {
      {"the lowest priority goes",
       {urgent(1)},
       {Victim(10, "batch", 8, "n1", 5), Victim(11, "batch", 8, "n2", 1)},
       {{11, 1}}},
      {"on equal priority, the most recently started",
       {urgent(1)},
       {Victim(10, "batch", 8, "n1").StartedAt(kNow - minutes(10)),
        Victim(11, "batch", 8, "n2").StartedAt(kNow - hours(2))},
       {{10, 1}}},
      {"on equal priority and start, the highest id",
       {urgent(1)},
       {Victim(10, "batch", 8, "n1"), Victim(11, "batch", 8, "n2")},
       {{11, 1}}},
      {"the fewest: a victim whose room is not needed is reprieved",
       {urgent(1)},
       {Victim(10, "batch", 4, "n1", 1), Victim(12, "train", 4, "n1", -50), Victim(11, "batch", 8, "n2", 2)},
       {{11, 1}}},
      {"as many as one node needs",
       {urgent(1)},
       {Victim(10, "batch", 4, "n1", 1), Victim(11, "batch", 4, "n1", 2), Victim(12, "train", 8, "n2", -50)},
       {{10, 1}, {11, 1}}},
      {"never a non-preemptible queue's job",
       {urgent(1)},
       {Victim(10, "train", 8, "n1", -50), Victim(11, "train", 8, "n2", -50)},
       {}},
      {"never a job of equal or higher priority",
       {urgent(1)},
       {Victim(10, "batch", 8, "n1", 100), Victim(11, "batch", 8, "n2", 200)},
       {}},
      {"never a job that preempted this one (no loops)",
       {urgent(1).PreemptedBy(11)},
       {Victim(10, "batch", 8, "n1", 5), Victim(11, "batch", 8, "n2", 1)},
       {{10, 1}}},
      {"nobody when every candidate once preempted it",
       {urgent(1).PreemptedBy(10).PreemptedBy(11)},
       {Victim(10, "batch", 8, "n1", 5), Victim(11, "batch", 8, "n2", 1)},
       {}},
      {"only a queue with can_preempt preempts",
       {MakePending(1).Queue("batch").Cpus(8).Priority(100)},
       {Victim(10, "batch", 8, "n1", 5), Victim(11, "batch", 8, "n2", 1)},
       {}},
      {"no preemption when the job fits",
       {urgent(1).Cpus(4)},
       {Victim(10, "batch", 4, "n1"), Victim(11, "batch", 8, "n2")},
       {},
       {1}},
      {"no preemption when even every victim would not make room",
       {urgent(1).Cpus(16)},
       {Victim(10, "batch", 8, "n1"), Victim(11, "batch", 8, "n2")},
       {}},
      {"each preemptor its own victims",
       {urgent(1), urgent(2).Priority(90)},
       {Victim(10, "batch", 8, "n1", 5), Victim(11, "batch", 8, "n2", 1)},
       {{11, 1}, {10, 2}}},
      {"victims in flight: no new ones for the same job, and not taken by another",
       {urgent(1), urgent(2).Priority(90)},
       {Victim(10, "batch", 8, "n1", 5), Victim(11, "batch", 8, "n2", 1).PreemptingFor(1)},
       {{10, 2}}},
      {"another pool's jobs are not candidates",
       {urgent(1)},
       {Victim(10, "train", 8, "n1", -50), Victim(11, "train", 8, "n2", -50),
        Victim(12, "batch", 8, "x1", 1).Pool("other")},
       {}},
  };
  const model::ClusterSpec cluster = PreemptionCluster();
  std::vector<model::NodeUsage> nodes = EmptyUsage(cluster);
  nodes.push_back(MakeNode("x1").Pool("other").Cpus(8).MemoryMb(65536));
  const Scheduler scheduler = SchedulerFor(cluster);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const Plan plan = scheduler.Decide(MakeSnapshot(nodes, c.pending, c.running), kNow);
    EXPECT_EQ(VictimPairs(plan), c.want);
    EXPECT_EQ(StartedIds(plan), c.want_started);
    EXPECT_EQ(plan.report.preempted, static_cast<int>(c.want.size()));
  }
}

TEST(SchedulerPreemptionTest, GraceAndRequeueComeFromTheVictimsQueue) {
  const model::ClusterSpec cluster = PreemptionCluster();
  const Plan plan = SchedulerFor(cluster).Decide(
      MakeSnapshot(EmptyUsage(cluster), {MakePending(1).Queue("urgent").Nodes(2).Cpus(8).Priority(100)},
                   {Victim(10, "batch", 8, "n1", 1), Victim(11, "scratch", 8, "n2", 2)}),
      kNow);
  ASSERT_EQ(plan.preemptions.size(), 2u);
  std::map<model::JobId, Preemption> by_victim;
  for (const auto& p : plan.preemptions) by_victim[p.victim] = p;
  EXPECT_EQ(by_victim.at(10).preemptor, 1);
  EXPECT_EQ(by_victim.at(10).grace_seconds, 45);
  EXPECT_TRUE(by_victim.at(10).requeue);
  EXPECT_EQ(by_victim.at(11).preemptor, 1);
  EXPECT_EQ(by_victim.at(11).grace_seconds, 5);
  EXPECT_FALSE(by_victim.at(11).requeue);
}

TEST(SchedulerPreemptionTest, ThePreemptorWaitsAndSaysWhy) {
  const model::ClusterSpec cluster = PreemptionCluster();
  const Scheduler scheduler = SchedulerFor(cluster);
  {
    const Plan plan =
        scheduler.Decide(MakeSnapshot(EmptyUsage(cluster), {MakePending(1).Queue("urgent").Cpus(8).Priority(100)},
                                      {Victim(10, "batch", 8, "n1", 5), Victim(11, "batch", 8, "n2", 1)}),
                         kNow);
    const auto reasons = Reasons(plan, 1);
    ASSERT_GE(reasons.size(), 2u);
    EXPECT_EQ(reasons[0], (PendingReason{"Preempting", "preempting job(s) 11 to make room"}));
    EXPECT_EQ(reasons[1].code, "Resources");
  }
  {
    const Plan plan = scheduler.Decide(
        MakeSnapshot(EmptyUsage(cluster), {MakePending(1).Queue("urgent").Cpus(8).Priority(100)},
                     {Victim(10, "batch", 8, "n1", 5),
                      Victim(11, "batch", 8, "n2", 1).PreemptingFor(1).ExpectedEnd(kNow + std::chrono::seconds(45))}),
        kNow);
    EXPECT_THAT(VictimPairs(plan), IsEmpty());
    EXPECT_EQ(Reasons(plan, 1).front(), (PendingReason{"Preempting", "waiting for preempted job(s) 11 to stop"}));
    // Its victim's room frees at the end of the grace: that is when it starts.
    EXPECT_EQ(EstimatedStart(plan, 1), kNow + std::chrono::seconds(45));
  }
}

// ---- reasons and explain ----

TEST(SchedulerTest, ExplainFalseGivesTheSameDecisionsWithoutReasons) {
  // A bit of everything: quota, reservation, backfill, preemption.
  auto b = MakeCluster();
  b.Node(Node("n1", 12)).Node(Node("n2"));
  model::ResourceLimits one_job;
  one_job.running_jobs = 1;
  b.Queue(MakeQueue("q").Pool("p").ProjectQuota(one_job));
  b.Queue(MakeQueue("urgent").Pool("p").CanPreempt(true));
  const model::ClusterSpec cluster = b.Build();
  Snapshot snapshot = MakeSnapshot(
      EmptyUsage(cluster),
      {MakePending(1).Project("x").Cpus(12).WalltimeSeconds(7200).Priority(10), MakePending(2).Project("y").Cpus(4),
       MakePending(3).Project("y").Cpus(1), MakePending(4).Project("z").Cpus(4).WalltimeSeconds(1800),
       MakePending(5).Queue("urgent").Cpus(12).Priority(50)},
      {MakeRunning(90).Project("w").Cpus(4).On("n1").ExpectedEnd(kNow + hours(1)),
       MakeRunning(91).Project("v").Cpus(8).On("n2").ExpectedEnd(kNow + hours(3))});
  const Scheduler scheduler = SchedulerFor(cluster);
  const Plan explained = scheduler.Decide(snapshot, kNow);
  snapshot.explain = false;
  const Plan quiet = scheduler.Decide(snapshot, kNow);

  // 5 preempts 90 to get n1's 12 cpus and holds them from +1 h; 1 waits
  // behind it; 2 and 4 fit in n1 before that; 3 is over y's quota.
  EXPECT_THAT(StartedIds(explained), ElementsAre(2, 4));
  EXPECT_THAT(VictimPairs(explained), ElementsAre(std::make_pair(model::JobId{90}, model::JobId{5})));
  EXPECT_EQ(Reasons(explained, 3).front().code, "QuotaExceeded");
  EXPECT_EQ(EstimatedStart(explained, 5), kNow + hours(1));
  EXPECT_THAT(quiet.pending, IsEmpty());
  ASSERT_EQ(quiet.starts.size(), explained.starts.size());
  for (size_t i = 0; i < quiet.starts.size(); ++i) {
    EXPECT_EQ(quiet.starts[i].job, explained.starts[i].job);
    EXPECT_EQ(quiet.starts[i].allocation, explained.starts[i].allocation);
  }
  EXPECT_EQ(VictimPairs(quiet), VictimPairs(explained));
}

TEST(SchedulerTest, AJobsOwnReasonComesBeforeItsQueuePosition) {
  const model::ClusterSpec cluster = TrainingCluster();
  std::vector<RunningJob> running;
  for (int i = 1; i <= 4; ++i)
    running.push_back(
        RunningTraining(100 + i, "genomics", std::string("g").append(std::to_string(i)), kNow + hours(1)));
  running.push_back(RunningTraining(105, "climate", "g5", kNow + hours(1)));
  running.push_back(RunningTraining(106, "climate", "g6", kNow + hours(1)));
  const Plan plan = SchedulerFor(cluster).Decide(
      MakeSnapshot(EmptyUsage(cluster),
                   {TrainingJob(1, "climate").Priority(3), TrainingJob(2, "climate").Priority(2),
                    TrainingJob(3, "genomics").Priority(1)},
                   running),
      kNow);
  EXPECT_THAT(StartedIds(plan), IsEmpty());
  EXPECT_EQ(Reasons(plan, 1).size(), 1u);
  EXPECT_EQ(Reasons(plan, 2).back(), (PendingReason{"Priority", "1 job ahead in gpu"}));
  ASSERT_EQ(Reasons(plan, 3).size(), 2u);
  EXPECT_EQ(Reasons(plan, 3)[0].code, "QuotaExceeded");
  EXPECT_EQ(Reasons(plan, 3)[1], (PendingReason{"Priority", "2 jobs ahead in gpu"}));
}

// ---- determinism ----

TEST(SchedulerTest, SameInputSamePlanWhateverTheListOrder) {
  std::vector<model::NodeUsage> nodes;
  for (int i = 0; i < 6; ++i) {
    nodes.push_back(MakeNode("n" + std::to_string(i)).Pool(i % 2 ? "a" : "b").Cpus(8).MemoryMb(16384).Gpus(2));
  }
  std::vector<PendingJob> pending;
  for (int i = 1; i <= 30; ++i) {
    // Equal priorities and submit times, so only the tie-breaks decide.
    pending.push_back(MakePending(i).Pool(i % 3 ? "a" : "b").Cpus(1 + i % 5).Gpus(i % 2).SubmittedAfter(0));
  }
  const Scheduler scheduler;
  const Plan first = scheduler.Decide(MakeSnapshot(nodes, pending), kNow);
  ASSERT_FALSE(first.starts.empty());
  ASSERT_FALSE(first.pending.empty());

  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(round);
    std::shuffle(nodes.begin(), nodes.end(), rng);
    std::shuffle(pending.begin(), pending.end(), rng);
    const Plan again = scheduler.Decide(MakeSnapshot(nodes, pending), kNow);
    ASSERT_EQ(again.starts.size(), first.starts.size());
    for (size_t i = 0; i < first.starts.size(); ++i) {
      EXPECT_EQ(again.starts[i].job, first.starts[i].job);
      EXPECT_EQ(again.starts[i].allocation, first.starts[i].allocation);
    }
    ASSERT_EQ(again.pending.size(), first.pending.size());
    for (const auto& [id, info] : first.pending) {
      EXPECT_EQ(again.pending.at(id).Reasons(), info.Reasons());
      EXPECT_EQ(again.pending.at(id).estimated_start, info.estimated_start);
    }
  }
}

TEST(SchedulerTest, ReportCountsAndTimesThePhases) {
  const Plan plan = Scheduler().Decide(
      MakeSnapshot({MakeNode("n1").Pool("p").Cpus(8).MemoryMb(16384)}, {MakePending(1), MakePending(2).Cpus(99)}),
      kNow);
  EXPECT_EQ(plan.report.considered, 2);
  EXPECT_EQ(plan.report.started, 1);
  EXPECT_EQ(plan.report.preempted, 0);
  EXPECT_GE(plan.report.total, plan.report.order);
  EXPECT_GE(plan.report.total, plan.report.fit);
}

// A saturated pool with many identical waiting jobs: each gets the same
// reasons (computed once), and a smaller job that still fits starts.
TEST(SchedulerSaturationTest, IdenticalWaitingJobsShareTheVerdictAndSmallerJobsStillStart) {
  std::vector<PendingJob> pending;
  for (model::JobId id = 1; id <= 500; ++id) pending.push_back(MakePending(id).Cpus(2).MemoryMb(512));
  pending.push_back(MakePending(501).Cpus(1).MemoryMb(512));
  const Snapshot snapshot =
      MakeSnapshot({MakeNode("x86-c4m8-el-01").Pool("p").Cpus(4).MemoryMb(8192).Used(3, 1024)}, pending);
  const Plan plan = Scheduler().Decide(snapshot, kNow);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].job, 501);
  ASSERT_EQ(plan.pending.size(), 500u);
  const auto first = Reasons(plan, 1);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first[0].code, "Resources");
  for (model::JobId id = 2; id <= 500; ++id) {
    const auto reasons = Reasons(plan, id);
    ASSERT_GE(reasons.size(), 1u);
    EXPECT_EQ(reasons[0], first[0]) << id;
  }
}

}  // namespace
}  // namespace unisched::scheduler
