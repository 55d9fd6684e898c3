// Tests of the config loader: valid and invalid documents with their exact
// error paths, the derived node fields, and the shipped config files.

#include "unisched/config/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "config/version.h"

namespace unisched::config {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A small valid cluster, section by section; cases replace one section.
constexpr const char* kPools = R"(
pools:
  - name: cpu-pool
    kind: cpu
    labels: {interconnect: ib, memory: large}
    nodes: [x86-c8m16-hpc-01, x86-c8m16-hpc-02]
  - name: gpu-pool
    kind: gpu
    labels: {interconnect: nvlink}
    nodes: [x86-c8m64g2-train-01]
)";
constexpr const char* kNodes = R"(
nodes:
  - name: x86-c8m16-hpc-01
    labels: {memory: huge, rack: r1}
    cpus: 8
    memory_mb: 16384
  - name: x86-c8m16-hpc-02
    cpus: 8
    memory_mb: 16384
  - name: x86-c8m64g2-train-01
    cpus: 8
    memory_mb: 65536
    gpus:
      - {model: a100, memory_gb: 40}
      - {model: h100, memory_gb: 80}
)";
constexpr const char* kQueues = R"(
queues:
  - name: batch
    pool: cpu-pool
    workload_kinds: [hpc]
  - name: train
    pool: gpu-pool
    workload_kinds: [ai-training, ai-inference]
    priority_tier: 2
    policy: {type: priority-with-quota, gpu_quota_per_project: 4, preemptible: false}
)";

class Doc {
 public:
  Doc& Pools(std::string text) {
    pools_ = std::move(text);
    return *this;
  }
  Doc& Nodes(std::string text) {
    nodes_ = std::move(text);
    return *this;
  }
  Doc& Queues(std::string text) {
    queues_ = std::move(text);
    return *this;
  }
  Doc& Extra(std::string text) {
    extra_ = std::move(text);
    return *this;
  }  // further top-level sections
  std::string Text() const { return pools_ + nodes_ + queues_ + extra_; }

 private:
  std::string pools_ = kPools;
  std::string nodes_ = kNodes;
  std::string queues_ = kQueues;
  std::string extra_;
};

std::vector<ConfigError> ErrorsOf(const LoadResult& result) {
  if (const auto* errors = std::get_if<std::vector<ConfigError>>(&result)) return *errors;
  return {};
}

std::vector<std::string> PathsOf(const std::vector<ConfigError>& errors) {
  std::vector<std::string> paths;
  for (const auto& error : errors) paths.push_back(error.path);
  return paths;
}

std::string Dump(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const auto& error : errors) out += "\n  " + error.ToString();
  return out;
}

