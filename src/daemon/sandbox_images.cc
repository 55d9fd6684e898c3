// ImageCatalog (sandbox_images.h): image versions, current stacks and rollback.
// Apart from the manager, which starts instances of them.

#include "daemon/sandbox_images.h"

#include <sys/stat.h>

#include <algorithm>
#include <set>

namespace unisched::daemon {
namespace {

using nlohmann::json;

constexpr char kHostImage[] = "host";

}  // namespace

std::string ImageKey(const std::string& name, const std::string& version) {
  return name + ":" + version;
}

json ImageSpecJson(const std::string& rootfs, const ImageBinds& binds) {
  json b = json::array();
  for (const auto& [from, to] : binds) b.push_back(from + ":" + to);
  return {{"rootfs", rootfs}, {"binds", b}};
}

ImageBinds SplitBinds(const std::vector<std::string>& binds) {
  ImageBinds out;
  for (const std::string& b : binds) {
    const size_t colon = b.find(':');
    out.emplace_back(b.substr(0, colon), b.substr(colon + 1));
  }
  return out;
}

std::vector<config::ImageSpec> ConfiguredImages(const config::Config& config) {
  std::vector<config::ImageSpec> configured = config.images;
  const bool host_configured = std::any_of(configured.begin(), configured.end(),
                                           [](const config::ImageSpec& i) { return i.name == kHostImage; });
  if (!host_configured) {
    config::ImageSpec host;
    host.name = kHostImage;
    configured.insert(configured.begin(), host);
  }
  return configured;
}

Status CheckRootfs(const std::string& rootfs) {
  if (rootfs.empty()) return Status::Ok();
  struct stat st {};
  if (::stat(rootfs.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Error::Unprocessable("invalid_value", "rootfs '" + rootfs + "' is not a directory on the daemon's host",
                                "rootfs");
  }
  return Status::Ok();
}

Status ImageCatalog::RegisterConfigured(store::Store& store, const std::vector<config::ImageSpec>& configured,
                                        Timestamp now) {
  std::set<std::string> known;
  for (const auto& row : store.ListImageVersions()) known.insert(ImageKey(row.name, row.version));
  return store.WriteSync([&](store::Transaction& t) -> Status {
    for (const auto& image : configured) {
      if (known.count(ImageKey(image.name, image.version))) continue;
      store::ImageVersionRow row{image.name, image.version, ImageSpecJson(image.rootfs, SplitBinds(image.binds)).dump(),
                                 "config", now};
      if (Status s = t.PutImageVersion(row); !s) return s;
      if (Status s = t.PushImageCurrent(image.name, image.version, now); !s) return s;
    }
    return Status::Ok();
  });
}

void ImageCatalog::Load(const store::Store& store) {
  for (const auto& row : store.ListImageVersions()) {
    ImageVersion v;
    v.name = row.name;
    v.version = row.version;
    v.created_by = row.created_by;
    v.created_at = row.created_at;
    const json spec = json::parse(row.spec, nullptr, false);
    if (spec.is_object()) {
      v.rootfs = spec.value("rootfs", "");
      v.binds = SplitBinds(spec.value("binds", std::vector<std::string>{}));
    }
    versions_[row.name][row.version] = std::move(v);
  }
  stacks_ = store.ImageCurrentStacks();
}

Result<ImageVersion> ImageCatalog::Resolve(const std::string& reference) const {
  const size_t colon = reference.find(':');
  const std::string name = reference.substr(0, colon);
  auto it = versions_.find(name);
  if (it == versions_.end()) {
    std::string names;
    for (const auto& [n, v] : versions_) names += (names.empty() ? "" : ", ") + n;
    return Error::Unprocessable("invalid_value", "unknown image '" + name + "'; images: " + names, "image");
  }
  std::string version;
  if (colon != std::string::npos) {
    version = reference.substr(colon + 1);
  } else {
    auto current = Current(name);
    if (!current) return Error::Unprocessable("invalid_value", "image '" + name + "' has no current version", "image");
    version = *current;
  }
  auto v = it->second.find(version);
  if (v == it->second.end()) {
    std::string versions;
    for (const auto& [ver, image] : it->second) versions += (versions.empty() ? "" : ", ") + ver;
    return Error::Unprocessable(
        "invalid_value", "image '" + name + "' has no version '" + version + "'; versions: " + versions, "image");
  }
  return v->second;
}

std::optional<std::string> ImageCatalog::Current(const std::string& name) const {
  auto stack = stacks_.find(name);
  if (stack == stacks_.end() || stack->second.empty()) return std::nullopt;
  return stack->second.back();
}

std::vector<std::string> ImageCatalog::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, versions] : versions_) names.push_back(name);
  return names;
}

const std::map<std::string, ImageVersion>& ImageCatalog::Versions(const std::string& name) const {
  static const std::map<std::string, ImageVersion> kNone;
  auto it = versions_.find(name);
  return it == versions_.end() ? kNone : it->second;
}

const std::vector<std::string>& ImageCatalog::Stack(const std::string& name) const {
  static const std::vector<std::string> kNone;
  auto it = stacks_.find(name);
  return it == stacks_.end() ? kNone : it->second;
}

Status ImageCatalog::CheckNew(const std::string& name, const std::string& version) const {
  auto it = versions_.find(name);
  if (it != versions_.end() && it->second.count(version)) {
    return Error::Conflict(
        "image_exists", "image " + ImageKey(name, version) + " exists; versions are immutable: register a new version");
  }
  return Status::Ok();
}

ImageVersion ImageCatalog::VersionOf(const config::ImageSpec& image, const std::string& actor, Timestamp now) {
  ImageVersion v;
  v.name = image.name;
  v.version = image.version;
  v.rootfs = image.rootfs;
  v.binds = SplitBinds(image.binds);
  v.created_at = now;
  v.created_by = actor;
  return v;
}

store::ImageVersionRow ImageCatalog::RowOf(const ImageVersion& v) {
  return {v.name, v.version, ImageSpecJson(v.rootfs, v.binds).dump(), v.created_by, v.created_at};
}

void ImageCatalog::Push(ImageVersion version) {
  stacks_[version.name].push_back(version.version);
  const std::string name = version.name, number = version.version;
  versions_[name][number] = std::move(version);
}

Status ImageCatalog::CheckRollback(const std::string& name) const {
  if (!versions_.count(name)) return Error::NotFound("no image '" + name + "'");
  if (Stack(name).size() < 2) {
    return Error::Conflict("no_previous_version", "image '" + name + "' has no earlier version to roll back to");
  }
  return Status::Ok();
}

void ImageCatalog::Pop(const std::string& name) {
  auto& stack = stacks_[name];
  if (stack.size() > 1) stack.pop_back();
}

}  // namespace unisched::daemon
