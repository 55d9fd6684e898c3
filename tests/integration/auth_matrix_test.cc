// The auth matrix, generated from docs/openapi.yaml: every operation there,
// called by every kind of caller against a real daemon, answers as the
// operation's `x-access` rule says. An operation without a rule fails the
// test, and the route table is held to the document by
// OpenApiAgreementTest, so a new endpoint cannot ship unprotected.
//
// Callers: no token, a wrong token, an expired one, a revoked one; a node
// token of another pool and one of the right pool; a user (alice, project
// default, owner of the job and the sandbox the paths name); a user of
// another project (bob); a queue-admin of another queue (carol); a
// platform-admin; the job's own token (UNISCHED_JOB_TOKEN, read from the
// running job), which may call only the operations marked x-job-token, and
// a forged job token.

#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const std::string kAgentNode = "x86-c4m8-agent-01";

// The default config plus what the matrix needs: a second project, an
// agent pool with one node, and a queue on it.
std::string MatrixConfig() {
  YAML::Node config = YAML::LoadFile(std::string(UNISCHED_SOURCE_DIR) + "/config/unisched.yaml");
  config["projects"].push_back(YAML::Load("{name: physics}"));
  config["pools"].push_back(YAML::Load("{name: agent-pool, kind: cpu, nodes: [" + kAgentNode + "]}"));
  config["nodes"].push_back(YAML::Load("{name: " + kAgentNode + ", cpus: 4, memory_mb: 8192, agent: true}"));
  config["queues"].push_back(YAML::Load("{name: agent-batch, pool: agent-pool}"));
  YAML::Emitter out;
  out << config;
  return out.c_str();
}

struct Caller {
  std::string name;
  std::string token;
  enum Kind { kNoCredential, kUser, kNode, kJob } kind = kUser;
};

struct Operation {
  std::string method, path, id, access;
  bool job_token = false;  // x-job-token: the job's own token may call it
};

// Every operation of docs/openapi.yaml, reads first and deletions last, so
// that what one call changes does not hide what the next would show.
std::vector<Operation> Operations() {
  const YAML::Node doc = YAML::LoadFile(std::string(UNISCHED_SOURCE_DIR) + "/docs/openapi.yaml");
  std::vector<Operation> ops;
  for (const auto& path : doc["paths"]) {
    for (const auto& entry : path.second) {
      const std::string method = entry.first.as<std::string>();
      if (method == "parameters") continue;
      Operation op;
      op.method = method;
      std::transform(op.method.begin(), op.method.end(), op.method.begin(), ::toupper);
      op.path = path.first.as<std::string>();
      op.id = entry.second["operationId"].as<std::string>("");
      op.access = entry.second["x-access"].as<std::string>("");
      op.job_token = entry.second["x-job-token"].as<bool>(false);
      ops.push_back(op);
    }
  }
  auto rank = [](const std::string& m) { return m == "GET" ? 0 : m == "DELETE" ? 2 : 1; };
  std::stable_sort(ops.begin(), ops.end(),
                   [&](const Operation& a, const Operation& b) { return rank(a.method) < rank(b.method); });
  return ops;
}

class AuthMatrixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the sandbox operations need root";
    d_.UseConfigText(MatrixConfig());
    d_.Start();
    alice_ = d_.CreateUser("alice", "user", {"default"});
    bob_ = d_.CreateUser("bob", "user", {"physics"});
    carol_ = d_.CreateUser("carol", "queue-admin", {}, {"agent-batch"});

    auto as_alice = [&](const std::string& method, const std::string& target, const json& body) {
      return d_.Call(method, target, body.dump(), {}, &alice_);
    };
    // The job hands its token out through a file (a job could pass it to anyone).
    const std::string shared = d_.state_dir() + "/shared";
    std::filesystem::create_directories(shared);
    std::filesystem::permissions(shared, std::filesystem::perms::all);
    Reply job = as_alice("POST", "/v1/jobs",
                         {{"workload", {{"kind", "hpc"}}},
                          {"command",
                           {"/bin/sh", "-c",
                            "echo $UNISCHED_JOB_TOKEN > " + shared + "/token.tmp; mv " + shared + "/token.tmp " +
                                shared + "/token; exec sleep 300"}}});
    ASSERT_EQ(job.status, 201) << job.body;
    job_id_ = job.json["id"];
    for (int i = 0; i < 300 && !std::filesystem::exists(shared + "/token"); ++i) std::this_thread::sleep_for(50ms);
    std::string job_token;
    std::ifstream(shared + "/token") >> job_token;
    ASSERT_FALSE(job_token.empty()) << "the job did not start";
    Reply step = as_alice("POST", "/v1/jobs/" + job_id_ + "/steps", {{"command", {"true"}}});
    ASSERT_EQ(step.status, 201) << step.body;
    Reply sandbox = as_alice("POST", "/v1/sandboxes", {{"project", "default"}});
    ASSERT_EQ(sandbox.status, 201) << sandbox.body;
    sandbox_id_ = sandbox.json["id"];
    Reply file = d_.Call("PUT", "/v1/sandboxes/" + sandbox_id_ + "/files/matrix.txt", "hello",
                         {{"Content-Type", "application/octet-stream"}}, &alice_);
    ASSERT_EQ(file.status / 100, 2) << file.body;
    Reply throwaway = as_alice("POST", "/v1/users/alice/tokens", {{"name", "throwaway"}});
    ASSERT_EQ(throwaway.status, 201) << throwaway.body;
    throwaway_token_id_ = throwaway.json["id"];
    Reply node_throwaway = d_.Call("POST", "/v1/node-tokens", json{{"pool", "agent-pool"}});
    ASSERT_EQ(node_throwaway.status, 201) << node_throwaway.body;
    throwaway_node_token_id_ = node_throwaway.json["id"];
    ASSERT_EQ(as_alice("POST", "/v1/secrets", {{"name", "matrix-secret"}, {"value", "v"}}).status, 201);
    Reply workflow = as_alice("POST", "/v1/workflows", WorkflowBody("matrix"));
    ASSERT_EQ(workflow.status, 201) << workflow.body;
    workflow_id_ = workflow.json["id"];

    Reply expiring = as_alice("POST", "/v1/users/alice/tokens", {{"expires_in_seconds", 1}});
    Reply revoked = as_alice("POST", "/v1/users/alice/tokens", json::object());
    ASSERT_EQ(revoked.status, 201);
    ASSERT_EQ(d_.Call("DELETE", "/v1/users/alice/tokens/" + revoked.json["id"].get<std::string>()).status, 200);
    Reply other_pool = d_.Call("POST", "/v1/node-tokens", json{{"pool", "cpu-hpc-pool"}});
    Reply own_pool = d_.Call("POST", "/v1/node-tokens", json{{"pool", "agent-pool"}});
    std::this_thread::sleep_for(1100ms);  // the expiring token is now expired

    callers_ = {{"no token", "", Caller::kNoCredential},
                {"wrong token", "usk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", Caller::kNoCredential},
                {"expired token", expiring.json.value("token", ""), Caller::kNoCredential},
                {"revoked token", revoked.json.value("token", ""), Caller::kNoCredential},
                {"node token of another pool", other_pool.json.value("token", ""), Caller::kNode},
                {"node token of its pool", own_pool.json.value("token", ""), Caller::kNode},
                {"user of another project", bob_, Caller::kUser},
                {"queue-admin of another queue", carol_, Caller::kUser},
                {"user", alice_, Caller::kUser},
                {"platform-admin", d_.admin_token(), Caller::kUser},
                {"the job's own token", job_token, Caller::kJob},
                {"a forged job token", "usj_" + job_id_ + ".1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                 Caller::kNoCredential}};
  }

  // The path with its parameters naming alice's objects.
  std::string Target(const Operation& op) const {
    std::string path = op.path;
    auto put = [&](const std::string& param, const std::string& value) {
      if (auto at = path.find(param); at != std::string::npos) path.replace(at, param.size(), value);
    };
    if (path.rfind("/v1/jobs/", 0) == 0) put("{id}", job_id_);
    if (path.rfind("/v1/sandboxes/", 0) == 0) put("{id}", sandbox_id_);
    if (path.rfind("/v1/node-tokens/", 0) == 0) put("{id}", throwaway_node_token_id_);
    if (path.rfind("/v1/users/", 0) == 0) put("{id}", throwaway_token_id_);
    if (path.rfind("/v1/users/", 0) == 0) put("{name}", "alice");
    if (path.rfind("/v1/nodes/", 0) == 0) put("{name}", "x86-c64m256-hpc-01");
    if (path.rfind("/v1/images/", 0) == 0) put("{name}", "matrix-image");
    if (path.rfind("/v1/baselines/", 0) == 0) put("{id}", "1");
    if (path.rfind("/v1/workflows/", 0) == 0) put("{id}", workflow_id_);
    if (path.rfind("/v1/secrets/", 0) == 0) {
      put("{project}", "default");
      put("{name}", "matrix-secret");
    }
    put("{path}", "matrix.txt");
    put("{file}", "app.js");
    put("{step}", "1");
    if (op.id == "agentLogs") path += "?node=" + kAgentNode + "&job=" + job_id_ + "&attempt=1&stream=stdout&offset=0";
    return path;
  }

  // A body the operation would accept from a caller it allows.
  std::string Body(const Operation& op) {
    static int users = 0;
    const std::map<std::string, json> bodies = {
        {"submitJob", {{"workload", {{"kind", "hpc"}}}, {"command", {"true"}}, {"project", "default"}}},
        {"createUser", {{"name", "matrix-" + std::to_string(++users)}, {"role", "user"}, {"projects", {"default"}}}},
        {"createNodeToken", {{"pool", "agent-pool"}}},
        {"drainNode", {{"reason", "auth matrix"}}},
        {"agentHeartbeat",
         {{"node", kAgentNode}, {"pool", "agent-pool"}, {"resources", {{"cpus", 4}, {"memory_mb", 8192}}}}},
        {"agentResults", {{"node", kAgentNode}, {"results", json::array()}}},
        {"createSandbox", {{"project", "default"}}},
        {"execSandbox", {{"command", {"true"}}}},
        {"createImage", {{"name", "matrix-image"}}},
        {"recordBaseline", {{"pools", {"cpu-hpc-pool"}}, {"figures", json::array()}}},
        {"createSecret", {{"project", "default"}, {"name", "matrix-" + std::to_string(++users)}, {"value", "v"}}},
        {"rotateSecret", {{"value", "v2"}}},
        {"createWorkflow", WorkflowBody("matrix-" + std::to_string(++users))},
        {"addWorkflowTasks", {{"tasks", {{{"name", "added-" + std::to_string(++users)}, {"job", SleepJob()}}}}}},
    };
    if (op.id == "putSandboxFile") return "hello";
    if (auto it = bodies.find(op.id); it != bodies.end()) return it->second.dump();
    return op.method == "GET" || op.method == "DELETE" ? std::string() : std::string("{}");
  }

  // Whether `caller` may make calls of this rule (on alice's objects).
  static bool Allowed(const Operation& op, const Caller& caller) {
    const std::string& access = op.access;
    if (access == "public") return true;
    if (caller.kind == Caller::kJob) return op.job_token;
    if (caller.kind == Caller::kNoCredential) return false;
    if (access == "node") return caller.name == "node token of its pool";
    if (caller.kind == Caller::kNode) return false;
    if (access == "authenticated") return true;
    if (caller.name == "platform-admin") return true;
    if (access == "platform-admin") return false;
    // self, project-member, job-reader, job-controller, sandbox-owner: of
    // alice's objects (the path's user, the body's project default).
    return caller.name == "user";
  }

  // The statuses a refused caller may get under `access`.
  static std::set<int> Refusals(const std::string& access, const Caller& caller) {
    if (caller.kind == Caller::kNoCredential) return {401};
    if (caller.kind == Caller::kJob) return {403, 404};  // 404: another object (its job only)
    if (caller.kind == Caller::kNode) return access == "node" ? std::set<int>{403, 404} : std::set<int>{403};
    if (access == "job-reader" || access == "job-controller" || access == "sandbox-owner") return {404};
    return {403};
  }

  // A job that waits long enough for the matrix to find its workflow running.
  static json SleepJob() {
    return {{"workload", {{"kind", "hpc"}}},
            {"resources", {{"cpus", 1}, {"memory_mb", 64}}},
            {"command", {"/bin/sh", "-c", "sleep 300"}}};
  }
  static json WorkflowBody(const std::string& name) {
    return {{"name", name}, {"project", "default"}, {"tasks", {{{"name", "only"}, {"job", SleepJob()}}}}};
  }

  TestDaemon d_;
  std::string alice_, bob_, carol_, workflow_id_;
  std::string job_id_, sandbox_id_, throwaway_token_id_, throwaway_node_token_id_;
  std::vector<Caller> callers_;
};

