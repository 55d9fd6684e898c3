// YAML tree -> Config: every section, every key, with the key path of each
// problem. Value ranges and cross references are checked in validate.cc.

#include "config/parse.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/yaml_reader.h"

namespace unisched::config::internal {
namespace {

const std::vector<std::string> kPoolKindNames = {"cpu", "gpu", "elastic"};
const std::vector<std::string> kWorkloadKindNames = {"hpc", "ai-training", "ai-inference", "agent"};
const std::vector<std::string> kBackfillNames = {"fcfs", "easy", "conservative", "easy-predicted",
                                                 "conservative-predicted"};
const std::vector<std::pair<std::string, model::BudgetPeriod>> kBudgetPeriods = {
    {"day", model::BudgetPeriod::kDay}, {"week", model::BudgetPeriod::kWeek}, {"month", model::BudgetPeriod::kMonth}};
const std::vector<std::pair<std::string, model::QuotaAction>> kQuotaActions = {{"wait", model::QuotaAction::kWait},
                                                                               {"reject", model::QuotaAction::kReject}};
const std::vector<std::pair<std::string, model::PreemptAction>> kPreemptActions = {
    {"requeue", model::PreemptAction::kRequeue}, {"cancel", model::PreemptAction::kCancel}};
// The most GPUs one node may declare; a guard against a typo such as 80 for 8.
constexpr int64_t kMaxGpusPerNode = 1024;

// Reads a value written by name: parse maps a name to the value, or to
// nullopt for an unknown name, which is one error listing the allowed ones.
template <class T, class Parse>
void ReadEnum(MapReader& m, std::string_view key, std::string_view noun, const std::vector<std::string>& names,
              Parse parse, T& out, Errors& errors) {
  std::string text;
  if (!m.Read(key, text)) return;
  if (std::optional<T> value = parse(text)) {
    out = *value;
    return;
  }
  errors.Add(m.PathOf(key), "unknown " + std::string(noun) + " '" + text + "'; expected one of: " + JoinNames(names) +
                                DidYouMean(text, names));
}

// ReadEnum for the enums that only the config spells, given as a table.
template <class T>
void ReadEnum(MapReader& m, std::string_view key, std::string_view noun,
              const std::vector<std::pair<std::string, T>>& table, T& out, Errors& errors) {
  std::vector<std::string> names;
  for (const auto& entry : table) names.push_back(entry.first);
  ReadEnum(
      m, key, noun, names,
      [&](const std::string& text) -> std::optional<T> {
        for (const auto& [name, value] : table) {
          if (name == text) return value;
        }
        return std::nullopt;
      },
      out, errors);
}

void ParseServer(const YAML::Node& node, Errors& errors, ServerSettings& out) {
  MapReader m(node, "server",
              {"listen", "state_dir", "http_threads", "max_body_bytes", "header_timeout_seconds",
               "body_timeout_seconds", "idle_timeout_seconds", "scheduler_tick_seconds", "metrics_require_token",
               "max_connections", "max_connections_per_client", "reserved_descriptors", "tls", "replica"},
              errors);
  MapReader replica(m.Get("replica"), m.PathOf("replica"), {"name", "advertise_url", "lease_seconds", "ca_file"},
                    errors);
  out.replica.enabled = m.Has("replica");
  replica.Read("name", out.replica.name);
  replica.Read("advertise_url", out.replica.advertise_url);
  replica.Read("lease_seconds", out.replica.lease_seconds);
  replica.Read("ca_file", out.replica.ca_file);
  MapReader tls(m.Get("tls"), m.PathOf("tls"), {"cert_file", "key_file", "client_ca_file", "agents_need_client_cert"},
                errors);
  tls.Read("cert_file", out.tls.cert_file);
  tls.Read("key_file", out.tls.key_file);
  tls.Read("client_ca_file", out.tls.client_ca_file);
  tls.Read("agents_need_client_cert", out.tls.agents_need_client_cert);
  m.Read("listen", out.listen);
  m.Read("state_dir", out.state_dir);
  m.Read("http_threads", out.http_threads);
  m.Read("max_body_bytes", out.max_body_bytes);
  m.Read("header_timeout_seconds", out.header_timeout_seconds);
  m.Read("body_timeout_seconds", out.body_timeout_seconds);
  m.Read("idle_timeout_seconds", out.idle_timeout_seconds);
  m.Read("scheduler_tick_seconds", out.scheduler_tick_seconds);
  m.Read("metrics_require_token", out.metrics_require_token);
  m.Read("max_connections", out.max_connections);
  m.Read("max_connections_per_client", out.max_connections_per_client);
  m.Read("reserved_descriptors", out.reserved_descriptors);
}

void ParseAccess(const YAML::Node& node, Errors& errors, AccessSettings& out) {
  MapReader m(node, "access", {"roles", "jwt"}, errors);
  MapReader jwt(m.Get("jwt"), m.PathOf("jwt"), {"jwks_file", "issuer", "audience", "user_claim", "leeway_seconds"},
                errors);
  if (m.Has("jwt")) {
    for (const char* key : {"jwks_file", "issuer", "audience"}) jwt.Require(key);
  }
  jwt.Read("jwks_file", out.jwt.jwks_file);
  jwt.Read("issuer", out.jwt.issuer);
  jwt.Read("audience", out.jwt.audience);
  jwt.Read("user_claim", out.jwt.user_claim);
  jwt.Read("leeway_seconds", out.jwt.leeway_seconds);
  const YAML::Node roles = m.Get("roles");
  if (!IsSet(roles)) return;
  if (!roles.IsMap()) {
    errors.Add(m.PathOf("roles"), "must be a map from role (user, queue-admin, platform-admin, node) to its rule");
    return;
  }
  for (const auto& entry : roles) {
    if (!entry.first.IsScalar() || entry.first.Scalar().empty()) {
      errors.Add(m.PathOf("roles"), "keys must be role names (user, queue-admin, platform-admin, node)");
      continue;
    }
    const std::string& role = entry.first.Scalar();
    MapReader r(entry.second, JoinKey(m.PathOf("roles"), role), {"allow_from", "requests_per_second", "burst"}, errors);
    AccessRule rule;
    r.Read("allow_from", rule.allow_from);
    r.Read("requests_per_second", rule.requests_per_second);
    r.Read("burst", rule.burst);
    out.roles[role] = std::move(rule);
  }
}

void ParseStore(const YAML::Node& node, Errors& errors, StoreSettings& out) {
  MapReader m(node, "store",
              {"backend", "postgresql", "synchronous", "group_commit_max_batch", "job_retention_days",
               "audit_retention_days", "audit_max_rows", "max_log_bytes", "accounting_interval_seconds",
               "storage_sample_interval_seconds", "reconcile_interval_seconds", "secrets_key_file"},
              errors);
  m.Read("backend", out.backend);
  m.Read("secrets_key_file", out.secrets_key_file);
  MapReader pg(m.Get("postgresql"), m.PathOf("postgresql"), {"conninfo", "password_file", "password_env"}, errors);
  pg.Read("conninfo", out.postgresql.conninfo);
  pg.Read("password_file", out.postgresql.password_file);
  pg.Read("password_env", out.postgresql.password_env);
  m.Read("accounting_interval_seconds", out.accounting_interval_seconds);
  m.Read("storage_sample_interval_seconds", out.storage_sample_interval_seconds);
  m.Read("reconcile_interval_seconds", out.reconcile_interval_seconds);
  m.Read("synchronous", out.synchronous);
  m.Read("group_commit_max_batch", out.group_commit_max_batch);
  m.Read("job_retention_days", out.job_retention_days);
  m.Read("audit_retention_days", out.audit_retention_days);
  m.Read("audit_max_rows", out.audit_max_rows);
  m.Read("max_log_bytes", out.max_log_bytes);
}

// The scheduler section holds cluster-wide policy settings; they live in the
// ClusterSpec so that the scheduler and the simulator read one struct.
void ParseScheduler(const YAML::Node& node, Errors& errors, model::ClusterSpec& out) {
  MapReader m(node, "scheduler",
              {"fairshare_half_life_hours", "fairshare_gpu_weight", "kill_invalid_dependency", "event_pass_depth"},
              errors);
  m.Read("fairshare_half_life_hours", out.fairshare_half_life_hours);
  m.Read("fairshare_gpu_weight", out.fairshare_gpu_weight);
  m.Read("kill_invalid_dependency", out.kill_invalid_dependency);
  m.Read("event_pass_depth", out.event_pass_depth);
}

void ParseExecutor(const YAML::Node& node, Errors& errors, ExecutorSettings& out) {
  MapReader m(node, "executor",
              {"default_unix_user", "user_accounts", "kill_grace_seconds", "use_cgroups", "pids_limit",
               "supervisor_path", "runtime_dir", "output_dir", "work_dir_retention_hours", "pin_cpus"},
              errors);
  MapReader accounts(m.Get("user_accounts"), m.PathOf("user_accounts"), {"uid_min", "uid_max", "gid_min", "gid_max"},
                     errors);
  accounts.Read("uid_min", out.user_accounts.uid_min);
  accounts.Read("uid_max", out.user_accounts.uid_max);
  accounts.Read("gid_min", out.user_accounts.gid_min);
  accounts.Read("gid_max", out.user_accounts.gid_max);
  m.Read("default_unix_user", out.default_unix_user);
  m.Read("kill_grace_seconds", out.kill_grace_seconds);
  m.Read("use_cgroups", out.use_cgroups);
  m.Read("pids_limit", out.pids_limit);
  m.Read("supervisor_path", out.supervisor_path);
  m.Read("runtime_dir", out.runtime_dir);
  m.Read("output_dir", out.output_dir);
  m.Read("work_dir_retention_hours", out.work_dir_retention_hours);
  m.Read("pin_cpus", out.pin_cpus);
}

model::PoolSpec ParsePool(const YAML::Node& node, const std::string& path, Errors& errors) {
  model::PoolSpec pool;
  MapReader m(node, path,
              {"name", "kind", "labels", "nodes", "backfill", "reservation_depth", "planned_share", "prices",
               "health_check", "sandbox", "backend", "target_share_percent"},
              errors);
  m.Require("name");
  m.Read("name", pool.name);
  std::string kind;
  if (m.Require("kind", "one of: " + JoinNames(kPoolKindNames)) && m.Read("kind", kind)) {
    if (auto parsed = model::ParsePoolKind(kind)) {
      pool.kind = *parsed;
    } else {
      errors.Add(m.PathOf("kind"), "unknown pool kind '" + kind + "'; expected one of: " + JoinNames(kPoolKindNames) +
                                       DidYouMean(kind, kPoolKindNames));
    }
  }
  m.Read("labels", pool.labels);
  m.Read("nodes", pool.nodes);
  model::BackfillChoice backfill{pool.backfill, pool.predict_run_times};
  ReadEnum(m, "backfill", "backfill mode", kBackfillNames, model::ParseBackfillChoice, backfill, errors);
  pool.backfill = backfill.mode;
  pool.predict_run_times = backfill.predicted;
  m.Read("reservation_depth", pool.reservation_depth);
  m.Read("planned_share", pool.planned_share);
  m.Read("prices", pool.prices);
  m.Read("target_share_percent", pool.target_share_percent);
  m.Read("sandbox", pool.sandbox);
  pool.backend.clear();  // unset: derived from the nodes (DeriveNodePools)
  m.Read("backend", pool.backend);
  MapReader check(m.Get("health_check"), m.PathOf("health_check"), {"command", "interval_seconds", "timeout_seconds"},
                  errors);
  check.Read("command", pool.health_check_command);
  check.Read("interval_seconds", pool.health_check_interval_seconds);
  check.Read("timeout_seconds", pool.health_check_timeout_seconds);
  return pool;
}

// Reads {model, memory_gb} of one device description; false after errors.
bool ParseGpuModel(MapReader& m, Errors& errors, model::GpuDevice& device) {
  bool ok = true;
  if (!m.Require("model", "e.g. model: h100") || !m.Read("model", device.model)) {
    ok = false;
  } else if (device.model.empty()) {
    errors.Add(m.PathOf("model"), "must not be empty; name the GPU model, e.g. h100");
    ok = false;
  }
  if (!m.Require("memory_gb", "the memory of one device in GB, e.g. memory_gb: 80") ||
      !m.Read("memory_gb", device.memory_gb)) {
    ok = false;
  } else if (device.memory_gb <= 0) {
    errors.Add(m.PathOf("memory_gb"), "must be > 0; give the memory of one device in GB");
    ok = false;
  }
  return ok;
}

// gpus is either {count, model, memory_gb} (identical devices) or a list of
// {model, memory_gb}. Devices get indices 0..n-1 in order. On any error the
// node gets no devices and its gpus path is marked, so validation does not
// add "declares no GPUs" on top.
std::vector<model::GpuDevice> ParseGpus(const YAML::Node& node, const std::string& path, Errors& errors) {
  std::vector<model::GpuDevice> gpus;
  bool ok = true;
  if (node.IsMap()) {
    MapReader m(node, path, {"count", "model", "memory_gb"}, errors);
    model::GpuDevice device;
    int64_t count = 0;
    if (m.Require("count", "the number of identical devices, e.g. count: 8")) {
      auto value = ReadInteger(m.Get("count"), m.PathOf("count"), 0, kMaxGpusPerNode, errors);
      if (value) {
        count = *value;
      } else {
        ok = false;
      }
    } else {
      ok = false;
    }
    ok = ParseGpuModel(m, errors, device) && ok;
    for (int64_t i = 0; ok && i < count; ++i) {
      device.index = static_cast<int>(i);
      gpus.push_back(device);
    }
  } else if (node.IsSequence()) {
    if (node.size() > static_cast<size_t>(kMaxGpusPerNode)) {
      errors.Add(path, "lists " + std::to_string(node.size()) + " devices; at most " + std::to_string(kMaxGpusPerNode) +
                           " per node");
      ok = false;
    }
    ForEachItem(node, path, errors, [&](const YAML::Node& item, const std::string& item_path) {
      MapReader m(item, item_path, {"model", "memory_gb"}, errors);
      model::GpuDevice device;
      device.index = static_cast<int>(gpus.size());
      if (m.is_map() && ParseGpuModel(m, errors, device)) {
        gpus.push_back(device);
      } else {
        ok = false;
      }
    });
  } else {
    errors.Add(path, "must be a map {count, model, memory_gb} or a list of {model, memory_gb}; got " + Describe(node));
    ok = false;
  }
  if (!ok) {
    errors.MarkBroken(path);
    gpus.clear();
  }
  return gpus;
}

model::NodeSpec ParseNode(const YAML::Node& node, const std::string& path, Errors& errors) {
  model::NodeSpec spec;
  MapReader m(node, path, {"name", "labels", "cpus", "memory_mb", "gpus", "agent"}, errors);
  m.Require("name", "e.g. name: x86-c64m256-hpc-01");
  m.Read("name", spec.name);
  m.Read("labels", spec.labels);
  m.Require("cpus", "the number of CPUs jobs may use on this node");
  m.Read("cpus", spec.cpus);
  m.Require("memory_mb", "the memory jobs may use on this node, in MB");
  m.Read("memory_mb", spec.memory_mb);
  if (m.Has("gpus")) spec.gpus = ParseGpus(m.Get("gpus"), m.PathOf("gpus"), errors);
  m.Read("agent", spec.agent);
  return spec;
}

std::vector<model::WorkloadKind> ParseWorkloadKinds(const YAML::Node& node, const std::string& path, Errors& errors) {
  std::vector<model::WorkloadKind> kinds;
  ForEachItem(node, path, errors, [&](const YAML::Node& item, const std::string& item_path) {
    auto name = ReadString(item, item_path, errors);
    if (!name) return;
    if (auto kind = model::ParseWorkloadKind(*name)) {
      kinds.push_back(*kind);
    } else {
      errors.Add(item_path, "unknown workload kind '" + *name + "'; expected one of: " + JoinNames(kWorkloadKindNames) +
                                DidYouMean(*name, kWorkloadKindNames));
    }
  });
  return kinds;
}

// Upper bounds of one scope (a project or user in a queue, a project over
// all queues); a key left out is no limit.
model::ResourceLimits ParseLimits(const YAML::Node& node, const std::string& path, Errors& errors) {
  model::ResourceLimits limits;
  MapReader m(node, path, {"cpus", "memory_mb", "gpus", "running_jobs"}, errors);
  m.Read("cpus", limits.cpus);
  m.Read("memory_mb", limits.memory_mb);
  m.Read("gpus", limits.gpus);
  m.Read("running_jobs", limits.running_jobs);
  return limits;
}

// Keys left out keep the value of defaults (the weights of the queue's type),
// so `priority_weights: {age: 0}` changes one factor and keeps the others.
model::PriorityWeights ParseWeights(MapReader& m, const model::PriorityWeights& defaults) {
  model::PriorityWeights weights = defaults;
  m.Read("fairshare", weights.fairshare);
  m.Read("age", weights.age);
  m.Read("tier", weights.tier);
  m.Read("size", weights.size);
  m.Read("max_age_hours", weights.max_age_hours);
  return weights;
}

model::QueuePolicy ParsePolicy(const YAML::Node& node, const std::string& path, Errors& errors) {
  model::QueuePolicy policy;
  MapReader m(node, path,
              {"type", "max_walltime_hours", "default_walltime_hours", "default_memory_mb_per_cpu",
               "gpu_quota_per_project", "preemptible", "scale_in_idle_seconds", "max_concurrency", "priority_weights",
               "project_quota", "user_quota", "quota_action", "can_preempt", "preempt_action", "preempt_grace_seconds",
               "max_retries", "retry_backoff_seconds", "requeue_on_node_fail", "max_node_fail_requeues"},
              errors);
  m.Read("type", policy.type);
  m.Read("max_walltime_hours", policy.max_walltime_hours);
  m.Read("default_walltime_hours", policy.default_walltime_hours);
  m.Read("default_memory_mb_per_cpu", policy.default_memory_mb_per_cpu);
  m.Read("gpu_quota_per_project", policy.gpu_quota_per_project);
  m.Read("preemptible", policy.preemptible);
  m.Read("scale_in_idle_seconds", policy.scale_in_idle_seconds);
  m.Read("max_concurrency", policy.max_concurrency);
  if (m.Has("priority_weights")) {
    // type is read above, so Weights() gives the defaults of this queue's type.
    const model::PriorityWeights defaults = policy.Weights();
    MapReader weights(m.Get("priority_weights"), m.PathOf("priority_weights"),
                      {"fairshare", "age", "tier", "size", "max_age_hours"}, errors);
    if (weights.is_map()) policy.priority_weights = ParseWeights(weights, defaults);
  }
  policy.project_quota = ParseLimits(m.Get("project_quota"), m.PathOf("project_quota"), errors);
  policy.user_quota = ParseLimits(m.Get("user_quota"), m.PathOf("user_quota"), errors);
  ReadEnum(m, "quota_action", "quota action", kQuotaActions, policy.quota_action, errors);
  m.Read("can_preempt", policy.can_preempt);
  ReadEnum(m, "preempt_action", "preempt action", kPreemptActions, policy.preempt_action, errors);
  m.Read("preempt_grace_seconds", policy.preempt_grace_seconds);
  m.Read("max_retries", policy.max_retries);
  m.Read("retry_backoff_seconds", policy.retry_backoff_seconds);
  m.Read("requeue_on_node_fail", policy.requeue_on_node_fail);
  m.Read("max_node_fail_requeues", policy.max_node_fail_requeues);
  return policy;
}

model::QueueSpec ParseQueue(const YAML::Node& node, const std::string& path, Errors& errors,
                            const std::vector<std::string>& pool_names) {
  model::QueueSpec queue;
  MapReader m(node, path, {"name", "pool", "workload_kinds", "priority_tier", "policy"}, errors);
  m.Require("name");
  m.Read("name", queue.name);
  m.Require("pool", "name the pool this queue's jobs run on (defined pools: " + JoinNames(pool_names) + ")");
  m.Read("pool", queue.pool);
  queue.workload_kinds = ParseWorkloadKinds(m.Get("workload_kinds"), m.PathOf("workload_kinds"), errors);
  m.Read("priority_tier", queue.priority_tier);
  queue.policy = ParsePolicy(m.Get("policy"), m.PathOf("policy"), errors);
  return queue;
}

model::RoutingRule ParseRule(const YAML::Node& node, const std::string& path, Errors& errors) {
  model::RoutingRule rule;
  MapReader m(node, path, {"name", "match", "queue"}, errors);
  m.Require("name", "rules are named in every routing decision");
  m.Read("name", rule.name);
  m.Require("queue", "name the queue that matching jobs go to");
  m.Read("queue", rule.queue);
  MapReader match(m.Get("match"), m.PathOf("match"), {"kind", "features", "min_gpus", "max_gpus"}, errors);
  std::string kind;
  if (match.Read("kind", kind)) {
    if (auto parsed = model::ParseWorkloadKind(kind)) {
      rule.kind = *parsed;
    } else {
      errors.Add(match.PathOf("kind"), "unknown workload kind '" + kind + "'; expected one of: " +
                                           JoinNames(kWorkloadKindNames) + DidYouMean(kind, kWorkloadKindNames));
    }
  }
  match.Read("features", rule.features);
  match.Read("min_gpus", rule.min_gpus);
  match.Read("max_gpus", rule.max_gpus);
  return rule;
}

ProjectSpec ParseProject(const YAML::Node& node, const std::string& path, Errors& errors) {
  ProjectSpec project;
  MapReader m(node, path, {"name", "description", "shares", "user_shares", "quota", "budget", "storage_paths"}, errors);
  m.Require("name");
  m.Read("name", project.name);
  m.Read("description", project.description);
  m.Read("shares", project.shares);
  m.Read("user_shares", project.user_shares);
  m.Read("storage_paths", project.storage_paths);
  project.quota = ParseLimits(m.Get("quota"), m.PathOf("quota"), errors);
  MapReader b(m.Get("budget"), m.PathOf("budget"), {"gpu_hours", "cpu_hours", "period", "action"}, errors);
  b.Read("gpu_hours", project.budget.gpu_hours);
  b.Read("cpu_hours", project.budget.cpu_hours);
  ReadEnum(b, "period", "budget period", kBudgetPeriods, project.budget.period, errors);
  ReadEnum(b, "action", "budget action", kQuotaActions, project.budget.action, errors);
  return project;
}

UserSpec ParseUser(const YAML::Node& node, const std::string& path, Errors& errors) {
  UserSpec user;
  MapReader m(node, path, {"name", "role", "projects", "queues", "unix_user"}, errors);
  m.Require("name");
  m.Read("name", user.name);
  m.Read("role", user.role);
  m.Read("projects", user.projects);
  m.Read("queues", user.queues);
  m.Read("unix_user", user.unix_user);
  return user;
}

}  // namespace

void DeriveNodePools(model::ClusterSpec& cluster) {
  for (auto& pool : cluster.pools) {
    if (pool.backend.empty()) {
      // A pool of agent nodes is served by the agents; any other by the daemon.
      const bool agents = !pool.nodes.empty() && std::all_of(pool.nodes.begin(), pool.nodes.end(), [&](const auto& n) {
        const model::NodeSpec* node = cluster.FindNode(n);
        return node && node->agent;
      });
      pool.backend = agents ? model::kAgentBackend : model::kLocalBackend;
    }
  }
  for (const auto& pool : cluster.pools) {
    for (const auto& node_name : pool.nodes) {
      for (auto& node : cluster.nodes) {
        if (node.name != node_name || !node.pool.empty()) continue;
        node.pool = pool.name;
        // insert() keeps existing keys, so the node's own labels win.
        node.labels.insert(pool.labels.begin(), pool.labels.end());
        break;
      }
    }
  }
}

void DerivePolicies(Config& config) {
  for (auto& queue : config.cluster.queues) {
    model::QueuePolicy& policy = queue.policy;
    if (policy.gpu_quota_per_project && !policy.project_quota.gpus) {
      policy.project_quota.gpus = *policy.gpu_quota_per_project;
    } else if (!policy.gpu_quota_per_project && policy.project_quota.gpus &&
               *policy.project_quota.gpus <= std::numeric_limits<int>::max()) {
      // The API shows gpu_quota_per_project, the seed's name for the limit.
      policy.gpu_quota_per_project = static_cast<int>(*policy.project_quota.gpus);
    }
  }
  config.cluster.projects.clear();
  for (const auto& project : config.projects) {
    model::ProjectPolicy policy;
    policy.name = project.name;
    policy.shares = project.shares;
    policy.user_shares = project.user_shares;
    policy.quota = project.quota;
    policy.budget = project.budget;
    config.cluster.projects.push_back(std::move(policy));
  }
}

void ParseHealth(const YAML::Node& node, Errors& errors, HealthSettings& out) {
  MapReader m(
      node, "health",
      {"heartbeat_interval_seconds", "heartbeat_timeout_seconds", "black_hole_failures", "black_hole_window_seconds"},
      errors);
  m.Read("heartbeat_interval_seconds", out.heartbeat_interval_seconds);
  m.Read("heartbeat_timeout_seconds", out.heartbeat_timeout_seconds);
  m.Read("black_hole_failures", out.black_hole_failures);
  m.Read("black_hole_window_seconds", out.black_hole_window_seconds);
}

AlertRule ParseAlertRule(const YAML::Node& node, const std::string& path, Errors& errors) {
  AlertRule rule;
  MapReader m(node, path, {"name", "kind", "severity", "queue", "threshold_seconds"}, errors);
  m.Require("name");
  m.Read("name", rule.name);
  m.Require("kind", "one of: node_down, node_drained_automatically, pending_age, ledger_discrepancy, store_errors");
  m.Read("kind", rule.kind);
  m.Read("severity", rule.severity);
  m.Read("queue", rule.queue);
  m.Read("threshold_seconds", rule.threshold_seconds);
  return rule;
}

void ParseAlerts(const YAML::Node& node, Errors& errors, AlertSettings& out) {
  MapReader m(node, "alerts", {"webhook", "rules"}, errors);
  MapReader hook(m.Get("webhook"), m.PathOf("webhook"), {"url", "timeout_seconds", "retries", "ca_file"}, errors);
  hook.Read("ca_file", out.webhook.ca_file);
  hook.Read("url", out.webhook.url);
  hook.Read("timeout_seconds", out.webhook.timeout_seconds);
  hook.Read("retries", out.webhook.retries);
  out.rules = ParseList<AlertRule>(m, "rules", errors, ParseAlertRule);
}

void ParseSandboxes(const YAML::Node& node, Errors& errors, SandboxSettings& out) {
  MapReader m(node, "sandboxes",
              {"init_path", "queue", "uid_base", "uid_count", "uid_lock_dir", "output_cap_bytes", "max_file_bytes",
               "create_wait_seconds", "pids_max", "default_cpus", "default_timeout_seconds", "default_idle_seconds",
               "default_image"},
              errors);
  m.Read("init_path", out.init_path);
  m.Read("queue", out.queue);
  m.Read("uid_base", out.uid_base);
  m.Read("uid_count", out.uid_count);
  m.Read("uid_lock_dir", out.uid_lock_dir);
  m.Read("output_cap_bytes", out.output_cap_bytes);
  m.Read("max_file_bytes", out.max_file_bytes);
  m.Read("create_wait_seconds", out.create_wait_seconds);
  m.Read("pids_max", out.pids_max);
  m.Read("default_cpus", out.default_cpus);
  m.Read("default_timeout_seconds", out.default_timeout_seconds);
  m.Read("default_idle_seconds", out.default_idle_seconds);
  m.Read("default_image", out.default_image);
}

void ParseBaseline(const YAML::Node& node, Errors& errors, BaselineSettings& out) {
  MapReader m(node, "baseline", {"gpu_command", "gpu_device"}, errors);
  m.Read("gpu_command", out.gpu_command);
  m.Read("gpu_device", out.gpu_device);
}

ImageSpec ParseImage(const YAML::Node& node, const std::string& path, Errors& errors) {
  ImageSpec image;
  MapReader m(node, path, {"name", "version", "rootfs", "binds", "warm"}, errors);
  m.Require("name");
  m.Read("name", image.name);
  m.Read("version", image.version);
  m.Read("rootfs", image.rootfs);
  m.Read("binds", image.binds);
  m.Read("warm", image.warm);
  return image;
}

Config ParseConfig(const YAML::Node& root, Errors& errors) {
  Config config;
  MapReader m(root, "",
              {"server", "store", "executor", "scheduler", "health", "alerts", "pools", "nodes", "queues", "routing",
               "projects", "users", "sandboxes", "images", "access", "baseline", "storage"},
              errors);
  if (!m.is_map()) return config;
  ParseAccess(m.Get("access"), errors, config.access);
  ParseSandboxes(m.Get("sandboxes"), errors, config.sandboxes);
  config.images = ParseList<ImageSpec>(m, "images", errors, ParseImage);
  ParseServer(m.Get("server"), errors, config.server);
  ParseStore(m.Get("store"), errors, config.store);
  ParseHealth(m.Get("health"), errors, config.health);
  ParseAlerts(m.Get("alerts"), errors, config.alerts);
  ParseExecutor(m.Get("executor"), errors, config.executor);
  ParseBaseline(m.Get("baseline"), errors, config.baseline);
  ParseStorage(m.Get("storage"), errors, config.storage);
  ParseScheduler(m.Get("scheduler"), errors, config.cluster);

  m.Require("pools", "list the resource pools, e.g. pools: [{name: cpu-hpc-pool, kind: cpu, nodes: [...]}]");
  m.Require("nodes", "list the nodes (nodes: [] when every node registers through an agent)");
  m.Require("queues", "list the queues, e.g. queues: [{name: hpc-precision, pool: cpu-hpc-pool}]");
  config.cluster.pools = ParseList<model::PoolSpec>(m, "pools", errors, ParsePool);
  config.cluster.nodes = ParseList<model::NodeSpec>(m, "nodes", errors, ParseNode);
  std::vector<std::string> pool_names;
  for (const auto& pool : config.cluster.pools) {
    if (!pool.name.empty()) pool_names.push_back(pool.name);
  }
  config.cluster.queues = ParseList<model::QueueSpec>(
      m, "queues", errors, [&](const YAML::Node& item, const std::string& item_path, Errors& item_errors) {
        return ParseQueue(item, item_path, item_errors, pool_names);
      });

  MapReader routing(m.Get("routing"), m.PathOf("routing"), {"rules"}, errors);
  config.cluster.routing_rules = ParseList<model::RoutingRule>(routing, "rules", errors, ParseRule);

  config.projects = ParseList<ProjectSpec>(m, "projects", errors, ParseProject);
  config.users = ParseList<UserSpec>(m, "users", errors, ParseUser);

  DeriveNodePools(config.cluster);
  return config;
}

}  // namespace unisched::config::internal
