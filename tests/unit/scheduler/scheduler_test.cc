// Tests of the scheduling cycle: ordering, fitting within a cycle, reasons,
// the admission seam, determinism, and a seeded property test over many
// cycles that checks no node is ever over-committed.

#include "unisched/scheduler/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "testing/builders.h"

namespace unisched::scheduler {
namespace {

using model::NodeState;
using model::PendingReason;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::MakeNode;
using testing::MakePending;
using testing::TestEpoch;

std::vector<model::JobId> StartedIds(const Plan& plan) {
  std::vector<model::JobId> ids;
  for (const auto& s : plan.starts) ids.push_back(s.job);
  return ids;
}

// ---- ordering ----

TEST(PriorityFifoOrderingTest, PriorityThenTierThenSubmitTimeThenId) {
  struct Case {
    std::string name;
    PendingJob a, b;
    bool want_a_first;
  };
  const std::vector<Case> cases = {
      {"higher priority first", MakePending(2).Priority(5).SubmittedAfter(9), MakePending(1).Priority(0), true},
      {"negative priority last", MakePending(1).Priority(-1), MakePending(2).SubmittedAfter(100), false},
      {"higher queue tier on equal priority", MakePending(2).Tier(1).SubmittedAfter(9), MakePending(1), true},
      {"priority outranks tier", MakePending(1).Tier(5), MakePending(2).Priority(1), false},
      {"earlier submission on equal priority and tier", MakePending(9).SubmittedAfter(1),
       MakePending(1).SubmittedAfter(2), true},
      {"lower id last", MakePending(1).SubmittedAfter(5), MakePending(2).SubmittedAfter(5), true},
      {"a job is not before itself", MakePending(1), MakePending(1), false},
  };
  const PriorityFifoOrdering ordering;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(ordering.Before(c.a, c.b, TestEpoch()), c.want_a_first);
  }
}

// ---- one cycle, table-driven ----

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
      {"the queue position counts only jobs ahead that wait",
       {node("n1")},
       {MakePending(1).Cpus(16), MakePending(2).Cpus(4), MakePending(3).Cpus(16), MakePending(4).Cpus(16)},
       {2},
       {{1, {{"Resources", "needs 16 cpus on 1 node, at most 8 free on any node of p"}}},
        {3,
         {{"Resources", "needs 16 cpus on 1 node, at most 4 free on any node of p"}, {"Priority", "1 job ahead in p"}}},
        {4,
         {{"Resources", "needs 16 cpus on 1 node, at most 4 free on any node of p"},
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
  const Scheduler scheduler;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const Plan plan = scheduler.Decide({c.nodes, c.pending, {}}, TestEpoch());
    EXPECT_EQ(StartedIds(plan), c.want_started);
    EXPECT_EQ(plan.pending_reasons, c.want_reasons);
    EXPECT_EQ(plan.report.considered, static_cast<int>(c.pending.size()));
    EXPECT_EQ(plan.report.started, static_cast<int>(c.want_started.size()));
  }
}

TEST(SchedulerTest, GpuIndicesAreNeverHandedOutTwiceInACycle) {
  const Snapshot snapshot{{MakeNode("g1").Pool("p").Cpus(32).MemoryMb(65536).Gpus(4, "h100").BusyGpus({1})},
                          {MakePending(1).Gpus(1), MakePending(2).Gpus(2), MakePending(3).Gpus(1)},
                          {}};
  const Plan plan = Scheduler().Decide(snapshot, TestEpoch());
  ASSERT_EQ(plan.starts.size(), 2u);
  EXPECT_THAT(plan.starts[0].allocation[0].gpu_indices, ElementsAre(0));
  EXPECT_THAT(plan.starts[1].allocation[0].gpu_indices, ElementsAre(2, 3));
  EXPECT_EQ(plan.pending_reasons.at(3),
            (std::vector<PendingReason>{{"Resources", "needs 1 GPU on 1 node, at most 0 free on any node of p"}}));
}

// ---- the admission seam ----

// Refuses one project, and lets each user start at most one job per cycle:
// the second needs the starts decided so far.
class FakeAdmission final : public AdmissionCheck {
 public:
  std::optional<PendingReason> Check(const PendingJob& job, const Snapshot& snapshot, const std::vector<Start>& decided,
                                     Timestamp /*now*/) const override {
    ++calls;
    if (job.project == "over-quota") return PendingReason{"QuotaExceeded", "project over-quota is at its quota"};
    for (const Start& s : decided) {
      for (const PendingJob& p : snapshot.pending) {
        if (p.id == s.job && p.user == job.user) {
          return PendingReason{"ConcurrencyLimit", "user " + job.user + " already starts a job this cycle"};
        }
      }
    }
    return std::nullopt;
  }
  mutable int calls = 0;
};

class AlwaysWait final : public AdmissionCheck {
 public:
  std::optional<PendingReason> Check(const PendingJob&, const Snapshot&, const std::vector<Start>&,
                                     Timestamp) const override {
    return PendingReason{"Held", "second check"};
  }
};

TEST(SchedulerTest, AdmissionChecksComeBeforeFitAndTheFirstReasonWins) {
  auto fake = std::make_unique<FakeAdmission>();
  const FakeAdmission* fake_ptr = fake.get();
  Scheduler scheduler;
  scheduler.AddAdmissionCheck(std::move(fake));

  const Snapshot snapshot{{MakeNode("n1").Pool("p").Cpus(8).MemoryMb(16384)},
                          {MakePending(1).Project("over-quota").Cpus(8), MakePending(2).User("bob").Cpus(2),
                           MakePending(3).User("bob").Cpus(2), MakePending(4).User("carol").Cpus(2)},
                          {}};
  const Plan plan = scheduler.Decide(snapshot, TestEpoch());
  // Job 1 was refused before fitting, so its 8 cpus stayed free for 2 and 4.
  EXPECT_THAT(StartedIds(plan), ElementsAre(2, 4));
  EXPECT_EQ(plan.pending_reasons.at(1),
            (std::vector<PendingReason>{{"QuotaExceeded", "project over-quota is at its quota"}}));
  EXPECT_EQ(plan.pending_reasons.at(3),
            (std::vector<PendingReason>{{"ConcurrencyLimit", "user bob already starts a job this cycle"},
                                        {"Priority", "1 job ahead in p"}}));
  EXPECT_EQ(fake_ptr->calls, 4);

  // A later check is not asked once an earlier one said wait.
  scheduler.AddAdmissionCheck(std::make_unique<AlwaysWait>());
  const Plan second = scheduler.Decide(snapshot, TestEpoch());
  EXPECT_THAT(StartedIds(second), IsEmpty());
  EXPECT_EQ(second.pending_reasons.at(1).front().code, "QuotaExceeded");
  EXPECT_EQ(second.pending_reasons.at(2).front().code, "Held");
}

// ---- the ordering seam ----

class NewestFirst final : public OrderingPolicy {
 public:
  bool Before(const PendingJob& a, const PendingJob& b, Timestamp) const override {
    return a.submitted_at > b.submitted_at;
  }
};

TEST(SchedulerTest, TheOrderingPolicyIsASeam) {
  const Snapshot snapshot{{MakeNode("n1").Pool("p").Cpus(4).MemoryMb(16384)},
                          {MakePending(1).Cpus(4), MakePending(2).Cpus(4), MakePending(3).Cpus(4)},
                          {}};
  const Plan plan = Scheduler(std::make_unique<NewestFirst>()).Decide(snapshot, TestEpoch());
  EXPECT_THAT(StartedIds(plan), ElementsAre(3));
  EXPECT_EQ(plan.pending_reasons.at(1).back(), (PendingReason{"Priority", "1 job ahead in p"}));  // 3 started
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
  const Plan first = scheduler.Decide({nodes, pending, {}}, TestEpoch());
  ASSERT_FALSE(first.starts.empty());
  ASSERT_FALSE(first.pending_reasons.empty());

  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(round);
    std::shuffle(nodes.begin(), nodes.end(), rng);
    std::shuffle(pending.begin(), pending.end(), rng);
    const Plan again = scheduler.Decide({nodes, pending, {}}, TestEpoch());
    ASSERT_EQ(again.starts.size(), first.starts.size());
    for (size_t i = 0; i < first.starts.size(); ++i) {
      EXPECT_EQ(again.starts[i].job, first.starts[i].job);
      EXPECT_EQ(again.starts[i].allocation, first.starts[i].allocation);
    }
    EXPECT_EQ(again.pending_reasons, first.pending_reasons);
  }
}

// ---- property: many seeded cycles, invariants after each ----

struct Running {
  model::JobId id;
  model::Allocation allocation;
};

TEST(SchedulerPropertyTest, NoNodeOverCommittedOverManyCycles) {
  std::mt19937 rng(20261202);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  // Two pools of mixed nodes; some nodes of gpu carry a label.
  std::vector<model::NodeUsage> nodes;
  for (int i = 0; i < 5; ++i) {
    nodes.push_back(
        MakeNode("cpu-" + std::to_string(i)).Pool("cpu").Cpus(uniform(4, 32)).MemoryMb(uniform(4, 64) * 1024));
  }
  for (int i = 0; i < 4; ++i) {
    auto b = MakeNode("gpu-" + std::to_string(i)).Pool("gpu").Cpus(uniform(8, 32)).MemoryMb(65536);
    b.Gpus(uniform(1, 4), "h100").Gpus(uniform(0, 2), "a100");
    if (i % 2) b.Label("interconnect", "ib");
    nodes.push_back(b);
  }

  std::vector<PendingJob> pending;
  std::vector<Running> running;
  model::JobId next_id = 1;
  const Scheduler scheduler;
  int total_started = 0;

  for (int cycle = 0; cycle < 200; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    // New arrivals.
    for (int k = uniform(0, 4); k > 0; --k) {
      const bool gpu = uniform(0, 1) == 1;
      auto job = MakePending(next_id).Pool(gpu ? "gpu" : "cpu").Priority(uniform(-2, 2));
      job.SubmittedAfter(cycle).Nodes(uniform(1, 3)).Cpus(uniform(1, 12)).MemoryMb(uniform(1, 16) * 1024);
      if (gpu) job.Gpus(uniform(0, 3), uniform(0, 2) == 0 ? "a100" : "");
      if (gpu && uniform(0, 4) == 0) job.Constraint("interconnect", "ib");
      pending.push_back(job);
      ++next_id;
    }
    // Now and then a node leaves or comes back.
    if (uniform(0, 9) == 0) {
      auto& n = nodes[uniform(0, static_cast<int>(nodes.size()) - 1)];
      n.state = n.state == NodeState::kUp ? NodeState::kDraining : NodeState::kUp;
    }

    const Snapshot snapshot{nodes, pending, {}};
    const Plan plan = scheduler.Decide(snapshot, TestEpoch() + std::chrono::seconds(cycle));

    // Every pending job is either started or has reasons, never both.
    std::set<model::JobId> started_ids;
    for (const auto& s : plan.starts) ASSERT_TRUE(started_ids.insert(s.job).second);
    ASSERT_EQ(started_ids.size() + plan.pending_reasons.size(), pending.size());
    for (const auto& [id, reasons] : plan.pending_reasons) {
      EXPECT_FALSE(started_ids.count(id));
      ASSERT_FALSE(reasons.empty());
      EXPECT_NE(reasons.front().code, "Priority");  // a job's own reason comes first
    }
    EXPECT_EQ(plan.report.considered, static_cast<int>(pending.size()));
    EXPECT_EQ(plan.report.started, static_cast<int>(plan.starts.size()));

    // Apply the plan, checking each share against the job and the node.
    std::map<std::string, model::NodeUsage*> by_name;
    for (auto& n : nodes) by_name[n.spec.name] = &n;
    for (const auto& start : plan.starts) {
      const auto job_it =
          std::find_if(pending.begin(), pending.end(), [&](const PendingJob& p) { return p.id == start.job; });
      ASSERT_NE(job_it, pending.end());
      const PendingJob& job = *job_it;
      ASSERT_EQ(static_cast<int>(start.allocation.size()), job.resources.nodes);
      std::set<std::string> distinct;
      for (const auto& share : start.allocation) {
        ASSERT_TRUE(distinct.insert(share.node).second) << "node used twice by job " << job.id;
        model::NodeUsage& node = *by_name.at(share.node);
        EXPECT_EQ(node.spec.pool, job.pool);
        EXPECT_EQ(node.state, NodeState::kUp);
        EXPECT_EQ(share.cpus, job.resources.cpus);
        EXPECT_EQ(share.memory_mb, job.resources.memory_mb);
        ASSERT_EQ(static_cast<int>(share.gpu_indices.size()), job.resources.gpus);
        for (const auto& [key, value] : job.constraints) EXPECT_EQ(node.spec.labels.at(key), value);
        for (int index : share.gpu_indices) {
          const auto dev = std::find_if(node.spec.gpus.begin(), node.spec.gpus.end(),
                                        [&](const model::GpuDevice& d) { return d.index == index; });
          ASSERT_NE(dev, node.spec.gpus.end());
          const size_t pos = static_cast<size_t>(dev - node.spec.gpus.begin());
          ASSERT_FALSE(node.gpu_busy[pos]) << "GPU " << index << " of " << node.spec.name << " handed out twice";
          if (!job.resources.gpu_model.empty()) {
            EXPECT_EQ(dev->model, job.resources.gpu_model);
          }
        }
        node.Apply(share, +1);
        EXPECT_LE(node.cpus_used, node.spec.cpus);
        EXPECT_LE(node.memory_used_mb, node.spec.memory_mb);
      }
      running.push_back({job.id, start.allocation});
      ++total_started;
    }
    std::erase_if(pending, [&](const PendingJob& p) { return started_ids.count(p.id) > 0; });

    // Some running jobs end and give their share back.
    std::erase_if(running, [&](const Running& r) {
      if (uniform(0, 2) != 0) return false;
      for (const auto& share : r.allocation) by_name.at(share.node)->Apply(share, -1);
      return true;
    });
    for (const auto& n : nodes) {
      EXPECT_GE(n.cpus_used, 0);
      EXPECT_GE(n.memory_used_mb, 0);
    }
  }
  // The test means something only if the cluster was actually busy.
  EXPECT_GT(total_started, 100);
}

TEST(SchedulerTest, ReportTimesThePhases) {
  const Snapshot snapshot{
      {MakeNode("n1").Pool("p").Cpus(8).MemoryMb(16384)}, {MakePending(1), MakePending(2).Cpus(99)}, {}};
  const Plan plan = Scheduler().Decide(snapshot, TestEpoch());
  EXPECT_EQ(plan.report.considered, 2);
  EXPECT_EQ(plan.report.started, 1);
  EXPECT_GE(plan.report.total, plan.report.order);
  EXPECT_GE(plan.report.total, plan.report.fit);
  EXPECT_GE(plan.report.admit.count(), 0);
}

}  // namespace
}  // namespace unisched::scheduler

