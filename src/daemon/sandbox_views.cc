// JSON views of sandboxes and images (sandbox_views.h).
// Apart from the manager, whose state they show.

#include "daemon/sandbox_views.h"

#include <vector>

namespace unisched::daemon {

using nlohmann::json;

json SandboxView(const Sandbox& s) {
  json view = {
      {"id", SandboxName(s.id)},
      {"state", s.state},
      {"image", s.image + ":" + s.image_version},
      {"image_version", s.image_version},
      {"queue", s.queue},
      {"pool", s.pool},
      {"node", s.node},
      {"project", s.project},
      {"user", s.user},
      {"limits",
       {{"cpus", s.limits.cpus}, {"memory_mb", s.limits.memory_mb}, {"timeout_seconds", s.limits.timeout_seconds}}},
      {"idle_timeout_seconds", s.idle_timeout_seconds},
      {"created_at", FormatRfc3339(s.created_at)},
      {"ended_at", s.ended_at ? json(FormatRfc3339(*s.ended_at)) : json(nullptr)},
      {"execs", s.execs},
      {"warm_start", s.warm_start}};
  if (!s.end_reason.empty()) view["end_reason"] = s.end_reason;
  view["uid"] = s.uid;
  view["instance"] = s.instance_name;  // its cgroups and work directory are named after it
  return view;
}

store::SandboxRow SandboxRecord(const Sandbox& s) {
  json record = SandboxView(s);
  if (s.instance) {
    record["work_dir"] = s.instance->work_dir();
  }
  return {s.id, s.state, record.dump(), s.created_at, s.ended_at};
}

Result<json> StoredSandboxView(const store::SandboxRow& row) {
  json record = json::parse(row.record, nullptr, false);
  if (!record.is_object()) return Error::Internal("sandbox record unreadable");
  record.erase("work_dir");  // the host path is the daemon's business
  return record;
}

std::optional<StoredSandbox> SandboxOfRecord(const store::SandboxRow& row) {
  json record = json::parse(row.record, nullptr, false);
  if (!record.is_object()) return std::nullopt;
  auto s = std::make_shared<Sandbox>();
  s->id = row.id;
  s->user = record.value("user", "");
  s->project = record.value("project", "");
  s->queue = record.value("queue", "");
  s->pool = record.value("pool", "");
  s->node = record.value("node", "");
  s->image = record.value("image", "");
  s->image_version = record.value("image_version", "");
  s->created_at = row.created_at;
  s->execs = record.value("execs", int64_t{0});
  s->uid = record.value("uid", int64_t{0});
  const json limits = record.value("limits", json::object());
  s->limits = {limits.value("cpus", int64_t{1}), limits.value("memory_mb", int64_t{0}),
               limits.value("timeout_seconds", int64_t{0})};
  s->instance_name = record.value("instance", "");
  return StoredSandbox{std::move(s), record.value("work_dir", "")};
}

json ImageView(const std::string& name, const ImageCatalog& images, const WarmPool& warm) {
  json versions = json::array();
  for (const auto& [version, v] : images.Versions(name)) {
    json entry = ImageSpecJson(v.rootfs, v.binds);
    entry["version"] = version;
    entry["created_at"] = FormatRfc3339(v.created_at);
    entry["created_by"] = v.created_by;
    versions.push_back(entry);
  }
  const std::vector<std::string>& stack = images.Stack(name);
  return {{"name", name},
          {"current_version", images.Current(name).value_or("")},
          {"previous_versions",
           stack.size() > 1 ? json(std::vector<std::string>(stack.begin(), stack.end() - 1)) : json::array()},
          {"versions", versions},
          {"warm", warm.Target(name)},
          {"warm_ready", warm.Ready(name)}};
}

}  // namespace unisched::daemon