Config MustLoad(const LoadResult& result) {
  const auto errors = ErrorsOf(result);
  EXPECT_THAT(errors, IsEmpty()) << Dump(errors);
  if (const auto* config = std::get_if<Config>(&result)) return *config;
  return {};
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const model::NodeSpec& NodeNamed(const Config& config, std::string_view name) {
  const model::NodeSpec* node = config.cluster.FindNode(name);
  if (node == nullptr) {
    ADD_FAILURE() << "no node " << name;
    static const model::NodeSpec kNone;
    return kNone;
  }
  return *node;
}

TEST(LoadConfigText, AcceptsValidDocuments) {
  struct Case {
    std::string name;
    Doc doc;
  };
  const std::vector<Case> cases = {
      {"the base document", Doc()},
      {"no nodes at all: agents may register them",
       Doc().Pools("pools: [{name: cpu-pool, kind: cpu}, {name: gpu-pool, kind: gpu}]\n").Nodes("nodes: []\n")},
      {"gpus as a map of identical devices", Doc().Nodes(R"(
nodes:
  - {name: x86-c8m16-hpc-01, cpus: 8, memory_mb: 16384}
  - {name: x86-c8m16-hpc-02, cpus: 8, memory_mb: 16384}
  - {name: x86-c8m64g2-train-01, cpus: 8, memory_mb: 65536, gpus: {count: 2, model: a100, memory_gb: 40}}
)")},
      {"every optional section with every key", Doc().Extra(R"(
server:
  listen: "[::1]:0"
  state_dir: /tmp/unisched
  http_threads: 4
  max_body_bytes: 2048
  header_timeout_seconds: 1
  body_timeout_seconds: 2
  idle_timeout_seconds: 3
  scheduler_tick_seconds: 0.5
  metrics_require_token: true
access:
  roles:
    platform-admin: {allow_from: [127.0.0.1, "::1/128", 10.0.0.0/24]}
    user: {requests_per_second: 2.5, burst: 10}
    node: {allow_from: ["2001:db8::/32"]}
  jwt: {jwks_file: /etc/unisched/jwks.json, issuer: "https://idp", audience: unisched, user_claim: email,
        leeway_seconds: 5}
store: {synchronous: normal, group_commit_max_batch: 8, job_retention_days: 1, max_log_bytes: 0}
executor:
  default_unix_user: nobody
  kill_grace_seconds: 0
  use_cgroups: false
  pids_limit: 64
  supervisor_path: /usr/libexec/unisched-supervisor
routing:
  rules:
    - {name: gpu-jobs, match: {kind: ai-training, features: {precision: bf16}, min_gpus: 1, max_gpus: 8}, queue: train}
    - {name: catch-all, queue: batch}
projects:
  - {name: default, description: everyone}
  - {name: genomics}
users:
  - {name: alice, projects: [genomics], unix_user: alice}
  - {name: bob.smith, role: queue-admin, projects: [default, genomics], queues: [batch, train]}
  - {name: root-admin, role: platform-admin}
)")},
      {"empty optional sections and explicit nulls",
       Doc().Extra("server:\nstore: ~\nexecutor: {}\nrouting:\nprojects: []\nusers:\n")},
      {"numbers with a plus sign and floats for hours", Doc().Queues(R"(
queues:
  - name: batch
    pool: cpu-pool
    policy: {max_walltime_hours: +2.5, default_walltime_hours: 0.25, default_memory_mb_per_cpu: 512}
  - name: train
    pool: gpu-pool
    policy: {type: elastic, scale_in_idle_seconds: 30, max_concurrency: 10, gpu_quota_per_project: 0}
)")},
      {"a queue without workload kinds serves any kind, so any rule may target it",
       Doc()
           .Queues("queues: [{name: batch, pool: cpu-pool}, {name: train, pool: gpu-pool}]\n")
           .Extra("routing: {rules: [{name: agents, match: {kind: agent}, queue: batch}]}\n")},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    MustLoad(LoadConfigText(c.doc.Text()));
  }
}

TEST(LoadConfigText, ReportsEveryErrorWithItsPath) {
  struct Case {
    std::string name;
    Doc doc;
    std::vector<std::string> paths;  // in the reported order
    std::string message;             // a part of the first error's message
  };
  const std::vector<Case> cases = {
      // Shape: missing, unknown and mistyped keys.
      {"required sections missing",
       Doc().Pools("").Nodes("").Queues(""),
       {"pools", "nodes", "queues"},
       "missing required key 'pools'"},
      {"unknown top-level key", Doc().Extra("poolz: []\n"), {"poolz"}, "unknown key 'poolz'; expected one of: server"},
      {"unknown nested key with a suggestion",
       Doc().Queues("queues:\n  - {name: batch, pool: cpu-pool, policy: {max_concurency: 5}}\n"),
       {"queues[0].policy.max_concurency"},
       "(did you mean 'max_concurrency'?)"},
      {"a string where a number is needed",
       Doc().Extra("server: {http_threads: four}\n"),
       {"server.http_threads"},
       "must be an integer; got 'four'"},
      {"a quoted number is a string",
       Doc().Extra("store: {max_log_bytes: \"1024\"}\n"),
       {"store.max_log_bytes"},
       "write numbers and true/false without quotes"},
      {"a fraction where an integer is needed",
       Doc()
           .Pools("pools: [{name: cpu-pool, kind: cpu, nodes: [x86-c8m16-hpc-01]}]\n")
           .Nodes("nodes: [{name: x86-c8m16-hpc-01, cpus: 1.5, memory_mb: 1}]\n")
           .Queues("queues: [{name: batch, pool: cpu-pool}]\n"),
       {"nodes[0].cpus"},
       "must be an integer"},
      // One Unix account per user (docs/accounts.md).
      {"user uids over the sandboxes' uids",
       Doc().Extra("executor: {user_accounts: {uid_min: 3000000, uid_max: 3000999, gid_min: 5000, gid_max: 6000}}\n"),
       {"executor.user_accounts.uid_min"},
       "overlaps the sandboxes' uids (3000000..3099999)"},
      {"an empty gid range",
       Doc().Extra("executor: {user_accounts: {uid_min: 2000000, uid_max: 2000999, gid_min: 7000, gid_max: 6000}}\n"),
       {"executor.user_accounts.gid_min"},
       "gid_min..gid_max must be a range within 1000.."},
      {"uids among the host's accounts",
       Doc().Extra("executor: {user_accounts: {uid_min: 0, uid_max: 100, gid_min: 5000, gid_max: 6000}}\n"),
       {"executor.user_accounts.uid_min"},
       "uid_min..uid_max must be a range within 1000.."},
      // Access rules by role (docs/access.md).
      {"an unknown role in access",
       Doc().Extra("access: {roles: {admin: {requests_per_second: 5}}}\n"),
       {"access.roles.admin"},
       "unknown role 'admin'; expected one of: user, queue-admin, platform-admin, node"},
      {"a range with host bits",
       Doc().Extra("access: {roles: {user: {allow_from: [10.0.0.0/8, 10.0.0.1/8]}}}\n"),
       {"access.roles.user.allow_from[1]"},
       "did you mean 10.0.0.0/8?"},
      {"a negative rate",
       Doc().Extra("access: {roles: {node: {requests_per_second: -1, burst: -2}}}\n"),
       {"access.roles.node.requests_per_second", "access.roles.node.burst"},
       "must be >= 0"},
      {"a JWT section without its issuer and audience",
       Doc().Extra("access: {jwt: {jwks_file: jwks.json}}\n"),
       {"access.jwt.issuer", "access.jwt.audience", "access.jwt.jwks_file"},
       "missing required key 'issuer'"},
      {"an unknown key of a role's rule",
       Doc().Extra("access: {roles: {user: {rate: 5}}}\n"),
       {"access.roles.user.rate"},
       "unknown key 'rate'"},
      // One backend serves a pool (docs/adr/0006-pool-backend-port.md).
      {"a pool of local and agent nodes",
       Doc()
           .Pools("pools: [{name: cpu-pool, kind: cpu, nodes: [x86-c8m16-hpc-01, x86-c8m16-hpc-02]}]\n")
           .Nodes("nodes: [{name: x86-c8m16-hpc-01, cpus: 8, memory_mb: 16384},\n"
                  "        {name: x86-c8m16-hpc-02, cpus: 8, memory_mb: 16384, agent: true}]\n")
           .Queues("queues: [{name: batch, pool: cpu-pool}]\n"),
       {"pools[0].nodes"},
       "has local nodes (x86-c8m16-hpc-01) and agent nodes (x86-c8m16-hpc-02); one backend serves a pool"},
      {"backend: agent over a local node",
       Doc()
           .Pools("pools: [{name: cpu-pool, kind: cpu, backend: agent, nodes: [x86-c8m16-hpc-01]}]\n")
           .Nodes("nodes: [{name: x86-c8m16-hpc-01, cpus: 8, memory_mb: 16384}]\n")
           .Queues("queues: [{name: batch, pool: cpu-pool}]\n"),
       {"pools[0].nodes"},
       "has backend: agent but nodes without agent: true (x86-c8m16-hpc-01)"},
      {"a placing backend with nodes of its own here",
       Doc()
           .Pools("pools: [{name: cpu-pool, kind: cpu, backend: slurm-west, nodes: [x86-c8m16-hpc-01]}]\n")
           .Nodes("nodes: [{name: x86-c8m16-hpc-01, cpus: 8, memory_mb: 16384}]\n")
           .Queues("queues: [{name: batch, pool: cpu-pool}]\n"),
       {"pools[0].nodes"},
       "is served by backend 'slurm-west', which places its jobs itself: it has no nodes here; use nodes: []"},
      {"a backend name that is not a plain name",
       Doc()
           .Pools("pools: [{name: cpu-pool, kind: cpu, backend: \"Slurm West\", nodes: []}]\n")
           .Nodes("nodes: []\n")
           .Queues("queues: [{name: batch, pool: cpu-pool}]\n"),
       {"pools[0].backend"},
       "invalid backend name 'Slurm West'"},
      {"an integer beyond int",
       Doc().Extra("executor: {pids_limit: 99999999999}\n"),
       {"executor.pids_limit"},
       "between"},
      {"a boolean spelled otherwise",
       Doc().Extra("executor: {use_cgroups: maybe}\n"),
       {"executor.use_cgroups"},
       "must be true or false"},
      {"a list where a map is needed", Doc().Extra("server: [listen]\n"), {"server"}, "must be a map"},
      {"a map where a list is needed", Doc().Extra("projects: {name: default}\n"), {"projects"}, "must be a list"},
      {"a duplicate key",
       Doc().Extra("store: {synchronous: full, synchronous: off}\n"),
       {"store.synchronous"},
       "duplicate key 'synchronous'"},
      {"a label value that is a list",
       Doc().Extra("routing: {rules: [{name: r, match: {features: {a: [1]}}, queue: batch}]}\n"),
       {"routing.rules[0].match.features.a"},
       "must be a string value"},

      // Server, store and executor values.
      {"bad listen address", Doc().Extra("server: {listen: localhost}\n"), {"server.listen"}, "must be HOST:PORT"},
      {"port out of range", Doc().Extra("server: {listen: \"127.0.0.1:70000\"}\n"), {"server.listen"}, "65535"},
      {"non-positive server numbers",
       Doc().Extra("server: {http_threads: 0, max_body_bytes: -1, header_timeout_seconds: 0, "
                   "body_timeout_seconds: 0, idle_timeout_seconds: 0, scheduler_tick_seconds: 0, state_dir: ''}\n"),
       {"server.state_dir", "server.http_threads", "server.max_body_bytes", "server.header_timeout_seconds",
        "server.body_timeout_seconds", "server.idle_timeout_seconds", "server.scheduler_tick_seconds"},
       "must not be empty"},
      {"store values",
       Doc().Extra("store: {synchronous: ful, group_commit_max_batch: 0, job_retention_days: 0, max_log_bytes: -1}\n"),
       {"store.synchronous", "store.group_commit_max_batch", "store.job_retention_days", "store.max_log_bytes"},
       "expected one of: full, normal, off (did you mean 'full'?)"},
      {"executor values",
       Doc().Extra("executor: {default_unix_user: Root, kill_grace_seconds: -1, pids_limit: 0, supervisor_path: bin/x, "
                   "runtime_dir: run}\n"),
       {"executor.default_unix_user", "executor.kill_grace_seconds", "executor.pids_limit", "executor.supervisor_path",
        "executor.runtime_dir"},
       "must be a Unix user name"},
      {"a work directory kept as long as the job record",
       Doc().Extra("store: {job_retention_days: 2}\nexecutor: {work_dir_retention_hours: 48}\n"),
       {"executor.work_dir_retention_hours"},
       "must be shorter than the job records' retention (store.job_retention_days = 2, 48 hours)"},
      {"a negative work directory retention",
       Doc().Extra("executor: {work_dir_retention_hours: -1}\n"),
       {"executor.work_dir_retention_hours"},
       "must be >= 0"},

      // Pools and nodes.
      {"pool without name and kind, and an unknown kind (so cpu-pool is undefined)",
       Doc().Pools(R"(
pools:
  - {nodes: [x86-c8m16-hpc-01, x86-c8m16-hpc-02]}
  - {name: gpu-pool, kind: tpu, nodes: [x86-c8m64g2-train-01]}
)"),
       {"pools[0].name", "pools[0].kind", "pools[1].kind", "queues[0].pool"},
       "missing required key 'name'"},
      {"bad and duplicate pool names",
       Doc().Pools(R"(
pools:
  - {name: CPU pool, kind: cpu, nodes: [x86-c8m16-hpc-01, x86-c8m16-hpc-02]}
  - {name: gpu-pool, kind: gpu, nodes: [x86-c8m64g2-train-01]}
  - {name: gpu-pool, kind: gpu}
)"),
       {"pools[0].name", "pools[2].name", "queues[0].pool"},
       "invalid pool name 'CPU pool'"},
      {"node names must be architecture-spec-purpose",
       Doc()
           .Pools("pools: [{name: cpu-pool, kind: cpu, nodes: [hpc01, x86-c8m16-hpc-02]}, "
                  "{name: gpu-pool, kind: gpu, nodes: [x86-c8m64g2-train-01]}]\n")
           .Nodes(R"(
nodes:
  - {name: hpc01, cpus: 8, memory_mb: 16384}
  - {name: x86-c8m16-hpc-02, cpus: 8, memory_mb: 16384}
  - {name: x86-c8m64g2-train-01, cpus: 8, memory_mb: 65536, gpus: {count: 1, model: a100, memory_gb: 40}}
)"),
       {"nodes[0].name"},
       "architecture-spec-purpose"},
      {"node resources missing or not positive",
       Doc().Nodes(R"(
nodes:
  - {name: x86-c8m16-hpc-01}
  - {name: x86-c8m16-hpc-02, cpus: 0, memory_mb: -5}
  - {name: x86-c8m64g2-train-01, cpus: 8, memory_mb: 65536, gpus: {count: 1, model: a100, memory_gb: 40}}
)"),
       {"nodes[0].cpus", "nodes[0].memory_mb", "nodes[1].cpus", "nodes[1].memory_mb"},
       "missing required key 'cpus'"},
      {"node in no pool, in two pools, and an unknown node in a pool",
       Doc().Pools(R"(
pools:
  - {name: cpu-pool, kind: cpu, nodes: [x86-c8m16-hpc-01, x86-c8m64g2-train-01]}
  - {name: gpu-pool, kind: gpu, nodes: [x86-c8m64g2-train-01, x86-c8m16-hpc-09]}
)"),
       {"pools[1].nodes[0]", "pools[1].nodes[1]", "nodes[1]"},
       "node 'x86-c8m64g2-train-01' is already in pool 'cpu-pool'"},
      {"duplicate node names",
       Doc().Nodes(std::string(kNodes) + "  - {name: x86-c8m16-hpc-01, cpus: 1, memory_mb: 1}\n"),
       {"nodes[3].name"},
       "duplicate node name 'x86-c8m16-hpc-01' (first defined at nodes[0].name)"},
      {"gpu map form errors",
       Doc().Nodes(R"(
nodes:
  - {name: x86-c8m16-hpc-01, cpus: 8, memory_mb: 16384}
  - {name: x86-c8m16-hpc-02, cpus: 8, memory_mb: 16384}
  - {name: x86-c8m64g2-train-01, cpus: 8, memory_mb: 65536, gpus: {count: -1, model: '', memory_gb: 0, kind: x}}
)"),
       {"nodes[2].gpus.kind", "nodes[2].gpus.count", "nodes[2].gpus.model", "nodes[2].gpus.memory_gb"},
       "unknown key 'kind'; expected one of: count, model, memory_gb"},
      {"gpu list form errors",
       Doc().Nodes(R"(
nodes:
  - {name: x86-c8m16-hpc-01, cpus: 8, memory_mb: 16384}
  - {name: x86-c8m16-hpc-02, cpus: 8, memory_mb: 16384}
  - {name: x86-c8m64g2-train-01, cpus: 8, memory_mb: 65536, gpus: [{model: a100}, 7]}
)"),
       {"nodes[2].gpus[0].memory_gb", "nodes[2].gpus[1]"},
       "missing required key 'memory_gb'"},
      {"gpus neither map nor list",
       Doc().Nodes(R"(
nodes:
  - {name: x86-c8m16-hpc-01, cpus: 8, memory_mb: 16384}
  - {name: x86-c8m16-hpc-02, cpus: 8, memory_mb: 16384}
  - {name: x86-c8m64g2-train-01, cpus: 8, memory_mb: 65536, gpus: 8}
)"),
       {"nodes[2].gpus"},
       "must be a map {count, model, memory_gb} or a list of {model, memory_gb}"},
      {"a node of a gpu pool without gpus",
       Doc().Nodes(R"(
nodes:
  - {name: x86-c8m16-hpc-01, cpus: 8, memory_mb: 16384}
  - {name: x86-c8m16-hpc-02, cpus: 8, memory_mb: 16384}
  - {name: x86-c8m64g2-train-01, cpus: 8, memory_mb: 65536}
)"),
       {"nodes[2].gpus"},
       "is in GPU pool 'gpu-pool' but declares no GPUs"},

      // Queues.
      {"unknown pool, listing the defined ones",
       Doc().Queues("queues: [{name: batch, pool: gpu-poll}]\n"),
       {"queues[0].pool"},
       "unknown pool 'gpu-poll'; defined pools: cpu-pool, gpu-pool (did you mean 'gpu-pool'?)"},
      {"queue without name and pool",
       Doc().Queues("queues: [{workload_kinds: [hpc]}]\n"),
       {"queues[0].name", "queues[0].pool"},
       "missing required key 'name'"},
      {"no queues", Doc().Queues("queues: []\n"), {"queues"}, "at least one queue"},
      {"no pools",
       Doc().Pools("pools: []\n").Nodes("nodes: []\n").Queues("queues: [{name: batch, pool: cpu-pool}]\n"),
       {"pools", "queues[0].pool"},
       "at least one pool"},
      {"duplicate queue names and workload kinds",
       Doc().Queues("queues:\n  - {name: batch, pool: cpu-pool, workload_kinds: [hpc, agent, hpc, robots]}\n"
                    "  - {name: batch, pool: gpu-pool}\n"),
       {"queues[0].workload_kinds[3]", "queues[0].workload_kinds[2]", "queues[1].name"},
       "unknown workload kind 'robots'"},
      {"every policy rule at once",
       Doc().Queues(R"(
queues:
  - name: batch
    pool: cpu-pool
    policy:
      type: fair-share
      max_walltime_hours: 0
      default_walltime_hours: -1
      default_memory_mb_per_cpu: 0
      gpu_quota_per_project: -1
      preemptible: nope
      scale_in_idle_seconds: 0
      max_concurrency: 0
  - name: train
    pool: gpu-pool
    policy: {max_walltime_hours: 1, default_walltime_hours: 2, max_concurrency: many}
)"),
       {"queues[0].policy.preemptible", "queues[0].policy.type", "queues[0].policy.max_walltime_hours",
        "queues[0].policy.default_walltime_hours", "queues[0].policy.default_memory_mb_per_cpu",
        "queues[0].policy.gpu_quota_per_project", "queues[0].policy.scale_in_idle_seconds",
        "queues[0].policy.max_concurrency", "queues[1].policy.max_concurrency",
        "queues[1].policy.default_walltime_hours"},
       "must be true or false"},

      // Routing.
      {"routing rule errors",
       Doc().Extra(R"(
routing:
  rules:
    - {name: r1, match: {kind: quantum}, queue: batch}
    - {name: r1, match: {min_gpus: 4, max_gpus: 2}, queue: nowhere}
    - {match: {kind: hpc, min_gpus: -1}}
    - {name: r4, match: {kind: agent}, queue: train}
)"),
       {"routing.rules[0].match.kind", "routing.rules[1].name", "routing.rules[1].match.max_gpus",
        "routing.rules[1].queue", "routing.rules[2].name", "routing.rules[2].queue", "routing.rules[2].match.min_gpus",
        "routing.rules[3].queue"},
       "unknown workload kind 'quantum'"},
      {"routing must be a map with rules",
       Doc().Extra("routing: {rule: []}\n"),
       {"routing.rule"},
       "expected one of: rules"},

      // Projects and users.
      {"projects and users",
       Doc().Extra(R"(
projects:
  - {name: default}
  - {name: default}
  - {description: nameless}
users:
  - {name: alice, role: queue-admin}
  - {name: bob, projects: [genomics, default, default], queues: [batch]}
  - {name: carol, role: root, unix_user: Carol}
  - {name: dave, role: queue-admin, queues: [batch, nightly]}
  - {name: alice}
)"),
       {"projects[1].name", "projects[2].name", "users[0].queues", "users[1].projects[0]", "users[1].projects[2]",
        "users[1].queues", "users[2].role", "users[2].unix_user", "users[3].queues[1]", "users[4].name"},
       "duplicate project name 'default'"},

      // Several sections wrong at once: all are reported, grouped by section.
      {"many errors in one file",
       Doc()
           .Queues("queues: [{name: batch, pool: nowhere, policy: {max_concurrency: 0}}]\n")
           .Extra("server: {listen: nowhere}\nstore: {synchronous: sometimes}\nusers: [{name: x, role: y}]\n"),
       {"server.listen", "store.synchronous", "queues[0].pool", "queues[0].policy.max_concurrency", "users[0].role"},
       "must be HOST:PORT"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto errors = ErrorsOf(LoadConfigText(c.doc.Text()));
    EXPECT_EQ(PathsOf(errors), c.paths) << Dump(errors);
    if (!errors.empty()) {
      EXPECT_THAT(errors.front().message, HasSubstr(c.message)) << Dump(errors);
    }
  }
}

TEST(LoadConfigText, DocumentLevelErrors) {
  struct Case {
    std::string name;
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"syntax error with line and column", "pools:\n  - name: [a, b\nqueues: []\n", "test.yaml:3:"},
      {"bad indentation", "pools: []\n  nodes: []\n", "test.yaml:2:"},
      {"not a map", "- a\n- b\n", "the configuration must be a map of sections"},
      {"two documents", std::string(kPools) + kNodes + kQueues + "---\nfoo: 1\n", "holds 2 YAML documents"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto errors = ErrorsOf(LoadConfigText(c.text, "test.yaml"));
    ASSERT_EQ(errors.size(), 1u) << Dump(errors);
    EXPECT_EQ(errors[0].path, "");
    EXPECT_THAT(errors[0].message, HasSubstr(c.message));
    EXPECT_EQ(errors[0].ToString(), errors[0].message);
  }
}

TEST(LoadConfigText, ErrorToStringIsPathColonMessage) {
  const auto errors = ErrorsOf(LoadConfigText(Doc().Extra("server: {http_threads: 0}\n").Text()));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(), "server.http_threads: must be > 0");
}

TEST(LoadConfigText, DerivesNodePoolsLabelsAndGpuIndices) {
  const Config config = MustLoad(LoadConfigText(Doc{}.Text()));
  const auto& hpc1 = NodeNamed(config, "x86-c8m16-hpc-01");
  EXPECT_EQ(hpc1.pool, "cpu-pool");
  // The pool's labels merged under the node's own: the node's memory wins.
  EXPECT_EQ(hpc1.labels, (model::Labels{{"interconnect", "ib"}, {"memory", "huge"}, {"rack", "r1"}}));
  EXPECT_EQ(NodeNamed(config, "x86-c8m16-hpc-02").labels, (model::Labels{{"interconnect", "ib"}, {"memory", "large"}}));
  EXPECT_EQ(hpc1.cpus, 8);
  EXPECT_EQ(hpc1.memory_mb, 16384);
  EXPECT_THAT(hpc1.gpus, IsEmpty());

  const auto& train = NodeNamed(config, "x86-c8m64g2-train-01");
  EXPECT_EQ(train.pool, "gpu-pool");
  EXPECT_THAT(train.gpus, ElementsAre(model::GpuDevice{0, "a100", 40}, model::GpuDevice{1, "h100", 80}));

  // Pool labels stay the pool's own.
  EXPECT_EQ(config.cluster.FindPool("cpu-pool")->labels, (model::Labels{{"interconnect", "ib"}, {"memory", "large"}}));

  const auto* queue = config.cluster.FindQueue("train");
  ASSERT_NE(queue, nullptr);
  EXPECT_EQ(queue->pool, "gpu-pool");
  EXPECT_EQ(queue->priority_tier, 2);
  EXPECT_THAT(queue->workload_kinds, ElementsAre(model::WorkloadKind::kAiTraining, model::WorkloadKind::kAiInference));
  EXPECT_EQ(queue->policy.type, "priority-with-quota");
  EXPECT_EQ(queue->policy.gpu_quota_per_project, 4);
  EXPECT_FALSE(queue->policy.preemptible);
  EXPECT_FALSE(queue->policy.max_walltime_hours.has_value());
  // Defaults of what the file leaves out.
  const auto* batch = config.cluster.FindQueue("batch");
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->policy.type, "fifo");
  EXPECT_TRUE(batch->policy.preemptible);
  EXPECT_EQ(config.server.listen, "127.0.0.1:8642");
  EXPECT_EQ(config.store.synchronous, "full");
  EXPECT_EQ(config.executor.default_unix_user, "unisched-job");
}

TEST(LoadConfigText, APoolsBackendIsDerivedFromItsNodesOrNamed) {
  const Config config =
      MustLoad(LoadConfigText(Doc()
                                  .Pools("pools:\n"
                                         "  - {name: here, kind: cpu, nodes: [x86-c8m16-hpc-01]}\n"
                                         "  - {name: agents, kind: cpu, nodes: [x86-c8m16-hpc-02]}\n"
                                         "  - {name: empty, kind: cpu, nodes: []}\n"
                                         "  - {name: far, kind: cpu, backend: slurm-west, nodes: []}\n")
                                  .Nodes("nodes:\n"
                                         "  - {name: x86-c8m16-hpc-01, cpus: 8, memory_mb: 16384}\n"
                                         "  - {name: x86-c8m16-hpc-02, cpus: 8, memory_mb: 16384, "
                                         "agent: true}\n")
                                  .Queues("queues: [{name: batch, pool: here}]\n")
                                  .Text()));
  EXPECT_EQ(config.cluster.FindPool("here")->backend, "local");
  EXPECT_EQ(config.cluster.FindPool("agents")->backend, "agent");
  EXPECT_EQ(config.cluster.FindPool("empty")->backend, "local");
  EXPECT_EQ(config.cluster.FindPool("far")->backend, "slurm-west");
  EXPECT_FALSE(config.cluster.FindPool("agents")->PlacedByBackend());
  EXPECT_TRUE(config.cluster.FindPool("far")->PlacedByBackend());
}

TEST(LoadConfigText, GpuMapFormGivesIdenticalDevicesInOrder) {
  Doc doc;
  doc.Nodes(R"(
nodes:
  - {name: x86-c8m16-hpc-01, cpus: 8, memory_mb: 16384}
  - {name: x86-c8m16-hpc-02, cpus: 8, memory_mb: 16384}
  - {name: x86-c8m64g2-train-01, cpus: 8, memory_mb: 65536, gpus: {count: 3, model: l40s, memory_gb: 48}}
)");
  const Config config = MustLoad(LoadConfigText(doc.Text()));
  EXPECT_THAT(
      NodeNamed(config, "x86-c8m64g2-train-01").gpus,
      ElementsAre(model::GpuDevice{0, "l40s", 48}, model::GpuDevice{1, "l40s", 48}, model::GpuDevice{2, "l40s", 48}));
}

TEST(LoadConfigText, ReadsOptionalSections) {
  Doc doc;
  doc.Extra(R"(
server: {listen: "0.0.0.0:9000", scheduler_tick_seconds: 0.25, metrics_require_token: true}
store: {synchronous: normal, max_log_bytes: 4096}
executor: {kill_grace_seconds: 3, use_cgroups: false, work_dir_retention_hours: 0.5}
routing:
  rules:
    - {name: big-gpu, match: {kind: ai-training, features: {precision: bf16, gpu_memory_gb: 80}, min_gpus: 2, max_gpus: 8}, queue: train}
projects: [{name: default, description: "the default"}]
users: [{name: bob, role: queue-admin, projects: [default], queues: [train], unix_user: bob}]
)");
  const Config config = MustLoad(LoadConfigText(doc.Text()));
  EXPECT_EQ(config.server.listen, "0.0.0.0:9000");
  EXPECT_DOUBLE_EQ(config.server.scheduler_tick_seconds, 0.25);
  EXPECT_TRUE(config.server.metrics_require_token);
  EXPECT_EQ(config.store.synchronous, "normal");
  EXPECT_EQ(config.store.max_log_bytes, 4096);
  EXPECT_EQ(config.executor.kill_grace_seconds, 3);
  EXPECT_FALSE(config.executor.use_cgroups);
  EXPECT_DOUBLE_EQ(WorkDirRetentionHours(config), 0.5);
  // Left out: a week, or half the job records' retention when that is shorter.
  EXPECT_DOUBLE_EQ(WorkDirRetentionHours(MustLoad(LoadConfigText(Doc().Text()))), 168);
  EXPECT_DOUBLE_EQ(
      WorkDirRetentionHours(MustLoad(LoadConfigText(Doc().Extra("store: {job_retention_days: 2}\n").Text()))), 24);
  // The same for a config built in code: valid as it is, whatever its job retention.
  Config built = MustLoad(LoadConfigText(Doc().Text()));
  built.store.job_retention_days = 1;
  EXPECT_DOUBLE_EQ(WorkDirRetentionHours(built), 12);
  EXPECT_TRUE(ValidateConfig(built).empty());
  ASSERT_EQ(config.cluster.routing_rules.size(), 1u);
  const auto& rule = config.cluster.routing_rules[0];
  EXPECT_EQ(rule.name, "big-gpu");
  EXPECT_EQ(rule.kind, model::WorkloadKind::kAiTraining);
  // Every scalar is text in a label map, so the number 80 reads as "80".
  EXPECT_EQ(rule.features, (model::Labels{{"gpu_memory_gb", "80"}, {"precision", "bf16"}}));
  EXPECT_EQ(rule.min_gpus, 2);
  EXPECT_EQ(rule.max_gpus, 8);
  EXPECT_EQ(rule.queue, "train");
  ASSERT_EQ(config.projects.size(), 1u);
  EXPECT_EQ(config.projects[0].description, "the default");
  ASSERT_EQ(config.users.size(), 1u);
  EXPECT_EQ(config.users[0].role, "queue-admin");
  EXPECT_THAT(config.users[0].queues, ElementsAre("train"));
  EXPECT_EQ(config.users[0].unix_user, "bob");
}

TEST(LoadConfigText, VersionIsTheFnv1aOfTheText) {
  // Published FNV-1a 64 test vectors.
  EXPECT_EQ(internal::ContentVersion(""), "cbf29ce484222325");
  EXPECT_EQ(internal::ContentVersion("a"), "af63dc4c8601ec8c");
  EXPECT_EQ(internal::ContentVersion("foobar"), "85944171f73967e8");

  const std::string text = Doc{}.Text();
  const Config config = MustLoad(LoadConfigText(text));
  EXPECT_EQ(config.version, internal::ContentVersion(text));
  // A comment changes the text, so the version, though not the meaning.
  EXPECT_NE(MustLoad(LoadConfigText(text + "# note\n")).version, config.version);
}

TEST(LoadConfigFile, MissingFileIsOneError) {
  const auto errors = ErrorsOf(LoadConfigFile("/nonexistent/unisched.yaml"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "");
  EXPECT_THAT(errors[0].message, HasSubstr("/nonexistent/unisched.yaml"));
  EXPECT_THAT(errors[0].message, HasSubstr("No such file or directory"));
}

TEST(LoadConfigFile, NamesTheFileInSyntaxErrors) {
  const std::string path = ::testing::TempDir() + "/broken-config.yaml";
  std::ofstream(path) << "pools: [\n";
  const auto errors = ErrorsOf(LoadConfigFile(path));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message, HasSubstr(path + ":2:"));
}

TEST(DefaultConfig, LoadsCleanlyWithTheContractsCluster) {
  const std::string path = UNISCHED_SOURCE_DIR "/config/unisched.yaml";
  const Config config = MustLoad(LoadConfigFile(path));
  EXPECT_EQ(config.version, internal::ContentVersion(ReadFile(path)));
  EXPECT_EQ(config.server.listen, "127.0.0.1:8642");
  EXPECT_EQ(config.server.state_dir, "/var/lib/unisched");

  struct PoolWant {
    std::string name;
    model::PoolKind kind;
    size_t nodes;
    int cpus;
    int64_t memory_mb;
    size_t gpus;
    std::string gpu_model;
    int gpu_memory_gb;
  };
  const std::vector<PoolWant> pools = {
      {"cpu-hpc-pool", model::PoolKind::kCpu, 4, 64, 262144, 0, "", 0},
      {"gpu-train-pool", model::PoolKind::kGpu, 2, 32, 524288, 8, "h100", 80},
      {"inference-pool", model::PoolKind::kGpu, 1, 16, 131072, 4, "l40s", 48},
      {"elastic-light-pool", model::PoolKind::kElastic, 2, 256, 524288, 0, "", 0},
  };
  ASSERT_EQ(config.cluster.pools.size(), pools.size());
  size_t node_count = 0;
  for (const auto& want : pools) {
    SCOPED_TRACE(want.name);
    const auto* pool = config.cluster.FindPool(want.name);
    ASSERT_NE(pool, nullptr);
    EXPECT_EQ(pool->kind, want.kind);
    ASSERT_EQ(pool->nodes.size(), want.nodes);
    node_count += pool->nodes.size();
    for (const auto& name : pool->nodes) {
      SCOPED_TRACE(name);
      const auto& node = NodeNamed(config, name);
      EXPECT_EQ(node.pool, want.name);
      EXPECT_EQ(node.cpus, want.cpus);
      EXPECT_EQ(node.memory_mb, want.memory_mb);
      ASSERT_EQ(node.gpus.size(), want.gpus);
      for (size_t i = 0; i < node.gpus.size(); ++i) {
        EXPECT_EQ(node.gpus[i], (model::GpuDevice{static_cast<int>(i), want.gpu_model, want.gpu_memory_gb}));
      }
      // Every pool label reaches the node.
      for (const auto& [key, value] : pool->labels) EXPECT_EQ(node.labels.at(key), value) << key;
    }
  }
  EXPECT_EQ(config.cluster.nodes.size(), node_count);
  EXPECT_NE(config.cluster.FindNode("x86-c64m256-hpc-01"), nullptr);
  EXPECT_NE(config.cluster.FindNode("x86-c32m512g8-train-02"), nullptr);
  EXPECT_NE(config.cluster.FindNode("x86-c16m128g4-infer-01"), nullptr);
  EXPECT_NE(config.cluster.FindNode("x86-c256m512-elastic-02"), nullptr);
  const auto& hpc_labels = NodeNamed(config, "x86-c64m256-hpc-01").labels;
  EXPECT_EQ(hpc_labels.at("precision.fp64"), "true");
  EXPECT_EQ(hpc_labels.at("interconnect"), "ib");
  EXPECT_EQ(NodeNamed(config, "x86-c32m512g8-train-01").labels.at("interconnect"), "nvlink");
  EXPECT_EQ(NodeNamed(config, "x86-c256m512-elastic-01").labels.at("network"), "isolated");

  const auto* hpc = config.cluster.FindQueue("hpc-precision");
  const auto* training = config.cluster.FindQueue("ai-training");
  const auto* inference = config.cluster.FindQueue("ai-inference");
  const auto* agent = config.cluster.FindQueue("agent-sandbox");
  ASSERT_TRUE(hpc && training && inference && agent);
  EXPECT_EQ(hpc->pool, "cpu-hpc-pool");
  EXPECT_EQ(hpc->policy.type, "fairshare");
  EXPECT_EQ(hpc->policy.max_walltime_hours, 72.0);
  EXPECT_EQ(hpc->policy.default_walltime_hours, 1.0);
  EXPECT_EQ(hpc->policy.default_memory_mb_per_cpu, 1024);
  EXPECT_EQ(training->pool, "gpu-train-pool");
  EXPECT_EQ(training->policy.type, "priority-with-quota");
  EXPECT_EQ(training->policy.gpu_quota_per_project, 32);
  EXPECT_FALSE(training->policy.preemptible);
  EXPECT_EQ(training->policy.max_walltime_hours, 168.0);
  EXPECT_EQ(inference->pool, "inference-pool");
  EXPECT_EQ(inference->policy.type, "fifo");
  EXPECT_EQ(inference->policy.max_walltime_hours, 24.0);
  EXPECT_EQ(agent->pool, "elastic-light-pool");
  EXPECT_EQ(agent->policy.type, "elastic");
  EXPECT_EQ(agent->policy.scale_in_idle_seconds, 120);
  EXPECT_EQ(agent->policy.max_concurrency, 500);
  EXPECT_EQ(agent->policy.max_walltime_hours, 1.0);
  EXPECT_EQ(agent->policy.default_walltime_hours, 0.25);
  EXPECT_EQ(agent->policy.default_memory_mb_per_cpu, 512);

  // Every workload kind has its default queue, as the contract promises.
  EXPECT_EQ(config.cluster.DefaultQueueFor(model::WorkloadKind::kHpc), hpc);
  EXPECT_EQ(config.cluster.DefaultQueueFor(model::WorkloadKind::kAiTraining), training);
  EXPECT_EQ(config.cluster.DefaultQueueFor(model::WorkloadKind::kAiInference), inference);
  EXPECT_EQ(config.cluster.DefaultQueueFor(model::WorkloadKind::kAgent), agent);

  std::vector<std::pair<std::string, std::string>> rules;
  for (const auto& rule : config.cluster.routing_rules) rules.emplace_back(rule.name, rule.queue);
  EXPECT_THAT(rules, ElementsAre(std::pair<std::string, std::string>{"fp64-hpc", "hpc-precision"},
                                 std::pair<std::string, std::string>{"hpc-default", "hpc-precision"},
                                 std::pair<std::string, std::string>{"gpu-training", "ai-training"},
                                 std::pair<std::string, std::string>{"inference", "ai-inference"},
                                 std::pair<std::string, std::string>{"agent", "agent-sandbox"}));
  EXPECT_EQ(config.cluster.routing_rules[0].features, (model::Labels{{"precision", "fp64"}}));
  EXPECT_EQ(config.cluster.routing_rules[2].min_gpus, 1);

  ASSERT_EQ(config.projects.size(), 1u);
  EXPECT_EQ(config.projects[0].name, "default");
}

TEST(DefaultConfig, ConfiguresThePolicyEngineAsTheSeedAsks) {
  const Config config = MustLoad(LoadConfigText(EmbeddedDefaultConfig(), "embedded"));
  const model::ClusterSpec& cluster = config.cluster;

  struct PoolWant {
    std::string name;
    model::BackfillMode backfill;
    int reservation_depth;
  };
  for (const auto& want : std::vector<PoolWant>{{"cpu-hpc-pool", model::BackfillMode::kEasy, 0},
                                                {"gpu-train-pool", model::BackfillMode::kConservative, 100},
                                                {"inference-pool", model::BackfillMode::kEasy, 0},
                                                {"elastic-light-pool", model::BackfillMode::kEasy, 0}}) {
    SCOPED_TRACE(want.name);
    const auto* pool = cluster.FindPool(want.name);
    ASSERT_NE(pool, nullptr);
    EXPECT_EQ(pool->backfill, want.backfill);
    EXPECT_EQ(pool->reservation_depth, want.reservation_depth);
  }
  EXPECT_DOUBLE_EQ(cluster.fairshare_half_life_hours, 168);
  EXPECT_DOUBLE_EQ(cluster.fairshare_gpu_weight, 16);

  const auto* hpc = cluster.FindQueue("hpc-precision");
  const auto* training = cluster.FindQueue("ai-training");
  const auto* inference = cluster.FindQueue("ai-inference");
  const auto* agent = cluster.FindQueue("agent-sandbox");
  ASSERT_TRUE(hpc && training && inference && agent);
  // hpc-precision orders by the fairshare defaults.
  EXPECT_FALSE(hpc->policy.priority_weights.has_value());
  EXPECT_GT(hpc->policy.Weights().fairshare, 0);
  // ai-training: 32 GPUs per project, over-quota jobs wait, never preempted.
  EXPECT_EQ(training->policy.project_quota, (model::ResourceLimits{std::nullopt, std::nullopt, 32, std::nullopt}));
  EXPECT_EQ(training->policy.gpu_quota_per_project, 32);
  EXPECT_EQ(training->policy.quota_action, model::QuotaAction::kWait);
  EXPECT_FALSE(training->policy.preemptible);
  // ai-inference: preemptible with a requeue after 30 s of grace.
  EXPECT_TRUE(inference->policy.preemptible);
  EXPECT_EQ(inference->policy.preempt_action, model::PreemptAction::kRequeue);
  EXPECT_EQ(inference->policy.preempt_grace_seconds, 30);
  EXPECT_EQ(agent->policy.max_concurrency, 500);
  // Conservative defaults: no queue preempts, no quota but the seed's.
  for (const auto& queue : cluster.queues) {
    SCOPED_TRACE(queue.name);
    EXPECT_FALSE(queue.policy.can_preempt);
    EXPECT_TRUE(queue.policy.user_quota.Empty());
    if (&queue != training) {
      EXPECT_TRUE(queue.policy.project_quota.Empty());
    }
  }

  ASSERT_EQ(cluster.projects.size(), 1u);
  EXPECT_EQ(cluster.projects[0].name, "default");
  EXPECT_DOUBLE_EQ(cluster.projects[0].shares, 1);
  EXPECT_TRUE(cluster.projects[0].quota.Empty());
}

TEST(DefaultConfig, EmbeddedCopyEqualsTheFile) {
  EXPECT_EQ(EmbeddedDefaultConfig(), ReadFile(UNISCHED_SOURCE_DIR "/config/unisched.yaml"));
  MustLoad(LoadConfigText(EmbeddedDefaultConfig(), "embedded"));
}

TEST(SeedExample, LoadsAndHoldsTheSeedBlockVerbatim) {
  // The queue block of the seed document, byte for byte.
  constexpr const char* kSeedBlock = R"(queues:
  - name: hpc-precision          # double-precision simulation
    pool: cpu-hpc-pool
    policy:
      type: fairshare            # fair share among many users
      max_walltime_hours: 72     # per-job wall-time limit
  - name: ai-training
    pool: gpu-train-pool
    policy:
      type: priority-with-quota  # priority plus quota
      gpu_quota_per_project: 32  # GPUs per project
      preemptible: false         # training is never preempted: long jobs, costly to interrupt
  - name: agent-sandbox
    pool: elastic-light-pool
    policy:
      type: elastic              # elastic scaling
      scale_in_idle_seconds: 120 # reclaim idle instances
      max_concurrency: 500       # cap on concurrent instances
)";
  const std::string path = UNISCHED_SOURCE_DIR "/config/examples/seed-queues.yaml";
  EXPECT_THAT(ReadFile(path), HasSubstr(kSeedBlock));
  const Config config = MustLoad(LoadConfigFile(path));
  const auto* training = config.cluster.FindQueue("ai-training");
  ASSERT_NE(training, nullptr);
  EXPECT_FALSE(training->policy.preemptible);
  EXPECT_EQ(training->policy.gpu_quota_per_project, 32);
  // The seed's key is the policy engine's per-project GPU quota.
  EXPECT_EQ(training->policy.project_quota.gpus, 32);
  EXPECT_EQ(training->policy.quota_action, model::QuotaAction::kWait);
  const auto* agent = config.cluster.FindQueue("agent-sandbox");
  ASSERT_NE(agent, nullptr);
  EXPECT_EQ(agent->policy.max_concurrency, 500);
  EXPECT_EQ(agent->policy.scale_in_idle_seconds, 120);
  EXPECT_EQ(config.cluster.FindQueue("hpc-precision")->policy.max_walltime_hours, 72.0);

  // The seed block is also valid inside the default cluster, whose pools it names.
  std::string text = ReadFile(UNISCHED_SOURCE_DIR "/config/unisched.yaml");
  const size_t begin = text.find("\nqueues:\n");
  const size_t end = text.find("\n# Feature-aware routing");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  text.replace(begin + 1, end - begin, std::string(kSeedBlock) + "  - {name: ai-inference, pool: inference-pool}\n");
  const Config in_default = MustLoad(LoadConfigText(text));
  EXPECT_EQ(in_default.cluster.FindQueue("ai-training")->policy.project_quota.gpus, 32);
}

TEST(ValidateConfig, ChecksConfigsBuiltInCode) {
  Config config;
  EXPECT_THAT(PathsOf(ValidateConfig(config)), ElementsAre("pools", "queues"));

  config.cluster.pools.push_back({"cpu-pool", model::PoolKind::kCpu, {}, {"x86-c4m8-test-01"}});
  model::NodeSpec node;
  node.name = "x86-c4m8-test-01";
  node.pool = "cpu-pool";
  node.cpus = 4;
  node.memory_mb = 8192;
  config.cluster.nodes.push_back(node);
  model::QueueSpec queue;
  queue.name = "q";
  queue.pool = "cpu-pool";
  config.cluster.queues.push_back(queue);
  EXPECT_THAT(ValidateConfig(config), IsEmpty()) << Dump(ValidateConfig(config));

  // Fields only code can get wrong: a pool other than the one listing the
  // node, and device indices out of order.
  config.cluster.nodes[0].pool = "gpu-pool";
  config.cluster.nodes[0].gpus = {{0, "a100", 40}, {5, "", 0}};
  EXPECT_THAT(PathsOf(ValidateConfig(config)), ElementsAre("nodes[0].gpus[1].index", "nodes[0].gpus[1].model",
                                                           "nodes[0].gpus[1].memory_gb", "nodes[0].pool"));
}

// ---- Policy engine keys (issue 3): pools' backfill, queue priority weights,
// quotas and preemption, project shares and quotas, the scheduler section.

// The base document with the two queues replaced by one queue on each pool
// whose policy block is given; cases write only the keys they test.
Doc WithTrainPolicy(const std::string& policy) {
  return Doc().Queues(
      "queues:\n  - {name: batch, pool: cpu-pool}\n  - name: train\n    pool: gpu-pool\n"
      "    policy: " +
      policy + "\n");
}

TEST(PolicyKeys, LeftOutTakeTheirDefaults) {
  const Config config = MustLoad(LoadConfigText(Doc{}.Text()));
  for (const auto& pool : config.cluster.pools) {
    SCOPED_TRACE(pool.name);
    EXPECT_EQ(pool.backfill, model::BackfillMode::kEasy);
    EXPECT_EQ(pool.reservation_depth, 0);
  }
  const auto* batch = config.cluster.FindQueue("batch");
  ASSERT_NE(batch, nullptr);
  const model::QueuePolicy& p = batch->policy;
  EXPECT_FALSE(p.priority_weights.has_value());
  EXPECT_TRUE(p.project_quota.Empty());
  EXPECT_TRUE(p.user_quota.Empty());
  EXPECT_EQ(p.quota_action, model::QuotaAction::kWait);
  EXPECT_FALSE(p.can_preempt);
  EXPECT_EQ(p.preempt_action, model::PreemptAction::kRequeue);
  EXPECT_EQ(p.preempt_grace_seconds, 30);
  EXPECT_DOUBLE_EQ(config.cluster.fairshare_half_life_hours, 168);
  EXPECT_DOUBLE_EQ(config.cluster.fairshare_gpu_weight, 16);
  // No projects section: no project policies.
  EXPECT_THAT(config.cluster.projects, IsEmpty());
}

TEST(PolicyKeys, ValidValuesReachTheModel) {
  Doc doc;
  doc.Pools(R"(
pools:
  - {name: cpu-pool, kind: cpu, nodes: [x86-c8m16-hpc-01, x86-c8m16-hpc-02], backfill: fcfs}
  - {name: gpu-pool, kind: gpu, nodes: [x86-c8m64g2-train-01], backfill: conservative, reservation_depth: 1000}
)")
      .Queues(R"(
queues:
  - name: batch
    pool: cpu-pool
    policy:
      type: fairshare
      priority_weights: {fairshare: 5000.5, age: 0, tier: 1, size: 2, max_age_hours: 0.5}
      user_quota: {cpus: 64, memory_mb: 131072, gpus: 1, running_jobs: 10}
      quota_action: reject
      can_preempt: true
      preempt_action: cancel
      preempt_grace_seconds: 0
  - name: train
    pool: gpu-pool
    policy:
      project_quota: {cpus: 256, memory_mb: 1048576, gpus: 16, running_jobs: 4}
      preemptible: false
      preempt_grace_seconds: 600
)")
      .Extra(R"(
scheduler: {fairshare_half_life_hours: 0.5, fairshare_gpu_weight: 0}
projects:
  - name: genomics
    shares: 2.5
    user_shares: {alice: 3, bob.smith: 0.5}
    quota: {gpus: 8, running_jobs: 100}
  - {name: default, description: no policy keys}
)");
  const Config config = MustLoad(LoadConfigText(doc.Text()));
  const model::ClusterSpec& cluster = config.cluster;
  EXPECT_EQ(cluster.FindPool("cpu-pool")->backfill, model::BackfillMode::kFcfs);
  EXPECT_EQ(cluster.FindPool("gpu-pool")->backfill, model::BackfillMode::kConservative);
  EXPECT_EQ(cluster.FindPool("gpu-pool")->reservation_depth, 1000);
  EXPECT_DOUBLE_EQ(cluster.fairshare_half_life_hours, 0.5);
  EXPECT_DOUBLE_EQ(cluster.fairshare_gpu_weight, 0);

  const model::QueuePolicy& batch = cluster.FindQueue("batch")->policy;
  EXPECT_EQ(batch.priority_weights, (model::PriorityWeights{5000.5, 0, 1, 2, 0.5}));
  EXPECT_EQ(batch.Weights(), *batch.priority_weights);
  EXPECT_EQ(batch.user_quota, (model::ResourceLimits{64, 131072, 1, 10}));
  EXPECT_TRUE(batch.project_quota.Empty());
  EXPECT_FALSE(batch.gpu_quota_per_project.has_value());
  EXPECT_EQ(batch.quota_action, model::QuotaAction::kReject);
  EXPECT_TRUE(batch.can_preempt);
  EXPECT_EQ(batch.preempt_action, model::PreemptAction::kCancel);
  EXPECT_EQ(batch.preempt_grace_seconds, 0);

  const model::QueuePolicy& train = cluster.FindQueue("train")->policy;
  EXPECT_EQ(train.project_quota, (model::ResourceLimits{256, 1048576, 16, 4}));
  // project_quota.gpus also fills in the seed's name for the same limit.
  EXPECT_EQ(train.gpu_quota_per_project, 16);
  EXPECT_FALSE(train.preemptible);
  EXPECT_FALSE(train.can_preempt);
  EXPECT_EQ(train.preempt_grace_seconds, 600);

  // One ProjectPolicy per project, in file order; shares 1 when unset.
  ASSERT_EQ(cluster.projects.size(), 2u);
  const model::ProjectPolicy* genomics = cluster.FindProject("genomics");
  ASSERT_NE(genomics, nullptr);
  EXPECT_DOUBLE_EQ(genomics->shares, 2.5);
  EXPECT_EQ(genomics->user_shares, (std::map<std::string, double>{{"alice", 3}, {"bob.smith", 0.5}}));
  EXPECT_EQ(genomics->quota, (model::ResourceLimits{std::nullopt, std::nullopt, 8, 100}));
  EXPECT_EQ(cluster.projects[1].name, "default");
  EXPECT_DOUBLE_EQ(cluster.projects[1].shares, 1);
  EXPECT_THAT(cluster.projects[1].user_shares, IsEmpty());
  EXPECT_TRUE(cluster.projects[1].quota.Empty());
  // The project list itself keeps the keys as written.
  EXPECT_DOUBLE_EQ(config.projects[0].shares, 2.5);
}

TEST(PolicyKeys, EveryEnumNameParses) {
  struct Case {
    std::string policy;
    model::QuotaAction quota_action;
    model::PreemptAction preempt_action;
  };
  for (const auto& c : std::vector<Case>{
           {"{quota_action: wait, preempt_action: requeue}", model::QuotaAction::kWait, model::PreemptAction::kRequeue},
           {"{quota_action: reject, preempt_action: cancel}", model::QuotaAction::kReject,
            model::PreemptAction::kCancel}}) {
    SCOPED_TRACE(c.policy);
    const Config config = MustLoad(LoadConfigText(WithTrainPolicy(c.policy).Text()));
    EXPECT_EQ(config.cluster.FindQueue("train")->policy.quota_action, c.quota_action);
    EXPECT_EQ(config.cluster.FindQueue("train")->policy.preempt_action, c.preempt_action);
  }
  for (const auto mode : {model::BackfillMode::kFcfs, model::BackfillMode::kEasy, model::BackfillMode::kConservative}) {
    const std::string name(model::ToString(mode));
    SCOPED_TRACE(name);
    const Config config = MustLoad(LoadConfigText(
        Doc()
            .Pools("pools:\n  - {name: cpu-pool, kind: cpu, nodes: [x86-c8m16-hpc-01, x86-c8m16-hpc-02], backfill: " +
                   name + "}\n  - {name: gpu-pool, kind: gpu, nodes: [x86-c8m64g2-train-01]}\n")
            .Text()));
    EXPECT_EQ(config.cluster.FindPool("cpu-pool")->backfill, mode);
    EXPECT_FALSE(config.cluster.FindPool("cpu-pool")->predict_run_times);
  }
  // The predicted modes: the same backfill, planned with predicted run times.
  for (const auto mode : {model::BackfillMode::kEasy, model::BackfillMode::kConservative}) {
    const std::string name = std::string(model::ToString(mode)) + "-predicted";
    SCOPED_TRACE(name);
    const Config config = MustLoad(LoadConfigText(
        Doc()
            .Pools("pools:\n  - {name: cpu-pool, kind: cpu, nodes: [x86-c8m16-hpc-01, x86-c8m16-hpc-02], backfill: " +
                   name + ", planned_share: 0.5}\n  - {name: gpu-pool, kind: gpu, nodes: [x86-c8m64g2-train-01]}\n")
            .Text()));
    const model::PoolSpec& pool = *config.cluster.FindPool("cpu-pool");
    EXPECT_EQ(pool.backfill, mode);
    EXPECT_TRUE(pool.predict_run_times);
    EXPECT_DOUBLE_EQ(pool.planned_share, 0.5);
    EXPECT_FALSE(config.cluster.FindPool("gpu-pool")->predict_run_times);
    EXPECT_DOUBLE_EQ(config.cluster.FindPool("gpu-pool")->planned_share, 0.2);
  }
}

TEST(PolicyKeys, PriorityWeightsLeftOutKeepTheTypesDefaults) {
  struct Case {
    std::string type;
    std::string weights;
    model::PriorityWeights (*want)(model::PriorityWeights defaults);
  };
  const std::vector<Case> cases = {
      {"fairshare", "{}", [](model::PriorityWeights w) { return w; }},
      {"fairshare", "{age: 0}",
       [](model::PriorityWeights w) {
         w.age = 0;
         return w;
       }},
      {"priority-with-quota", "{size: 7, max_age_hours: 24}",
       [](model::PriorityWeights w) {
         w.size = 7;
         w.max_age_hours = 24;
         return w;
       }},
      {"fifo", "{fairshare: 1}",
       [](model::PriorityWeights w) {
         w.fairshare = 1;
         return w;
       }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.type + " " + c.weights);
    model::QueuePolicy of_type;
    of_type.type = c.type;
    const Config config =
        MustLoad(LoadConfigText(WithTrainPolicy("{type: " + c.type + ", priority_weights: " + c.weights + "}").Text()));
    const model::QueuePolicy& policy = config.cluster.FindQueue("train")->policy;
    ASSERT_TRUE(policy.priority_weights.has_value());
    EXPECT_EQ(*policy.priority_weights, c.want(of_type.Weights()));
  }
  // An explicit null is the same as leaving the key out.
  const Config config = MustLoad(LoadConfigText(WithTrainPolicy("{type: fairshare, priority_weights: ~}").Text()));
  EXPECT_FALSE(config.cluster.FindQueue("train")->policy.priority_weights.has_value());
}

TEST(PolicyKeys, GpuQuotaPerProjectIsProjectQuotaGpus) {
  struct Case {
    std::string policy;
    std::optional<int> gpu_quota_per_project;  // after loading
    std::optional<int64_t> project_quota_gpus;
  };
  const std::vector<Case> cases = {
      {"{gpu_quota_per_project: 32}", 32, 32},
      {"{project_quota: {gpus: 32}}", 32, 32},
      {"{gpu_quota_per_project: 32, project_quota: {gpus: 32, cpus: 8}}", 32, 32},
      // The seed's key allows 0 (no GPUs for any project); it stays valid.
      {"{gpu_quota_per_project: 0}", 0, 0},
      {"{gpu_quota_per_project: 0, project_quota: {gpus: 0}}", 0, 0},
      {"{project_quota: {cpus: 8}}", std::nullopt, std::nullopt},
      {"{}", std::nullopt, std::nullopt},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.policy);
    const Config config = MustLoad(LoadConfigText(WithTrainPolicy(c.policy).Text()));
    const model::QueuePolicy& policy = config.cluster.FindQueue("train")->policy;
    EXPECT_EQ(policy.gpu_quota_per_project, c.gpu_quota_per_project);
    EXPECT_EQ(policy.project_quota.gpus, c.project_quota_gpus);
  }

  // Two different values for the one limit: an error at the new key.
  const auto errors =
      ErrorsOf(LoadConfigText(WithTrainPolicy("{gpu_quota_per_project: 32, project_quota: {gpus: 16}}").Text()));
  ASSERT_EQ(errors.size(), 1u) << Dump(errors);
  EXPECT_EQ(errors[0].ToString(),
            "queues[1].policy.project_quota.gpus: is 16 but gpu_quota_per_project is 32; both are the GPUs one "
            "project may hold in this queue, so give one of them");
  // project_quota.gpus alone follows the rule of every quota: > 0.
  const auto zero = ErrorsOf(LoadConfigText(WithTrainPolicy("{project_quota: {gpus: 0}}").Text()));
  ASSERT_EQ(zero.size(), 1u) << Dump(zero);
  EXPECT_EQ(zero[0].ToString(), "queues[1].policy.project_quota.gpus: must be > 0; leave the key out for no limit");
}

TEST(PolicyKeys, ReportsEveryErrorWithItsPath) {
  struct Case {
    std::string name;
    Doc doc;
    std::vector<std::string> paths;  // in the reported order
    std::string message;             // a part of the first error's message
  };
  const std::vector<Case> cases = {
      // Pools.
      {"unknown backfill mode with a suggestion",
       Doc().Pools("pools:\n  - {name: cpu-pool, kind: cpu, nodes: [x86-c8m16-hpc-01, x86-c8m16-hpc-02]}\n"
                   "  - {name: gpu-pool, kind: gpu, nodes: [x86-c8m64g2-train-01], backfill: eazy}\n"),
       {"pools[1].backfill"},
       "unknown backfill mode 'eazy'; expected one of: fcfs, easy, conservative, easy-predicted, "
       "conservative-predicted (did you mean 'easy'?)"},
      {"fcfs plans nothing, so it predicts nothing",
       Doc().Pools("pools:\n  - {name: cpu-pool, kind: cpu, nodes: [x86-c8m16-hpc-01, x86-c8m16-hpc-02], "
                   "backfill: fcfs-predicted}\n  - {name: gpu-pool, kind: gpu, nodes: [x86-c8m64g2-train-01]}\n"),
       {"pools[0].backfill"},
       "unknown backfill mode 'fcfs-predicted'; expected one of: fcfs, easy, conservative, easy-predicted, "
       "conservative-predicted"},
      {"a planned share outside (0, 1]",
       Doc().Pools("pools:\n  - {name: cpu-pool, kind: cpu, nodes: [x86-c8m16-hpc-01, x86-c8m16-hpc-02], "
                   "backfill: easy-predicted, planned_share: 0}\n"
                   "  - {name: gpu-pool, kind: gpu, nodes: [x86-c8m64g2-train-01], planned_share: 1.5}\n"),
       {"pools[0].planned_share", "pools[1].planned_share"},
       "must be > 0 and <= 1: the share of a predicted run time a reservation plans with (default 0.2)"},
      {"backfill mode not a string",
       Doc().Pools("pools:\n  - {name: cpu-pool, kind: cpu, nodes: [x86-c8m16-hpc-01, x86-c8m16-hpc-02], "
                   "backfill: [easy]}\n  - {name: gpu-pool, kind: gpu, nodes: [x86-c8m64g2-train-01]}\n"),
       {"pools[0].backfill"},
       "must be a string; got a list"},
      {"negative and fractional reservation depths",
       Doc().Pools("pools:\n  - {name: cpu-pool, kind: cpu, nodes: [x86-c8m16-hpc-01, x86-c8m16-hpc-02], "
                   "reservation_depth: -1}\n"
                   "  - {name: gpu-pool, kind: gpu, nodes: [x86-c8m64g2-train-01], reservation_depth: 1.5}\n"),
       {"pools[0].reservation_depth", "pools[1].reservation_depth"},
       "must be >= 0; 0 gives every blocked job a reservation"},
      {"prices: an unknown metric and a negative price",
       Doc().Pools("pools:\n  - {name: cpu-pool, kind: cpu, nodes: [x86-c8m16-hpc-01, x86-c8m16-hpc-02], "
                   "prices: {gpu_hours: 2}}\n"
                   "  - {name: gpu-pool, kind: gpu, nodes: [x86-c8m64g2-train-01], prices: {gpu_seconds: -1}}\n"),
       {"pools[0].prices.gpu_hours", "pools[1].prices.gpu_seconds"},
       "unknown ledger metric; expected one of: cpu_core_seconds, cpu_seconds_used, memory_mb_seconds, "
       "gpu_seconds, instance_seconds"},
      {"budget: an unknown period and a zero budget",
       Doc().Extra("projects:\n  - {name: default}\n  - {name: genomics, budget: {gpu_hours: 0, period: year}}\n"),
       {"projects[1].budget.period", "projects[1].budget.gpu_hours"},
       "unknown budget period 'year'; expected one of: day, week, month"},
      {"misspelled pool key",
       Doc().Pools("pools:\n  - {name: cpu-pool, kind: cpu, nodes: [x86-c8m16-hpc-01, x86-c8m16-hpc-02], "
                   "backfil: easy}\n  - {name: gpu-pool, kind: gpu, nodes: [x86-c8m64g2-train-01]}\n"),
       {"pools[0].backfil"},
       "(did you mean 'backfill'?)"},

      // Queue policy: priority weights.
      {"negative weights and a zero max age",
       WithTrainPolicy("{priority_weights: {fairshare: -1, age: -0.5, tier: -2, size: -3, max_age_hours: 0}}"),
       {"queues[1].policy.priority_weights.fairshare", "queues[1].policy.priority_weights.age",
        "queues[1].policy.priority_weights.tier", "queues[1].policy.priority_weights.size",
        "queues[1].policy.priority_weights.max_age_hours"},
       "must be >= 0"},
      {"weights too large for 64-bit priorities",
       WithTrainPolicy("{priority_weights: {age: 1e9, tier: 1.5e9, size: 1e300}}"),
       {"queues[1].policy.priority_weights.tier", "queues[1].policy.priority_weights.size"},
       "must be at most 1000000000"},
      {"a weight that is not a number",
       WithTrainPolicy("{priority_weights: {fairshare: high, age: \"5\"}}"),
       {"queues[1].policy.priority_weights.fairshare", "queues[1].policy.priority_weights.age"},
       "must be a number; got 'high'"},
      {"a misspelled weight",
       WithTrainPolicy("{priority_weights: {agee: 1}}"),
       {"queues[1].policy.priority_weights.agee"},
       "unknown key 'agee'; expected one of: fairshare, age, tier, size, max_age_hours (did you mean 'age'?)"},
      {"weights that are not a map",
       WithTrainPolicy("{priority_weights: [1, 2]}"),
       {"queues[1].policy.priority_weights"},
       "must be a map (keys: fairshare, age, tier, size, max_age_hours); got a list"},

      // Queue policy: quotas.
      {"project quota values not positive",
       WithTrainPolicy("{project_quota: {cpus: 0, memory_mb: -1, gpus: 0, running_jobs: 0}}"),
       {"queues[1].policy.project_quota.cpus", "queues[1].policy.project_quota.memory_mb",
        "queues[1].policy.project_quota.gpus", "queues[1].policy.project_quota.running_jobs"},
       "must be > 0; leave the key out for no limit"},
      {"user quota values not positive",
       WithTrainPolicy("{user_quota: {cpus: -8, memory_mb: 0, gpus: -1, running_jobs: -2}}"),
       {"queues[1].policy.user_quota.cpus", "queues[1].policy.user_quota.memory_mb", "queues[1].policy.user_quota.gpus",
        "queues[1].policy.user_quota.running_jobs"},
       "must be > 0"},
      {"quota values of the wrong type",
       WithTrainPolicy("{user_quota: {cpus: 1.5, gpus: many}, project_quota: 4}"),
       {"queues[1].policy.project_quota", "queues[1].policy.user_quota.cpus", "queues[1].policy.user_quota.gpus"},
       "must be a map (keys: cpus, memory_mb, gpus, running_jobs); got '4'"},
      {"a misspelled quota key",
       WithTrainPolicy("{project_quota: {gpu: 8}}"),
       {"queues[1].policy.project_quota.gpu"},
       "(did you mean 'gpus'?)"},
      {"gpu_quota_per_project and project_quota.gpus disagree",
       WithTrainPolicy("{gpu_quota_per_project: 32, project_quota: {gpus: 0}}"),
       {"queues[1].policy.project_quota.gpus"},
       "is 0 but gpu_quota_per_project is 32"},
      {"unknown quota action",
       WithTrainPolicy("{quota_action: deny}"),
       {"queues[1].policy.quota_action"},
       "unknown quota action 'deny'; expected one of: wait, reject"},

      // Queue policy: preemption.
      {"unknown preempt action with a suggestion",
       WithTrainPolicy("{preempt_action: requeu}"),
       {"queues[1].policy.preempt_action"},
       "unknown preempt action 'requeu'; expected one of: requeue, cancel (did you mean 'requeue'?)"},
      {"can_preempt not a boolean",
       WithTrainPolicy("{can_preempt: yes}"),
       {"queues[1].policy.can_preempt"},
       "must be true or false"},
      {"negative grace",
       WithTrainPolicy("{preempt_grace_seconds: -1}"),
       {"queues[1].policy.preempt_grace_seconds"},
       "must be >= 0; 0 sends SIGKILL at once"},
      {"every new policy key wrong at once, shape errors first",
       WithTrainPolicy("{type: fairshare, priority_weights: {size: -1}, project_quota: {running_jobs: 0}, "
                       "user_quota: {gpus: 0}, quota_action: never, can_preempt: 1, preempt_action: kill, "
                       "preempt_grace_seconds: -5}"),
       {"queues[1].policy.quota_action", "queues[1].policy.can_preempt", "queues[1].policy.preempt_action",
        "queues[1].policy.priority_weights.size", "queues[1].policy.project_quota.running_jobs",
        "queues[1].policy.user_quota.gpus", "queues[1].policy.preempt_grace_seconds"},
       "unknown quota action 'never'"},

      // The scheduler section.
      {"scheduler values",
       Doc().Extra("scheduler: {fairshare_half_life_hours: 0, fairshare_gpu_weight: -1}\n"),
       {"scheduler.fairshare_half_life_hours", "scheduler.fairshare_gpu_weight"},
       "must be > 0"},
      {"scheduler unknown key",
       Doc().Extra("scheduler: {fairshare_halflife_hours: 24}\n"),
       {"scheduler.fairshare_halflife_hours"},
       "(did you mean 'fairshare_half_life_hours'?)"},
      {"scheduler not a map", Doc().Extra("scheduler: 168\n"), {"scheduler"}, "must be a map"},
      {"scheduler numbers quoted",
       Doc().Extra("scheduler: {fairshare_gpu_weight: \"16\"}\n"),
       {"scheduler.fairshare_gpu_weight"},
       "write numbers and true/false without quotes"},

      // Projects.
      {"project shares, user shares and quota",
       Doc().Extra(R"(
projects:
  - name: genomics
    shares: 0
    user_shares: {alice: 0, bob: -1, carol: many}
    quota: {cpus: 0, gpus: -4}
  - {name: physics, shares: -2}
)"),
       {"projects[0].user_shares.carol", "projects[0].shares", "projects[0].user_shares.alice",
        "projects[0].user_shares.bob", "projects[0].quota.cpus", "projects[0].quota.gpus", "projects[1].shares"},
       "must be a number; got 'many'"},
      {"user shares not a map",
       Doc().Extra("projects: [{name: genomics, user_shares: [alice]}]\n"),
       {"projects[0].user_shares"},
       "must be a map of names to numbers; got a list"},
      {"user shares listed twice",
       Doc().Extra("projects: [{name: genomics, user_shares: {alice: 1, alice: 2}}]\n"),
       {"projects[0].user_shares.alice"},
       "duplicate key 'alice'"},
      {"misspelled project key",
       Doc().Extra("projects: [{name: genomics, share: 2}]\n"),
       {"projects[0].share"},
       "(did you mean 'shares'?)"},
      {"project quota of the wrong type",
       Doc().Extra("projects: [{name: genomics, quota: {gpus: \"8\"}}]\n"),
       {"projects[0].quota.gpus"},
       "must be an integer"},

      // Sections in the order of docs/config.md.
      {"errors of new sections grouped in order",
       Doc()
           .Pools("pools:\n  - {name: cpu-pool, kind: cpu, nodes: [x86-c8m16-hpc-01, x86-c8m16-hpc-02]}\n"
                  "  - {name: gpu-pool, kind: gpu, nodes: [x86-c8m64g2-train-01], reservation_depth: -1}\n")
           .Extra("projects: [{name: p, shares: 0}]\nscheduler: {fairshare_half_life_hours: -1}\n"
                  "executor: {pids_limit: 0}\n"),
       {"executor.pids_limit", "scheduler.fairshare_half_life_hours", "pools[1].reservation_depth",
        "projects[0].shares"},
       "must be > 0"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto errors = ErrorsOf(LoadConfigText(c.doc.Text()));
    EXPECT_EQ(PathsOf(errors), c.paths) << Dump(errors);
    if (!errors.empty()) {
      EXPECT_THAT(errors.front().message, HasSubstr(c.message)) << Dump(errors);
    }
  }
}

TEST(ValidateConfig, ChecksPolicyEngineFieldsBuiltInCode) {
  Config config;
  config.cluster.pools.push_back({"cpu-pool", model::PoolKind::kCpu, {}, {}});
  model::QueueSpec queue;
  queue.name = "q";
  queue.pool = "cpu-pool";
  config.cluster.queues.push_back(queue);
  config.projects.push_back({"p", "", 1, {}, {}});
  ASSERT_THAT(ValidateConfig(config), IsEmpty()) << Dump(ValidateConfig(config));

  config.cluster.pools[0].reservation_depth = -3;
  config.cluster.fairshare_half_life_hours = 0;
  config.cluster.fairshare_gpu_weight = -1;
  model::QueuePolicy& policy = config.cluster.queues[0].policy;
  policy.priority_weights = model::PriorityWeights{-1, 0, 0, 0, 0};
  policy.gpu_quota_per_project = 8;
  policy.project_quota.gpus = 4;
  policy.user_quota.running_jobs = 0;
  policy.preempt_grace_seconds = -1;
  config.projects[0].shares = 0;
  config.projects[0].user_shares = {{"", 1}, {"alice", 0}};
  config.projects[0].quota.memory_mb = -1;
  EXPECT_THAT(
      PathsOf(ValidateConfig(config)),
      ElementsAre("scheduler.fairshare_half_life_hours", "scheduler.fairshare_gpu_weight", "pools[0].reservation_depth",
                  "queues[0].policy.priority_weights.fairshare", "queues[0].policy.priority_weights.max_age_hours",
                  "queues[0].policy.project_quota.gpus", "queues[0].policy.user_quota.running_jobs",
                  "queues[0].policy.preempt_grace_seconds", "projects[0].shares", "projects[0].user_shares",
                  "projects[0].user_shares.alice", "projects[0].quota.memory_mb"))
      << Dump(ValidateConfig(config));
}

}  // namespace
}  // namespace unisched::config

