// The value rules of a Config: ranges, name formats, unique names, references
// between sections and node membership in pools. docs/config.md lists them.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "config/errors.h"
#include "config/validate_rules.h"
#include "config/validate_storage.h"
#include "config/validate_store.h"
#include "unisched/auth/access.h"
#include "unisched/config/config.h"

namespace unisched::config {
namespace {

using internal::DidYouMean;
using internal::Errors;
using internal::IsListenAddress;
using internal::IsNodeName;
using internal::IsPlainName;
using internal::IsUnixUserName;
using internal::JoinIndex;
using internal::JoinKey;
using internal::JoinNames;
using internal::kNodeNameRule;
using internal::kPlainNameRule;
using internal::kUnixUserRule;
using internal::kUserNameRule;
using internal::NameRegistry;
using internal::NonNegative;
using internal::Positive;
using internal::ValidateReplica;
using internal::ValidateStore;

void ValidateServer(const ServerSettings& s, Errors& errors) {
  if (!IsListenAddress(s.listen)) {
    errors.Add("server.listen",
               "must be HOST:PORT with a port from 0 to 65535 (0 picks a free port), e.g. "
               "127.0.0.1:8642; got '" +
                   s.listen + "'");
  }
  if (s.state_dir.empty()) errors.Add("server.state_dir", "must not be empty; give the directory for the database");
  Positive(errors, "server.http_threads", s.http_threads);
  Positive(errors, "server.max_body_bytes", s.max_body_bytes);
  Positive(errors, "server.header_timeout_seconds", s.header_timeout_seconds);
  Positive(errors, "server.body_timeout_seconds", s.body_timeout_seconds);
  Positive(errors, "server.idle_timeout_seconds", s.idle_timeout_seconds);
  Positive(errors, "server.scheduler_tick_seconds", s.scheduler_tick_seconds);
  Positive(errors, "server.max_connections", s.max_connections);
  NonNegative(errors, "server.max_connections_per_client", s.max_connections_per_client, "0 sets no per-client cap");
  NonNegative(errors, "server.reserved_descriptors", s.reserved_descriptors);
  const auto& tls = s.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    errors.Add(tls.cert_file.empty() ? "server.tls.cert_file" : "server.tls.key_file",
               "give both cert_file and key_file for HTTPS, or neither");
  }
  for (const auto& [key, file] :
       {std::pair{"cert_file", tls.cert_file}, {"key_file", tls.key_file}, {"client_ca_file", tls.client_ca_file}}) {
    if (!file.empty() && file.front() != '/') errors.Add(std::string("server.tls.") + key, "must be an absolute path");
  }
  if (!tls.client_ca_file.empty() && tls.cert_file.empty()) {
    errors.Add("server.tls.client_ca_file", "client certificates need HTTPS: set cert_file and key_file too");
  }
  if (tls.agents_need_client_cert && tls.client_ca_file.empty()) {
    errors.Add("server.tls.agents_need_client_cert",
               "needs client_ca_file, the CA that signs the agents' certificates");
  }
}

void ValidateAccess(const AccessSettings& access, Errors& errors) {
  if (access.jwt.enabled()) {
    if (access.jwt.jwks_file.front() != '/') {
      errors.Add("access.jwt.jwks_file", "must be an absolute path to the IdP's JWKS file");
    }
    if (access.jwt.user_claim.empty()) errors.Add("access.jwt.user_claim", "must name a claim, e.g. sub");
    NonNegative(errors, "access.jwt.leeway_seconds", access.jwt.leeway_seconds);
  }
  static const std::vector<std::string> kRoles = {"user", "queue-admin", "platform-admin", "node"};
  for (const auto& [role, rule] : access.roles) {
    const std::string path = "access.roles." + role;
    if (std::find(kRoles.begin(), kRoles.end(), role) == kRoles.end()) {
      errors.Add(path, "unknown role '" + role + "'; expected one of: " + JoinNames(kRoles) + DidYouMean(role, kRoles));
    }
    for (size_t i = 0; i < rule.allow_from.size(); ++i) {
      auto parsed = auth::ParseCidr(rule.allow_from[i]);
      if (!parsed.cidr) errors.Add(path + ".allow_from[" + std::to_string(i) + "]", parsed.error);
    }
    NonNegative(errors, path + ".requests_per_second", rule.requests_per_second, "0 sets no limit");
    NonNegative(errors, path + ".burst", rule.burst, "0 makes the burst the rate");
  }
}

void ValidateHealth(const HealthSettings& h, Errors& errors) {
  Positive(errors, "health.heartbeat_interval_seconds", h.heartbeat_interval_seconds);
  Positive(errors, "health.heartbeat_timeout_seconds", h.heartbeat_timeout_seconds);
  if (h.heartbeat_timeout_seconds <= h.heartbeat_interval_seconds) {
    errors.Add("health.heartbeat_timeout_seconds",
               "must be longer than heartbeat_interval_seconds (" + std::to_string(h.heartbeat_interval_seconds) +
                   "), or every agent would time out between two heartbeats; 3 to 6 intervals is usual");
  }
  NonNegative(errors, "health.black_hole_failures", h.black_hole_failures, "0 never drains a node for failing jobs");
  Positive(errors, "health.black_hole_window_seconds", h.black_hole_window_seconds);
}

void ValidateBaseline(const BaselineSettings& b, Errors& errors) {
  const std::string& command = b.gpu_command;
  if (!command.empty() && command.find_first_not_of(" \t\r\n") == std::string::npos) {
    errors.Add("baseline.gpu_command",
               "is blank; give the training command, or leave the key out to skip the speed-up");
  } else if (command.find('\0') != std::string::npos) {
    errors.Add("baseline.gpu_command", "holds a NUL character, which would cut the command short; remove it");
  } else if (command.size() > 4096) {
    errors.Add("baseline.gpu_command",
               "is " + std::to_string(command.size()) + " bytes, at most 4096; put a longer one in a script");
  }
  const std::string& device = b.gpu_device;
  if (device.empty() || device[0] != '/' || device.find("{index}") == std::string::npos ||
      device.find('\0') != std::string::npos) {
    errors.Add(
        "baseline.gpu_device",
        "must be an absolute path holding {index}, the GPU's index, e.g. /dev/nvidia{index}; got '" + device + "'");
  }
}

bool IsVersionText(const std::string& v) {
  if (v.empty() || v.size() > 63) return false;
  for (char c : v) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) return false;
  }
  return true;
}

