// Tests of fitting: the per-node check, all-or-nothing placement, best fit,
// GPU index choice and the pool-wide reasons when nothing fits.

#include "unisched/model/fit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "testing/builders.h"
#include "unisched/model/words.h"

namespace unisched::model {
namespace {

using ::testing::ElementsAre;
using testing::MakeNode;
using testing::MakeRequest;

std::vector<const NodeUsage*> Ptrs(const std::vector<NodeUsage>& nodes) {
  std::vector<const NodeUsage*> out;
  for (const auto& n : nodes) out.push_back(&n);
  return out;
}

// 8 cpus, 16 GiB, 4 x h100, interconnect=ib, in pool p.
testing::NodeBuilder SmallGpuNode(std::string name = "n1") {
  return MakeNode(std::move(name)).Pool("p").Cpus(8).MemoryMb(16384).Gpus(4, "h100").Label("interconnect", "ib");
}

// ---- words ----

TEST(WordsTest, SplitKeepsTheNonEmptyItemsAndJoinPutsThemBack) {
  EXPECT_EQ(Split("a,b,c", ','), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(Split(",a,,b,", ','), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(Split("", ',').empty());
  EXPECT_TRUE(Split(",,", ',').empty());
  EXPECT_EQ(Join(Split("x86-01,x86-02", ','), ','), "x86-01,x86-02");
}

// ---- NodeUsage ----

// A BusySet's entries in order, true for taken.
std::vector<bool> Marks(const BusySet& set) {
  std::vector<bool> marks;
  for (size_t i = 0; i < set.size(); ++i) marks.push_back(set.Busy(i));
  return marks;
}

TEST(NodeUsageTest, FreeGpusCountsFreeDevicesOfTheModelCaseInsensitively) {
  NodeUsage node = MakeNode("n").Gpus(2, "a100").Gpus(2, "h100").BusyGpus({0, 3});
  EXPECT_EQ(node.FreeGpus(""), 2);
  EXPECT_EQ(node.FreeGpus("a100"), 1);
  EXPECT_EQ(node.FreeGpus("H100"), 1);
  EXPECT_EQ(node.FreeGpus("l40s"), 0);
}

TEST(NodeUsageTest, ApplyAddsAndRemovesByDeviceIndex) {
  // Device indices need not be positions: a node may expose 4..7 only.
  NodeUsage node = MakeNode("n").Cpus(16).MemoryMb(1000);
  node.spec.gpus = {{4, "h100", 80}, {5, "h100", 80}, {6, "h100", 80}, {7, "h100", 80}};
  node.gpu_busy = BusySet();  // short sets are allowed; Apply sizes them

  const NodeAllocation share{"n", 4, 300, {5, 7}};
  node.Apply(share, +1);
  EXPECT_EQ(node.cpus_used, 4);
  EXPECT_EQ(node.memory_used_mb, 300);
  EXPECT_THAT(Marks(node.gpu_busy), ElementsAre(false, true, false, true));
  EXPECT_EQ(node.FreeGpus(""), 2);

  node.Apply(share, -1);
  EXPECT_EQ(node.cpus_used, 0);
  EXPECT_EQ(node.memory_used_mb, 0);
  EXPECT_THAT(Marks(node.gpu_busy), ElementsAre(false, false, false, false));
}

TEST(NodeUsageTest, CpuIdsAreTheLowestFreeOnesAndComeBackWhenTheShareEnds) {
  std::vector<NodeUsage> nodes = {MakeNode("n").Cpus(8).MemoryMb(1000)};
  auto place = [&](int cpus) {
    const FitResult fit = Fit(Ptrs(nodes), MakeRequest().Cpus(cpus).MemoryMb(10), {}, "p");
    EXPECT_TRUE(fit.allocation.has_value());
    const NodeAllocation share = fit.allocation ? fit.allocation->front() : NodeAllocation{};
    nodes[0].Apply(share, +1);
    return share;
  };
  const NodeAllocation first = place(3);
  EXPECT_THAT(first.cpu_ids, ElementsAre(0, 1, 2));
  const NodeAllocation second = place(2);
  EXPECT_THAT(second.cpu_ids, ElementsAre(3, 4));
  nodes[0].Apply(first, -1);
  EXPECT_THAT(place(4).cpu_ids, ElementsAre(0, 1, 2, 5)) << "the first share's ids are free again";
  // An attempt stored before shares had ids counts, but marks no id.
  nodes[0].Apply(NodeAllocation{"n", 1, 0, {}}, +1);
  EXPECT_EQ(nodes[0].FreeCpus(), 1);
  EXPECT_THAT(place(1).cpu_ids, ElementsAre(6));
  // An id past the node's CPUs (its spec shrank since) marks nothing.
  NodeUsage shrunk = MakeNode("s").Cpus(2);
  shrunk.Apply(NodeAllocation{.node = "s", .cpus = 1, .gpu_indices = {}, .cpu_ids = {5}}, +1);
  EXPECT_THAT(Marks(shrunk.cpu_busy), ElementsAre(false, false));
}

TEST(BusySetTest, LowestFreeIdsAcrossWords) {
  // 0-63 and 64, 66 taken in a set of 130; what a request finds, by limit
  // (the node's CPUs) and by how many it wants.
  BusySet set;
  set.Grow(130);
  for (size_t cpu = 0; cpu < 64; ++cpu) set.Set(cpu, true);
  set.Set(64, true);
  set.Set(66, true);
  struct Case {
    std::string name;
    int limit;
    int want;
    std::vector<int> ids;
  };
  const std::vector<Case> cases = {
      {"the first free ids skip a full word", 130, 4, {65, 67, 68, 69}},
      {"the limit cuts the last word", 68, 10, {65, 67}},
      {"a limit inside the full word finds none", 64, 2, {}},
      {"ids past the set are free", 200, 3, {65, 67, 68}},
      {"into the third word", 130, 63, {}},  // filled below
      {"wanting none finds none", 130, 0, {}},
      {"no CPUs", 0, 1, {}},
  };
  for (auto c : cases) {
    SCOPED_TRACE(c.name);
    if (c.name == "into the third word") {
      c.ids = {65};
      for (int cpu = 67; cpu < 129; ++cpu) c.ids.push_back(cpu);
    }
    std::vector<int> ids;
    set.LowestFree(c.limit, c.want, ids);
    EXPECT_EQ(ids, c.ids);
  }
  // Freed ids come back; growing keeps what is marked.
  set.Set(3, false);
  set.Grow(256);
  EXPECT_TRUE(set.Busy(64));
  EXPECT_FALSE(set.Busy(3));
  EXPECT_FALSE(set.Busy(300));
  std::vector<int> ids;
  set.LowestFree(256, 2, ids);
  EXPECT_EQ(ids, (std::vector<int>{3, 65}));
  // Counted below a limit: 63 of 0-63 (3 is free), then 64 and 66.
  EXPECT_EQ(set.CountBelow(0), 0);
  EXPECT_EQ(set.CountBelow(64), 63);
  EXPECT_EQ(set.CountBelow(65), 64);
  EXPECT_EQ(set.CountBelow(66), 64);
  EXPECT_EQ(set.CountBelow(67), 65);
  EXPECT_EQ(set.CountBelow(1000), 65);
}

TEST(NodeUsageTest, FreeGpusCountsOnlyTheSpecsDevices) {
  // A set longer than the spec (the node's GPUs shrank since it was
  // sized) counts only the spec's devices.
  NodeUsage node = MakeNode("n").Gpus(2, "a100");
  node.gpu_busy = BusySet(4);
  node.gpu_busy.Set(1, true);
  node.gpu_busy.Set(3, true);
  EXPECT_EQ(node.FreeGpus(""), 1);
  EXPECT_EQ(node.FreeGpus("A100"), 1);
  EXPECT_EQ(node.FreeGpus("h100"), 0);
}

// ---- CheckNode ----

TEST(CheckNodeTest, EveryPathInOrder) {
  struct Case {
    std::string name;
    NodeUsage node;
    ResourceRequest request;
    Labels constraints;
    bool ignore_usage = false;
    std::optional<std::string> want_code;  // kFits: no shortfall
    std::string want_message;
  };
  const std::optional<std::string> kFits;
  const std::vector<Case> cases = {
      {"fits",
       SmallGpuNode(),
       MakeRequest().Cpus(8).MemoryMb(16384).Gpus(4, "h100"),
       {{"interconnect", "ib"}},
       false,
       kFits,
       ""},
      {"draining",
       SmallGpuNode().State(NodeState::kDraining),
       MakeRequest(),
       {},
       false,
       "Resources",
       "node n1 is draining"},
      {"drained",
       SmallGpuNode().State(NodeState::kDrained),
       MakeRequest(),
       {},
       false,
       "Resources",
       "node n1 is drained"},
      {"down", SmallGpuNode().State(NodeState::kDown), MakeRequest(), {}, false, "Resources", "node n1 is down"},
      {"state is checked before labels",
       SmallGpuNode().State(NodeState::kDown),
       MakeRequest(),
       {{"interconnect", "ethernet"}},
       false,
       "Resources",
       "node n1 is down"},
      {"could-ever-fit looks past the state",
       SmallGpuNode().State(NodeState::kDrained),
       MakeRequest(),
       {},
       true,
       kFits,
       ""},
      {"label has another value",
       SmallGpuNode(),
       MakeRequest(),
       {{"interconnect", "ethernet"}},
       false,
       "NodeLabelsMismatch",
       "requires interconnect=ethernet; node has interconnect=ib"},
      {"label missing",
       SmallGpuNode(),
       MakeRequest(),
       {{"zone", "a"}},
       false,
       "NodeLabelsMismatch",
       "requires zone=a; node has no label zone"},
      {"pinned to its name", SmallGpuNode(), MakeRequest(), {{kNodeNameConstraint, "n1"}}, false, kFits, ""},
      {"pinned to another node",
       SmallGpuNode(),
       MakeRequest(),
       {{kNodeNameConstraint, "n2"}},
       false,
       "NodeLabelsMismatch",
       "requires unisched.node=n2; node has unisched.node=n1"},
      {"the name wins over a label of the reserved key",
       SmallGpuNode().Label(kNodeNameConstraint, "n2"),
       MakeRequest(),
       {{kNodeNameConstraint, "n2"}},
       false,
       "NodeLabelsMismatch",
       "requires unisched.node=n2; node has unisched.node=n1"},
      {"labels are checked before resources",
       SmallGpuNode(),
       MakeRequest().Cpus(99),
       {{"zone", "a"}},
       false,
       "NodeLabelsMismatch",
       "requires zone=a; node has no label zone"},
      {"gpu model absent",
       MakeNode("n1").Cpus(8).MemoryMb(4096).Gpus(2, "a100"),
       MakeRequest().Gpus(1, "h100"),
       {},
       false,
       "Resources",
       "needs 1 GPU (h100); node has no h100 GPUs (has a100)"},
      {"gpu model on a node without GPUs",
       MakeNode("n1").Cpus(8).MemoryMb(4096),
       MakeRequest().Gpus(2, "h100"),
       {},
       false,
       "Resources",
       "needs 2 GPUs (h100); node has no h100 GPUs"},
      {"gpu model matches case-insensitively", SmallGpuNode(), MakeRequest().Gpus(1, "H100"), {}, false, kFits, ""},
      {"gpu model ignored without GPUs",
       MakeNode("n1").Cpus(8).MemoryMb(4096),
       MakeRequest().Gpus(0, "h100"),
       {},
       false,
       kFits,
       ""},
      {"model is checked before cpus",
       MakeNode("n1").Cpus(1).MemoryMb(4096),
       MakeRequest().Cpus(4).Gpus(1, "h100"),
       {},
       false,
       "Resources",
       "needs 1 GPU (h100); node has no h100 GPUs"},
      {"cpus short", SmallGpuNode().Used(6, 0), MakeRequest().Cpus(4), {}, false, "Resources", "needs 4 cpus, 2 free"},
      {"one cpu short",
       SmallGpuNode().Used(8, 0),
       MakeRequest().Cpus(1),
       {},
       false,
       "Resources",
       "needs 1 cpu, 0 free"},
      {"cpus are checked before memory",
       SmallGpuNode().Used(6, 16384),
       MakeRequest().Cpus(4).MemoryMb(1),
       {},
       false,
       "Resources",
       "needs 4 cpus, 2 free"},
      {"memory short",
       SmallGpuNode().Used(0, 12288),
       MakeRequest().MemoryMb(8192),
       {},
       false,
       "Resources",
       "needs 8192 MB memory, 4096 MB free"},
      {"gpus short",
       SmallGpuNode().BusyGpus({0, 1}),
       MakeRequest().Gpus(3),
       {},
       false,
       "Resources",
       "needs 3 GPUs, 2 free"},
      {"gpus of the model short on a mixed node",
       MakeNode("n1").Cpus(8).MemoryMb(4096).Gpus(2, "h100").Gpus(2, "a100"),
       MakeRequest().Gpus(3, "h100"),
       {},
       false,
       "Resources",
       "needs 3 GPUs (h100), 2 free"},
      {"gpus on a node without GPUs",
       MakeNode("n1").Cpus(8).MemoryMb(4096),
       MakeRequest().Gpus(1),
       {},
       false,
       "Resources",
       "needs 1 GPU, 0 free"},
      {"ignore_usage compares against capacity",
       SmallGpuNode().Used(8, 16384).BusyGpus({0, 1, 2, 3}),
       MakeRequest().Cpus(8).MemoryMb(16384).Gpus(4),
       {},
       true,
       kFits,
       ""},
      {"ignore_usage cpus beyond capacity",
       SmallGpuNode(),
       MakeRequest().Cpus(16),
       {},
       true,
       "Resources",
       "needs 16 cpus, node has 8"},
      {"ignore_usage memory beyond capacity",
       SmallGpuNode(),
       MakeRequest().MemoryMb(32768),
       {},
       true,
       "Resources",
       "needs 32768 MB memory, node has 16384 MB"},
      {"ignore_usage gpus beyond capacity",
       SmallGpuNode(),
       MakeRequest().Gpus(8),
       {},
       true,
       "Resources",
       "needs 8 GPUs, node has 4"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::optional<Shortfall> got = CheckNode(c.node, c.request, c.constraints, c.ignore_usage);
    if (!c.want_code) {
      EXPECT_FALSE(got.has_value()) << got->code << ": " << got->message;
      continue;
    }
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->code, *c.want_code);
    EXPECT_EQ(got->message, c.want_message);
  }
}

// ---- Fit: placements ----

TEST(FitTest, Placements) {
  struct Case {
    std::string name;
    std::vector<NodeUsage> nodes;
    ResourceRequest request;
    Labels constraints;
    Allocation want;
  };
  const std::vector<Case> cases = {
      {"best fit takes the node with the fewest free cpus",
       {MakeNode("a").Pool("p").Cpus(16).MemoryMb(8192), MakeNode("b").Pool("p").Cpus(8).MemoryMb(8192),
        MakeNode("c").Pool("p").Cpus(12).MemoryMb(8192)},
       MakeRequest().Cpus(4),
       {},
       {{"b", 4, 1024, {}}}},
      {"ties go to the first given (the scheduler gives name order)",
       {MakeNode("c").Pool("p").Cpus(8).MemoryMb(8192), MakeNode("b").Pool("p").Cpus(8).MemoryMb(8192)},
       MakeRequest().Cpus(4),
       {},
       {{"c", 4, 1024, {}}}},
      {"best fit counts what is already used",
       {MakeNode("a").Pool("p").Cpus(16).MemoryMb(8192).Used(12, 0), MakeNode("b").Pool("p").Cpus(8).MemoryMb(8192)},
       MakeRequest().Cpus(4),
       {},
       {{"a", 4, 1024, {}}}},
      {"a node that cannot hold it is skipped, however tight",
       {MakeNode("a").Pool("p").Cpus(4).MemoryMb(512), MakeNode("b").Pool("p").Cpus(64).MemoryMb(8192)},
       MakeRequest().Cpus(4).MemoryMb(1024),
       {},
       {{"b", 4, 1024, {}}}},
      {"multi-node takes distinct nodes, tightest first",
       {MakeNode("a").Pool("p").Cpus(32).MemoryMb(8192), MakeNode("b").Pool("p").Cpus(8).MemoryMb(8192),
        MakeNode("c").Pool("p").Cpus(16).MemoryMb(8192)},
       MakeRequest().Nodes(2).Cpus(8),
       {},
       {{"b", 8, 1024, {}}, {"c", 8, 1024, {}}}},
      {"skips nodes that are not up and nodes without the labels",
       {MakeNode("a").Pool("p").Cpus(8).MemoryMb(8192).Label("interconnect", "ib").State(NodeState::kDraining),
        MakeNode("b").Pool("p").Cpus(8).MemoryMb(8192).Label("interconnect", "ethernet"),
        MakeNode("c").Pool("p").Cpus(64).MemoryMb(8192).Label("interconnect", "ib")},
       MakeRequest().Cpus(2),
       {{"interconnect", "ib"}},
       {{"c", 2, 1024, {}}}},
      {"lowest free GPU indices",
       {SmallGpuNode().BusyGpus({0, 2})},
       MakeRequest().Gpus(2),
       {},
       {{"n1", 1, 1024, {1, 3}, {"h100", "h100"}}}},
      {"GPUs of the requested model only",
       {MakeNode("n").Pool("p").Cpus(8).MemoryMb(8192).Gpus(2, "a100").Gpus(2, "h100")},
       MakeRequest().Gpus(1, "h100"),
       {},
       {{"n", 1, 1024, {2}, {"h100"}}}},
      {"any model when none is asked for",
       {MakeNode("n").Pool("p").Cpus(8).MemoryMb(8192).Gpus(2, "a100").Gpus(2, "h100").BusyGpus({0})},
       MakeRequest().Gpus(2),
       {},
       {{"n", 1, 1024, {1, 2}, {"a100", "h100"}}}},
      {"the node with the model wins over a tighter one without",
       {MakeNode("a").Pool("p").Cpus(4).MemoryMb(8192).Gpus(4, "a100"),
        MakeNode("b").Pool("p").Cpus(32).MemoryMb(8192).Gpus(4, "h100")},
       MakeRequest().Gpus(1, "h100"),
       {},
       {{"b", 1, 1024, {0}, {"h100"}}}},
      {"no GPUs asked: no indices even on a GPU node",
       {SmallGpuNode()},
       MakeRequest().Cpus(2),
       {},
       {{"n1", 2, 1024, {}}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const FitResult got = Fit(Ptrs(c.nodes), c.request, c.constraints, "p");
    ASSERT_TRUE(got.allocation.has_value()) << (got.reasons.empty() ? "" : got.reasons[0].message);
    // CPU ids: the lowest ones, as no id is marked taken here (which ones
    // when some are: NodeUsageTest.CpuIdsAreTheLowestFreeOnes...).
    Allocation placed = *got.allocation;
    for (NodeAllocation& share : placed) {
      for (size_t k = 0; k < share.cpu_ids.size(); ++k) EXPECT_EQ(share.cpu_ids[k], static_cast<int>(k));
      EXPECT_EQ(static_cast<int>(share.cpu_ids.size()), share.cpus);
      share.cpu_ids.clear();
    }
    EXPECT_EQ(placed, c.want);
    EXPECT_TRUE(got.reasons.empty());
  }
}

// ---- Fit: reasons ----

TEST(FitTest, ReasonsWhenNothingFits) {
  using R = PendingReason;
  auto gpu_node = [](std::string name) {
    return MakeNode(std::move(name)).Pool("gpu-train-pool").Cpus(32).MemoryMb(65536).Gpus(8, "h100");
  };
  auto cpu_node = [](std::string name) {
    return MakeNode(std::move(name)).Pool("cpu-hpc-pool").Cpus(64).MemoryMb(262144);
  };
  struct Case {
    std::string name;
    std::vector<NodeUsage> nodes;
    ResourceRequest request;
    Labels constraints;
    std::string pool;
    std::vector<R> want;
  };
  const std::vector<Case> cases = {
      {"GPUs short on every node",
       {gpu_node("g1").BusyGpus({0, 1, 2, 3, 4, 5, 6}), gpu_node("g2").BusyGpus({0, 1, 2, 3, 4, 5})},
       MakeRequest().Gpus(4, "h100"),
       {},
       "gpu-train-pool",
       {{"Resources", "needs 4 GPUs (h100) on 1 node, at most 2 free on any node of gpu-train-pool"}}},
      {"multi-node, cpus short on all but one",
       {cpu_node("c1").Used(40, 0), cpu_node("c2"), cpu_node("c3").Used(64, 0)},
       MakeRequest().Nodes(2).Cpus(32),
       {},
       "cpu-hpc-pool",
       {{"Resources", "needs 2 nodes with 32 cpus free, 1 available in cpu-hpc-pool"}}},
      {"memory short",
       {cpu_node("c1").Used(0, 262144 - 1024)},
       MakeRequest().MemoryMb(4096),
       {},
       "cpu-hpc-pool",
       {{"Resources", "needs 4096 MB memory on 1 node, at most 1024 MB free on any node of cpu-hpc-pool"}}},
      {"the most restrictive resource first",
       {cpu_node("c1").Used(0, 262144), cpu_node("c2").Used(60, 262144)},
       MakeRequest().Nodes(2).Cpus(8).MemoryMb(1024),
       {},
       "cpu-hpc-pool",
       {{"Resources", "needs 2 nodes with 1024 MB memory free, 0 available in cpu-hpc-pool"},
        {"Resources", "needs 2 nodes with 8 cpus free, 1 available in cpu-hpc-pool"}}},
      {"each resource somewhere, never together",
       {cpu_node("c1").Used(64, 0), cpu_node("c2").Used(0, 262144)},
       MakeRequest().Cpus(4).MemoryMb(8192),
       {},
       "cpu-hpc-pool",
       {{"Resources", "needs 1 node with 4 cpus and 8192 MB memory free at once, 0 available in cpu-hpc-pool"}}},
      {"no node has the label",
       {cpu_node("c1").Label("interconnect", "ethernet"), cpu_node("c2").Label("interconnect", "ethernet")},
       MakeRequest(),
       {{"interconnect", "ib"}},
       "cpu-hpc-pool",
       {{"NodeLabelsMismatch",
         "requires interconnect=ib; no node of cpu-hpc-pool has it (found interconnect=ethernet)"}}},
      {"no node has the label key",
       {cpu_node("c1")},
       MakeRequest(),
       {{"zone", "a"}},
       "cpu-hpc-pool",
       {{"NodeLabelsMismatch", "requires zone=a; no node of cpu-hpc-pool has label zone"}}},
      {"each label somewhere, never together",
       {cpu_node("c1").Label("zone", "a"), cpu_node("c2").Label("interconnect", "ib")},
       MakeRequest(),
       {{"interconnect", "ib"}, {"zone", "a"}},
       "cpu-hpc-pool",
       {{"NodeLabelsMismatch", "requires interconnect=ib, zone=a; no node of cpu-hpc-pool has all of them"}}},
      {"fewer labelled nodes than asked for",
       {cpu_node("c1").Label("interconnect", "ib"), cpu_node("c2")},
       MakeRequest().Nodes(2),
       {{"interconnect", "ib"}},
       "cpu-hpc-pool",
       {{"NodeLabelsMismatch", "needs 2 nodes with interconnect=ib, 1 in cpu-hpc-pool"}}},
      {"no node up",
       {cpu_node("c1").State(NodeState::kDrained), cpu_node("c2").State(NodeState::kDown)},
       MakeRequest(),
       {},
       "cpu-hpc-pool",
       {{"Resources", "needs 1 node, 0 of 2 nodes of cpu-hpc-pool up (c1 drained, c2 down)"}}},
      {"nodes not up are named after the shortage",
       {cpu_node("c1").Used(64, 0), cpu_node("c2").State(NodeState::kDraining)},
       MakeRequest().Cpus(8),
       {},
       "cpu-hpc-pool",
       {{"Resources", "needs 8 cpus on 1 node, at most 0 free on any node of cpu-hpc-pool"},
        {"Resources", "1 node of cpu-hpc-pool not up (c2 draining)"}}},
      {"no node has the GPU model",
       {gpu_node("g1")},
       MakeRequest().Gpus(1, "a100"),
       {},
       "gpu-train-pool",
       {{"Resources", "needs 1 GPU (a100) on 1 node, no up node of gpu-train-pool has a100 GPUs"}}},
      {"a pool without nodes",
       {},
       MakeRequest(),
       {},
       "empty-pool",
       {{"Resources", "needs 1 node, empty-pool has no nodes"}}},
      {"all or nothing: 3 asked, 2 fit",
       {cpu_node("c1"), cpu_node("c2"), cpu_node("c3").Used(64, 0)},
       MakeRequest().Nodes(3).Cpus(16),
       {},
       "cpu-hpc-pool",
       {{"Resources", "needs 3 nodes with 16 cpus free, 2 available in cpu-hpc-pool"}}},
      {"an invalid request is refused, not placed",
       {cpu_node("c1")},
       MakeRequest().Nodes(0),
       {},
       "cpu-hpc-pool",
       {{"Resources", "invalid request: nodes must be at least 1 and cpus, memory_mb, gpus not negative"}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const FitResult got = Fit(Ptrs(c.nodes), c.request, c.constraints, c.pool);
    EXPECT_FALSE(got.allocation.has_value());
    EXPECT_EQ(got.reasons, c.want);
  }
}

TEST(FitTest, TheSameNodeListedTwiceCountsOnce) {
  const NodeUsage node = MakeNode("a").Pool("p").Cpus(8).MemoryMb(8192);
  const FitResult got = Fit({&node, &node}, MakeRequest().Nodes(2), {}, "p");
  EXPECT_FALSE(got.allocation.has_value());
}

// Filling a pool job by job, applying each allocation: nothing is ever
// over-committed and no GPU is handed out twice.
TEST(FitTest, RepeatedFitsNeverOverCommit) {
  std::vector<NodeUsage> nodes = {SmallGpuNode("a"), SmallGpuNode("b").Gpus(2, "a100")};
  std::set<std::pair<std::string, int>> handed_out;
  std::set<std::pair<std::string, int>> cpus_handed_out;
  int placed = 0;
  for (int i = 0; i < 100; ++i) {
    const ResourceRequest request = MakeRequest().Cpus(1 + i % 3).MemoryMb(1024 * (1 + i % 2)).Gpus(i % 2);
    const FitResult fit = Fit(Ptrs(nodes), request, {}, "p");
    if (!fit.allocation) continue;
    ++placed;
    for (const auto& share : *fit.allocation) {
      for (auto& node : nodes) {
        if (node.spec.name == share.node) node.Apply(share, +1);
      }
      for (int g : share.gpu_indices) EXPECT_TRUE(handed_out.insert({share.node, g}).second) << share.node << g;
      EXPECT_EQ(static_cast<int>(share.cpu_ids.size()), share.cpus);
      for (int c : share.cpu_ids) EXPECT_TRUE(cpus_handed_out.insert({share.node, c}).second) << share.node << c;
    }
  }
  EXPECT_GT(placed, 4);
  for (const auto& node : nodes) {
    EXPECT_LE(node.cpus_used, node.spec.cpus);
    EXPECT_LE(node.memory_used_mb, node.spec.memory_mb);
  }
}

}  // namespace
}  // namespace unisched::model