namespace unisched::scheduler {
namespace {

// A saturated pool with many identical waiting jobs: each gets the same
// reasons (computed once), and a smaller job that still fits starts.
TEST(SchedulerSaturationTest, IdenticalWaitingJobsShareTheVerdictAndSmallerJobsStillStart) {
  Snapshot snapshot;
  snapshot.nodes.push_back(testing::MakeNode("x86-c4m8-el-01").Pool("p").Cpus(4).MemoryMb(8192).Used(3, 1024));
  for (model::JobId id = 1; id <= 500; ++id) snapshot.pending.push_back(testing::MakePending(id).Cpus(2).MemoryMb(512));
  snapshot.pending.push_back(testing::MakePending(501).Cpus(1).MemoryMb(512));

  Scheduler scheduler;
  Plan plan = scheduler.Decide(snapshot, testing::TestEpoch() + std::chrono::hours(1));
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].job, 501);
  ASSERT_EQ(plan.pending_reasons.size(), 500u);
  const auto& first = plan.pending_reasons.at(1);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first[0].code, "Resources");
  for (model::JobId id = 2; id <= 500; ++id) {
    const auto& reasons = plan.pending_reasons.at(id);
    ASSERT_GE(reasons.size(), 1u);
    EXPECT_EQ(reasons[0], first[0]) << id;
  }
}

}  // namespace
}  // namespace unisched::scheduler
