// Storage and target-share rules: see config/validate_storage.h.

#include "config/validate_storage.h"

#include <cmath>
#include <map>
#include <string>

#include "config/validate_rules.h"

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

void ValidateStorage(const Config& config, Errors& errors) {
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
