// The `storage` section of the config (docs/config.md, "storage"; rules in
// validate_storage.cc): its shape read into StorageSettings.

#include <string>

#include "config/parse.h"
#include "config/yaml_reader.h"

namespace unisched::config::internal {
namespace {

SharedFileSystem ParseSharedFileSystem(const YAML::Node& node, const std::string& path, Errors& errors) {
  SharedFileSystem fs;
  MapReader m(node, path, {"name", "path", "mount", "read_only", "pools", "project_dirs", "charge_storage", "tier"},
              errors);
  m.Require("name");
  m.Require("path", "the directory on every node of its pools, e.g. /srv/lustre/unisched");
  m.Read("name", fs.name);
  m.Read("path", fs.path);
  m.Read("mount", fs.mount);
  m.Read("read_only", fs.read_only);
  m.Read("pools", fs.pools);
  m.Read("project_dirs", fs.project_dirs);
  m.Read("charge_storage", fs.charge_storage);
  m.Read("tier", fs.tier);
  return fs;
}

ObjectStoreAccess ParseObjectStoreAccess(const YAML::Node& node, const std::string& path, Errors& errors) {
  ObjectStoreAccess access;
  MapReader m(node, path, {"projects", "bucket", "prefix", "read_only"}, errors);
  m.Require("projects", "the projects that may use it, or [\"*\"] for every project");
  m.Require("bucket");
  m.Read("projects", access.projects);
  m.Read("bucket", access.bucket);
  m.Read("prefix", access.prefix);
  m.Read("read_only", access.read_only);
  return access;
}

ObjectStore ParseObjectStore(const YAML::Node& node, const std::string& path, Errors& errors) {
  ObjectStore store;
  MapReader m(node, path, {"name", "endpoint", "region", "path_style", "credentials", "access", "tier"}, errors);
  m.Require("name");
  m.Require("endpoint", "the service's URL, e.g. https://s3.eu-west-1.amazonaws.com or http://rgw.example:7480");
  m.Require("credentials", "{project: P, access_key: SECRET-NAME, secret_key: SECRET-NAME}");
  m.Read("name", store.name);
  m.Read("endpoint", store.endpoint);
  m.Read("region", store.region);
  m.Read("path_style", store.path_style);
  m.Read("tier", store.tier);
  if (m.Has("credentials")) {
    MapReader c(m.Get("credentials"), m.PathOf("credentials"), {"project", "access_key", "secret_key"}, errors);
    c.Require("project", "the project whose secrets hold the keys");
    c.Require("access_key", "the name of the secret holding the access key id");
    c.Require("secret_key", "the name of the secret holding the secret access key");
    c.Read("project", store.credentials_project);
    c.Read("access_key", store.access_key_secret);
    c.Read("secret_key", store.secret_key_secret);
  }
  store.access = ParseList<ObjectStoreAccess>(m, "access", errors, ParseObjectStoreAccess);
  return store;
}

LifecycleRule ParseLifecycleRule(const YAML::Node& node, const std::string& path, Errors& errors) {
  LifecycleRule rule;
  MapReader m(node, path, {"name", "shared", "projects", "archive_to", "objects", "older_than_days"}, errors);
  m.Require("name");
  m.Require("older_than_days", "the age in days (by modification time) from which the rule applies");
  m.Read("name", rule.name);
  m.Read("shared", rule.shared);
  m.Read("projects", rule.projects);
  m.Read("archive_to", rule.archive_to);
  m.Read("objects", rule.objects);
  m.Read("older_than_days", rule.older_than_days);
  return rule;
}

StorageTier ParseStorageTier(const YAML::Node& node, const std::string& path, Errors& errors) {
  StorageTier tier;
  MapReader m(node, path, {"name", "price_per_gb_hour"}, errors);
  m.Require("name");
  m.Require("price_per_gb_hour", "the price of one GB (10^9 bytes) kept for one hour, e.g. 0.00005");
  m.Read("name", tier.name);
  m.Read("price_per_gb_hour", tier.price_per_gb_hour);
  return tier;
}

}  // namespace

void ParseStorage(const YAML::Node& node, Errors& errors, StorageSettings& out) {
  MapReader m(node, "storage",
              {"shared", "object_stores", "lifecycle", "lifecycle_interval_minutes", "tiers", "workflow_dirs"}, errors);
  out.shared = ParseList<SharedFileSystem>(m, "shared", errors, ParseSharedFileSystem);
  out.object_stores = ParseList<ObjectStore>(m, "object_stores", errors, ParseObjectStore);
  out.lifecycle = ParseList<LifecycleRule>(m, "lifecycle", errors, ParseLifecycleRule);
  m.Read("lifecycle_interval_minutes", out.lifecycle_interval_minutes);
  out.tiers = ParseList<StorageTier>(m, "tiers", errors, ParseStorageTier);
  m.Read("workflow_dirs", out.workflow_dirs);
}

}  // namespace unisched::config::internal
