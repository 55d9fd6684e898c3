// One Unix account per user (executor.user_accounts, docs/accounts.md): a
// user's job can neither read another user's work directory nor signal
// another user's processes, and both jobs still run. The same two jobs with
// the accounts switched off (every user shares default_unix_user) show the
// hole the accounts close.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Waits for `path` to hold a line (the job wrote it).
std::string WaitForFile(const std::string& path) {
  for (int i = 0; i < 300; ++i) {
    std::string text = ReadFile(path);
    if (!text.empty() && text.back() == '\n') return text.substr(0, text.size() - 1);
    std::this_thread::sleep_for(100ms);
  }
  return {};
}

struct TwoJobs {
  json victim;               // alice's job, at its end
  std::string intruder_log;  // bob's job's output
  std::string victim_uid, victim_groups, intruder_uid;
};

// Alice's job writes a secret in its work directory and sleeps; bob's job
// tries to read the secret and to SIGKILL alice's process.
TwoJobs RunTwoJobs(TestDaemon& d) {
  const std::string alice = d.CreateUser("alice", "user", {"default"});
  const std::string bob = d.CreateUser("bob", "user", {"default"});
  TwoJobs out;
  json victim_job = {{"workload", {{"kind", "hpc"}}},
                     {"command",
                      {"/bin/sh", "-c",
                       "echo alice-secret > secret.txt; chmod 0644 secret.txt; id -G > groups; id -u > uid; "
                       "echo $$ > pid; exec sleep 4"}}};
  auto submitted = d.Call("POST", "/v1/jobs", victim_job.dump(), {}, &alice);
  EXPECT_EQ(submitted.status, 201) << submitted.body;
  const std::string victim_id = submitted.json.value("id", "");
  const std::string work = d.state_dir() + "/work/" + victim_id;
  out.victim_uid = WaitForFile(work + "/uid");
  out.victim_groups = ReadFile(work + "/groups");
  const std::string pid = WaitForFile(work + "/pid");
  EXPECT_FALSE(pid.empty());

  json intruder_job = {{"workload", {{"kind", "hpc"}}},
                       {"command",
                        {"/bin/sh", "-c",
                         "id -u; cat " + work + "/secret.txt && echo READ_SECRET; kill -9 " + pid +
                             " && echo KILLED; echo intruder-done"}}};
  submitted = d.Call("POST", "/v1/jobs", intruder_job.dump(), {}, &bob);
  EXPECT_EQ(submitted.status, 201) << submitted.body;
  const std::string intruder_id = submitted.json.value("id", "");
  json intruder = d.WaitTerminal(intruder_id);
  EXPECT_EQ(intruder["state"], "COMPLETED") << intruder.dump();
  out.intruder_log = d.Call("GET", "/v1/jobs/" + intruder_id + "/log").body;
  out.intruder_uid = out.intruder_log.substr(0, out.intruder_log.find('\n'));
  out.victim = d.WaitTerminal(victim_id);
  return out;
}

TEST(UserAccountsTest, OneUsersJobCanNeitherReadNorSignalAnothers) {
  if (::geteuid() != 0) GTEST_SKIP() << "switching accounts needs root";
  TestDaemon d;  // config/unisched.yaml: user_accounts on
  d.Start();
  const TwoJobs jobs = RunTwoJobs(d);

  EXPECT_EQ(jobs.victim["state"], "COMPLETED") << jobs.victim.dump();  // not killed
  EXPECT_EQ(jobs.intruder_log.find("READ_SECRET"), std::string::npos) << jobs.intruder_log;
  EXPECT_EQ(jobs.intruder_log.find("alice-secret"), std::string::npos) << jobs.intruder_log;
  EXPECT_EQ(jobs.intruder_log.find("KILLED"), std::string::npos) << jobs.intruder_log;
  EXPECT_NE(jobs.intruder_log.find("intruder-done"), std::string::npos) << jobs.intruder_log;

  // Each ran as the uid the daemon allocated to its user, in the range, with
  // the project's group.
  const json users = d.Call("GET", "/v1/users").json["users"];
  std::map<std::string, int64_t> uid_of;
  for (const auto& u : users) {
    if (u["uid"].is_number()) uid_of[u["name"]] = u["uid"].get<int64_t>();
  }
  ASSERT_TRUE(uid_of.count("alice") && uid_of.count("bob")) << users.dump();
  EXPECT_NE(uid_of["alice"], uid_of["bob"]);
  EXPECT_GE(uid_of["alice"], 2000000);
  EXPECT_LE(uid_of["alice"], 2099999);
  EXPECT_EQ(jobs.victim_uid, std::to_string(uid_of["alice"]));
  EXPECT_EQ(jobs.intruder_uid, std::to_string(uid_of["bob"]));
  EXPECT_EQ(uid_of.count("admin"), 0u);  // the bootstrap admin keeps default_unix_user
  const json ids = d.Call("GET", "/v1/unix-ids").json;
  int64_t default_gid = 0;
  for (const auto& p : ids["projects"]) {
    if (p["name"] == "default") default_gid = p["gid"];
  }
  ASSERT_GT(default_gid, 0) << ids.dump();
  EXPECT_NE(jobs.victim_groups.find(std::to_string(default_gid)), std::string::npos) << jobs.victim_groups;

  // The work directory is its owner's alone.
  struct stat st {};
  const std::string work = d.state_dir() + "/work/" + jobs.victim["id"].get<std::string>();
  ASSERT_EQ(::stat(work.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, static_cast<uid_t>(uid_of["alice"]));
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // Allocated once: a restart keeps every id.
  d.Stop();
  d.Start();
  const json again = d.Call("GET", "/v1/unix-ids").json;
  EXPECT_EQ(again, ids);
}

TEST(UserAccountsTest, WithoutThemUsersShareOneAccountAndTheHoleIsOpen) {
  if (::geteuid() != 0) GTEST_SKIP() << "switching accounts needs root";
  std::string config = ReadFile(std::string(UNISCHED_SOURCE_DIR) + "/config/unisched.yaml");
  const size_t line = config.find("  user_accounts:");
  ASSERT_NE(line, std::string::npos);
  config.erase(line, config.find('\n', line) + 1 - line);
  TestDaemon d;
  d.UseConfigText(config);
  d.Start();
  const TwoJobs jobs = RunTwoJobs(d);
  EXPECT_EQ(jobs.victim_uid, jobs.intruder_uid);
  EXPECT_NE(jobs.intruder_log.find("READ_SECRET"), std::string::npos) << jobs.intruder_log;
  EXPECT_NE(jobs.intruder_log.find("KILLED"), std::string::npos) << jobs.intruder_log;
  EXPECT_NE(jobs.victim["state"], "COMPLETED") << jobs.victim.dump();
}

}  // namespace
}  // namespace unisched::testing
