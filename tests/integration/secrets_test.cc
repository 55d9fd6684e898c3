// Secrets (docs/secrets.md, issue 23 point 4) on a real daemon: a value
// given to POST /v1/secrets reaches a job as a file on a tmpfs only the job
// sees, or as a variable, on an HPC node and in a sandboxed agent job; and
// it appears nowhere else: not in any file under the state directory (the
// database, its WAL, the logs, the work directories) or the runtime
// directory, not in any API answer, event, audit record or metric. Every use
// is audited. The rules: unknown secrets are refused at submit, one
// project's secrets are invisible to another's members, and a secret deleted
// before the launch fails the attempt with the reason.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/agent_process.h"
#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string RandomValue(const std::string& tag) {
  std::random_device device;
  std::ostringstream out;
  out << tag << "-";
  for (int i = 0; i < 4; ++i) out << std::hex << device();
  return out.str();
}

std::string Sha256(const std::string& text) {
  const std::string file = fs::temp_directory_path() / ("unisched-sha-" + std::to_string(::getpid()));
  std::ofstream(file) << text;
  std::string digest(64, '\0');
  FILE* p = ::popen(("sha256sum " + file).c_str(), "r");
  if (p == nullptr || std::fread(digest.data(), 1, 64, p) != 64) digest.clear();
  if (p != nullptr) ::pclose(p);
  fs::remove(file);
  return digest;
}

class SecretsTest : public ::testing::Test {
 protected:
  // Every answer of the test, searched for the values at the end.
  Reply Call(TestDaemon& d, const std::string& method, const std::string& target, const std::string& body = {},
             const std::string* token = nullptr) {
    auto reply = d.Call(method, target, body, {}, token);
    answers_ += reply.body + "\n";
    return reply;
  }
  std::string answers_;
};

