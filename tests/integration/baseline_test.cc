// Launch check 6 (docs/baseline.md): the real `unisched baseline` against a
// real daemon on the default config (four pools of declared nodes on this
// one machine, GPUs declared only): DGEMM through OpenBLAS on every node and
// across each pool's nodes, job start and sandbox latencies, the GPU
// speed-up skipped with its reason; the run recorded and read back over
// HTTP, and a second run compared with it.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <set>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// name -> pool -> node -> value of a run's figures ("" for no node).
std::map<std::string, std::map<std::string, std::map<std::string, double>>> Figures(const json& run) {
  std::map<std::string, std::map<std::string, std::map<std::string, double>>> out;
  for (const auto& f : run["figures"]) {
    out[f["name"]][f.value("pool", "")][f.value("node", "")] = f["value"].get<double>();
  }
  return out;
}

const json* SkippedItem(const json& run, const std::string& name, const std::string& pool) {
  for (const auto& s : run["skipped"]) {
    if (s["name"] == name && s.value("pool", "") == pool) return &s;
  }
  return nullptr;
}

TEST(BaselineTest, MeasuresRecordsAndComparesWithThePreviousRun) {
  TestDaemon d;
  d.Start();
  const std::vector<std::string> args = {"baseline", "--size", "256", "--repeat", "2", "--samples", "2", "--json"};
  const auto first = d.RunCli(args, {}, 300s);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  const json printed = json::parse(first.out, nullptr, false);
  ASSERT_TRUE(printed.is_object()) << first.out;
  EXPECT_FALSE(printed.contains("comparison"));

  // What the daemon keeps is what was printed.
  const Reply stored = d.Call("GET", "/v1/baselines/" + printed.value("id", ""));
  ASSERT_EQ(stored.status, 200) << stored.body;
  const json& run = stored.json;
  EXPECT_EQ(run["figures"], printed["figures"]);
  EXPECT_EQ(run["pools"], json({"cpu-hpc-pool", "elastic-light-pool", "gpu-train-pool", "inference-pool"}));
  EXPECT_EQ(run["parameters"]["size"], 256);
  EXPECT_EQ(run["created_by"], "admin");
  EXPECT_GT(run["server"]["cpus"].get<int>(), 0);
  EXPECT_TRUE(run["config"]["version"].is_number_integer()) << run["config"];

  auto figures = Figures(run);
  // DGEMM on each of the nine nodes, alone, and the pools' sums.
  const json nodes = d.Call("GET", "/v1/nodes").json["nodes"];
  ASSERT_EQ(nodes.size(), 9u);
  for (const auto& node : nodes) {
    const std::string name = node["name"], pool = node["pool"];
    SCOPED_TRACE(name);
    ASSERT_TRUE(figures["dgemm_gflops"][pool].count(name)) << first.err;
    EXPECT_GT(figures["dgemm_gflops"][pool][name], 0);
    const json& facts = run["nodes"][name];
    EXPECT_NE(facts["blas"]["config"].get<std::string>().find("OpenBLAS"), std::string::npos) << facts;
    EXPECT_GT(facts["cpus"].get<int>(), 0);
  }
  for (const char* pool : {"cpu-hpc-pool", "gpu-train-pool", "inference-pool", "elastic-light-pool"}) {
    SCOPED_TRACE(pool);
    EXPECT_GT(figures["dgemm_gflops_pool"][pool][""], 0);
    EXPECT_GT(figures["job_start_ms_p99"][pool][""], 0);
    EXPECT_LE(figures["job_start_ms_p50"][pool][""], figures["job_start_ms_p99"][pool][""]);
  }
  // Across nodes: every node of a pool at once, one rank each.
  EXPECT_GT(figures["dgemm_gflops_all_nodes"]["cpu-hpc-pool"][""], 0);
  const json* single = SkippedItem(run, "dgemm_gflops_all_nodes", "inference-pool");
  ASSERT_NE(single, nullptr) << "a pool of one node has no cross-node figure";
  // Over MPI: one product shared by one rank on each node, mpirun reaching
  // the nodes through `unisched step --rsh`, the result checked by rank 0.
  for (const auto& [pool, count] : std::map<std::string, size_t>{{"cpu-hpc-pool", 4}, {"gpu-train-pool", 2}}) {
    SCOPED_TRACE(pool);
    const json* mpi = nullptr;
    for (const auto& f : run["figures"]) {
      if (f["name"] == "dgemm_gflops_mpi" && f["pool"] == pool) mpi = &f;
    }
    ASSERT_NE(mpi, nullptr) << first.err;
    EXPECT_GT((*mpi)["value"].get<double>(), 0);
    const json& detail = (*mpi)["detail"];
    EXPECT_EQ(detail["ranks"], count);
    std::set<std::string> ran_on;
    for (const auto& node : detail["nodes"]) ran_on.insert(node.get<std::string>());
    std::set<std::string> pool_nodes;
    for (const auto& node : nodes) {
      if (node["pool"] == pool) pool_nodes.insert(node["name"].get<std::string>());
    }
    EXPECT_EQ(ran_on, pool_nodes) << "one rank on each of the pool's nodes: " << detail;
    EXPECT_NE(detail["mpi"].get<std::string>().find("Open MPI"), std::string::npos) << detail;
  }
  EXPECT_NE(SkippedItem(run, "dgemm_gflops_mpi", "inference-pool"), nullptr);
  const json* sandboxed = SkippedItem(run, "dgemm_gflops_mpi", "elastic-light-pool");
  ASSERT_NE(sandboxed, nullptr);
  EXPECT_NE((*sandboxed)["reason"].get<std::string>().find("no network"), std::string::npos) << *sandboxed;
  // Sandboxes, where the daemon can run them (root).
  if (::geteuid() == 0) {
    EXPECT_GT(figures["sandbox_create_ms_p50"]["elastic-light-pool"][""], 0);
    EXPECT_GT(figures["sandbox_first_exec_ms_p99"]["elastic-light-pool"][""], 0);
  } else {
    EXPECT_NE(SkippedItem(run, "sandbox_create_ms", ""), nullptr);
  }
  // The GPUs of the default config are declared devices only.
  for (const char* pool : {"gpu-train-pool", "inference-pool"}) {
    const json* gpu = SkippedItem(run, "gpu_speedup", pool);
    ASSERT_NE(gpu, nullptr) << pool << ": " << run["skipped"];
    EXPECT_NE((*gpu)["reason"].get<std::string>().find("declared devices only (no /dev/nvidia0)"), std::string::npos)
        << (*gpu)["reason"];
    EXPECT_FALSE(figures.count("gpu_speedup"));
  }
  // The jobs it ran are ordinary jobs of the caller.
  ASSERT_FALSE(run["jobs"].empty());
  const Reply job = d.Call("GET", "/v1/jobs/" + run["jobs"][0].get<std::string>());
  EXPECT_EQ(job.json["user"], "admin");
  EXPECT_EQ(job.json["state"], "COMPLETED");

  // The second run is compared with the first, figure by figure; its exit
  // status says whether any got worse by more than the margin.
  std::vector<std::string> again = args;
  again.insert(again.end(), {"--compare", "--margin", "50"});
  const auto second = d.RunCli(again, {}, 300s);
  const json compared = json::parse(second.out, nullptr, false);
  ASSERT_TRUE(compared.contains("comparison")) << second.out << second.err;
  const json& comparison = compared["comparison"];
  EXPECT_EQ(comparison["previous"], printed["id"]);
  EXPECT_EQ(comparison["margin_percent"], 50);
  int worse = 0, both = 0;
  for (const auto& c : comparison["changes"]) {
    worse += c["flagged"].get<bool>() ? 1 : 0;
    both += !c["before"].is_null() && !c["after"].is_null() ? 1 : 0;
  }
  EXPECT_EQ(both, static_cast<int>(run["figures"].size())) << "every figure of the first run is in the second:\n"
                                                           << second.err;
  EXPECT_EQ(comparison["worse"], worse);
  EXPECT_EQ(second.exit_code, worse > 0 ? 3 : 0) << second.err;
  EXPECT_EQ(d.Call("GET", "/v1/baselines?pools=cpu-hpc-pool,elastic-light-pool,gpu-train-pool,inference-pool")
                .json["baselines"]
                .size(),
            2u);
}

