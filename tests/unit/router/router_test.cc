// Tests of the feature-aware router against a cluster shaped like the
// default configuration (built in code), plus small clusters for the edges.

#include "unisched/router/router.h"

#include <gtest/gtest.h>

#include <climits>
#include <random>

#include "testing/builders.h"

namespace unisched::router {
namespace {

using model::WorkloadKind;
using testing::DefaultLikeCluster;
using testing::MakeCluster;
using testing::MakeNode;
using testing::MakeQueue;
using testing::MakeRule;

// A request as the API hands it over: nodes 1, cpus 1, the rest unset.
struct Req {
  RouteRequest r;
  explicit Req(WorkloadKind kind) { r.workload.kind = kind; }
  Req& Feature(std::string k, std::string v) {
    r.workload.features[std::move(k)] = std::move(v);
    return *this;
  }
  Req& Queue(std::string q) {
    r.queue = std::move(q);
    return *this;
  }
  Req& Nodes(int n) {
    r.resources.nodes = n;
    return *this;
  }
  Req& Cpus(int n) {
    r.resources.cpus = n;
    return *this;
  }
  Req& MemoryMb(int64_t m) {
    r.resources.memory_mb = m;
    return *this;
  }
  Req& Gpus(int n, std::string model = {}) {
    r.resources.gpus = n;
    r.resources.gpu_model = std::move(model);
    return *this;
  }
  Req& Walltime(int64_t s) {
    r.resources.walltime_seconds = s;
    return *this;
  }
  Req& Constraint(std::string k, std::string v) {
    r.constraints[std::move(k)] = std::move(v);
    return *this;
  }
  operator RouteRequest() const { return r; }  // NOLINT: builder
};

TEST(RouterTest, RoutesTheDefaultLikeCluster) {
  struct Case {
    std::string name;
    RouteRequest request;
    std::string want_queue;
    std::string want_pool;
    std::string want_reason;
  };
  const std::vector<Case> cases = {
      {"fp64 simulation", Req(WorkloadKind::kHpc).Feature("precision", "fp64").Cpus(4), "hpc-precision", "cpu-hpc-pool",
       "rule fp64-hpc: kind=hpc, precision=fp64 -> hpc-precision (cpu-hpc-pool)"},
      {"hpc without precision", Req(WorkloadKind::kHpc).Cpus(4), "hpc-precision", "cpu-hpc-pool",
       "rule hpc-default: kind=hpc -> hpc-precision (cpu-hpc-pool)"},
      {"features compare exactly", Req(WorkloadKind::kHpc).Feature("precision", "FP64"), "hpc-precision",
       "cpu-hpc-pool", "rule hpc-default: kind=hpc -> hpc-precision (cpu-hpc-pool)"},
      {"training with 1 GPU", Req(WorkloadKind::kAiTraining).Gpus(1), "ai-training", "gpu-train-pool",
       "rule gpu-training: kind=ai-training, gpus>=1 -> ai-training (gpu-train-pool)"},
      {"training with a model", Req(WorkloadKind::kAiTraining).Gpus(8, "H100"), "ai-training", "gpu-train-pool",
       "rule gpu-training: kind=ai-training, gpus>=1 -> ai-training (gpu-train-pool)"},
      {"training without GPUs takes the default", Req(WorkloadKind::kAiTraining).Cpus(2), "ai-training",
       "gpu-train-pool", "default queue for kind ai-training"},
      {"inference", Req(WorkloadKind::kAiInference).Gpus(1), "ai-inference", "inference-pool",
       "rule inference: kind=ai-inference -> ai-inference (inference-pool)"},
      {"agent", Req(WorkloadKind::kAgent), "agent-sandbox", "elastic-light-pool", "default queue for kind agent"},
      {"explicit queue", Req(WorkloadKind::kHpc).Queue("hpc-precision"), "hpc-precision", "cpu-hpc-pool",
       "queue hpc-precision named by the submitter"},
      {"multi-node within the pool", Req(WorkloadKind::kHpc).Nodes(4).Cpus(64), "hpc-precision", "cpu-hpc-pool",
       "rule hpc-default: kind=hpc -> hpc-precision (cpu-hpc-pool)"},
      {"constraints the pool has", Req(WorkloadKind::kHpc).Constraint("interconnect", "ib"), "hpc-precision",
       "cpu-hpc-pool", "rule hpc-default: kind=hpc -> hpc-precision (cpu-hpc-pool)"},
      {"pinned to a node of the pool", Req(WorkloadKind::kHpc).Constraint("unisched.node", "x86-c64m256-hpc-02"),
       "hpc-precision", "cpu-hpc-pool", "rule hpc-default: kind=hpc -> hpc-precision (cpu-hpc-pool)"},
  };
  const model::ClusterSpec cluster = DefaultLikeCluster();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const Result<RouteDecision> got = Route(cluster, c.request);
    ASSERT_TRUE(got.ok()) << got.error().code << ": " << got.error().message;
    EXPECT_EQ(got->queue, c.want_queue);
    EXPECT_EQ(got->pool, c.want_pool);
    EXPECT_EQ(got->reason, c.want_reason);
  }
}

TEST(RouterTest, RejectsWithCodeFieldAndAnswer) {
  struct Case {
    std::string name;
    RouteRequest request;
    std::string want_code;
    std::string want_field;
    std::string want_message;
  };
  const std::vector<Case> cases = {
      {"unknown queue", Req(WorkloadKind::kHpc).Queue("nope"), "unknown_queue", "queue",
       "queue nope does not exist; omit queue to route automatically or use one of: hpc-precision, ai-training, "
       "ai-inference, agent-sandbox"},
      {"queue for another kind", Req(WorkloadKind::kAgent).Queue("ai-training"), "queue_mismatch", "queue",
       "queue ai-training serves ai-training jobs, not agent; omit queue to route automatically or use "
       "agent-sandbox"},
      {"GPU job to the CPU queue", Req(WorkloadKind::kHpc).Gpus(1).Queue("hpc-precision"), "unsatisfiable",
       "resources.gpus", "queue hpc-precision (pool cpu-hpc-pool) has no GPUs; omit queue or ask for 0 GPUs"},
      {"GPU job routed to the CPU queue", Req(WorkloadKind::kHpc).Gpus(2), "unsatisfiable", "resources.gpus",
       "queue hpc-precision (pool cpu-hpc-pool) has no GPUs; ask for 0 GPUs or name a queue with GPUs"},
      {"16 GPUs on one node", Req(WorkloadKind::kAiTraining).Gpus(16), "unsatisfiable", "resources.gpus",
       "no node of gpu-train-pool has 16 GPUs (largest: 8); ask for at most 8 per node or use more nodes"},
      {"a GPU model the pool lacks", Req(WorkloadKind::kAiTraining).Gpus(1, "a100"), "unsatisfiable",
       "resources.gpu_model",
       "no node of gpu-train-pool has a100 GPUs (models: h100); ask for one of those or omit gpu_model"},
      {"more cpus than any node", Req(WorkloadKind::kHpc).Cpus(128), "unsatisfiable", "resources.cpus",
       "no node of cpu-hpc-pool has 128 cpus (largest: 64); ask for at most 64 per node or use more nodes"},
      {"memory too big", Req(WorkloadKind::kHpc).MemoryMb(1048576), "unsatisfiable", "resources.memory_mb",
       "no node of cpu-hpc-pool has 1048576 MB memory (largest: 262144 MB); ask for at most 262144 per node or use "
       "more nodes"},
      {"too many nodes", Req(WorkloadKind::kHpc).Nodes(5), "unsatisfiable", "resources.nodes",
       "requires 5 nodes but cpu-hpc-pool has only 4"},
      {"too many GPU nodes", Req(WorkloadKind::kAiTraining).Nodes(3).Gpus(8), "unsatisfiable", "resources.nodes",
       "requires 3 nodes but gpu-train-pool has only 2"},
      {"walltime above the maximum", Req(WorkloadKind::kHpc).Walltime(300000), "walltime_exceeds_max",
       "resources.walltime_seconds",
       "walltime_seconds 300000 exceeds the maximum of queue hpc-precision (259200 s = 72 h)"},
      {"walltime above a fractional maximum", Req(WorkloadKind::kAgent).Walltime(3601), "walltime_exceeds_max",
       "resources.walltime_seconds", "walltime_seconds 3601 exceeds the maximum of queue agent-sandbox (3600 s = 1 h)"},
      {"constraints no node has", Req(WorkloadKind::kHpc).Constraint("interconnect", "roce"), "unsatisfiable",
       "constraints", "requires interconnect=roce; no node of cpu-hpc-pool has it (found interconnect=ib)"},
      {"a constraint key no node has", Req(WorkloadKind::kAgent).Constraint("gpu.arch", "hopper"), "unsatisfiable",
       "constraints", "requires gpu.arch=hopper; no node of elastic-light-pool has label gpu.arch"},
      {"pinned to a node of another pool",
       Req(WorkloadKind::kAiInference).Constraint("unisched.node", "x86-c64m256-hpc-01"), "unsatisfiable",
       "constraints",
       "requires unisched.node=x86-c64m256-hpc-01; no node of inference-pool has it (found "
       "unisched.node=x86-c16m128g4-infer-01)"},
  };
  const model::ClusterSpec cluster = DefaultLikeCluster();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const Result<RouteDecision> got = Route(cluster, c.request);
    ASSERT_FALSE(got.ok()) << "routed to " << got->queue;
    EXPECT_EQ(got.error().kind, ErrorKind::kUnprocessable);
    EXPECT_EQ(got.error().code, c.want_code);
    EXPECT_EQ(got.error().field, c.want_field);
    EXPECT_EQ(got.error().message, c.want_message);
  }
}