TEST_F(SecretsTest, AValueReachesItsJobsAndNothingElse) {
  if (::geteuid() != 0) GTEST_SKIP() << "secret files need a root supervisor (a private tmpfs)";
  TestDaemon d;
  d.Start();
  const std::string first = RandomValue("planted-first"), file_value = RandomValue("planted-file"),
                    env_value = RandomValue("planted-env");

  auto made =
      Call(d, "POST", "/v1/secrets",
           json{{"project", "default"}, {"name", "db-password"}, {"value", first}, {"description", "results"}}.dump());
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.json["version"], 1);
  EXPECT_FALSE(made.json.contains("value"));
  auto again =
      Call(d, "POST", "/v1/secrets", json{{"project", "default"}, {"name", "db-password"}, {"value", "x"}}.dump());
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_EQ(again.json["error"]["code"], "secret_exists");
  // Rotated: jobs get the new value; the first one is gone.
  auto rotated = Call(d, "PUT", "/v1/secrets/default/db-password", json{{"value", file_value}}.dump());
  ASSERT_EQ(rotated.status, 200) << rotated.body;
  EXPECT_EQ(rotated.json["version"], 2);
  EXPECT_EQ(rotated.json["description"], "results");
  ASSERT_EQ(Call(d, "POST", "/v1/secrets", json{{"name", "api-key"}, {"value", env_value}}.dump()).status, 201);
  auto listed = Call(d, "GET", "/v1/secrets?project=default");
  ASSERT_EQ(listed.status, 200);
  ASSERT_EQ(listed.json["secrets"].size(), 2u) << listed.body;

  // An HPC job: the file (read-only, its own, 0400) and the variable; it
  // prints only whether each matched. It sleeps so that the host can look.
  const std::string check =
      "f=$UNISCHED_SECRETS_DIR/db-password; "
      "[ \"$(sha256sum < $f | cut -c1-64)\" = \"$WANT_FILE\" ] && echo file-ok; "
      "[ \"$(printf %s \"$API_KEY\" | sha256sum | cut -c1-64)\" = \"$WANT_ENV\" ] && echo env-ok; "
      "stat -c 'mode=%a uid=%u' $f; echo dir=$UNISCHED_SECRETS_DIR; "
      "(echo x > $f) 2>/dev/null || echo read-only; "
      "touch $UNISCHED_SECRETS_DIR/new 2>/dev/null || echo no-new-files; ";
  const std::string hpc_id =
      d.Submit({{"workload", {{"kind", "hpc"}}},
                {"command", {"/bin/sh", "-c", check + "sleep 3"}},
                {"env", {{"WANT_FILE", Sha256(file_value)}, {"WANT_ENV", Sha256(env_value)}}},
                {"secrets", json::array({"db-password", {{"name", "api-key"}, {"env", "API_KEY"}}})}});
  const json running = d.WaitJob(hpc_id, [](const json& j) { return j["state"] == "RUNNING"; });
  EXPECT_EQ(running["secrets"], json::parse(R"([{"name":"db-password"},{"name":"api-key","env":"API_KEY"}])"));
  // From the host, the mount point is an empty directory: the tmpfs is in
  // the job's own mount namespace.
  const std::string host_dir = d.state_dir() + "/work/" + hpc_id + "/.unisched-secrets";
  for (int i = 0; i < 50 && !fs::exists(host_dir); ++i) std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(fs::is_directory(host_dir));
  EXPECT_TRUE(fs::is_empty(host_dir));
  const json hpc = d.WaitTerminal(hpc_id);
  EXPECT_EQ(hpc["state"], "COMPLETED") << hpc.dump();
  const std::string log = Call(d, "GET", "/v1/jobs/" + hpc_id + "/log").body;
  EXPECT_NE(log.find("file-ok"), std::string::npos) << log;
  EXPECT_NE(log.find("env-ok"), std::string::npos) << log;
  EXPECT_NE(log.find("mode=400"), std::string::npos) << log;
  EXPECT_NE(log.find("read-only"), std::string::npos) << log;
  EXPECT_NE(log.find("no-new-files"), std::string::npos) << log;

  // A sandboxed agent job gets it the same way, inside its sandbox.
  const std::string agent_id =
      d.Submit({{"workload", {{"kind", "agent"}}},
                {"command", {"/bin/sh", "-c", check}},
                {"env", {{"WANT_FILE", Sha256(file_value)}, {"WANT_ENV", Sha256(env_value)}}},
                {"secrets", json::array({"db-password", {{"name", "api-key"}, {"env", "API_KEY"}}})}});
  const json agent = d.WaitTerminal(agent_id);
  EXPECT_EQ(agent["state"], "COMPLETED") << agent.dump();
  EXPECT_EQ(agent["queue"], "agent-sandbox");
  const std::string agent_log = Call(d, "GET", "/v1/jobs/" + agent_id + "/log").body;
  EXPECT_NE(agent_log.find("file-ok"), std::string::npos) << agent_log;
  EXPECT_NE(agent_log.find("env-ok"), std::string::npos) << agent_log;
  EXPECT_NE(agent_log.find("dir=/home/sandbox/.unisched-secrets"), std::string::npos) << agent_log;

  // Each use audited, without the value.
  const json audit = Call(d, "GET", "/v1/audit?limit=1000").json;
  int uses = 0;
  for (const auto& r : audit["audit"]) {
    if (r["action"] == "secret.use") ++uses;
  }
  EXPECT_EQ(uses, 4) << audit.dump();  // two secrets, two jobs

  // Nowhere else: every answer, the events, the metrics, every file of the
  // state and runtime directories (the database and its WAL included).
  for (const std::string& id : {hpc_id, agent_id}) {
    Call(d, "GET", "/v1/jobs/" + id);
    Call(d, "GET", "/v1/jobs/" + id + "/events");
  }
  Call(d, "GET", "/v1/jobs");
  Call(d, "GET", "/v1/events?limit=10000");
  Call(d, "GET", "/v1/secrets/default/db-password");
  answers_ += d.Call("GET", "/metrics").body;
  const std::vector<std::string> values = {first, file_value, env_value};
  for (const auto& v : values) EXPECT_EQ(answers_.find(v), std::string::npos) << v << " is in an API answer";
  const std::string runtime_dir = [&] {
    std::string text = ReadFile(d.state_dir() + "/runtime-dir");
    return text.substr(0, text.find('\n'));
  }();
  d.Stop();  // the database's WAL and the logs as they are left
  EXPECT_EQ(FilesHolding(d.state_dir(), values), std::vector<std::string>());
  if (!runtime_dir.empty() && fs::exists(runtime_dir)) {
    EXPECT_EQ(FilesHolding(runtime_dir, values), std::vector<std::string>());
  }
  // The key is outside the database, its own, 0600.
  EXPECT_EQ(fs::status(d.state_dir() + "/secrets.key").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

// Through a node agent: the value travels in the launch command, and the
// agent's record of the launch on its disk holds none.
TEST_F(SecretsTest, AnAgentsJobGetsItAndTheAgentKeepsNoCopy) {
  if (::geteuid() != 0) GTEST_SKIP() << "secret files need a root supervisor (a private tmpfs)";
  TestDaemon d;
  d.UseConfigText(R"yaml(
server:
  scheduler_tick_seconds: 0.1
health:
  heartbeat_interval_seconds: 1
pools:
  - name: cpu
    kind: cpu
    nodes: [x86-c2m2-hpc-01]
nodes:
  - {name: x86-c2m2-hpc-01, cpus: 2, memory_mb: 1024, agent: true}
queues:
  - name: batch
    pool: cpu
projects:
  - name: default
)yaml");
  d.Start();
  AgentFleet agents(d, "cpu", {"x86-c2m2-hpc-01"});
  ASSERT_TRUE(d.WaitNodes("up")) << d.Call("GET", "/v1/nodes").body;
  const std::string value = RandomValue("planted-agent");
  // The same value under two names: one as a file, one as a variable.
  for (const char* name : {"key", "key-again"}) {
    ASSERT_EQ(Call(d, "POST", "/v1/secrets", json{{"name", name}, {"value", value}}.dump()).status, 201);
  }
  const std::string id =
      d.Submit({{"workload", {{"kind", "hpc"}}},
                {"queue", "batch"},
                {"command",
                 {"/bin/sh", "-c",
                  "[ -n \"$K\" ] && [ \"$(cat $UNISCHED_SECRETS_DIR/key)\" = \"$K\" ] && echo both-ok; sleep 2"}},
                {"secrets", json::array({"key", {{"name", "key-again"}, {"env", "K"}}})}});
  // While it runs, the agent's record of the launch is on its disk: no value in it.
  d.WaitJob(id, [&](const json& j) {
    return j["state"] != "RUNNING" ||
           d.Call("GET", "/v1/jobs/" + id + "/log").body.find("both-ok") != std::string::npos;
  });
  EXPECT_EQ(FilesHolding(agents.Dir("x86-c2m2-hpc-01"), {value}), std::vector<std::string>());
  const json done = d.WaitTerminal(id);
  EXPECT_EQ(done["state"], "COMPLETED") << done.dump();
  EXPECT_EQ(done["nodes"], json::array({"x86-c2m2-hpc-01"}));
  const std::string log = Call(d, "GET", "/v1/jobs/" + id + "/log").body;
  EXPECT_NE(log.find("both-ok"), std::string::npos) << log;
  Call(d, "GET", "/v1/jobs/" + id);
  EXPECT_EQ(answers_.find(value), std::string::npos);
  EXPECT_EQ(FilesHolding(agents.Dir("x86-c2m2-hpc-01"), {value}), std::vector<std::string>());
  d.Stop();
  EXPECT_EQ(FilesHolding(d.state_dir(), {value}), std::vector<std::string>());
}

// The CLI: the value from standard input (never the command line), then a
// job that names it with --secret.
TEST_F(SecretsTest, TheCliTakesTheValueFromStandardInputAndSubmitNamesIt) {
  TestDaemon d;
  d.Start();
  const std::string value = RandomValue("planted-cli");
  const std::string cli =
      std::string("env UNISCHED_URL=") + d.url() + " UNISCHED_TOKEN=" + d.admin_token() + " " + UNISCHED_BINARY;
  auto sh = [&](const std::string& cmd) {
    std::string out;
    FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
    char buf[4096];
    for (size_t n; p != nullptr && (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    const int rc = p != nullptr ? ::pclose(p) : -1;
    return std::make_pair(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out);
  };
  auto [made_rc, made] = sh("echo " + value + " | " + cli + " secret create token --description 'for the hub'");
  EXPECT_EQ(made_rc, 0) << made;
  EXPECT_NE(made.find("Created secret default/token (version 1)"), std::string::npos) << made;
  EXPECT_EQ(made.find(value), std::string::npos);
  auto [ls_rc, ls] = sh(cli + " secret ls");
  EXPECT_EQ(ls_rc, 0) << ls;
  EXPECT_NE(ls.find("for the hub"), std::string::npos) << ls;
  auto [run_rc, run] =
      sh(cli + " submit --wait --kind hpc --secret token=HUB_TOKEN -- /bin/sh -c '[ \"$HUB_TOKEN\" = " + value +
         " ] && echo matched'");
  EXPECT_EQ(run_rc, 0) << run;
  auto [rotated_rc, rotated] = sh("printf new-value | " + cli + " secret rotate token");
  EXPECT_EQ(rotated_rc, 0) << rotated;
  EXPECT_NE(rotated.find("(version 2)"), std::string::npos) << rotated;
  auto [rm_rc, rm] = sh(cli + " secret rm token");
  EXPECT_EQ(rm_rc, 0) << rm;
  EXPECT_EQ(Call(d, "GET", "/v1/secrets").json["secrets"].size(), 0u);
  auto [bad_rc, bad] = sh(cli + " secret frob x");
  EXPECT_EQ(bad_rc, 2) << bad;
}

TEST_F(SecretsTest, RulesAtSubmitAndAtLaunch) {
  std::string config = ReadFile(std::string(UNISCHED_SOURCE_DIR) + "/config/unisched.yaml");
  const size_t projects = config.find("\nprojects:\n");
  ASSERT_NE(projects, std::string::npos);
  config.insert(projects + 11, "  - name: physics\n    shares: 1\n");
  TestDaemon d;
  d.UseConfigText(config);
  d.Start();
  ASSERT_EQ(
      Call(d, "POST", "/v1/secrets", json{{"project", "default"}, {"name", "token"}, {"value", "v"}}.dump()).status,
      201);

  // A name the project has not: refused at submit, naming the field.
  auto unknown = Call(d, "POST", "/v1/jobs",
                      json{{"workload", {{"kind", "hpc"}}}, {"command", {"true"}}, {"secrets", {"tokn"}}}.dump());
  EXPECT_EQ(unknown.status, 422) << unknown.body;
  EXPECT_EQ(unknown.json["error"]["code"], "unknown_secret");
  EXPECT_EQ(unknown.json["error"]["field"], "secrets[0]");
  auto bad_name = Call(d, "POST", "/v1/jobs",
                       json{{"workload", {{"kind", "hpc"}}}, {"command", {"true"}}, {"secrets", {"../etc"}}}.dump());
  EXPECT_EQ(bad_name.status, 422) << bad_name.body;
  auto bad_env = Call(d, "POST", "/v1/jobs",
                      json{{"workload", {{"kind", "hpc"}}},
                           {"command", {"true"}},
                           {"secrets", {{{"name", "token"}, {"env", "UNISCHED_X"}}}}}
                          .dump());
  EXPECT_EQ(bad_env.status, 422) << bad_env.body;
  EXPECT_EQ(bad_env.json["error"]["field"], "secrets[0].env");
  auto twice =
      Call(d, "POST", "/v1/jobs",
           json{{"workload", {{"kind", "hpc"}}}, {"command", {"true"}}, {"secrets", {"token", "token"}}}.dump());
  EXPECT_EQ(twice.status, 422) << twice.body;
  auto bad_secret = Call(d, "POST", "/v1/secrets", json{{"name", "x"}, {"value", ""}}.dump());
  EXPECT_EQ(bad_secret.status, 422) << bad_secret.body;
  EXPECT_EQ(bad_secret.json["error"]["field"], "value");

  // Another project's member sees none of it and cannot use it.
  const std::string bob = d.CreateUser("bob", "user", {"physics"});
  EXPECT_EQ(Call(d, "GET", "/v1/secrets", "", &bob).json["secrets"].size(), 0u);
  // 403 for the project, the same for a secret it has and one it has not.
  EXPECT_EQ(Call(d, "GET", "/v1/secrets/default/token", "", &bob).status, 403);
  EXPECT_EQ(Call(d, "GET", "/v1/secrets/default/no-such", "", &bob).status, 403);
  EXPECT_EQ(Call(d, "PUT", "/v1/secrets/default/token", json{{"value", "w"}}.dump(), &bob).status, 403);
  EXPECT_EQ(Call(d, "DELETE", "/v1/secrets/default/token", "", &bob).status, 403);
  EXPECT_EQ(
      Call(d, "POST", "/v1/secrets", json{{"project", "default"}, {"name", "b"}, {"value", "v"}}.dump(), &bob).status,
      403);
  auto bobs_job =
      Call(d, "POST", "/v1/jobs",
           json{{"workload", {{"kind", "hpc"}}}, {"command", {"true"}}, {"secrets", {"token"}}}.dump(), &bob);
  EXPECT_EQ(bobs_job.status, 422) << bobs_job.body;  // physics has no secret "token"
  ASSERT_EQ(Call(d, "POST", "/v1/secrets", json{{"name", "token"}, {"value", "p"}}.dump(), &bob).status, 201);
  EXPECT_EQ(Call(d, "GET", "/v1/secrets", "", &bob).json["secrets"].size(), 1u);
  EXPECT_EQ(Call(d, "GET", "/v1/secrets").json["secrets"].size(), 2u);  // the admin sees both

  // Deleted while the job waits: its launch fails and says why.
  const std::string first = d.Submit({{"workload", {{"kind", "hpc"}}}, {"command", {"sleep", "2"}}});
  const std::string waiting = d.Submit({{"workload", {{"kind", "hpc"}}},
                                        {"command", {"true"}},
                                        {"secrets", {"token"}},
                                        {"dependency", "afterok:" + first},
                                        {"max_retries", 0}});
  auto deleted = Call(d, "DELETE", "/v1/secrets/default/token");
  EXPECT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(Call(d, "DELETE", "/v1/secrets/default/token").status, 404);
  const json failed = d.WaitTerminal(waiting);
  EXPECT_EQ(failed["state"], "FAILED") << failed.dump();
  EXPECT_NE(failed.dump().find("secret 'token' of project default cannot be read"), std::string::npos) << failed.dump();
}

}  // namespace
}  // namespace unisched::testing