TEST(BaselineTest, CompareFlagsAFallExitsThreeAndOnlyAdminsRecord) {
  TestDaemon d;
  d.Start();
  auto post = [&](double gflops, double start_ms) {
    const json run = {{"pools", {"cpu-hpc-pool"}},
                      {"figures",
                       {{{"name", "dgemm_gflops"},
                         {"pool", "cpu-hpc-pool"},
                         {"node", "x86-c64m256-hpc-01"},
                         {"value", gflops},
                         {"unit", "GFLOP/s"},
                         {"better", "higher"}},
                        {{"name", "job_start_ms_p99"},
                         {"pool", "cpu-hpc-pool"},
                         {"value", start_ms},
                         {"unit", "ms"},
                         {"better", "lower"}}}}};
    const Reply r = d.Call("POST", "/v1/baselines", run);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.json.value("id", "");
  };
  const std::string before = post(40, 10), same = post(39, 10.5), fell = post(30, 10), slower = post(40, 20);
  const auto ok = d.RunCli({"baseline", "compare", before, same});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("No figure got worse"), std::string::npos) << ok.out;
  const auto dgemm = d.RunCli({"baseline", "compare", before, fell});
  EXPECT_EQ(dgemm.exit_code, 3) << dgemm.out << dgemm.err;
  EXPECT_NE(dgemm.out.find("-25.0%"), std::string::npos) << dgemm.out;
  EXPECT_NE(dgemm.out.find("WORSE"), std::string::npos) << dgemm.out;
  const auto latency = d.RunCli({"baseline", "compare", before, slower, "--json"});
  EXPECT_EQ(latency.exit_code, 3) << latency.out << latency.err;
  const json body = json::parse(latency.out, nullptr, false);
  EXPECT_EQ(body["comparison"]["worse"], 1) << latency.out;
  // A margin wider than the rise: not flagged.
  EXPECT_EQ(d.RunCli({"baseline", "compare", before, slower, "--margin", "150"}).exit_code, 0);
  EXPECT_EQ(d.RunCli({"baseline", "compare", before, slower, "--margin", "ten"}).exit_code, 2);
  const auto listed = d.RunCli({"baseline", "list"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("cpu-hpc-pool"), std::string::npos) << listed.out;

  // A user may read the history but not record a run: refused before any job runs.
  const std::string alice = d.CreateUser("alice", "user", {"default"});
  const auto as_alice = d.RunCli({"baseline", "--pools", "cpu-hpc-pool"}, {{"UNISCHED_TOKEN", alice}});
  EXPECT_EQ(as_alice.exit_code, 1);
  EXPECT_NE(as_alice.err.find("only platform-admins"), std::string::npos) << as_alice.err;
  EXPECT_EQ(d.Call("GET", "/v1/jobs?limit=0").json["total"], 0) << "no job was submitted";
  EXPECT_EQ(d.Call("GET", "/v1/baselines", "", {}, &alice).status, 200);
}

