// Slurm's -o/-e (output_file, error_file; docs/execution.md "Output files")
// through a real daemon: each task's stdout and stderr copied into files
// its own account creates, named by the patterns, under the shared output
// directory for relative ones; refusals name the field.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kConfig = R"yaml(
server:
  scheduler_tick_seconds: 0.1
executor:
  output_dir: OUTPUT_DIR
pools:
  - name: cpu
    kind: cpu
    nodes: [x86-c4m4-hpc-01, x86-c4m4-hpc-02]
nodes:
  - {name: x86-c4m4-hpc-01, cpus: 4, memory_mb: 4096}
  - {name: x86-c4m4-hpc-02, cpus: 4, memory_mb: 4096}
queues:
  - name: batch
    pool: cpu
projects:
  - name: default
)yaml";

class OutputFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shared_ = daemon_.state_dir() + "/shared";
    fs::create_directories(shared_);
    fs::permissions(shared_, fs::perms::all);  // any job account may create its files here
    std::string config = kConfig;
    config.replace(config.find("OUTPUT_DIR"), 10, shared_);
    daemon_.UseConfigText(config);
    daemon_.Start();
  }
  static json Job(const std::string& script) { return ShellJob("batch", script); }
  TestDaemon daemon_;
  std::string shared_;
};

TEST_F(OutputFilesTest, EachRankWritesTheFilesItsPatternsNameAsItsOwnAccount) {
  json job = Job("echo out $UNISCHED_RANK uid $(id -u); echo err $UNISCHED_RANK >&2");
  job["name"] = "sim";
  job["launch"] = "per_node";
  job["resources"]["nodes"] = 2;
  job["output_file"] = "%x-%j-%t.out";
  job["error_file"] = "%x-%j-%t-%N.err";
  const std::string id = daemon_.Submit(job);
  const json ended = daemon_.WaitTerminal(id);
  ASSERT_EQ(ended["state"], "COMPLETED") << ended.dump(2);
  EXPECT_EQ(ended["output_file"], shared_ + "/%x-%j-%t.out");  // made absolute when submitted
  const std::vector<std::string> nodes = ended["nodes"];
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::string r = std::to_string(rank);
    const std::string out = shared_ + "/sim-" + id + "-" + r + ".out";
    const std::string err = shared_ + "/sim-" + id + "-" + r + "-" + nodes[static_cast<size_t>(rank)] + ".err";
    const std::string text = ReadFile(out);
    ASSERT_EQ(text.rfind("out " + r + " uid ", 0), 0u) << text;
    EXPECT_EQ(ReadFile(err), "err " + r + "\n");
    // Created by the job's own account (never root), readable by its group.
    struct stat st {};
    ASSERT_EQ(::stat(out.c_str(), &st), 0);
    const std::string uid = text.substr(text.rfind(' ') + 1, text.size() - text.rfind(' ') - 2);
    EXPECT_EQ(std::to_string(st.st_uid), uid);
    EXPECT_NE(st.st_uid, 0u);
    EXPECT_EQ(st.st_mode & 0777, 0640u);
    // The captured log is unchanged.
    EXPECT_EQ(daemon_.Call("GET", "/v1/jobs/" + id + "/log?rank=" + r).body, text);
  }
}

TEST_F(OutputFilesTest, TheCliTakesSlurmsFlagsAndStderrJoinsTheOutputFileWithoutE) {
  const auto submit = daemon_.RunCli(
      {"submit", "--queue", "batch", "--wait", "-o", "slurm-%j.out", "--", "/bin/sh", "-c", "echo a; echo b >&2"});
  ASSERT_EQ(submit.exit_code, 0) << submit.out << submit.err;
  const json jobs = daemon_.Call("GET", "/v1/jobs").json;
  const std::string id = jobs["jobs"][0]["id"];
  EXPECT_EQ(ReadFile(shared_ + "/slurm-" + id + ".out"), "a\nb\n");
  EXPECT_EQ(jobs["jobs"][0]["error_file"], "");
}

TEST_F(OutputFilesTest, AFileItsAccountMayNotCreateFailsTheLaunchSayingWhy) {
  const std::string closed = daemon_.state_dir() + "/closed";
  fs::create_directories(closed);
  fs::permissions(closed, fs::perms::owner_all);  // root's alone
  json job = Job("echo never");
  job["output_file"] = closed + "/job-%j.out";
  const std::string id = daemon_.Submit(job);
  const json ended = daemon_.WaitTerminal(id);
  EXPECT_EQ(ended["state"], "FAILED") << ended.dump(2);
  const std::string reason = ended["attempts"][0]["reason"];
  EXPECT_NE(reason.find("cannot open the job's output file " + closed + "/job-" + id + ".out (-o)"), std::string::npos)
      << reason;
  EXPECT_NE(reason.find("Permission denied"), std::string::npos) << reason;
  EXPECT_FALSE(fs::exists(closed + "/job-" + id + ".out"));
}

TEST_F(OutputFilesTest, BadPatternsAreRefusedNamingTheField) {
  json job = Job("true");
  job["output_file"] = "slurm-%q.out";
  Reply r = daemon_.Call("POST", "/v1/jobs", job);
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(r.json["error"]["field"], "output_file") << r.body;
  job = Job("true");
  job["error_file"] = 7;
  r = daemon_.Call("POST", "/v1/jobs", job);
  EXPECT_EQ(r.status, 400) << r.body;  // a wrong type, as for every field
  EXPECT_EQ(r.json["error"]["field"], "error_file") << r.body;
}

TEST(OutputFilesWithoutSharedStorageTest, ARelativePatternNeedsTheSharedOutputDirectory) {
  TestDaemon daemon;
  std::string config = kConfig;
  config.erase(config.find("executor:"), std::string("executor:\n  output_dir: OUTPUT_DIR\n").size());
  daemon.UseConfigText(config);
  daemon.Start();
  const json job = {
      {"queue", "batch"}, {"workload", {{"kind", "hpc"}}}, {"output_file", "slurm-%j.out"}, {"command", {"true"}}};
  Reply r = daemon.Call("POST", "/v1/jobs", job);
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(r.json["error"]["field"], "output_file") << r.body;
  EXPECT_NE(r.body.find("executor.output_dir"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace unisched::testing