void ValidateImageInto(const ImageSpec& image, const std::string& path, Errors& errors) {
  if (!IsVersionText(image.version)) {
    errors.Add(JoinKey(path, "version"), "must be 1-63 letters, digits, '.', '-' or '_', e.g. 3.11-v3");
  }
  if (!image.rootfs.empty() && image.rootfs.front() != '/') {
    errors.Add(JoinKey(path, "rootfs"), "must be an absolute directory path, e.g. /srv/images/python-3.11");
  }
  for (size_t i = 0; i < image.binds.size(); ++i) {
    const std::string& b = image.binds[i];
    const size_t colon = b.find(':');
    if (colon == std::string::npos || b.size() < 4 || b.front() != '/' || colon + 1 >= b.size() ||
        b[colon + 1] != '/' || b.find(':', colon + 1) != std::string::npos) {
      errors.Add(JoinKey(path, "binds") + "[" + std::to_string(i) + "]",
                 "must be HOST_PATH:PATH_INSIDE, both absolute, e.g. /opt/python3.11:/opt/python");
    }
  }
  NonNegative(errors, JoinKey(path, "warm"), image.warm, "0 keeps no idle instance ready");
}

void ValidateSandboxes(const Config& config, const NameRegistry& queues, Errors& errors) {
  const SandboxSettings& s = config.sandboxes;
  Positive(errors, "sandboxes.uid_base", s.uid_base, "pick a range no account of the host uses, e.g. 3000000");
  Positive(errors, "sandboxes.uid_count", s.uid_count);
  if (s.uid_base > 0 && s.uid_base + s.uid_count > 4'000'000'000LL) {
    errors.Add("sandboxes.uid_count", "uid_base + uid_count must stay below 4000000000");
  }
  if (s.uid_lock_dir.empty() || s.uid_lock_dir.front() != '/') {
    errors.Add("sandboxes.uid_lock_dir", "must be an absolute path, e.g. /run/unisched/sandbox-uids");
  }
  Positive(errors, "sandboxes.output_cap_bytes", s.output_cap_bytes);
  Positive(errors, "sandboxes.max_file_bytes", s.max_file_bytes);
  NonNegative(errors, "sandboxes.create_wait_seconds", s.create_wait_seconds, "0 answers 429 at once");
  Positive(errors, "sandboxes.pids_max", s.pids_max);
  Positive(errors, "sandboxes.default_cpus", s.default_cpus);
  Positive(errors, "sandboxes.default_timeout_seconds", s.default_timeout_seconds);
  Positive(errors, "sandboxes.default_idle_seconds", s.default_idle_seconds);
  if (!s.queue.empty()) queues.CheckReference(errors, "sandboxes.queue", s.queue);
  std::map<std::string, std::string> seen;  // name:version -> path
  bool default_found = s.default_image == "host";
  for (size_t i = 0; i < config.images.size(); ++i) {
    const ImageSpec& image = config.images[i];
    const std::string path = "images[" + std::to_string(i) + "]";
    if (!IsPlainName(image.name, "")) {
      errors.Add(JoinKey(path, "name"), "invalid image name '" + image.name + "'; " + std::string(kPlainNameRule));
    }
    ValidateImageInto(image, path, errors);
    const auto [it, fresh] = seen.emplace(image.name + ":" + image.version, path);
    if (!fresh) {
      errors.Add(path, "duplicate image " + image.name + ":" + image.version + " (first at " + it->second + ")");
    }
    default_found = default_found || image.name == s.default_image;
  }
  if (!default_found) {
    errors.Add("sandboxes.default_image", "unknown image '" + s.default_image + "'; use host or an image of images");
  }
}

