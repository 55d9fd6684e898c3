// Shared storage (config storage.shared, docs/data.md; issue 23 point 1) on
// a real daemon: jobs of the pools given a file system find it in
// UNISCHED_SHARED_<NAME>, an HPC job and a sandboxed agent job share a
// project directory there, another project's job cannot read it, a
// read-only file system stays read-only, one seen elsewhere than at the
// node's path is bound there, a job can start in its project directory
// (workdir), and a pool not given the file system does not see it.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class SharedStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "project directories, accounts and binds need root";
    // Under /tmp, reachable by the jobs' accounts (the state directory is not).
    root_ = "/tmp/unisched-shared-" + std::to_string(::getpid());
    fs::remove_all(root_);
    for (const std::string dir : {"", "/data", "/refs-src", "/refs"}) {
      fs::create_directories(root_ + dir);
      fs::permissions(root_ + dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec |
                                       fs::perms::group_read | fs::perms::others_read);
    }
    std::ofstream(root_ + "/refs-src/genome.fa") << ">chr1\nACGT\n";
    fs::permissions(root_ + "/refs-src/genome.fa",
                    fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
    std::string config = ReadFile(std::string(UNISCHED_SOURCE_DIR) + "/config/unisched.yaml");
    const size_t projects = config.find("\nprojects:\n");
    ASSERT_NE(projects, std::string::npos);
    config.insert(projects + 11, "  - name: physics\n    shares: 1\n");
    config +=
        "\nstorage:\n  shared:\n"
        "    - {name: data, path: " +
        root_ +
        "/data, pools: [cpu-hpc-pool, elastic-light-pool]}\n"
        "    - {name: ref-genomes, path: " +
        root_ + "/refs-src, mount: " + root_ +
        "/refs, read_only: true, project_dirs: false, pools: [cpu-hpc-pool, elastic-light-pool]}\n";
    daemon_.UseConfigText(config);
    daemon_.Start();
    alice_ = daemon_.CreateUser("alice", "user", {"default"});
    bob_ = daemon_.CreateUser("bob", "user", {"physics"});
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }

  // Runs `script` as `token`'s user with `extra` fields; returns the job at its end and its output.
  std::pair<json, std::string> Run(const std::string& kind, const std::string& script, const std::string& token,
                                   json extra = json::object()) {
    json job = {{"workload", {{"kind", kind}}}, {"command", {"/bin/sh", "-c", script}}};
    job.update(extra);
    auto submitted = daemon_.Call("POST", "/v1/jobs", job.dump(), {}, &token);
    EXPECT_EQ(submitted.status, 201) << submitted.body;
    const std::string id = submitted.json.value("id", "");
    json done = daemon_.WaitTerminal(id);
    return {done, daemon_.Call("GET", "/v1/jobs/" + id + "/log").body};
  }

  TestDaemon daemon_;
  std::string root_, alice_, bob_;
};