namespace unisched::config {
namespace {

TEST(SandboxKeys, DefaultsAndValuesReachTheConfig) {
  const Config defaults = MustLoad(LoadConfigText(Doc().Text()));
  EXPECT_EQ(defaults.sandboxes.uid_base, 3'000'000);
  EXPECT_EQ(defaults.sandboxes.default_image, "host");
  EXPECT_TRUE(defaults.images.empty());
  const Config set = MustLoad(LoadConfigText(
      Doc()
          .Extra("sandboxes: {uid_base: 500000, uid_count: 1000, pids_max: 64, default_image: py}\n"
                 "images:\n"
                 "  - {name: py, version: 3.11-v3, rootfs: /srv/py, binds: ['/opt/m:/models'], warm: 4}\n"
                 "  - {name: py, version: 3.11-v4}\n")
          .Text()));
  EXPECT_EQ(set.sandboxes.uid_base, 500'000);
  EXPECT_EQ(set.sandboxes.pids_max, 64);
  ASSERT_EQ(set.images.size(), 2u);
  EXPECT_EQ(set.images[0].rootfs, "/srv/py");
  EXPECT_EQ(set.images[0].binds, std::vector<std::string>{"/opt/m:/models"});
  EXPECT_EQ(set.images[0].warm, 4);
  EXPECT_EQ(set.images[1].version, "3.11-v4");
}

TEST(SandboxKeys, BadValuesAreReportedWithTheirPaths) {
  struct Case {
    std::string extra;
    std::vector<std::string> paths;
  };
  const std::vector<Case> cases = {
      {"sandboxes: {uid_base: 0}\n", {"sandboxes.uid_base"}},
      {"sandboxes: {uid_lock_dir: relative}\n", {"sandboxes.uid_lock_dir"}},
      {"sandboxes: {pids_max: 0, output_cap_bytes: -1}\n", {"sandboxes.output_cap_bytes", "sandboxes.pids_max"}},
      {"sandboxes: {queue: nope}\n", {"sandboxes.queue"}},
      {"sandboxes: {default_image: missing}\n", {"sandboxes.default_image"}},
      {"sandboxes: {uid_countt: 5}\n", {"sandboxes.uid_countt"}},
      {"images: [{name: Py, version: '1'}]\n", {"images[0].name"}},
      {"images: [{name: py, version: 'a b'}]\n", {"images[0].version"}},
      {"images: [{name: py, rootfs: relative}]\n", {"images[0].rootfs"}},
      {"images: [{name: py, binds: ['/a']}]\n", {"images[0].binds[0]"}},
      {"images: [{name: py, warm: -1}]\n", {"images[0].warm"}},
      {"images: [{name: py}, {name: py}]\n", {"images[1]"}},
      {"images: [{version: '2'}]\n", {"images[0].name"}},
  };
  for (const Case& c : cases) {
    const auto errors = ErrorsOf(LoadConfigText(Doc().Extra(c.extra).Text()));
    EXPECT_EQ(PathsOf(errors), c.paths) << c.extra << Dump(errors);
  }
}

TEST(StorageKeys, SharedFileSystemsAreReadAndChecked) {
  const Config set = MustLoad(LoadConfigText(
      Doc()
          .Extra("storage: {shared: [{name: ref-genomes, path: /lustre/refs, mount: /refs, read_only: true, "
                 "project_dirs: false}, {name: data, path: /lustre/u}]}\n")
          .Text()));
  ASSERT_EQ(set.storage.shared.size(), 2u);
  EXPECT_EQ(set.storage.shared[0].mount, "/refs");
  EXPECT_TRUE(set.storage.shared[0].read_only);
  EXPECT_FALSE(set.storage.shared[0].project_dirs);
  EXPECT_TRUE(set.storage.shared[1].project_dirs);   // the default
  EXPECT_TRUE(set.storage.shared[1].pools.empty());  // every pool
  EXPECT_EQ(SharedVariable("ref-genomes"), "UNISCHED_SHARED_REF_GENOMES");
  struct Case {
    std::string extra;
    std::vector<std::string> paths;
  };
  const std::vector<Case> cases = {
      {"storage: {shared: [{path: /a}]}\n", {"storage.shared[0].name"}},
      {"storage: {shared: [{name: a}]}\n", {"storage.shared[0].path"}},
      {"storage: {shared: [{name: A, path: /a}]}\n", {"storage.shared[0].name"}},
      {"storage: {shared: [{name: a, path: relative}]}\n", {"storage.shared[0].path"}},
      {"storage: {shared: [{name: a, path: /a/../b}]}\n", {"storage.shared[0].path"}},
      {"storage: {shared: [{name: a, path: /a/}]}\n", {"storage.shared[0].path"}},
      {"storage: {shared: [{name: a, path: /a, mount: 'x,y'}]}\n", {"storage.shared[0].mount"}},
      {"storage: {shared: [{name: a, path: /a, pools: [nope]}]}\n", {"storage.shared[0].pools[0]"}},
      {"storage: {shared: [{name: a, path: /a}, {name: a, path: /b}]}\n", {"storage.shared[1].name"}},
      {"storage: {shared: [{name: a-b, path: /a}, {name: a_b, path: /b}]}\n", {"storage.shared[1].name"}},
      {"storage: {shared: [{name: a, path: /a, sise: 1}]}\n", {"storage.shared[0].sise"}},
      {"storage: {shared: [{name: a, path: /a}], workflow_dirs: b}\n", {"storage.workflow_dirs"}},
      {"storage: {shared: [{name: a, path: /a, read_only: true}], workflow_dirs: a}\n", {"storage.workflow_dirs"}},
  };
  for (const Case& c : cases) {
    const auto errors = ErrorsOf(LoadConfigText(Doc().Extra(c.extra).Text()));
    EXPECT_EQ(PathsOf(errors), c.paths) << c.extra << Dump(errors);
  }
}

TEST(StorageKeys, ObjectStoresAreReadAndChecked) {
  const std::string store =
      "projects: [{name: default}]\nstorage:\n  object_stores:\n    - name: rgw\n      endpoint: "
      "http://rgw.example:7480\n"
      "      credentials: {project: default, access_key: rgw-ak, secret_key: rgw-sk}\n";
  const Config set = MustLoad(
      LoadConfigText(Doc()
                         .Extra(store + "      path_style: false\n      region: eu-west-1\n      access:\n"
                                        "        - {projects: [default], bucket: genomics}\n"
                                        "        - {projects: ['*'], bucket: public, prefix: refs/, read_only: true}\n")
                         .Text()));
  ASSERT_EQ(set.storage.object_stores.size(), 1u);
  const config::ObjectStore& rgw = *set.storage.FindObjectStore("rgw");
  EXPECT_EQ(rgw.endpoint, "http://rgw.example:7480");
  EXPECT_EQ(rgw.region, "eu-west-1");
  EXPECT_FALSE(rgw.path_style);
  EXPECT_EQ(rgw.credentials_project, "default");
  EXPECT_EQ(rgw.access_key_secret, "rgw-ak");
  EXPECT_EQ(rgw.secret_key_secret, "rgw-sk");
  ASSERT_EQ(rgw.access.size(), 2u);
  EXPECT_EQ(rgw.access[1].prefix, "refs/");
  EXPECT_TRUE(rgw.access[1].read_only);
  EXPECT_EQ(MustLoad(LoadConfigText(Doc().Extra(store).Text())).storage.object_stores[0].region, "us-east-1");
  struct Case {
    std::string extra;
    std::vector<std::string> paths;
  };
  const std::string at = "storage.object_stores[0]";
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = store;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  const std::vector<Case> cases = {
      {with("endpoint: http://rgw.example:7480", "endpoint: rgw.example:7480"), {at + ".endpoint"}},
      {with("endpoint: http://rgw.example:7480", "endpoint: http://rgw.example:7480/s3"), {at + ".endpoint"}},
      {with("name: rgw", "name: RGW"), {at + ".name"}},
      {with("project: default", "project: nope"), {at + ".credentials.project"}},
      {with("access_key: rgw-ak", "access_key: 'no way'"), {at + ".credentials.access_key"}},
      {with("      credentials: {project: default, access_key: rgw-ak, secret_key: rgw-sk}\n", ""),
       {at + ".credentials"}},
      {store + "      access: [{projects: [nope], bucket: genomics}]\n", {at + ".access[0].projects[0]"}},
      {store + "      access: [{projects: [], bucket: genomics}]\n", {at + ".access[0].projects"}},
      {store + "      access: [{projects: [default], bucket: g}]\n", {at + ".access[0].bucket"}},
      {store + "      access: [{projects: [default], bucket: genomics, prefix: /x}]\n", {at + ".access[0].prefix"}},
      {store + "    - name: rgw\n      endpoint: http://b:1\n"
               "      credentials: {project: default, access_key: a, secret_key: b}\n",
       {"storage.object_stores[1].name"}},
  };
  for (const Case& c : cases) {
    const auto errors = ErrorsOf(LoadConfigText(Doc().Extra(c.extra).Text()));
    EXPECT_EQ(PathsOf(errors), c.paths) << c.extra << Dump(errors);
  }
}

TEST(StorageKeys, LifecycleRulesAreOneKindOverKnownStoresAndFileSystems) {
  const std::string base =
      "projects: [{name: default}]\nstorage:\n  shared: [{name: data, path: /lustre/u}]\n"
      "  object_stores:\n    - name: rgw\n      endpoint: http://rgw.example:7480\n"
      "      credentials: {project: default, access_key: ak, secret_key: sk}\n  lifecycle:\n";
  const Config set = MustLoad(LoadConfigText(
      Doc()
          .Extra(base + "    - {name: archive, shared: data, older_than_days: 30, archive_to: s3://rgw/cold/a/}\n"
                        "    - {name: expire, objects: s3://rgw/scratch/tmp/, older_than_days: 0.5}\n")
          .Text()));
  ASSERT_EQ(set.storage.lifecycle.size(), 2u);
  EXPECT_EQ(set.storage.lifecycle[0].archive_to, "s3://rgw/cold/a/");
  EXPECT_DOUBLE_EQ(set.storage.lifecycle[1].older_than_days, 0.5);
  EXPECT_EQ(set.storage.lifecycle_interval_minutes, 60);
  struct Case {
    std::string rule;
    std::vector<std::string> paths;
  };
  const std::string at = "storage.lifecycle[0]";
  const std::vector<Case> cases = {
      {"{name: a, shared: data, older_than_days: 1}", {at + ".archive_to"}},
      {"{name: a, shared: nope, older_than_days: 1, archive_to: s3://rgw/cold/}", {at + ".shared"}},
      {"{name: a, shared: data, older_than_days: 0, archive_to: s3://rgw/cold/}", {at + ".older_than_days"}},
      {"{name: a, shared: data, older_than_days: 1, archive_to: s3://elsewhere/cold/}", {at + ".archive_to"}},
      {"{name: a, shared: data, older_than_days: 1, archive_to: /tmp/cold}", {at + ".archive_to"}},
      {"{name: a, shared: data, projects: [nope], older_than_days: 1, archive_to: s3://rgw/cold/}",
       {at + ".projects[0]"}},
      {"{name: a, older_than_days: 1}", {at}},
      {"{name: a, shared: data, objects: s3://rgw/xxx/, older_than_days: 1}", {at}},
      {"{name: a, objects: s3://rgw/xxx/, older_than_days: 1, archive_to: s3://rgw/yyy/}", {at + ".archive_to"}},
      {"{name: A, objects: s3://rgw/xxx/, older_than_days: 1}", {at + ".name"}},
  };
  for (const Case& c : cases) {
    const auto errors = ErrorsOf(LoadConfigText(Doc().Extra(base + "    - " + c.rule + "\n").Text()));
    EXPECT_EQ(PathsOf(errors), c.paths) << c.rule << Dump(errors);
  }
}

TEST(StorageKeys, TiersHavePricesAndWhatNamesATierNamesAKnownOne) {
  const std::string base =
      "projects: [{name: default}]\nstorage:\n  shared: [{name: data, path: /lustre/u, tier: nvme}]\n"
      "  object_stores:\n    - name: rgw\n      endpoint: http://rgw.example:7480\n"
      "      credentials: {project: default, access_key: ak, secret_key: sk}\n";
  const std::string tiers =
      "  tiers: [{name: nvme, price_per_gb_hour: 0.0002}, {name: cold, price_per_gb_hour: 1e-6}]\n";
  const Config set = MustLoad(LoadConfigText(Doc().Extra(base + tiers).Text()));
  EXPECT_EQ(set.storage.shared[0].tier, "nvme");
  EXPECT_EQ(set.storage.object_stores[0].tier, "cold");  // the default
  EXPECT_DOUBLE_EQ(set.storage.TierPrice("nvme"), 0.0002);
  EXPECT_DOUBLE_EQ(set.storage.TierPrice("cold"), 1e-6);
  EXPECT_DOUBLE_EQ(set.storage.TierPrice("hot"), 0);  // built in, unpriced
  struct Case {
    std::string extra;
    std::vector<std::string> paths;
  };
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = base + tiers;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  const std::vector<Case> cases = {
      {base, {"storage.shared[0].tier"}},  // nvme is nobody's
      {with("price_per_gb_hour: 0.0002", "price_per_gb_hour: -1"), {"storage.tiers[0].price_per_gb_hour"}},
      {with("{name: cold, price_per_gb_hour: 1e-6}", "{name: nvme, price_per_gb_hour: 1}"), {"storage.tiers[1].name"}},
      {with("{name: cold, price_per_gb_hour: 1e-6}", "{name: cold}"), {"storage.tiers[1].price_per_gb_hour"}},
      {with("{name: cold, price_per_gb_hour: 1e-6}", "{name: Cold, price_per_gb_hour: 1}"), {"storage.tiers[1].name"}},
      {with("credentials:", "tier: tape\n      credentials:"), {"storage.object_stores[0].tier"}},
  };
  for (const Case& c : cases) {
    const auto errors = ErrorsOf(LoadConfigText(Doc().Extra(c.extra).Text()));
    EXPECT_EQ(PathsOf(errors), c.paths) << c.extra << Dump(errors);
  }
}

TEST(PoolKeys, TargetSharesAreOptionalAndAddUpTo100) {
  const std::string two_pools = Doc().Text();
  EXPECT_EQ(MustLoad(LoadConfigText(two_pools)).cluster.pools[0].target_share_percent, 0);
  auto with = [&](const std::string& first, const std::string& second) {
    std::string text = two_pools;
    text.replace(text.find("  - name: cpu-pool\n"), 19,
                 "  - name: cpu-pool\n    target_share_percent: " + first + "\n");
    text.replace(text.find("  - name: gpu-pool\n"), 19,
                 "  - name: gpu-pool\n    target_share_percent: " + second + "\n");
    return LoadConfigText(text);
  };
  EXPECT_EQ(MustLoad(with("60", "40")).cluster.pools[1].target_share_percent, 40);
  EXPECT_EQ(PathsOf(ErrorsOf(with("60", "30"))), std::vector<std::string>{"pools"});
  EXPECT_EQ(PathsOf(ErrorsOf(with("120", "-20"))),
            (std::vector<std::string>{"pools[0].target_share_percent", "pools[1].target_share_percent"}));
}

TEST(BaselineKeys, TheGpuCommandIsOptionalAndChecked) {
  EXPECT_EQ(MustLoad(LoadConfigText(Doc().Text())).baseline.gpu_command, "");
  const Config set =
      MustLoad(LoadConfigText(Doc().Extra("baseline: {gpu_command: 'python3 train.py --steps 200'}\n").Text()));
  EXPECT_EQ(set.baseline.gpu_command, "python3 train.py --steps 200");
  EXPECT_EQ(set.baseline.gpu_device, "/dev/nvidia{index}");
  EXPECT_EQ(MustLoad(LoadConfigText(Doc().Extra("baseline: {gpu_device: '/dev/dri/card{index}'}\n").Text()))
                .baseline.gpu_device,
            "/dev/dri/card{index}");
  struct Case {
    std::string extra;
    std::vector<std::string> paths;
  };
  const std::vector<Case> cases = {
      {"baseline: {gpu_command: '   '}\n", {"baseline.gpu_command"}},
      {"baseline: {gpu_command: \"a\\0b\"}\n", {"baseline.gpu_command"}},
      {"baseline: {gpu_command: '" + std::string(4097, 'x') + "'}\n", {"baseline.gpu_command"}},
      {"baseline: {gpu_comand: x}\n", {"baseline.gpu_comand"}},
      {"baseline: {gpu_command: [a, b]}\n", {"baseline.gpu_command"}},
      {"baseline: {gpu_device: /dev/nvidia0}\n", {"baseline.gpu_device"}},
      {"baseline: {gpu_device: 'renderD{index}'}\n", {"baseline.gpu_device"}},
      {"baseline: {gpu_device: ''}\n", {"baseline.gpu_device"}},
  };
  for (const Case& c : cases) {
    const auto errors = ErrorsOf(LoadConfigText(Doc().Extra(c.extra).Text()));
    EXPECT_EQ(PathsOf(errors), c.paths) << c.extra.substr(0, 80) << Dump(errors);
  }
}

TEST(SandboxKeys, ValidateImageChecksOneImage) {
  ImageSpec ok;
  ok.name = "tools";
  ok.version = "v2";
  ok.binds = {"/usr/share:/mnt"};
  EXPECT_TRUE(ValidateImage(ok).empty());
  ImageSpec bad = ok;
  bad.binds = {"/usr/share:mnt"};
  ASSERT_EQ(ValidateImage(bad).size(), 1u);
  EXPECT_EQ(ValidateImage(bad)[0].path, "binds[0]");
}

}  // namespace
}  // namespace unisched::config