TEST(RouterTest, AppliesQueueDefaults) {
  struct Case {
    std::string name;
    model::ClusterSpec cluster;
    RouteRequest request;
    int64_t want_memory_mb;
    int64_t want_walltime_seconds;
  };
  // A queue without any defaults or limits.
  const model::ClusterSpec bare = MakeCluster()
                                      .Node(MakeNode("n1").Pool("p").Cpus(8).MemoryMb(65536))
                                      .Queue(MakeQueue("q").Pool("p"))
                                      .Rule(MakeRule("all").Queue("q"));
  const std::vector<Case> cases = {
      {"hpc: memory per cpu and the default walltime", DefaultLikeCluster(), Req(WorkloadKind::kHpc).Cpus(4), 4 * 4096,
       3600},
      {"agent: a quarter of an hour", DefaultLikeCluster(), Req(WorkloadKind::kAgent).Cpus(2), 2 * 512, 900},
      {"no default walltime: the maximum", DefaultLikeCluster(), Req(WorkloadKind::kAiInference).Cpus(3), 3 * 1024,
       24 * 3600},
      {"no defaults, no maximum", bare, Req(WorkloadKind::kHpc).Cpus(2), 2 * 1024, 3600},
      {"given values are kept", DefaultLikeCluster(), Req(WorkloadKind::kHpc).Cpus(4).MemoryMb(5000).Walltime(120),
       5000, 120},
      {"walltime exactly at the maximum", DefaultLikeCluster(), Req(WorkloadKind::kHpc).Walltime(72 * 3600), 4096,
       72 * 3600},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const Result<RouteDecision> got = Route(c.cluster, c.request);
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ(got->resources.memory_mb, c.want_memory_mb);
    EXPECT_EQ(got->resources.walltime_seconds, c.want_walltime_seconds);
    // The rest is passed through.
    const RouteRequest& in = c.request;
    EXPECT_EQ(got->resources.nodes, in.resources.nodes);
    EXPECT_EQ(got->resources.cpus, in.resources.cpus);
    EXPECT_EQ(got->resources.gpus, in.resources.gpus);
  }
}