void ValidateAlerts(const AlertSettings& a, const NameRegistry& queues, Errors& errors) {
  static const std::vector<std::string> kKinds = {"node_down", "node_drained_automatically", "pending_age",
                                                  "ledger_discrepancy", "store_errors"};
  static const std::vector<std::string> kSeverities = {"info", "warning", "critical"};
  if (!a.webhook.url.empty() && a.webhook.url.rfind("http://", 0) != 0 && a.webhook.url.rfind("https://", 0) != 0) {
    errors.Add("alerts.webhook.url", "must be an http:// or https:// URL, e.g. http://127.0.0.1:9093/hook");
  }
  Positive(errors, "alerts.webhook.timeout_seconds", a.webhook.timeout_seconds);
  NonNegative(errors, "alerts.webhook.retries", a.webhook.retries, "0 tries once");
  std::set<std::string> names;
  for (size_t i = 0; i < a.rules.size(); ++i) {
    const AlertRule& r = a.rules[i];
    const std::string path = JoinIndex("alerts.rules", i);
    if (!names.insert(r.name).second) errors.Add(JoinKey(path, "name"), "'" + r.name + "' is used by another rule");
    if (std::find(kKinds.begin(), kKinds.end(), r.kind) == kKinds.end()) {
      errors.Add(JoinKey(path, "kind"),
                 "unknown alert kind '" + r.kind +
                     "'; expected one of: node_down, "
                     "node_drained_automatically, pending_age, ledger_discrepancy, store_errors" +
                     DidYouMean(r.kind, kKinds));
    }
    if (std::find(kSeverities.begin(), kSeverities.end(), r.severity) == kSeverities.end()) {
      errors.Add(JoinKey(path, "severity"),
                 "unknown severity '" + r.severity + "'; expected info, warning or critical");
    }
    if (!r.queue.empty()) queues.CheckReference(errors, JoinKey(path, "queue"), r.queue);
    Positive(errors, JoinKey(path, "threshold_seconds"), r.threshold_seconds);
  }
}

void ValidateUserAccounts(const Config& config, Errors& errors) {
  const UserAccountSettings& a = config.executor.user_accounts;
  if (!a.enabled() && a.uid_min == 0 && a.gid_min == 0 && a.gid_max == 0) return;
  constexpr int64_t kLowest = 1000, kHighest = (int64_t{1} << 31) - 1;
  const std::string path = "executor.user_accounts";
  for (const auto& [key, lo, hi] : {std::tuple{"uid", a.uid_min, a.uid_max}, std::tuple{"gid", a.gid_min, a.gid_max}}) {
    const std::string name = key;
    if (lo < kLowest || hi > kHighest || lo > hi) {
      errors.Add(path + "." + name + "_min", name + "_min.." + name + "_max must be a range within 1000.." +
                                                 std::to_string(kHighest) + ", e.g. 2000000..2099999; got " +
                                                 std::to_string(lo) + ".." + std::to_string(hi));
    }
  }
  const int64_t sandbox_first = config.sandboxes.uid_base;
  const int64_t sandbox_last = config.sandboxes.uid_base + config.sandboxes.uid_count - 1;
  if (a.uid_min <= sandbox_last && sandbox_first <= a.uid_max) {
    errors.Add(path + ".uid_min", "uid_min..uid_max (" + std::to_string(a.uid_min) + ".." + std::to_string(a.uid_max) +
                                      ") overlaps the sandboxes' uids (" + std::to_string(sandbox_first) + ".." +
                                      std::to_string(sandbox_last) + "); give users a range of their own");
  }
}

