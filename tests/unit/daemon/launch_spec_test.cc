// The launch spec of an attempt (daemon/launch_spec.h), built from a job and
// the default config: what reaches the supervisor and the cgroup.

#include "daemon/launch_spec.h"

#include <gtest/gtest.h>

#include <tuple>

#include "testing/config_text.h"

namespace unisched::daemon {
namespace {

config::Config DefaultConfig() {
  auto loaded = config::LoadConfigText(unisched::testing::DefaultConfigText());
  EXPECT_TRUE(std::holds_alternative<config::Config>(loaded));
  return std::get<config::Config>(loaded);
}

model::Job TrainingJob() {
  model::Job job;
  job.id = 42;
  job.name = "train";
  job.user = "alice";
  job.project = "genomics";
  job.queue = "ai-training";
  job.pool = "gpu-train-pool";
  job.command = {"python3", "train.py"};
  job.env = {{"EPOCHS", "3"}, {"UNISCHED_JOB_ID", "forged"}};
  job.resources.cpus = 8;
  job.resources.gpus = 2;
  job.resources.walltime_seconds = 7200;
  model::Attempt attempt;
  attempt.number = 2;
  attempt.allocation = {{.node = "gpu-01",
                         .cpus = 8,
                         .memory_mb = 65536,
                         .gpu_indices = {1, 3},
                         .cpu_ids = {8, 9, 10, 11, 12, 13, 14, 15}}};
  job.attempts = {model::Attempt{}, attempt};
  return job;
}

TEST(LaunchSpecTest, TheAllocationBecomesTheCapsAndTheEnvironment) {
  const config::Config config = DefaultConfig();
  const executor::LaunchSpec spec = BuildLaunchSpec(config, TrainingJob(), "alice", /*as_root=*/true);
  EXPECT_EQ(spec.job_id, 42);
  EXPECT_EQ(spec.attempt, 2);  // the current attempt
  EXPECT_EQ(spec.argv, (std::vector<std::string>{"python3", "train.py"}));
  EXPECT_EQ(spec.node, "gpu-01");
  EXPECT_EQ(spec.unix_user, "alice");
  EXPECT_EQ(spec.walltime_seconds, 7200);
  EXPECT_EQ(spec.limits.memory_bytes, int64_t{65536} << 20);
  EXPECT_EQ(spec.limits.cpu_millis, 8000);
  EXPECT_EQ(spec.limits.pids, config.executor.pids_limit);
  EXPECT_EQ(spec.kill_grace_seconds, config.executor.kill_grace_seconds);
  EXPECT_EQ(spec.preempt_grace_seconds, config.cluster.FindQueue("ai-training")->policy.preempt_grace_seconds);
  EXPECT_FALSE(spec.isolate);  // gpu-train-pool is no sandbox pool

  EXPECT_EQ(spec.env.at("UNISCHED_JOB_ID"), "42");  // the scheduler's value, not the job's
  EXPECT_EQ(spec.env.at("EPOCHS"), "3");
  EXPECT_EQ(spec.env.at("UNISCHED_ATTEMPT"), "2");
  EXPECT_EQ(spec.env.at("UNISCHED_NODELIST"), "gpu-01");
  EXPECT_EQ(spec.env.at("CUDA_VISIBLE_DEVICES"), "1,3");
  EXPECT_EQ(spec.env.at("OMP_NUM_THREADS"), "8");
  EXPECT_EQ(spec.env.at("USER"), "alice");
  EXPECT_EQ(spec.env.at("PATH"), "/usr/local/bin:/usr/bin:/bin");
  EXPECT_EQ(spec.env.count("HOME"), 0u);  // nothing of the daemon's own
  // The batch script's CPUs: its first node's share, all of it.
  EXPECT_EQ(spec.cpu_set, (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(spec.env.at("UNISCHED_CPU_SET"), "8-15");
}

// A batch script job: the script travels in the spec (to a local node's
// supervisor or an agent's), argv is the script's name and arguments, and
// the job starts in its workdir; its steps run commands there.
TEST(LaunchSpecTest, ABatchScriptAndItsWorkdirTravelInTheSpecButNotIntoItsSteps) {
  model::Job job = TrainingJob();
  job.command = {"train.sh", "--epochs", "3"};
  job.script = model::ScriptText("#!/bin/bash\nsrun python3 train.py \"$@\"\n");
  job.workdir = "/scratch/alice";
  const executor::LaunchSpec spec = BuildLaunchSpec(DefaultConfig(), job, "alice", /*as_root=*/true);
  EXPECT_EQ(spec.script, job.script.str());
  EXPECT_EQ(spec.argv, job.command);
  EXPECT_EQ(spec.chdir, "/scratch/alice");
  service::StepRequest step;
  step.command = {"hostname"};
  auto steps = BuildStepSpecs(spec, job, step, 1, "alice");
  ASSERT_TRUE(steps.ok()) << steps.error().message;
  ASSERT_FALSE(steps->empty());
  EXPECT_EQ(steps->front().argv, std::vector<std::string>{"hostname"});
  EXPECT_EQ(steps->front().script, "");
  EXPECT_EQ(steps->front().chdir, "/scratch/alice");  // as srun inherits the batch script's directory
}

// The shared file systems of the job's pool, and only those, travel in its
// spec with the project whose directory it gets (docs/data.md).
TEST(LaunchSpecTest, TheSharedFileSystemsOfItsPoolTravelWithItsProject) {
  config::Config config = DefaultConfig();
  config.storage.shared = {{"data", "/lustre/u", "", false, {}, true},
                           {"ref-genomes", "/lustre/refs", "/refs", true, {"gpu-train-pool"}, false},
                           {"hpc-only", "/scratch", "", false, {"cpu-hpc-pool"}, true}};
  const executor::LaunchSpec spec = BuildLaunchSpec(config, TrainingJob(), "alice", /*as_root=*/true);
  ASSERT_EQ(spec.shared.size(), 2u);
  EXPECT_EQ(spec.shared[0].path, "/lustre/u");
  EXPECT_EQ(spec.shared[0].mount, "/lustre/u");  // seen where the node has it
  EXPECT_EQ(spec.shared[0].project, "genomics");
  EXPECT_EQ(spec.shared[0].variable, "UNISCHED_SHARED_DATA");
  EXPECT_EQ(spec.shared[1].mount, "/refs");
  EXPECT_TRUE(spec.shared[1].read_only);
  EXPECT_EQ(spec.shared[1].project, "");  // one tree for everyone
  EXPECT_EQ(spec.shared[1].variable, "UNISCHED_SHARED_REF_GENOMES");
  // A gang's tasks carry them too.
  model::Job gang = TrainingJob();
  gang.launch = model::LaunchMode::kPerNode;
  gang.resources.tasks_per_node = 2;
  for (const auto& task : BuildGangSpecs(spec, gang, "alice", "10.0.0.1")) EXPECT_EQ(task.shared.size(), 2u);
}

TEST(LaunchSpecTest, ACpuSetIsWrittenInTheKernelsListFormat) {
  const std::pair<std::vector<int>, std::string> cases[] = {
      {{}, ""},
      {{3}, "3"},
      {{0, 1, 2, 3}, "0-3"},
      {{8, 0, 2, 1}, "0-2,8"},  // sorted first
      {{5, 5, 6}, "5-6"},       // each id once
      {{0, 2, 4, 5, 6, 9}, "0,2,4-6,9"},
  };
  for (const auto& [ids, text] : cases) EXPECT_EQ(CpuListText(ids), text);
}

TEST(LaunchSpecTest, AnAttemptStoredBeforeCpuIdsHasNoCpuSet) {
  model::Job job = TrainingJob();
  job.attempts.back().allocation.front().cpu_ids.clear();
  const executor::LaunchSpec spec = BuildLaunchSpec(DefaultConfig(), job, "alice", /*as_root=*/true);
  EXPECT_TRUE(spec.cpu_set.empty());
  EXPECT_EQ(spec.env.count("UNISCHED_CPU_SET"), 0u);
}

TEST(LaunchSpecTest, AMultiNodeJobsShapeIsInTheEnvironmentUnderOurNamesAndSlurms) {
  model::Job job = TrainingJob();
  job.attempts.back().allocation.push_back({"gpu-02", 8, 65536, {0, 1}});
  job.resources.nodes = 2;
  const executor::LaunchSpec spec = BuildLaunchSpec(DefaultConfig(), job, "alice", /*as_root=*/true);
  const std::map<std::string, std::string> expected = {
      {"UNISCHED_NNODES", "2"},
      {"UNISCHED_NTASKS", "2"},
      {"UNISCHED_RANK", "0"},
      {"UNISCHED_NODE_RANK", "0"},
      {"UNISCHED_LOCAL_RANK", "0"},
      {"UNISCHED_CPUS_PER_TASK", "8"},
      {"UNISCHED_NODELIST", "gpu-01,gpu-02"},
      {"SLURM_JOB_ID", "42"},
      {"SLURM_JOBID", "42"},
      {"SLURM_JOB_NAME", "train"},
      {"SLURM_JOB_NODELIST", "gpu-01,gpu-02"},
      {"SLURM_NODELIST", "gpu-01,gpu-02"},
      {"SLURM_JOB_NUM_NODES", "2"},
      {"SLURM_NNODES", "2"},
      {"SLURM_NTASKS", "2"},
      {"SLURM_NPROCS", "2"},
      {"SLURM_CPUS_PER_TASK", "8"},
      {"SLURM_CPUS_ON_NODE", "8"},
      {"SLURM_PROCID", "0"},
      {"SLURM_NODEID", "0"},
      {"SLURM_LOCALID", "0"},
      {"SLURM_JOB_PARTITION", "ai-training"},
      {"SLURM_JOB_ACCOUNT", "genomics"},
      {"SLURM_JOB_USER", "alice"},
      {"SLURM_RESTART_COUNT", "1"},
  };
  for (const auto& [name, value] : expected) {
    ASSERT_TRUE(spec.env.count(name)) << name;
    EXPECT_EQ(spec.env.at(name), value) << name;
  }
  EXPECT_EQ(spec.env.at("CUDA_VISIBLE_DEVICES"), "1,3") << "the first node's GPUs: the batch script runs there";
}

TEST(LaunchSpecTest, ASandboxedPoolsJobIsIsolatedOnlyUnderARootDaemon) {
  const config::Config config = DefaultConfig();
  model::Job job;
  job.id = 7;
  job.queue = "agent-sandbox";
  job.pool = "elastic-light-pool";
  job.command = {"true"};
  model::Attempt attempt;
  attempt.allocation = {{"x86-c256m512-elastic-01", 1, 512, {}}};
  job.attempts = {attempt};

  const executor::LaunchSpec root = BuildLaunchSpec(config, job, "unisched-job", /*as_root=*/true);
  EXPECT_TRUE(root.isolate);
  EXPECT_EQ(root.sandbox_uid_base, config.sandboxes.uid_base);
  EXPECT_EQ(root.sandbox_uid_count, config.sandboxes.uid_count);
  EXPECT_EQ(root.env.count("CUDA_VISIBLE_DEVICES"), 0u);

  const executor::LaunchSpec user = BuildLaunchSpec(config, job, "", /*as_root=*/false);
  EXPECT_FALSE(user.isolate);
  EXPECT_EQ(user.unix_user, "");
  EXPECT_EQ(user.env.count("USER"), 0u);
}

TEST(LaunchSpecTest, APerNodeGangHasTasksPerNodeTasksOnEveryNodeEachWithItsPlaceAndShare) {
  model::Job job = TrainingJob();
  job.launch = model::LaunchMode::kPerNode;
  job.resources.nodes = 2;
  job.resources.tasks_per_node = 2;
  job.attempts.back().allocation.push_back(
      {.node = "gpu-02", .cpus = 8, .memory_mb = 65536, .gpu_indices = {0, 1}, .cpu_ids = {0, 1, 2, 3, 4, 5, 6, 7}});
  const config::Config config = DefaultConfig();
  const executor::LaunchSpec first = BuildLaunchSpec(config, job, "alice", /*as_root=*/true, "10.0.0.1");
  const std::vector<executor::LaunchSpec> gang = BuildGangSpecs(first, job, "alice", "10.0.0.1");
  ASSERT_EQ(gang.size(), 4u);
  // (task, node, node rank, local rank, GPUs, CPUs): ranked node by node,
  // each task with its half of its node's GPUs and CPUs.
  const std::tuple<int, std::string, std::string, std::string, std::string, std::string> expected[] = {
      {0, "gpu-01", "0", "0", "1", "8-11"},
      {1, "gpu-01", "0", "1", "3", "12-15"},
      {2, "gpu-02", "1", "0", "0", "0-3"},
      {3, "gpu-02", "1", "1", "1", "4-7"},
  };
  for (const auto& [rank, node, node_rank, local_rank, gpus, cpus] : expected) {
    const executor::LaunchSpec& task = gang[static_cast<size_t>(rank)];
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(task.task, rank);
    EXPECT_EQ(task.node, node);
    EXPECT_EQ(task.attempt, 2);
    EXPECT_EQ(task.env.at("UNISCHED_RANK"), std::to_string(rank));
    EXPECT_EQ(task.env.at("SLURM_PROCID"), std::to_string(rank));
    EXPECT_EQ(task.env.at("RANK"), std::to_string(rank));
    EXPECT_EQ(task.env.at("UNISCHED_NODE_RANK"), node_rank);
    EXPECT_EQ(task.env.at("SLURM_NODEID"), node_rank);
    EXPECT_EQ(task.env.at("UNISCHED_LOCAL_RANK"), local_rank);
    EXPECT_EQ(task.env.at("SLURM_LOCALID"), local_rank);
    EXPECT_EQ(task.env.at("LOCAL_RANK"), local_rank);
    EXPECT_EQ(task.env.at("UNISCHED_NODE"), node);
    EXPECT_EQ(task.env.at("CUDA_VISIBLE_DEVICES"), gpus);  // its half of its node's two
    EXPECT_EQ(task.env.at("UNISCHED_CPU_SET"), cpus);
    EXPECT_EQ(CpuListText(task.cpu_set), cpus);
    EXPECT_EQ(task.env.at("WORLD_SIZE"), "4");
    EXPECT_EQ(task.env.at("SLURM_NTASKS"), "4");
    EXPECT_EQ(task.env.at("UNISCHED_NNODES"), "2");
    EXPECT_EQ(task.env.at("SLURM_CPUS_PER_TASK"), "4");
    EXPECT_EQ(task.env.at("OMP_NUM_THREADS"), "4");
    EXPECT_EQ(task.env.at("MASTER_ADDR"), "10.0.0.1");
    EXPECT_EQ(task.env.at("UNISCHED_MASTER_PORT"), std::to_string(RendezvousPort(42)));
    EXPECT_EQ(task.env.at("SLURM_NODELIST"), "gpu-01,gpu-02");
    EXPECT_EQ(task.limits.cpu_millis, 4000);  // half its node's 8 cpus
    EXPECT_EQ(task.limits.memory_bytes, (int64_t{65536} << 20) / 2);
  }
  EXPECT_GE(RendezvousPort(42), kRendezvousPortBase);
  EXPECT_LT(RendezvousPort(42), 32768);  // below Linux's ephemeral ports

  // A batch job, or a gang of one task, is its first spec alone.
  job.launch = model::LaunchMode::kBatch;
  EXPECT_TRUE(BuildGangSpecs(first, job, "alice", "10.0.0.1").empty());
  job.launch = model::LaunchMode::kPerNode;
  job.resources.tasks_per_node = 1;
  job.attempts.back().allocation.pop_back();
  EXPECT_TRUE(BuildGangSpecs(first, job, "alice", "10.0.0.1").empty());
}

}  // namespace
}  // namespace unisched::daemon