TEST(RouterTest, DefaultedMemoryThatCannotFitSaysWhereItCameFrom) {
  const model::ClusterSpec cluster =
      MakeCluster()
          .Node(MakeNode("n1").Pool("p").Cpus(64).MemoryMb(262144))
          .Queue(MakeQueue("q").Pool("p").DefaultMemoryMbPerCpu(8192).Kinds({WorkloadKind::kHpc}));
  const Result<RouteDecision> got = Route(cluster, Req(WorkloadKind::kHpc).Cpus(64));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().field, "resources.memory_mb");
  EXPECT_EQ(got.error().message,
            "no node of p has 524288 MB memory (largest: 262144 MB); ask for at most 262144 per node or use more "
            "nodes (memory_mb was not given; queue q defaults it to cpus x 8192 MB)");
}

TEST(RouterTest, ResourcesThatExistOnlyOnDifferentNodes) {
  // One node with many cpus and little memory, one the other way round.
  const model::ClusterSpec cluster = MakeCluster()
                                         .Node(MakeNode("wide").Pool("p").Cpus(64).MemoryMb(8192))
                                         .Node(MakeNode("deep").Pool("p").Cpus(8).MemoryMb(262144))
                                         .Queue(MakeQueue("q").Pool("p").Kinds({WorkloadKind::kHpc}));
  struct Case {
    std::string name;
    RouteRequest request;
    std::string want_field;
    std::string want_message;
  };
  const std::vector<Case> cases = {
      {"one node", Req(WorkloadKind::kHpc).Cpus(32).MemoryMb(65536), "resources.cpus",
       "no node of p has 32 cpus and 65536 MB memory together; ask for less per node or use more nodes"},
      {"two nodes, each resource on one", Req(WorkloadKind::kHpc).Nodes(2).Cpus(16), "resources.nodes",
       "requires 2 nodes but p has only 1 with 16 cpus"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const Result<RouteDecision> got = Route(cluster, c.request);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.error().code, "unsatisfiable");
    EXPECT_EQ(got.error().field, c.want_field);
    EXPECT_EQ(got.error().message, c.want_message);
  }
}

