// Slurm batch scripts through a real daemon (docs/slurm-users.md):
// `unisched sbatch` and POST /v1/jobs with `script` read the #SBATCH
// directives, the job runs the script itself with its interpreter and
// arguments, on a local node and on an agent's, and --export=ALL passes on
// the submitter's environment without unisched's token or credentials.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "testing/agent_process.h"
#include "testing/daemon.h"

namespace unisched::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kConfig = R"yaml(
server:
  scheduler_tick_seconds: 0.1
health:
  heartbeat_interval_seconds: 1
  heartbeat_timeout_seconds: 10
executor:
  output_dir: OUTPUT_DIR
pools:
  - name: cpu
    kind: cpu
    nodes: [x86-c4m4-hpc-01]
  - name: far
    kind: cpu
    nodes: [x86-c2m2-far-01]
nodes:
  - {name: x86-c4m4-hpc-01, cpus: 4, memory_mb: 4096}
  - {name: x86-c2m2-far-01, cpus: 2, memory_mb: 1024, agent: true}
queues:
  - name: batch
    pool: cpu
    workload_kinds: [hpc]
    policy: {default_walltime_hours: 1}
  - name: remote
    pool: far
projects:
  - name: default
)yaml";

class SbatchTest : public ::testing::Test {
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
  // Writes `text` as a script file; returns its path.
  std::string WriteScript(const std::string& name, const std::string& text) {
    const std::string path = daemon_.state_dir() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string Log(const std::string& id) { return daemon_.Call("GET", "/v1/jobs/" + id + "/log").body; }

  TestDaemon daemon_;
  std::string shared_;
};

// The issue's new user: `--time=00:00:05` and a name in #SBATCH lines
// became the 1 h default and an empty name. Now the directives are the
// job's, the script runs with its interpreter and arguments, and the
// submitter's environment comes without UNISCHED_TOKEN or credentials.
TEST_F(SbatchTest, TheDirectivesAreTheJobsAndTheScriptRunsWithItsInterpreterAndArguments) {
  const std::string script = WriteScript("job.sh",
                                         "#!/bin/bash\n"
                                         "#SBATCH -J sbatch-test\n"
                                         "#SBATCH -t 0:05 --mem=1G\n"
                                         "#SBATCH -o %x-%j.out\n"
                                         "#SBATCH --mail-type=END\n"
                                         "# a comment, then the first command\n"
                                         "echo \"shell=${BASH_VERSION:+bash} argc=$# 1=$1 2=$2 0=${0##*/}\"\n"
                                         "echo \"token=${UNISCHED_TOKEN:-unset}\"\n"
                                         "echo \"secret=${MY_API_TOKEN:-unset} mode=${RUN_MODE:-unset}\"\n"
                                         "echo \"name=$SLURM_JOB_NAME submit_dir=$SLURM_SUBMIT_DIR\"\n");
  auto submitted = daemon_.RunCli({"sbatch", "--parsable", script, "first", "two words"},
                                  {{"MY_API_TOKEN", "s3cr3t"}, {"RUN_MODE", "fast"}});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;
  const std::string id = submitted.out.substr(0, submitted.out.find('\n'));
  ASSERT_EQ(submitted.out, id + "\n");  // --parsable: the id alone
  EXPECT_NE(submitted.err.find("warning: " + script + ": line 5: --mail-type=END: unisched sends no mail"),
            std::string::npos)
      << submitted.err;
  const size_t credentials = submitted.err.find("not copied, as they look like credentials: ");
  ASSERT_NE(credentials, std::string::npos) << submitted.err;
  EXPECT_NE(submitted.err.find("MY_API_TOKEN", credentials), std::string::npos) << submitted.err;

  const json job = daemon_.WaitTerminal(id);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump(2);
  EXPECT_EQ(job["name"], "sbatch-test");
  EXPECT_EQ(job["resources"]["walltime_seconds"], 5);  // not the queue's 1 h
  EXPECT_EQ(job["resources"]["memory_mb"], 1024);
  EXPECT_EQ(job["command"], json({script, "first", "two words"}));
  EXPECT_EQ(job["env"].value("RUN_MODE", ""), "fast");
  EXPECT_FALSE(job["env"].contains("UNISCHED_TOKEN"));
  EXPECT_FALSE(job["env"].contains("UNISCHED_URL"));
  EXPECT_FALSE(job["env"].contains("MY_API_TOKEN"));

  const std::string output = ReadFile(shared_ + "/sbatch-test-" + id + ".out");  // -o under the output directory
  EXPECT_EQ(output,
            "shell=bash argc=2 1=first 2=two words 0=unisched-script.1\n"
            "token=unset\n"
            "secret=unset mode=fast\n"
            "name=sbatch-test submit_dir=" +
                fs::current_path().string() + "\n")
      << output;
  EXPECT_EQ(Log(id), output);
}

// The command line wins over the directives: here it sends the job to the
// agent's queue, where the same script runs on the agent's node, in the
// directory -D names (where its relative -o file goes too).
TEST_F(SbatchTest, OnAnAgentsNodeInItsWorkdirWithTheCommandLineOverTheDirectives) {
  AgentFleet agents(daemon_, "far", {"x86-c2m2-far-01"});
  ASSERT_TRUE(daemon_.WaitNodes("up")) << daemon_.Call("GET", "/v1/nodes").body;
  const std::string workdir = shared_ + "/run";
  fs::create_directories(workdir);
  fs::permissions(workdir, fs::perms::all);
  const std::string script = WriteScript("remote.sh",
                                         "#!/bin/sh\n"
                                         "#SBATCH -p batch -J local-name\n"
                                         "#SBATCH -o rel-%j.out\n"
                                         "echo \"node=$SLURMD_NODENAME pwd=$(pwd) args=$*\"\n");
  auto submitted = daemon_.RunCli({"sbatch", "-p", "remote", "-J", "on-agent", "-D", workdir, script, "x", "y"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;
  ASSERT_EQ(submitted.out.rfind("Submitted batch job ", 0), 0u) << submitted.out;  // Slurm's words
  const std::string id = submitted.out.substr(20, submitted.out.size() - 21);
  const json job = daemon_.WaitTerminal(id);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump(2);
  EXPECT_EQ(job["queue"], "remote");
  EXPECT_EQ(job["name"], "on-agent");
  EXPECT_EQ(job["workdir"], workdir);
  EXPECT_EQ(ReadFile(workdir + "/rel-" + id + ".out"), "node=x86-c2m2-far-01 pwd=" + workdir + " args=x y\n");
}

// POST /v1/jobs with a script and no command: the server reads the
// directives (the body's own fields win) and answers with its warnings.
TEST_F(SbatchTest, TheApiReadsAScriptsDirectives) {
  const std::string script =
      "#!/usr/bin/env python3\n"
      "#SBATCH --job-name=py -t 2:00 --mem-per-cpu=100M -c 4\n"
      "#SBATCH --exclusive\n"
      "import os, sys\n"
      "print('python', len(sys.argv), os.environ['SLURM_JOB_NAME'], os.environ.get('MODE'))\n";
  const Reply r = daemon_.Call(
      "POST", "/v1/jobs",
      json{{"script", script}, {"env", {{"MODE", "api"}, {"PATH", "/usr/bin:/bin"}}}, {"resources", {{"cpus", 2}}}});
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.json["name"], "py");
  EXPECT_EQ(r.json["resources"]["walltime_seconds"], 120);
  EXPECT_EQ(r.json["resources"]["cpus"], 2);         // the body's, over -c 4
  EXPECT_EQ(r.json["resources"]["memory_mb"], 200);  // --mem-per-cpu=100M x those 2
  EXPECT_EQ(r.json["command"], json({"script"}));
  ASSERT_EQ(r.json["warnings"].size(), 1u) << r.body;
  EXPECT_EQ(r.json["warnings"][0]["line"], 3);
  const std::string id = r.json["id"];
  const json job = daemon_.WaitTerminal(id);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump(2);
  EXPECT_EQ(Log(id), "python 1 py api\n");

  // An array directive makes an array (docs/arrays.md).
  const Reply array = daemon_.Call("POST", "/v1/jobs", json{{"script", "#!/bin/sh\n#SBATCH --array=1-3%2\ntrue\n"}});
  ASSERT_EQ(array.status, 201) << array.body;
  EXPECT_EQ(array.json["array"]["indices"], "1-3");
  EXPECT_EQ(array.json["array"]["max_running"], 2);
}

// Arrays and dependencies are passed on by the client to the server.
TEST_F(SbatchTest, ArraysAndDependenciesReachTheServer) {
  const std::string script = WriteScript("plain.sh", "#!/bin/sh\ntrue\n");
  auto array = daemon_.RunCli({"sbatch", "--parsable", "--array=1-10%2", script});
  ASSERT_EQ(array.exit_code, 0) << array.err;
  const std::string array_id = array.out.substr(0, array.out.find('\n'));
  const json parent = daemon_.Call("GET", "/v1/jobs/" + array_id).json;
  EXPECT_EQ(parent["array"]["indices"], "1-10");
  EXPECT_EQ(parent["array"]["max_running"], 2);
  // Dependencies are the server's (docs/dependencies.md): -d reaches it.
  auto first = daemon_.RunCli({"sbatch", "--parsable", script});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string first_id = first.out.substr(0, first.out.find('\n'));
  auto dependent = daemon_.RunCli({"sbatch", "--parsable", "-d", "afterany:" + first_id, script});
  ASSERT_EQ(dependent.exit_code, 0) << dependent.err;
  const std::string dependent_id = dependent.out.substr(0, dependent.out.find('\n'));
  EXPECT_EQ(daemon_.Call("GET", "/v1/jobs/" + dependent_id).json["dependency"], "afterany:" + first_id);
  EXPECT_EQ(daemon_.WaitTerminal(dependent_id)["state"], "COMPLETED");
  auto missing = daemon_.RunCli({"sbatch", "-d", "afterok:999999", script});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("does not exist or is not visible"), std::string::npos) << missing.err;
  auto bad = daemon_.RunCli({"sbatch", "-t", "soon", script});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("-t soon: 'soon' is not a time"), std::string::npos) << bad.err;
  // --wait: sbatch's exit status is the job's.
  const std::string failing = WriteScript("fail.sh", "#!/bin/sh\nexit 3\n");
  auto waited = daemon_.RunCli({"sbatch", "-W", failing});
  EXPECT_EQ(waited.exit_code, 3) << waited.out << waited.err;
  EXPECT_NE(waited.out.find("FAILED (exit code 3)"), std::string::npos) << waited.out;
  // An array waited for exits with its tasks' highest code, as sbatch -W.
  auto tasks = daemon_.RunCli({"sbatch", "-W", "--array=1-3", "--wrap", "exit $SLURM_ARRAY_TASK_ID"});
  EXPECT_EQ(tasks.exit_code, 3) << tasks.out << tasks.err;
  // -H: submitted HELD, it waits for its release; its name is the script's.
  auto held = daemon_.RunCli({"sbatch", "--parsable", "-H", script});
  ASSERT_EQ(held.exit_code, 0) << held.err;
  EXPECT_EQ(held.err.find("warning"), std::string::npos) << held.err;
  const std::string held_id = held.out.substr(0, held.out.find('\n'));
  const json waiting = daemon_.Call("GET", "/v1/jobs/" + held_id).json;
  EXPECT_EQ(waiting["state"], "HELD") << waiting.dump(2);
  EXPECT_EQ(waiting["name"], "plain.sh");
  EXPECT_EQ(daemon_.Call("POST", "/v1/jobs/" + held_id + "/release").status, 200);
  EXPECT_EQ(daemon_.WaitTerminal(held_id)["state"], "COMPLETED");
  // --begin: not before then (BeginTime); a past time starts at once.
  auto later = daemon_.RunCli({"sbatch", "--parsable", "--begin=now+1hour", script});
  ASSERT_EQ(later.exit_code, 0) << later.err;
  const std::string later_id = later.out.substr(0, later.out.find('\n'));
  const json begins = daemon_.WaitJob(later_id, [](const json& j) { return !j["pending_reasons"].empty(); });
  EXPECT_EQ(begins["pending_reasons"][0]["code"], "BeginTime") << begins.dump(2);
  EXPECT_EQ(begins["state"], "PENDING");
  EXPECT_EQ(daemon_.Call("DELETE", "/v1/jobs/" + later_id).status, 200);
  auto past = daemon_.RunCli({"sbatch", "--parsable", "-b", "now-1minute", script});
  ASSERT_EQ(past.exit_code, 0) << past.err;
  EXPECT_EQ(daemon_.WaitTerminal(past.out.substr(0, past.out.find('\n')))["state"], "COMPLETED");
  EXPECT_EQ(daemon_.RunCli({"sbatch", "--begin=whenever", script}).exit_code, 1);
  // submit has -a and -H too.
  auto submitted = daemon_.RunCli({"submit", "-H", "-a", "0-4%2", "--", "true"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const json arrays = daemon_.Call("GET", "/v1/jobs?state=HELD").json;
  ASSERT_EQ(arrays["jobs"].size(), 1u) << arrays.dump(2);
  EXPECT_EQ(arrays["jobs"][0]["array"]["indices"], "0-4");
  EXPECT_EQ(arrays["jobs"][0]["array"]["max_running"], 2);
  EXPECT_EQ(daemon_.Call("DELETE", "/v1/jobs/" + arrays["jobs"][0]["id"].get<std::string>()).status, 200);
}

}  // namespace
}  // namespace unisched::testing
