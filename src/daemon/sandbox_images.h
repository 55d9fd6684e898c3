#pragma once
// The image catalog (docs/sandboxes.md, Images and rollback): versions, current stacks, registration, rollback.
// Apart from the manager: the rules of image versions in one class, whoever starts instances of them.

// Not synchronized: the manager holds its lock around every call.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/config/config.h"
#include "unisched/store/store.h"

namespace unisched::daemon {

using ImageBinds = std::vector<std::pair<std::string, std::string>>;  // host path, path inside

// One version of an image.
struct ImageVersion {
  std::string name, version, rootfs, created_by;
  ImageBinds binds;
  Timestamp created_at{};
};

// "name:version".
std::string ImageKey(const std::string& name, const std::string& version);
// The definition of a version as stored and shown: {"rootfs", "binds"}.
nlohmann::json ImageSpecJson(const std::string& rootfs, const ImageBinds& binds);
// "HOST:INSIDE" entries, split at the first colon.
ImageBinds SplitBinds(const std::vector<std::string>& binds);
// The config's images, after the built-in `host` (version 1, the host
// profile) unless the config names an image `host` itself.
std::vector<config::ImageSpec> ConfiguredImages(const config::Config& config);
// A rootfs of POST /v1/images: empty (the host profile) or a directory on
// the daemon's host.
Status CheckRootfs(const std::string& rootfs);

class ImageCatalog {
 public:
  // At start: each configured version new to the store is stored and becomes
  // its image's current one; one the store knows keeps its stored definition
  // and the stacks are left as they are (a rollback survives a restart).
  static Status RegisterConfigured(store::Store& store, const std::vector<config::ImageSpec>& configured,
                                   Timestamp now);
  // Every version and the stacks of current versions, from the store.
  void Load(const store::Store& store);

  // `name` (its current version) or `name:version`; invalid_value (field
  // `image`) when there is no such image or version.
  Result<ImageVersion> Resolve(const std::string& reference) const;
  // The current version of `name`, if it has one.
  std::optional<std::string> Current(const std::string& name) const;
  std::vector<std::string> Names() const;
  // Its versions, by version; its stack of current versions, current last.
  // Empty for an unknown image.
  const std::map<std::string, ImageVersion>& Versions(const std::string& name) const;
  const std::vector<std::string>& Stack(const std::string& name) const;

  // Registering `name:version`: image_exists when it exists (versions are
  // immutable).
  Status CheckNew(const std::string& name, const std::string& version) const;
  // A version, as a registration by `actor` makes it.
  static ImageVersion VersionOf(const config::ImageSpec& image, const std::string& actor, Timestamp now);
  static store::ImageVersionRow RowOf(const ImageVersion& version);
  // A registration committed: the version is added and becomes current.
  void Push(ImageVersion version);

  // Rolling back `name`: not_found, or no_previous_version when one version
  // is left on its stack.
  Status CheckRollback(const std::string& name) const;
  // A rollback committed: the previous version is current again.
  void Pop(const std::string& name);

 private:
  std::map<std::string, std::map<std::string, ImageVersion>> versions_;  // name -> version -> image
  std::map<std::string, std::vector<std::string>> stacks_;               // name -> current versions, last current
};

}  // namespace unisched::daemon