void ValidateExecutor(const ExecutorSettings& s, int job_retention_days, Errors& errors) {
  if (!IsUnixUserName(s.default_unix_user)) {
    errors.Add("executor.default_unix_user", std::string(kUnixUserRule) + "; got '" + s.default_unix_user + "'");
  }
  NonNegative(errors, "executor.kill_grace_seconds", s.kill_grace_seconds, "0 sends SIGKILL at once");
  Positive(errors, "executor.pids_limit", s.pids_limit);
  if (!s.supervisor_path.empty() && s.supervisor_path.front() != '/') {
    errors.Add("executor.supervisor_path",
               "must be an absolute path, or left out to use unisched-supervisor beside the unisched binary");
  }
  if (!s.runtime_dir.empty() && s.runtime_dir.front() != '/') {
    errors.Add("executor.runtime_dir",
               "must be an absolute path (a directory on a tmpfs for this daemon alone), or left out to let the "
               "daemon choose one under /run or /dev/shm; got '" +
                   s.runtime_dir + "'");
  }
  if (!s.output_dir.empty() && (s.output_dir.front() != '/' || s.output_dir.back() == '/')) {
    errors.Add("executor.output_dir",
               "must be an absolute path without a trailing '/' (shared storage mounted there on every node, e.g. "
               "/shared/unisched-output), or left out; got '" +
                   s.output_dir + "'");
  }
  if (!s.work_dir_retention_hours) return;  // WorkDirRetentionHours: always shorter
  NonNegative(errors, "executor.work_dir_retention_hours", *s.work_dir_retention_hours,
              "0 keeps work directories as long as their job's record");
  if (job_retention_days > 0 && *s.work_dir_retention_hours >= 24.0 * job_retention_days) {
    errors.Add("executor.work_dir_retention_hours",
               "must be shorter than the job records' retention (store.job_retention_days = " +
                   std::to_string(job_retention_days) + ", " + std::to_string(24 * job_retention_days) +
                   " hours), since that removes everything of a job anyway; lower it, or raise the other");
  }
}

void ValidateScheduler(const model::ClusterSpec& cluster, Errors& errors) {
  Positive(errors, "scheduler.fairshare_half_life_hours", cluster.fairshare_half_life_hours,
           "usage must lose weight over some time");
  NonNegative(errors, "scheduler.fairshare_gpu_weight", cluster.fairshare_gpu_weight,
              "0 charges GPU time nothing beyond its CPUs");
  NonNegative(errors, "scheduler.event_pass_depth", cluster.event_pass_depth,
              "0 makes every pass rank and explain the whole queue");
}

// Each limit that is set must be > 0: a limit of 0 would let no job run,
// and is more likely meant as "no limit", which is leaving the key out.
// skip_gpus: the GPU limit is judged by the caller.
void ValidateLimits(const model::ResourceLimits& limits, const std::string& path, Errors& errors,
                    bool skip_gpus = false) {
  constexpr std::string_view kHint = "leave the key out for no limit";
  if (limits.cpus) Positive(errors, JoinKey(path, "cpus"), *limits.cpus, kHint);
  if (limits.memory_mb) Positive(errors, JoinKey(path, "memory_mb"), *limits.memory_mb, kHint);
  if (limits.gpus && !skip_gpus) Positive(errors, JoinKey(path, "gpus"), *limits.gpus, kHint);
  if (limits.running_jobs) Positive(errors, JoinKey(path, "running_jobs"), *limits.running_jobs, kHint);
}

void ValidatePolicyEngineKeys(const model::QueuePolicy& p, const std::string& policy_path, Errors& errors) {
  if (p.priority_weights) {
    const std::string path = JoinKey(policy_path, "priority_weights");
    const model::PriorityWeights& w = *p.priority_weights;
    // Priorities are sums of rounded weights in 64-bit integers; the bound
    // keeps every sum far from overflow and is beyond any useful weight.
    constexpr double kMaxWeight = 1e9;
    const auto weight = [&](std::string_view key, double value) {
      const std::string weight_path = JoinKey(path, key);
      if (value > kMaxWeight) {
        errors.Add(weight_path, "must be at most 1000000000");
      } else {
        NonNegative(errors, weight_path, value, "0 turns the factor off");
      }
    };
    weight("fairshare", w.fairshare);
    weight("age", w.age);
    weight("tier", w.tier);
    weight("size", w.size);
    Positive(errors, JoinKey(path, "max_age_hours"), w.max_age_hours);
  }
  // gpu_quota_per_project (the seed's key, which allows 0) and
  // project_quota.gpus are one limit: the loader copies either into the
  // other, so they may both be set only when they agree.
  const std::string project_quota_path = JoinKey(policy_path, "project_quota");
  const bool gpus_from_seed_key = p.gpu_quota_per_project.has_value();
  if (gpus_from_seed_key && p.project_quota.gpus && *p.project_quota.gpus != *p.gpu_quota_per_project) {
    errors.Add(JoinKey(project_quota_path, "gpus"),
               "is " + std::to_string(*p.project_quota.gpus) + " but gpu_quota_per_project is " +
                   std::to_string(*p.gpu_quota_per_project) +
                   "; both are the GPUs one project may hold in this queue, so give one of them");
  }
  ValidateLimits(p.project_quota, project_quota_path, errors, gpus_from_seed_key);
  ValidateLimits(p.user_quota, JoinKey(policy_path, "user_quota"), errors);
  NonNegative(errors, JoinKey(policy_path, "preempt_grace_seconds"), p.preempt_grace_seconds,
              "0 sends SIGKILL at once");
  NonNegative(errors, JoinKey(policy_path, "max_retries"), p.max_retries, "0 never retries a failed job");
  NonNegative(errors, JoinKey(policy_path, "retry_backoff_seconds"), p.retry_backoff_seconds, "0 retries at once");
  NonNegative(errors, JoinKey(policy_path, "max_node_fail_requeues"), p.max_node_fail_requeues,
              "0 ends a job whose node failed as NODE_FAIL");
}