// Where the GPUs are real, the training command runs with 1 GPU and with
// all of the node's: this machine has none, so the node's two GPUs are
// made real for the check the way a site whose devices live elsewhere
// would (baseline.gpu_device), as character devices in a directory of the
// test; the "training" takes 0.8 s of work shared by its GPUs.
TEST(BaselineTest, WhereTheGpusAreRealTheTrainingCommandRunsOnOneAndOnAllOfThem) {
  if (::geteuid() != 0) GTEST_SKIP() << "making character devices needs root";
  TestDaemon d;
  const std::string devices = d.state_dir() + "/gpus";
  ASSERT_EQ(::mkdir(devices.c_str(), 0755), 0);
  for (const char* card : {"card0", "card1"}) {
    // The numbers of /dev/null: a character device, harmless.
    ASSERT_EQ(::mknod((devices + "/" + card).c_str(), S_IFCHR | 0666, ::makedev(1, 3)), 0) << card;
  }
  d.UseConfigText(R"yaml(
server:
  scheduler_tick_seconds: 0.1
pools:
  - name: train
    kind: gpu
    nodes: [x86-c4m8g2-train-01]
nodes:
  - {name: x86-c4m8g2-train-01, cpus: 4, memory_mb: 8192, gpus: {count: 2, model: h100, memory_gb: 80}}
queues:
  - name: training
    pool: train
    workload_kinds: [ai-training]
    policy: {max_walltime_hours: 1}
projects:
  - name: default
baseline:
  gpu_command: 'n=$(echo "$CUDA_VISIBLE_DEVICES" | tr , " " | wc -w); test "$n" = "$UNISCHED_BASELINE_GPUS" && sleep $(awk "BEGIN {print 0.8 / $UNISCHED_BASELINE_GPUS}")'
  gpu_device: )yaml" +
                  devices + R"yaml(/card{index}
)yaml");
  d.Start();
  const auto run = d.RunCli({"baseline", "--pools", "train", "--size", "64", "--samples", "1", "--json"}, {}, 120s);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const json recorded = json::parse(run.out, nullptr, false);
  const json* speedup = nullptr;
  for (const auto& f : recorded["figures"]) {
    if (f["name"] == "gpu_speedup") speedup = &f;
  }
  ASSERT_NE(speedup, nullptr) << run.err;
  EXPECT_EQ((*speedup)["node"], "x86-c4m8g2-train-01");
  const json& detail = (*speedup)["detail"];
  EXPECT_EQ(detail["gpus"], 2);
  // Each run's time from its process's start to its end: at least the
  // work's share, and the speed-up their ratio.
  EXPECT_GE(detail["seconds_1_gpu"].get<double>(), 0.8);
  EXPECT_GE(detail["seconds_all_gpus"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ((*speedup)["value"].get<double>(),
                   detail["seconds_1_gpu"].get<double>() / detail["seconds_all_gpus"].get<double>());
  EXPECT_GT((*speedup)["value"].get<double>(), 1.0) << detail;
  ASSERT_EQ(detail["jobs"].size(), 2u);
  for (const auto& [id, gpus] : {std::pair{0, 1}, std::pair{1, 2}}) {
    const json job = d.Call("GET", "/v1/jobs/" + detail["jobs"][id].get<std::string>()).json;
    EXPECT_EQ(job["state"], "COMPLETED");
    EXPECT_EQ(job["resources"]["gpus"], gpus) << job;
  }

  // Without the devices the same config records the speed-up as skipped,
  // naming the file it looked for.
  for (const char* card : {"card0", "card1"}) ::unlink((devices + "/" + card).c_str());
  const auto again = d.RunCli({"baseline", "--pools", "train", "--size", "64", "--samples", "1", "--json"}, {}, 120s);
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  const json skipped = json::parse(again.out, nullptr, false);
  const json* item = SkippedItem(skipped, "gpu_speedup", "train");
  ASSERT_NE(item, nullptr) << again.out;
  EXPECT_NE((*item)["reason"].get<std::string>().find("declared devices only (no " + devices + "/card0)"),
            std::string::npos)
      << (*item)["reason"];
}

}  // namespace
}  // namespace unisched::testing
