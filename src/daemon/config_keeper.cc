// Live config versions, the daemon's side (config_keeper.h).

#include "daemon/config_keeper.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "unisched/config/change.h"
#include "unisched/service/config_impact.h"

namespace unisched::daemon {

namespace {

using nlohmann::json;

std::string JoinErrors(const std::vector<config::ConfigError>& errors) {
  std::string text;
  for (const auto& e : errors) text += (text.empty() ? "" : "; ") + e.ToString();
  return text;
}

json DifferencesJson(const std::vector<config::ConfigDifference>& differences) {
  json out = json::array();
  for (const auto& d : differences) out.push_back({{"path", d.path}, {"before", d.before}, {"after", d.after}});
  return out;
}

// The differences of a change apart from the replica's own sections.
std::vector<config::ConfigDifference> ClusterDifferences(const std::vector<config::ConfigDifference>& all) {
  std::vector<config::ConfigDifference> out;
  for (const auto& d : all) {
    if (config::ClassifyDifference(d).scope != config::ChangeScope::kLocal) out.push_back(d);
  }
  return out;
}

json VersionJson(const store::ConfigVersionRecord& r) {
  return {{"version", r.version},
          {"digest", r.digest},
          {"author", r.author},
          {"comment", r.comment},
          {"created_at", FormatRfc3339(r.created_at)}};
}

}  // namespace

ConfigKeeper::ConfigKeeper(store::Store& store, config::Config local, std::string source)
    : store_(store), local_(std::move(local)), source_(std::move(source)) {}

Result<config::Config> ConfigKeeper::LoadVersion(int64_t number) {
  auto record = store_.ReadConfigVersion(number);
  if (!record.ok()) return record.error();
  if (!record->has_value()) {
    return Error::NotFound("config version " + std::to_string(number) + " does not exist");
  }
  auto loaded = config::LoadConfigText((*record)->text, "config version " + std::to_string(number));
  if (auto* errors = std::get_if<std::vector<config::ConfigError>>(&loaded)) {
    return Error::Unprocessable(
        "invalid_config", "config version " + std::to_string(number) + " no longer loads: " + JoinErrors(*errors));
  }
  config::Config cfg = config::WithLocalSections(std::get<config::Config>(std::move(loaded)), local_);
  cfg.number = number;
  return cfg;
}

Result<ConfigKeeper::InForce> ConfigKeeper::Build(const store::ConfigHead& head) {
  auto current = LoadVersion(head.current);
  if (!current.ok()) return current.error();
  InForce in_force{*current, *current};
  if (head.canary != 0) {
    auto candidate = LoadVersion(head.canary);
    if (!candidate.ok()) return candidate.error();
    auto merged = config::MergeCanary(*current, *candidate, head.canary_queue);
    if (!merged.ok()) return merged.error();
    in_force.effective = std::move(*merged);
  }
  return in_force;
}

Result<config::Config> ConfigKeeper::Adopt(const ConfigAdoption& how) {
  std::lock_guard lock(mu_);
  auto head = store_.ReadConfigHead();
  if (!head.ok()) return head.error();
  if (head->current == 0) {
    // The first start of this cluster: the file is version 1. Two replicas
    // seeding at once: one wins, the other finds its version below.
    store::ConfigChange seed;
    seed.expected_changes = head->changes;
    seed.add = store::ConfigVersionRecord{0, local_.version, local_.text, "seed", "from " + source_, {}};
    seed.head.current = store::kAddedVersion;
    seed.head.changed_by = "seed";
    auto seeded = store_.ChangeConfig(seed);
    if (seeded.ok()) {
      spdlog::info("config: {} stored as version {}", source_, seeded->current);
    } else if (seeded.error().code != "config_changed") {
      return seeded.error();
    }
    head = store_.ReadConfigHead();
    if (!head.ok()) return head.error();
  }
  auto stored = LoadVersion(head->current);
  if (!stored.ok()) return stored.error();
  const auto differences = ClusterDifferences(config::DiffConfigTexts(stored->text, local_.text));
  if (!differences.empty() && how.apply_file) {
    store::ConfigChange apply;
    apply.expected_changes = head->changes;
    apply.add = store::ConfigVersionRecord{0, local_.version, local_.text, "--apply-config", "from " + source_, {}};
    apply.head.current = store::kAddedVersion;
    apply.head.previous = head->current;
    apply.head.changed_by = "--apply-config";
    auto applied = store_.ChangeConfig(apply);
    if (!applied.ok()) return applied.error();
    spdlog::warn("config: {} applied as version {} (--apply-config; it was version {}): {} differences", source_,
                 applied->current, head->current, differences.size());
    head = std::move(applied);
  } else if (!differences.empty() && how.file_given && !how.trust_store) {
    std::string listed;
    for (const auto& d : differences) listed += "\n  " + d.ToString();
    return Error::Unprocessable(
        "config_differs",
        "the config file " + source_ + " differs from the cluster's current config, version " +
            std::to_string(head->current) + " (by " + head->changed_by + " at " + FormatRfc3339(head->changed_at) +
            "), which is in force since the cluster runs:" + listed +
            "\nTo run the cluster's version, save it over the file (unisched config show > FILE); to make the file the "
            "cluster's config, start once with --apply-config (docs/config-versions.md)");
  } else if (!differences.empty()) {
    spdlog::info("config: the store's version {} is in force ({} differences from {})", head->current,
                 differences.size(), source_);
  }
  auto in_force = Build(*head);
  if (!in_force.ok()) return in_force.error();
  head_ = *head;
  current_ = in_force->current;
  return in_force->effective;
}

Result<config::Config> ConfigKeeper::LoadInForce() {
  std::lock_guard lock(mu_);
  auto head = store_.ReadConfigHead();
  if (!head.ok()) return head.error();
  if (head->current == 0) return local_;
  auto in_force = Build(*head);
  if (!in_force.ok()) return in_force.error();
  head_ = *head;
  current_ = in_force->current;
  return in_force->effective;
}

void ConfigKeeper::Attach(config::LiveConfig& live, std::function<std::vector<model::Job>()> active_jobs,
                          std::function<void(const config::Config&)> on_applied) {
  std::lock_guard lock(mu_);
  live_ = &live;
  active_jobs_ = std::move(active_jobs);
  on_applied_ = std::move(on_applied);
}

json ConfigKeeper::HeadJson() const {
  json head = {{"version", head_.current},
               {"digest", current_.version},
               {"previous_version", head_.previous},
               {"changed_by", head_.changed_by},
               {"changed_at", FormatRfc3339(head_.changed_at)}};
  if (head_.canary != 0) head["canary"] = {{"version", head_.canary}, {"queue", head_.canary_queue}};
  return head;
}

Result<json> ConfigKeeper::Show(std::optional<int64_t> number) {
  std::lock_guard lock(mu_);
  auto record = store_.ReadConfigVersion(number.value_or(head_.current));
  if (!record.ok()) return record.error();
  if (!record->has_value()) {
    return Error::NotFound("config version " + std::to_string(number.value_or(head_.current)) +
                           " does not exist; GET /v1/config/versions lists them");
  }
  json out = VersionJson(**record);
  out["text"] = (*record)->text;
  out["in_force"] = HeadJson();
  return out;
}

Result<json> ConfigKeeper::Versions(int limit) {
  std::lock_guard lock(mu_);
  auto versions = store_.ListConfigVersions(limit);
  if (!versions.ok()) return versions.error();
  json items = json::array();
  for (const auto& r : *versions) {
    json item = VersionJson(r);
    item["current"] = r.version == head_.current;
    if (r.version == head_.canary) item["canary_queue"] = head_.canary_queue;
    items.push_back(std::move(item));
  }
  return json{{"versions", items}, {"in_force", HeadJson()}};
}

std::optional<Error> ConfigKeeper::RefuseNotLive(const std::vector<config::ConfigDifference>& from_current,
                                                 const std::string& next_text) const {
  std::string reasons;
  std::string first;
  auto refuse = [&](const config::ConfigDifference& d, const std::string& why) {
    if (first.empty()) first = d.path;
    reasons += "\n  " + d.ToString() + ": " + why;
  };
  for (const auto& d : from_current) {
    const config::ChangeClass cls = config::ClassifyDifference(d);
    if (cls.scope == config::ChangeScope::kRestart) refuse(d, cls.reason);
  }
  // The replica's own sections: left out, they stay as they are; written,
  // they must say what this replica runs with.
  for (const auto& d : config::DiffConfigTexts(local_.text, next_text)) {
    if (config::ClassifyDifference(d).scope != config::ChangeScope::kLocal || d.after == config::kAbsent) continue;
    refuse(d,
           "server and store are each replica's own, read from its file at start: change them there and restart "
           "(or leave these sections out)");
  }
  if (reasons.empty()) return std::nullopt;
  return Error{ErrorKind::kUnprocessable, "not_live",
               "these changes cannot be applied while the daemon runs:" + reasons, first};
}

Result<store::ConfigHead> ConfigKeeper::Commit(store::ConfigChange change) {
  change.expected_changes = head_.changes;
  auto head = store_.ChangeConfig(change);
  if (!head.ok()) return head.error();
  auto in_force = Build(*head);
  if (!in_force.ok()) return in_force.error();
  head_ = *head;
  current_ = in_force->current;
  if (live_ != nullptr) {
    const config::Config& now = live_->Replace(std::move(in_force->effective));
    if (on_applied_) on_applied_(now);
  }
  spdlog::info("config: version {} in force{} (by {})", head_.current,
               head_.canary ? " with version " + std::to_string(head_.canary) + " on queue " + head_.canary_queue : "",
               head_.changed_by);
  return head;
}

Result<json> ConfigKeeper::Apply(const ApplyRequest& request, const std::string& actor) {
  std::lock_guard lock(mu_);
  if (live_ == nullptr) return Error::Unavailable("the daemon is starting; try again in a moment");
  auto loaded = config::LoadConfigText(request.text, "text");
  if (auto* errors = std::get_if<std::vector<config::ConfigError>>(&loaded)) {
    return Error{ErrorKind::kUnprocessable, "invalid_config", "the config does not load: " + JoinErrors(*errors),
                 "text." + errors->front().path};
  }
  config::Config candidate = config::WithLocalSections(std::get<config::Config>(std::move(loaded)), local_);
  if (auto errors = config::ValidateConfig(candidate); !errors.empty()) {
    return Error{ErrorKind::kUnprocessable, "invalid_config",
                 "the config does not hold with this replica's server and store sections: " + JoinErrors(errors),
                 "text." + errors.front().path};
  }
  const auto from_current = config::DiffConfigTexts(current_.text, candidate.text);
  if (auto refused = RefuseNotLive(from_current, candidate.text)) return *refused;
  const auto differences = ClusterDifferences(from_current);
  if (differences.empty() && request.canary_queue.empty()) {
    return json{{"applied", false},
                {"message", "no change from the current version " + std::to_string(head_.current)},
                {"in_force", HeadJson()}};
  }
  const std::vector<model::Job> active = active_jobs_ ? active_jobs_() : std::vector<model::Job>{};
  for (const auto& d : differences) {
    // queues[NAME] removed while it holds work: its jobs would have no queue.
    if (d.path.rfind("queues[", 0) != 0 || d.path.back() != ']' || d.after != config::kAbsent) continue;
    const std::string queue = d.path.substr(7, d.path.size() - 8);
    int held = 0;
    for (const auto& job : active) held += job.queue == queue ? 1 : 0;
    if (held > 0) {
      return Error{ErrorKind::kConflict, "queue_not_empty",
                   "queue " + queue + " holds " + std::to_string(held) +
                       " pending or running jobs; remove it once they have ended (cancel them, or set its "
                       "max_concurrency and wait)",
                   d.path};
    }
  }
  config::Config next = candidate;
  if (!request.canary_queue.empty()) {
    auto merged = config::MergeCanary(current_, candidate, request.canary_queue);
    if (!merged.ok()) return merged.error();
    next = std::move(*merged);
  }
  const service::ConfigImpact impact = service::AssessConfigChange(live_->Current(), next, differences, active);
  json out = {{"changes", DifferencesJson(differences)}, {"impact", service::ToJson(impact)}};
  if (!request.canary_queue.empty()) {
    // What the canary leaves for the promotion: all but the queue's own entry.
    std::vector<config::ConfigDifference> deferred;
    for (const auto& d : differences) {
      if (d.path.rfind("queues[" + request.canary_queue + "]", 0) != 0) deferred.push_back(d);
    }
    out["canary_queue"] = request.canary_queue;
    out["deferred_to_promotion"] = DifferencesJson(deferred);
  }
  if (request.dry_run) {
    out["applied"] = false;
    out["dry_run"] = true;
    out["in_force"] = HeadJson();
    return out;
  }
  store::ConfigChange change;
  change.add = store::ConfigVersionRecord{0, candidate.version, candidate.text, actor, request.comment, {}};
  change.head = head_;
  change.head.changed_by = actor;
  if (request.canary_queue.empty()) {
    change.head.previous = head_.current;
    change.head.current = store::kAddedVersion;
    change.head.canary = 0;  // a whole version ends any canary
  } else {
    change.head.canary = store::kAddedVersion;
    change.head.canary_queue = request.canary_queue;
  }
  auto head = Commit(std::move(change));
  if (!head.ok()) return head.error();
  out["applied"] = true;
  out["version"] = request.canary_queue.empty() ? head->current : head->canary;
  out["in_force"] = HeadJson();
  return out;
}

Result<json> ConfigKeeper::Rollback(std::optional<int64_t> number, const std::string& actor) {
  std::lock_guard lock(mu_);
  if (live_ == nullptr) return Error::Unavailable("the daemon is starting; try again in a moment");
  store::ConfigChange change;
  change.head = head_;
  change.head.changed_by = actor;
  if (head_.canary != 0 && !number) {
    change.head.canary = 0;
    const int64_t ended = head_.canary;
    auto head = Commit(std::move(change));
    if (!head.ok()) return head.error();
    return json{{"rolled_back", "canary"}, {"canary_version", ended}, {"in_force", HeadJson()}};
  }
  const int64_t target = number.value_or(head_.previous);
  if (target == 0) {
    return Error::Conflict("no_previous_version", "version " + std::to_string(head_.current) +
                                                      " is the first; name a version to roll back to");
  }
  if (target == head_.current && head_.canary == 0) {
    return json{{"rolled_back", false},
                {"message", "version " + std::to_string(target) + " is already current"},
                {"in_force", HeadJson()}};
  }
  auto record = store_.ReadConfigVersion(target);
  if (!record.ok()) return record.error();
  if (!record->has_value()) {
    return Error{ErrorKind::kNotFound, "not_found", "config version " + std::to_string(target) + " does not exist",
                 "version"};
  }
  const std::string& text = (*record)->text;
  if (auto refused = RefuseNotLive(config::DiffConfigTexts(current_.text, text), text)) return *refused;
  change.head.previous = head_.current;
  change.head.current = target;
  change.head.canary = 0;
  auto head = Commit(std::move(change));
  if (!head.ok()) return head.error();
  return json{{"rolled_back", true}, {"version", target}, {"in_force", HeadJson()}};
}

Result<json> ConfigKeeper::Promote(const std::string& actor) {
  std::lock_guard lock(mu_);
  if (live_ == nullptr) return Error::Unavailable("the daemon is starting; try again in a moment");
  if (head_.canary == 0) {
    return Error::Conflict("no_canary", "no version is being tried on a canary queue; apply one with canary_queue");
  }
  store::ConfigChange change;
  change.head = head_;
  change.head.changed_by = actor;
  change.head.previous = head_.current;
  change.head.current = head_.canary;
  change.head.canary = 0;
  const int64_t promoted = head_.canary;
  auto head = Commit(std::move(change));
  if (!head.ok()) return head.error();
  return json{{"promoted", promoted}, {"in_force", HeadJson()}};
}

}  // namespace unisched::daemon