TEST(RouterTest, DrainedAndBusyNodesStillCountAsCapacity) {
  // The router sees only the ClusterSpec: node state and usage cannot make a
  // job unsatisfiable, since both change.
  const Result<RouteDecision> got = Route(DefaultLikeCluster(), Req(WorkloadKind::kAiTraining).Nodes(2).Gpus(8));
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->pool, "gpu-train-pool");
}

// Rules: first match that can hold the job; the first matched error if none can.
TEST(RouterTest, RuleOrderAndFallThrough) {
  const model::ClusterSpec cluster =
      MakeCluster()
          .Node(MakeNode("s1").Pool("small").Cpus(8).MemoryMb(16384))
          .Node(MakeNode("b1").Pool("big").Cpus(64).MemoryMb(262144))
          .Node(MakeNode("g1").Pool("gpu").Cpus(32).MemoryMb(262144).Gpus(4, "h100"))
          .Queue(MakeQueue("small-q").Pool("small").Kinds({WorkloadKind::kHpc}))
          .Queue(MakeQueue("big-q").Pool("big").Kinds({WorkloadKind::kHpc}))
          .Queue(MakeQueue("gpu-q").Pool("gpu"))  // serves any kind
          .Rule(MakeRule("few-gpus").MinGpus(1).MaxGpus(2).Queue("gpu-q"))
          .Rule(MakeRule("exactly-four").MinGpus(4).MaxGpus(4).Queue("gpu-q"))
          .Rule(MakeRule("low-gpu").MaxGpus(0).Kind(WorkloadKind::kHpc).Feature("size", "s").Queue("small-q"))
          .Rule(MakeRule("hpc").Kind(WorkloadKind::kHpc).Queue("big-q"));
  struct Case {
    std::string name;
    RouteRequest request;
    std::string want_queue;
    std::string want_reason;
  };
  const std::vector<Case> cases = {
      {"the first match that fits", Req(WorkloadKind::kHpc).Feature("size", "s").Cpus(4), "small-q",
       "rule low-gpu: kind=hpc, size=s, gpus<=0 -> small-q (small)"},
      {"a match that cannot hold it is passed over", Req(WorkloadKind::kHpc).Feature("size", "s").Cpus(32), "big-q",
       "rule hpc: kind=hpc -> big-q (big); skipped rule low-gpu: no node of small has 32 cpus (largest: 8); ask for "
       "at most 8 per node or use more nodes"},
      {"a gpu range", Req(WorkloadKind::kAgent).Gpus(2), "gpu-q", "rule few-gpus: gpus in [1, 2] -> gpu-q (gpu)"},
      {"an exact gpu count", Req(WorkloadKind::kAgent).Gpus(4), "gpu-q", "rule exactly-four: gpus=4 -> gpu-q (gpu)"},
      {"a queue serving any kind may be named", Req(WorkloadKind::kAgent).Queue("gpu-q"), "gpu-q",
       "queue gpu-q named by the submitter"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const Result<RouteDecision> got = Route(cluster, c.request);
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ(got->queue, c.want_queue);
    EXPECT_EQ(got->reason, c.want_reason);
  }

  // Nothing that matched can hold it: the first matched rule's error.
  const Result<RouteDecision> none = Route(cluster, Req(WorkloadKind::kHpc).Feature("size", "s").Cpus(100));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, "unsatisfiable");
  EXPECT_EQ(none.error().message,
            "no node of small has 100 cpus (largest: 8); ask for at most 8 per node or use more nodes");
}