void ValidateGpus(const model::NodeSpec& node, const std::string& path, Errors& errors) {
  for (size_t j = 0; j < node.gpus.size(); ++j) {
    const model::GpuDevice& gpu = node.gpus[j];
    const std::string gpu_path = JoinIndex(JoinKey(path, "gpus"), j);
    if (gpu.index != static_cast<int>(j)) {
      errors.Add(JoinKey(gpu_path, "index"), "must be " + std::to_string(j) + "; devices are numbered 0..n-1 in order");
    }
    if (gpu.model.empty()) errors.Add(JoinKey(gpu_path, "model"), "must not be empty; name the GPU model, e.g. h100");
    Positive(errors, JoinKey(gpu_path, "memory_gb"), gpu.memory_gb, "give the memory of one device in GB");
  }
}

void ValidateCluster(const model::ClusterSpec& cluster, NameRegistry& queues, Errors& errors) {
  NameRegistry pools("pool", "pools");
  if (cluster.pools.empty()) errors.Add("pools", "must list at least one pool");
  for (size_t i = 0; i < cluster.pools.size(); ++i) {
    const auto& pool = cluster.pools[i];
    const std::string path = JoinIndex("pools", i);
    pools.Add(errors, JoinKey(path, "name"), pool.name, IsPlainName(pool.name, ""), kPlainNameRule);
    NonNegative(errors, JoinKey(path, "reservation_depth"), pool.reservation_depth,
                "0 gives every blocked job a reservation");
    if (!(pool.planned_share > 0 && pool.planned_share <= 1)) {
      errors.Add(JoinKey(path, "planned_share"),
                 "must be > 0 and <= 1: the share of a predicted run time a reservation plans with (default 0.2)");
    }
    static const std::vector<std::string> kPriced = {"cpu_core_seconds", "cpu_seconds_used", "memory_mb_seconds",
                                                     "gpu_seconds", "instance_seconds"};
    for (const auto& [metric, price] : pool.prices) {
      const std::string price_path = JoinKey(JoinKey(path, "prices"), metric);
      if (std::find(kPriced.begin(), kPriced.end(), metric) == kPriced.end()) {
        std::string names;
        for (const auto& n : kPriced) names += (names.empty() ? "" : ", ") + n;
        errors.Add(price_path, "unknown ledger metric; expected one of: " + names);
      }
      NonNegative(errors, price_path, price, "a price per hour of the metric");
    }
    if (pool.target_share_percent < 0 || pool.target_share_percent > 100) {
      errors.Add(JoinKey(path, "target_share_percent"), "must be between 0 and 100 (percent of the platform's nodes)");
    }
    const std::string check_path = JoinKey(path, "health_check");
    Positive(errors, JoinKey(check_path, "interval_seconds"), pool.health_check_interval_seconds);
    Positive(errors, JoinKey(check_path, "timeout_seconds"), pool.health_check_timeout_seconds);
  }

  NameRegistry nodes("node", "nodes");
  for (size_t i = 0; i < cluster.nodes.size(); ++i) {
    const auto& node = cluster.nodes[i];
    const std::string path = JoinIndex("nodes", i);
    nodes.Add(errors, JoinKey(path, "name"), node.name, IsNodeName(node.name), kNodeNameRule);
    Positive(errors, JoinKey(path, "cpus"), node.cpus, "the number of CPUs jobs may use on this node");
    Positive(errors, JoinKey(path, "memory_mb"), node.memory_mb, "the memory jobs may use on this node, in MB");
    ValidateGpus(node, path, errors);
  }

  // Each node in exactly one pool: the first pool that lists it owns it.
  std::map<std::string, std::string> owner;  // node name -> pool name
  for (size_t i = 0; i < cluster.pools.size(); ++i) {
    const auto& pool = cluster.pools[i];
    const std::string nodes_path = JoinKey(JoinIndex("pools", i), "nodes");
    for (size_t j = 0; j < pool.nodes.size(); ++j) {
      const std::string& name = pool.nodes[j];
      const std::string path = JoinIndex(nodes_path, j);
      if (name.empty()) {
        errors.Add(path, "must not be empty; list node names");
        continue;
      }
      if (!nodes.CheckReference(errors, path, name)) continue;
      const auto [it, inserted] = owner.emplace(name, pool.name);
      if (!inserted) {
        errors.Add(path, "node '" + name + "' is already in pool '" + it->second +
                             "'; a node belongs to exactly one pool, so list it once");
      }
    }
  }
  for (size_t i = 0; i < cluster.nodes.size(); ++i) {
    const auto& node = cluster.nodes[i];
    if (node.name.empty()) continue;
    const std::string path = JoinIndex("nodes", i);
    const auto it = owner.find(node.name);
    if (it == owner.end()) {
      // Only the first node of a duplicated name is the one pools refer to.
      if (cluster.FindNode(node.name) == &node) {
        errors.Add(path, "node '" + node.name + "' is in no pool; add it to the nodes of one pool (" +
                             JoinNames(pools.names()) + ")");
      }
      continue;
    }
    if (!node.pool.empty() && node.pool != it->second) {
      errors.Add(JoinKey(path, "pool"), "is '" + node.pool + "' but pool '" + it->second + "' lists the node");
    }
    const model::PoolSpec* pool = cluster.FindPool(it->second);
    if (pool != nullptr && pool->kind == model::PoolKind::kGpu && node.gpus.empty()) {
      errors.Add(JoinKey(path, "gpus"), "node '" + node.name + "' is in GPU pool '" + pool->name +
                                            "' but declares no GPUs; add gpus: {count, model, memory_gb}");
    }
  }

  // One backend serves a pool (docs/adr/0006-pool-backend-port.md): its
  // nodes are all the daemon's, all agents', or none (the backend places).
  for (size_t i = 0; i < cluster.pools.size(); ++i) {
    const auto& pool = cluster.pools[i];
    const std::string path = JoinIndex("pools", i);
    const std::string backend_path = JoinKey(path, "backend");
    if (!IsPlainName(pool.backend, "")) {
      errors.Add(backend_path, "invalid backend name '" + pool.backend + "'; " + std::string(kPlainNameRule) +
                                   " (built in: local, agent)");
      continue;
    }
    std::vector<std::string> agent_nodes, local_nodes;
    for (const auto& name : pool.nodes) {
      const model::NodeSpec* node = cluster.FindNode(name);
      if (node) (node->agent ? agent_nodes : local_nodes).push_back(name);
    }
    if (pool.PlacedByBackend()) {
      if (!pool.nodes.empty()) {
        errors.Add(JoinKey(path, "nodes"), "pool '" + pool.name + "' is served by backend '" + pool.backend +
                                               "', which places its jobs itself: it has no nodes here; use nodes: []");
      }
    } else if (pool.backend == model::kLocalBackend && !agent_nodes.empty()) {
      errors.Add(JoinKey(path, "nodes"),
                 "pool '" + pool.name + "' has local nodes (" + JoinNames(local_nodes) + ") and agent nodes (" +
                     JoinNames(agent_nodes) +
                     "); one backend serves a pool, so put the agent nodes in a pool of their own" +
                     (local_nodes.empty() ? " or set backend: agent" : ""));
    } else if (pool.backend == model::kAgentBackend && !local_nodes.empty()) {
      errors.Add(JoinKey(path, "nodes"), "pool '" + pool.name + "' has backend: agent but nodes without agent: true (" +
                                             JoinNames(local_nodes) +
                                             "); mark them agent: true or move them to a local pool");
    }
  }

  if (cluster.queues.empty()) errors.Add("queues", "must list at least one queue");
  for (size_t i = 0; i < cluster.queues.size(); ++i) {
    const auto& queue = cluster.queues[i];
    const std::string path = JoinIndex("queues", i);
    queues.Add(errors, JoinKey(path, "name"), queue.name, IsPlainName(queue.name, ""), kPlainNameRule);
    pools.CheckReference(errors, JoinKey(path, "pool"), queue.pool);
    for (size_t j = 0; j < queue.workload_kinds.size(); ++j) {
      for (size_t k = 0; k < j; ++k) {
        if (queue.workload_kinds[k] == queue.workload_kinds[j]) {
          // Built piecewise: "'" + std::string(...) trips GCC 12's -Wrestrict (PR 105329).
          std::string message = "'";
          message += model::ToString(queue.workload_kinds[j]);
          message += "' is listed twice";
          errors.Add(JoinIndex(JoinKey(path, "workload_kinds"), j), message);
          break;
        }
      }
    }
    const model::QueuePolicy& p = queue.policy;
    const std::string policy_path = JoinKey(path, "policy");
    static const std::vector<std::string> kPolicyTypes = {"fifo", "fairshare", "priority-with-quota", "elastic"};
    if (std::find(kPolicyTypes.begin(), kPolicyTypes.end(), p.type) == kPolicyTypes.end()) {
      errors.Add(JoinKey(policy_path, "type"), "unknown policy type '" + p.type + "'; expected one of: " +
                                                   JoinNames(kPolicyTypes) + DidYouMean(p.type, kPolicyTypes));
    }
    if (p.max_walltime_hours) Positive(errors, JoinKey(policy_path, "max_walltime_hours"), *p.max_walltime_hours);
    if (p.default_walltime_hours) {
      const std::string default_path = JoinKey(policy_path, "default_walltime_hours");
      if (*p.default_walltime_hours <= 0) {
        errors.Add(default_path, "must be > 0");
      } else if (p.max_walltime_hours && *p.max_walltime_hours > 0 &&
                 *p.default_walltime_hours > *p.max_walltime_hours) {
        char max_text[32];
        std::snprintf(max_text, sizeof max_text, "%g", *p.max_walltime_hours);
        errors.Add(default_path,
                   std::string("must be <= max_walltime_hours (") + max_text + "); lower it or raise the maximum");
      }
    }
    if (p.default_memory_mb_per_cpu) {
      Positive(errors, JoinKey(policy_path, "default_memory_mb_per_cpu"), *p.default_memory_mb_per_cpu);
    }
    if (p.gpu_quota_per_project) {
      NonNegative(errors, JoinKey(policy_path, "gpu_quota_per_project"), *p.gpu_quota_per_project);
    }
    if (p.scale_in_idle_seconds) {
      Positive(errors, JoinKey(policy_path, "scale_in_idle_seconds"), *p.scale_in_idle_seconds);
    }
    if (p.max_concurrency) Positive(errors, JoinKey(policy_path, "max_concurrency"), *p.max_concurrency);
    ValidatePolicyEngineKeys(p, policy_path, errors);
  }

  NameRegistry rules("routing rule", "rules");
  for (size_t i = 0; i < cluster.routing_rules.size(); ++i) {
    const auto& rule = cluster.routing_rules[i];
    const std::string path = JoinIndex("routing.rules", i);
    rules.Add(errors, JoinKey(path, "name"), rule.name, IsPlainName(rule.name, ""), kPlainNameRule);
    const std::string match_path = JoinKey(path, "match");
    if (rule.min_gpus) NonNegative(errors, JoinKey(match_path, "min_gpus"), *rule.min_gpus);
    if (rule.max_gpus) NonNegative(errors, JoinKey(match_path, "max_gpus"), *rule.max_gpus);
    if (rule.min_gpus && rule.max_gpus && *rule.min_gpus >= 0 && *rule.max_gpus >= 0 &&
        *rule.min_gpus > *rule.max_gpus) {
      errors.Add(JoinKey(match_path, "max_gpus"),
                 "must be >= min_gpus (" + std::to_string(*rule.min_gpus) + "); no job could match this rule");
    }
    for (const auto& [feature, value] : rule.features) {
      if (feature.empty()) errors.Add(JoinKey(match_path, "features"), "feature names must not be empty");
    }
    const std::string queue_path = JoinKey(path, "queue");
    if (!queues.CheckReference(errors, queue_path, rule.queue) || !rule.kind) continue;
    const model::QueueSpec* queue = cluster.FindQueue(rule.queue);
    if (queue != nullptr && !queue->workload_kinds.empty() &&
        std::find(queue->workload_kinds.begin(), queue->workload_kinds.end(), *rule.kind) ==
            queue->workload_kinds.end()) {
      std::vector<std::string> served;
      for (auto kind : queue->workload_kinds) {
        const std::string name(model::ToString(kind));
        if (std::find(served.begin(), served.end(), name) == served.end()) served.push_back(name);
      }
      errors.Add(queue_path, "queue '" + rule.queue + "' does not serve workload kind '" +
                                 std::string(model::ToString(*rule.kind)) + "' (its workload_kinds: " +
                                 JoinNames(served) + "); route to a queue that lists it, or add it there");
    }
  }
}

