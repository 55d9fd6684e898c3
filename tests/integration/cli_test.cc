// The command-line client and validate-config against the real daemon.

#include <gtest/gtest.h>

#include <fstream>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

TEST(CliTest, ValidateConfig) {
  TestDaemon d;  // not started: validate-config opens no port and no database
  auto ok = d.RunCli({"validate-config", std::string(UNISCHED_SOURCE_DIR) + "/config/unisched.yaml"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_EQ(ok.out, "OK\n");
  const std::string bad = d.state_dir() + "/bad.yaml";
  std::ofstream(bad) << "pools:\n  - name: p\n    kind: cpu\n    nodes: [x86-c1m1-a-01]\n"
                        "nodes:\n  - name: x86-c1m1-a-01\n    cpus: 0\n    memory_mb: 1\n"
                        "queues:\n  - name: q\n    pool: nowhere\n    policy: {max_concurrency: 0}\n";
  auto errors = d.RunCli({"validate-config", bad});
  EXPECT_EQ(errors.exit_code, 1);
  EXPECT_NE(errors.out.find("queues[0].policy.max_concurrency"), std::string::npos) << errors.out;
  EXPECT_NE(errors.out.find("queues[0].pool"), std::string::npos) << errors.out;
  EXPECT_NE(errors.out.find("nodes[0].cpus"), std::string::npos) << errors.out;
  // Valid, but naming a backend this binary does not have: the server would
  // not start on it, so validation says so.
  const std::string placed = d.state_dir() + "/placed.yaml";
  std::ofstream(placed) << "pools:\n  - {name: far, kind: cpu, backend: slurm-west, nodes: []}\n"
                           "nodes: []\nqueues:\n  - {name: q, pool: far}\nprojects:\n  - name: default\n";
  auto unknown = d.RunCli({"validate-config", placed});
  EXPECT_EQ(unknown.exit_code, 1) << unknown.out;
  EXPECT_NE(unknown.out.find("pools[0].backend: 'slurm-west' is not a backend of this daemon"), std::string::npos)
      << unknown.out;
}

TEST(CliTest, SubmitWaitAndList) {
  TestDaemon d;
  d.Start();
  auto submit = d.RunCli({"submit", "--kind", "agent", "--name", "from-cli", "--wait", "--", "/bin/echo", "hi"});
  EXPECT_EQ(submit.exit_code, 0) << submit.out << submit.err;
  EXPECT_NE(submit.out.find("COMPLETED"), std::string::npos) << submit.out;
  auto jobs = d.RunCli({"jobs"});
  EXPECT_EQ(jobs.exit_code, 0) << jobs.err;
  EXPECT_NE(jobs.out.find("from-cli"), std::string::npos) << jobs.out;
  auto json_jobs = d.RunCli({"jobs", "--json"});
  EXPECT_EQ(nlohmann::json::parse(json_jobs.out)["jobs"][0]["name"], "from-cli");
  auto queues = d.RunCli({"queues"});
  EXPECT_NE(queues.out.find("hpc-precision"), std::string::npos) << queues.out;
  auto nodes = d.RunCli({"nodes"});
  EXPECT_NE(nodes.out.find("x86-c64m256-hpc-01"), std::string::npos) << nodes.out;
  auto failing = d.RunCli({"submit", "--kind", "agent", "--wait", "--", "/bin/false"});
  EXPECT_EQ(failing.exit_code, 1);
  auto bad = d.RunCli({"submit", "--kind", "ai-training", "--gpus", "16", "--", "true"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("resources.gpus"), std::string::npos) << bad.err;
}

TEST(CliTest, WorkflowSubmitShowGraphAndCancel) {
  TestDaemon d;
  d.Start();
  const std::string file = d.state_dir() + "/workflow.json";
  std::ofstream(file) << R"({"name": "cli", "tasks": [
    {"name": "first", "job": {"workload": {"kind": "hpc"}, "command": ["sleep", "300"]}},
    {"name": "second", "after": ["first"], "job": {"workload": {"kind": "hpc"}, "command": ["true"]}}]})";
  auto submit = d.RunCli({"workflow", "submit", file});
  ASSERT_EQ(submit.exit_code, 0) << submit.out << submit.err;
  const std::string id = submit.out.substr(0, submit.out.find('\n'));
  auto show = d.RunCli({"workflow", "show", id});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("'cli' RUNNING"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("second"), std::string::npos) << show.out;
  auto ls = d.RunCli({"workflow", "ls"});
  EXPECT_NE(ls.out.find("cli"), std::string::npos) << ls.out;
  auto graph = d.RunCli({"workflow", "graph", id, "--format", "dot"});
  EXPECT_NE(graph.out.find("t_first -> t_second;"), std::string::npos) << graph.out;
  auto cancel = d.RunCli({"workflow", "cancel", id});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_NE(cancel.out.find("CANCELLED"), std::string::npos) << cancel.out;
  auto again = d.RunCli({"workflow", "cancel", id});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("already ended CANCELLED"), std::string::npos) << again.err;
  auto bad = d.RunCli({"workflow", "frobnicate"});
  EXPECT_NE(bad.exit_code, 0);
}

}  // namespace
}  // namespace unisched::testing