TEST(RouterTest, NoRuleAndNoDefaultQueue) {
  const model::ClusterSpec cluster = MakeCluster()
                                         .Node(MakeNode("n1").Pool("p").Cpus(8).MemoryMb(16384))
                                         .Queue(MakeQueue("q").Pool("p").Kinds({WorkloadKind::kHpc}));
  const Result<RouteDecision> got = Route(cluster, Req(WorkloadKind::kAgent));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, "no_route");
  EXPECT_EQ(got.error().field, "workload.kind");
  EXPECT_EQ(got.error().message, "no routing rule matches and no queue serves kind agent; name a queue");
}

TEST(RouterTest, SuggestsTheQueueAutomaticRoutingWouldPick) {
  // hpc jobs may use the GPU queue; naming the CPU one with GPUs points there.
  const model::ClusterSpec cluster =
      MakeCluster()
          .Node(MakeNode("c1").Pool("cpu").Cpus(8).MemoryMb(16384))
          .Node(MakeNode("g1").Pool("gpu").Cpus(8).MemoryMb(16384).Gpus(2))
          .Queue(MakeQueue("cpu-q").Pool("cpu").Kinds({WorkloadKind::kHpc}))
          .Queue(MakeQueue("gpu-q").Pool("gpu").Kinds({WorkloadKind::kHpc, WorkloadKind::kAiTraining}));
  const Result<RouteDecision> got = Route(cluster, Req(WorkloadKind::kHpc).Gpus(1).Queue("cpu-q"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().message, "queue cpu-q (pool cpu) has no GPUs; omit queue or use gpu-q");

  const Result<RouteDecision> mismatch = Route(cluster, Req(WorkloadKind::kAgent).Queue("gpu-q"));
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.error().message,
            "queue gpu-q serves hpc and ai-training jobs, not agent; omit queue to route automatically");
}

// Route validates nothing the API validates, but no input may crash it.
TEST(RouterTest, SurvivesArbitraryInput) {
  const std::vector<model::ClusterSpec> clusters = {
      DefaultLikeCluster(),
      model::ClusterSpec{},
      MakeCluster().Queue(MakeQueue("orphan").Pool("missing")).Rule(MakeRule("r").Queue("gone")),
      MakeCluster()
          .Node(MakeNode("n").Pool("p").Cpus(1).MemoryMb(1))
          .Queue(MakeQueue("q").Pool("p").MaxWalltimeHours(-1).DefaultWalltimeHours(1e300).DefaultMemoryMbPerCpu(
              INT64_MAX)),
  };
  const std::vector<int> ints = {INT_MIN, -1, 0, 1, 2, 8, 16, INT_MAX};
  const std::vector<int64_t> longs = {INT64_MIN, -1, 0, 1, 4096, INT64_MAX};
  std::mt19937 rng(42);
  auto pick = [&](const auto& v) { return v[rng() % v.size()]; };
  for (int i = 0; i < 2000; ++i) {
    Req req(static_cast<WorkloadKind>(rng() % 4));
    req.Nodes(pick(ints)).Cpus(pick(ints)).MemoryMb(pick(longs)).Gpus(pick(ints), rng() % 2 ? "h100" : "");
    req.Walltime(pick(longs));
    if (rng() % 3 == 0) req.Queue(pick(std::vector<std::string>{"q", "orphan", "hpc-precision", "", "nope"}));
    if (rng() % 3 == 0) req.Constraint("interconnect", "ib");
    const model::ClusterSpec& cluster = pick(clusters);
    const Result<RouteDecision> got = Route(cluster, req);
    if (!got.ok()) {
      EXPECT_FALSE(got.error().code.empty());
      EXPECT_FALSE(got.error().message.empty());
    }
  }
}

}  // namespace
}  // namespace unisched::router