// Reports names listed twice in one list of references.
void NoRepeats(const std::vector<std::string>& names, const std::string& path, Errors& errors) {
  for (size_t j = 0; j < names.size(); ++j) {
    if (std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(j), names[j]) !=
        names.begin() + static_cast<std::ptrdiff_t>(j)) {
      errors.Add(JoinIndex(path, j), "'" + names[j] + "' is listed twice");
    }
  }
}

void ValidatePeople(const Config& config, const NameRegistry& queues, Errors& errors) {
  NameRegistry projects("project", "projects");
  for (size_t i = 0; i < config.projects.size(); ++i) {
    const auto& project = config.projects[i];
    const std::string path = JoinIndex("projects", i);
    projects.Add(errors, JoinKey(path, "name"), project.name, IsPlainName(project.name, ""), kPlainNameRule);
    Positive(errors, JoinKey(path, "shares"), project.shares,
             "a project's share of the cluster relative to the others");
    // Users may be created through the API later, so the names are not
    // checked against the users section.
    if (project.budget.gpu_hours) {
      Positive(errors, JoinKey(JoinKey(path, "budget"), "gpu_hours"), *project.budget.gpu_hours,
               "GPU card-hours per period; leave the key out for no budget");
    }
    if (project.budget.cpu_hours) {
      Positive(errors, JoinKey(JoinKey(path, "budget"), "cpu_hours"), *project.budget.cpu_hours,
               "CPU core-hours per period; leave the key out for no budget");
    }
    const std::string user_shares_path = JoinKey(path, "user_shares");
    for (const auto& [user, shares] : project.user_shares) {
      if (user.empty()) {
        errors.Add(user_shares_path, "user names must not be empty");
        continue;
      }
      Positive(errors, JoinKey(user_shares_path, user), shares, "the user's share within the project");
    }
    ValidateLimits(project.quota, JoinKey(path, "quota"), errors);
    for (size_t j = 0; j < project.storage_paths.size(); ++j) {
      const std::string& dir = project.storage_paths[j];
      if (dir.empty() || dir.front() != '/' || dir.find("/../") != std::string::npos ||
          (dir.size() >= 3 && dir.compare(dir.size() - 3, 3, "/..") == 0)) {
        std::string message = "'";
        message += dir;
        message += "' is not an absolute path without '..'; write the directory in full, e.g. /data/";
        message += project.name;
        errors.Add(JoinIndex(JoinKey(path, "storage_paths"), j), message);
      }
    }
  }

  NameRegistry users("user", "users");
  static const std::vector<std::string> kRoles = {"platform-admin", "queue-admin", "user"};
  for (size_t i = 0; i < config.users.size(); ++i) {
    const auto& user = config.users[i];
    const std::string path = JoinIndex("users", i);
    users.Add(errors, JoinKey(path, "name"), user.name, IsPlainName(user.name, "."), kUserNameRule);
    const bool known_role = std::find(kRoles.begin(), kRoles.end(), user.role) != kRoles.end();
    if (!known_role) {
      errors.Add(JoinKey(path, "role"), "unknown role '" + user.role + "'; expected one of: " + JoinNames(kRoles) +
                                            DidYouMean(user.role, kRoles));
    }
    const std::string projects_path = JoinKey(path, "projects");
    for (size_t j = 0; j < user.projects.size(); ++j) {
      projects.CheckReference(errors, JoinIndex(projects_path, j), user.projects[j]);
    }
    NoRepeats(user.projects, projects_path, errors);
    const std::string queues_path = JoinKey(path, "queues");
    if (user.role == "queue-admin") {
      if (user.queues.empty()) {
        errors.Add(queues_path, "a queue-admin needs the queues it administers; list them, e.g. queues: [" +
                                    (queues.names().empty() ? std::string("hpc-precision") : queues.names().front()) +
                                    "]");
      }
    } else if (!user.queues.empty() && known_role) {
      errors.Add(queues_path, "only a queue-admin has queues; set role: queue-admin or remove queues");
    }
    for (size_t j = 0; j < user.queues.size(); ++j) {
      queues.CheckReference(errors, JoinIndex(queues_path, j), user.queues[j]);
    }
    NoRepeats(user.queues, queues_path, errors);
    if (!user.unix_user.empty() && !IsUnixUserName(user.unix_user)) {
      errors.Add(JoinKey(path, "unix_user"), std::string(kUnixUserRule) + "; got '" + user.unix_user + "'");
    }
  }
}

}  // namespace

std::vector<ConfigError> ValidateConfig(const Config& config) {
  Errors errors;
  ValidateServer(config.server, errors);
  ValidateAccess(config.access, errors);
  ValidateStore(config.store, errors);
  ValidateReplica(config, errors);
  ValidateHealth(config.health, errors);
  ValidateExecutor(config.executor, config.store.job_retention_days, errors);
  ValidateUserAccounts(config, errors);
  ValidateScheduler(config.cluster, errors);
  NameRegistry queues("queue", "queues");
  ValidateCluster(config.cluster, queues, errors);
  ValidatePeople(config, queues, errors);
  ValidateAlerts(config.alerts, queues, errors);
  ValidateSandboxes(config, queues, errors);
  ValidateBaseline(config.baseline, errors);
  internal::ValidateStorage(config, errors);
  internal::ValidateTargetShares(config.cluster, errors);
  return errors.Take();
}

std::vector<ConfigError> ValidateImage(const ImageSpec& image) {
  Errors errors;
  if (!IsPlainName(image.name, "")) {
    errors.Add("name", "invalid image name '" + image.name + "'; " + std::string(kPlainNameRule));
  }
  ValidateImageInto(image, "", errors);
  return errors.Take();
}

}  // namespace unisched::config
