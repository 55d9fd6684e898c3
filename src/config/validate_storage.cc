// Storage and target-share rules: see config/validate_storage.h.

#include "config/validate_storage.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "config/validate_rules.h"
#include "unisched/model/job.h"

namespace unisched::config::internal {
namespace {

// Absolute, normalized (no "." or ".." parts, no trailing or doubled '/'),
// not the root, and free of what a mount option or an env value cannot hold.
bool IsPlainAbsolutePath(const std::string& p) {
  if (p.size() < 2 || p.front() != '/' || p.back() == '/') return false;
  if (p.find("//") != std::string::npos || p.find('\0') != std::string::npos || p.find(',') != std::string::npos) {
    return false;
  }
  for (const std::string part : {"/./", "/../"}) {
    if ((p + "/").find(part) != std::string::npos) return false;
  }
  return true;
}

}  // namespace

// The pools' target shares (capacity planning): where any is set, they make
// the whole platform, 100.
void ValidateTargetShares(const model::ClusterSpec& cluster, Errors& errors) {
  double sum = 0;
  bool any = false;
  for (const auto& pool : cluster.pools) {
    sum += pool.target_share_percent;
    any = any || pool.target_share_percent > 0;
  }
  if (any && std::abs(sum - 100.0) > 0.01) {
    errors.Add("pools", "the pools' target_share_percent add up to " + std::to_string(static_cast<int>(sum)) +
                            "; give every pool its share of the nodes so that they add up to 100");
  }
}

// storage.object_stores: names a stage URL can use, endpoints curl can
// reach, credentials that can name secrets of a project that exists, and
// access rules over projects that exist.
static void ValidateObjectStores(const Config& config, Errors& errors) {
  // config.projects: the cluster's policies are made from it after validation.
  auto known_project = [&config](const std::string& name) {
    for (const auto& p : config.projects) {
      if (p.name == name) return true;
    }
    return false;
  };
  std::map<std::string, std::string> names;
  for (size_t i = 0; i < config.storage.object_stores.size(); ++i) {
    const ObjectStore& store = config.storage.object_stores[i];
    const std::string path = "storage.object_stores[" + std::to_string(i) + "]";
    if (!IsPlainName(store.name, "")) {
      errors.Add(JoinKey(path, "name"), "invalid name '" + store.name + "'; " + std::string(kPlainNameRule));
    } else if (!names.emplace(store.name, path).second) {
      errors.Add(JoinKey(path, "name"),
                 "duplicate object store '" + store.name + "' (first at " + names[store.name] + ")");
    }
    const bool http = store.endpoint.rfind("http://", 0) == 0 || store.endpoint.rfind("https://", 0) == 0;
    const size_t host_at = store.endpoint.find("://") + 3;
    if (!http || store.endpoint.size() <= host_at || store.endpoint.find('/', host_at) != std::string::npos ||
        store.endpoint.find_first_of(" \t\r\n?#") != std::string::npos) {
      errors.Add(JoinKey(path, "endpoint"),
                 "must be scheme://host[:port] without a path, e.g. https://s3.eu-west-1.amazonaws.com");
    }
    if (store.region.empty() || store.region.find_first_of(" /\t\r\n") != std::string::npos) {
      errors.Add(JoinKey(path, "region"), "must be a region name, e.g. us-east-1 (radosgw and MinIO accept any)");
    }
    const std::string credentials = JoinKey(path, "credentials");
    if (!store.credentials_project.empty() && !known_project(store.credentials_project)) {
      errors.Add(JoinKey(credentials, "project"), "unknown project '" + store.credentials_project + "'");
    }
    for (const auto& [key, secret] : {std::pair<const char*, const std::string&>{"access_key", store.access_key_secret},
                                      {"secret_key", store.secret_key_secret}}) {
      if (const std::string why = model::CheckSecretName(secret); !why.empty()) {
        errors.Add(JoinKey(credentials, key), why);
      }
    }
    for (size_t j = 0; j < store.access.size(); ++j) {
      const ObjectStoreAccess& rule = store.access[j];
      const std::string rule_path = JoinKey(path, "access") + "[" + std::to_string(j) + "]";
      if (rule.projects.empty())
        errors.Add(JoinKey(rule_path, "projects"), "lists no project; [\"*\"] is every project");
      for (size_t k = 0; k < rule.projects.size(); ++k) {
        if (rule.projects[k] != "*" && !known_project(rule.projects[k])) {
          errors.Add(JoinKey(rule_path, "projects") + "[" + std::to_string(k) + "]",
                     "unknown project '" + rule.projects[k] + "'");
        }
      }
      if (rule.bucket.size() < 3 || rule.bucket.size() > 63 || rule.bucket.find('/') != std::string::npos) {
        errors.Add(JoinKey(rule_path, "bucket"), "must be a bucket name of 3 to 63 characters without '/'");
      }
      if (!rule.prefix.empty() && rule.prefix.front() == '/') {
        errors.Add(JoinKey(rule_path, "prefix"), "is a key prefix: no leading '/', e.g. genomics/");
      }
    }
  }
}

// storage.lifecycle: each rule one kind, over a file system or a store of
// the config, its ages positive.
static void ValidateLifecycle(const Config& config, Errors& errors) {
  const StorageSettings& storage = config.storage;
  if (storage.lifecycle_interval_minutes < 0) {
    errors.Add("storage.lifecycle_interval_minutes", "must be >= 0 (0: the rules run only when asked)");
  }
  std::map<std::string, std::string> names;
  auto check_url = [&](const std::string& url, const std::string& field) {
    // The message names the key alone: errors.Add puts the path before it.
    auto parsed = model::ParseStoreUrl(url, field.substr(field.find_last_of('.') + 1));
    if (!parsed.ok()) {
      errors.Add(field, parsed.error().message);
    } else if (storage.FindObjectStore(parsed->store) == nullptr) {
      errors.Add(field, "names object store '" + parsed->store + "', which storage.object_stores does not have");
    }
  };
  for (size_t i = 0; i < storage.lifecycle.size(); ++i) {
    const LifecycleRule& rule = storage.lifecycle[i];
    const std::string path = "storage.lifecycle[" + std::to_string(i) + "]";
    if (!IsPlainName(rule.name, "")) {
      errors.Add(JoinKey(path, "name"), "invalid name '" + rule.name + "'; " + std::string(kPlainNameRule));
    } else if (!names.emplace(rule.name, path).second) {
      errors.Add(JoinKey(path, "name"), "duplicate rule '" + rule.name + "' (first at " + names[rule.name] + ")");
    }
    if (!(rule.older_than_days > 0)) errors.Add(JoinKey(path, "older_than_days"), "must be > 0");
    if (rule.shared.empty() == rule.objects.empty()) {
      errors.Add(path,
                 "give either shared (with archive_to: archive a file system's old files) or objects (expire "
                 "a bucket's old objects)");
      continue;
    }
    if (!rule.shared.empty()) {
      const SharedFileSystem* fs = nullptr;
      for (const auto& s : storage.shared) fs = s.name == rule.shared ? &s : fs;
      if (fs == nullptr) errors.Add(JoinKey(path, "shared"), "unknown shared file system '" + rule.shared + "'");
      if (rule.archive_to.empty()) {
        errors.Add(JoinKey(path, "archive_to"), "is required with shared, e.g. s3://STORE/cold-bucket/archive/");
      } else {
        check_url(rule.archive_to, JoinKey(path, "archive_to"));
      }
      for (size_t k = 0; k < rule.projects.size(); ++k) {
        bool known = false;
        for (const auto& p : config.projects) known = known || p.name == rule.projects[k];
        if (!known) {
          errors.Add(JoinKey(path, "projects") + "[" + std::to_string(k) + "]",
                     "unknown project '" + rule.projects[k] + "'");
        }
      }
    } else {
      check_url(rule.objects, JoinKey(path, "objects"));
      if (!rule.archive_to.empty()) errors.Add(JoinKey(path, "archive_to"), "applies to a shared rule only");
      if (!rule.projects.empty()) errors.Add(JoinKey(path, "projects"), "applies to a shared rule only");
    }
  }
}

// storage.tiers: unique names with prices >= 0; every tier a file system or
// an object store names is one of the three built in or listed there.
static void ValidateTiers(const StorageSettings& storage, Errors& errors) {
  std::map<std::string, std::string> names;
  for (size_t i = 0; i < storage.tiers.size(); ++i) {
    const StorageTier& tier = storage.tiers[i];
    const std::string path = "storage.tiers[" + std::to_string(i) + "]";
    if (!IsPlainName(tier.name, "")) {
      errors.Add(JoinKey(path, "name"), "invalid name '" + tier.name + "'; " + std::string(kPlainNameRule));
    } else if (!names.emplace(tier.name, path).second) {
      errors.Add(JoinKey(path, "name"), "duplicate tier '" + tier.name + "' (first at " + names[tier.name] + ")");
    }
    if (!(tier.price_per_gb_hour >= 0) || !std::isfinite(tier.price_per_gb_hour)) {
      errors.Add(JoinKey(path, "price_per_gb_hour"), "must be a finite number >= 0");
    }
  }
  auto check = [&](const std::string& tier, const std::string& field) {
    if (tier == kHotTier || tier == kColdTier || tier == kScratchTier || names.count(tier) != 0) return;
    errors.Add(field, "unknown storage tier '" + tier + "'; use hot, cold or scratch, or list it in storage.tiers");
  };
  for (size_t i = 0; i < storage.shared.size(); ++i) {
    check(storage.shared[i].tier, "storage.shared[" + std::to_string(i) + "].tier");
  }
  for (size_t i = 0; i < storage.object_stores.size(); ++i) {
    check(storage.object_stores[i].tier, "storage.object_stores[" + std::to_string(i) + "].tier");
  }
}

void ValidateStorage(const Config& config, Errors& errors) {
  ValidateObjectStores(config, errors);
  ValidateTiers(config.storage, errors);
  ValidateLifecycle(config, errors);
  if (const std::string& name = config.storage.workflow_dirs; !name.empty()) {
    auto fs = std::find_if(config.storage.shared.begin(), config.storage.shared.end(),
                           [&](const SharedFileSystem& f) { return f.name == name; });
    if (fs == config.storage.shared.end()) {
      errors.Add("storage.workflow_dirs", "names no file system of storage.shared: '" + name + "'");
    } else if (fs->read_only) {
      errors.Add("storage.workflow_dirs", "'" + name + "' is read_only: workflows' tasks must write there");
    }
  }
  std::map<std::string, std::string> names, variables;
  // A job's private mounts are bounded (the supervisor's kMaxBinds).
  if (config.storage.shared.size() > 32) errors.Add("storage.shared", "may list at most 32 file systems");
  for (size_t i = 0; i < config.storage.shared.size(); ++i) {
    const SharedFileSystem& fs = config.storage.shared[i];
    const std::string path = "storage.shared[" + std::to_string(i) + "]";
    if (!IsPlainName(fs.name, "")) {
      errors.Add(JoinKey(path, "name"), "invalid name '" + fs.name + "'; " + std::string(kPlainNameRule));
    } else if (!names.emplace(fs.name, path).second) {
      errors.Add(JoinKey(path, "name"),
                 "duplicate shared file system '" + fs.name + "' (first at " + names[fs.name] + ")");
    } else if (const std::string var = SharedVariable(fs.name); !variables.emplace(var, path).second) {
      errors.Add(JoinKey(path, "name"),
                 "'" + fs.name + "' gives jobs the same variable " + var + " as " + variables[var] + "; rename one");
    }
    if (!IsPlainAbsolutePath(fs.path)) {
      errors.Add(JoinKey(path, "path"),
                 "must be an absolute directory path without '.', '..', ',' or a trailing "
                 "'/', e.g. /srv/lustre/unisched");
    }
    if (!fs.mount.empty() && !IsPlainAbsolutePath(fs.mount)) {
      errors.Add(JoinKey(path, "mount"),
                 "must be an absolute directory path without '.', '..', ',' or a trailing "
                 "'/', e.g. /shared");
    }
    for (size_t j = 0; j < fs.pools.size(); ++j) {
      if (config.cluster.FindPool(fs.pools[j]) == nullptr) {
        errors.Add(JoinKey(path, "pools") + "[" + std::to_string(j) + "]", "unknown pool '" + fs.pools[j] + "'");
      }
    }
  }
}

}  // namespace unisched::config::internal