TEST_F(AuthMatrixTest, EveryOperationAnswersEveryCallerAsItsAccessRuleSays) {
  static const std::set<std::string> kRules = {"public",         "authenticated",  "platform-admin",
                                               "self",           "project-member", "job-reader",
                                               "job-controller", "sandbox-owner",  "node"};
  const auto ops = Operations();
  ASSERT_GE(ops.size(), 40u);
  int calls = 0;
  for (const auto& op : ops) {
    SCOPED_TRACE(op.method + " " + op.path + " (" + op.id + ", x-access: " + op.access + ")");
    ASSERT_TRUE(kRules.count(op.access)) << "every operation needs an x-access rule in docs/openapi.yaml";
    const std::string target = Target(op);
    ASSERT_EQ(target.find('{'), std::string::npos) << "the matrix does not know how to fill " << target;
    // The refused callers first: an allowed caller's call may change what
    // the next one finds (a cancelled job, a deleted sandbox).
    std::vector<const Caller*> order;
    for (const auto& c : callers_) {
      if (!Allowed(op, c)) order.push_back(&c);
    }
    for (const auto& c : callers_) {
      if (Allowed(op, c)) order.push_back(&c);
    }
    bool first_allowed = true;
    for (const Caller* caller : order) {
      SCOPED_TRACE(caller->name);
      std::map<std::string, std::string> headers;
      if (op.id == "putSandboxFile") headers["Content-Type"] = "application/octet-stream";
      const Reply r = d_.Call(op.method, target, Body(op), headers, &caller->token);
      ++calls;
      if (Allowed(op, *caller)) {
        EXPECT_NE(r.status, 401) << r.body;
        EXPECT_NE(r.status, 403) << r.body;
        // The first allowed caller of an object finds it (later ones may
        // find it deleted by the first).
        if (first_allowed && (op.access == "job-reader" || op.access == "sandbox-owner")) {
          EXPECT_NE(r.status, 404) << r.body;
        }
        first_allowed = false;
      } else {
        const auto refusals = Refusals(op.access, *caller);
        EXPECT_TRUE(refusals.count(r.status)) << "got " << r.status << ": " << r.body;
      }
    }
  }
  // 43 operations x 10 callers at the time of writing.
  EXPECT_EQ(calls, static_cast<int>(ops.size() * callers_.size()));
}

}  // namespace
}  // namespace unisched::testing