TEST_F(SharedStorageTest, ProjectsShareTheirDirectoryAcrossJobKindsAndNoOneElseReadsIt) {
  // An HPC job of alice's project writes a result into its project directory.
  auto [hpc, hpc_log] = Run("hpc",
                            "echo $UNISCHED_SHARED_DATA; echo result-1 > $UNISCHED_SHARED_DATA/result.txt && "
                            "echo wrote; cat $UNISCHED_SHARED_REF_GENOMES/genome.fa | head -1; "
                            "touch $UNISCHED_SHARED_REF_GENOMES/x 2>/dev/null || echo refs-read-only",
                            alice_);
  EXPECT_EQ(hpc["state"], "COMPLETED") << hpc.dump() << hpc_log;
  EXPECT_NE(hpc_log.find(root_ + "/data/default\n"), std::string::npos) << hpc_log;
  EXPECT_NE(hpc_log.find("wrote"), std::string::npos) << hpc_log;
  EXPECT_NE(hpc_log.find(">chr1"), std::string::npos) << hpc_log;  // bound from refs-src at refs
  EXPECT_NE(hpc_log.find("refs-read-only"), std::string::npos) << hpc_log;
  EXPECT_FALSE(fs::exists(root_ + "/refs/genome.fa"));  // the bind is the job's alone
  EXPECT_FALSE(fs::exists(root_ + "/refs-src/x"));

  // The project directory: the project's group, setgid, closed to others.
  struct stat st {};
  ASSERT_EQ(::stat((root_ + "/data/default").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 02770u);
  int64_t default_gid = 0;
  const json ids = daemon_.Call("GET", "/v1/unix-ids").json;  // kept: the loop reads into it
  for (const auto& p : ids["projects"]) {
    if (p["name"] == "default") default_gid = p["gid"];
  }
  EXPECT_EQ(static_cast<int64_t>(st.st_gid), default_gid);

  // A sandboxed agent job of the same project reads it and adds its own.
  auto [agent, agent_log] =
      Run("agent",
          "cat $UNISCHED_SHARED_DATA/result.txt && echo agent-2 > $UNISCHED_SHARED_DATA/agent.txt "
          "&& echo agent-wrote; head -1 $UNISCHED_SHARED_REF_GENOMES/genome.fa",
          alice_);
  EXPECT_EQ(agent["state"], "COMPLETED") << agent.dump() << agent_log;
  EXPECT_EQ(agent["queue"], "agent-sandbox");
  EXPECT_NE(agent_log.find("result-1"), std::string::npos) << agent_log;
  EXPECT_NE(agent_log.find("agent-wrote"), std::string::npos) << agent_log;
  EXPECT_NE(agent_log.find(">chr1"), std::string::npos) << agent_log;
  EXPECT_EQ(ReadFile(root_ + "/data/default/agent.txt"), "agent-2\n");

  // A job that starts in its project directory (Slurm's -D on shared storage).
  auto [in_dir, in_dir_log] = Run("hpc", "pwd; cat agent.txt", alice_, {{"workdir", root_ + "/data/default"}});
  EXPECT_EQ(in_dir["state"], "COMPLETED") << in_dir.dump() << in_dir_log;
  EXPECT_NE(in_dir_log.find(root_ + "/data/default\nagent-2"), std::string::npos) << in_dir_log;

  // Another project's job: its own directory, and none of alice's files.
  auto [other, other_log] = Run("hpc",
                                "echo $UNISCHED_SHARED_DATA; cat " + root_ +
                                    "/data/default/result.txt 2>/dev/null && echo READ_OTHERS; "
                                    "ls " +
                                    root_ + "/data/default 2>/dev/null && echo LISTED_OTHERS; echo done",
                                bob_, {{"project", "physics"}});
  EXPECT_EQ(other["state"], "COMPLETED") << other.dump() << other_log;
  EXPECT_NE(other_log.find(root_ + "/data/physics\n"), std::string::npos) << other_log;
  EXPECT_EQ(other_log.find("READ_OTHERS"), std::string::npos) << other_log;
  EXPECT_EQ(other_log.find("LISTED_OTHERS"), std::string::npos) << other_log;
  EXPECT_NE(other_log.find("done"), std::string::npos) << other_log;

  // A pool not given the file system does not see it.
  auto [gpu, gpu_log] = Run("ai-training", "echo data=${UNISCHED_SHARED_DATA:-none}", alice_,
                            {{"resources", {{"gpus", 1}, {"cpus", 1}, {"memory_mb", 64}}}});
  EXPECT_EQ(gpu["state"], "COMPLETED") << gpu.dump() << gpu_log;
  EXPECT_NE(gpu_log.find("data=none"), std::string::npos) << gpu_log;
}

TEST_F(SharedStorageTest, AFileSystemMissingOnTheNodeFailsTheLaunchSayingSo) {
  fs::remove_all(root_ + "/data");
  auto [job, log] = Run("hpc", "true", alice_, {{"max_retries", 0}});
  EXPECT_EQ(job["state"], "FAILED") << job.dump();
  EXPECT_NE(job.dump().find("shared file system " + root_ + "/data is not on node"), std::string::npos) << job.dump();
}

}  // namespace
}  // namespace unisched::testing
