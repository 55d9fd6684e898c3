// Differences between config versions, their scope, and canary merges
// (unisched/config/change.h).

#include "unisched/config/change.h"

#include <yaml-cpp/yaml.h>

#include <map>
#include <set>
#include <utility>

namespace unisched::config {

namespace {

std::string Flow(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "null";
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter out;
  out.SetMapFormat(YAML::Flow);
  out.SetSeqFormat(YAML::Flow);
  out << node;
  return out.c_str();
}

// A list's items by name, when every item is a map with a distinct scalar
// `name`; otherwise empty (the list is compared by index).
std::vector<std::pair<std::string, YAML::Node>> NamedItems(const YAML::Node& list) {
  std::vector<std::pair<std::string, YAML::Node>> items;
  std::set<std::string> seen;
  for (const auto& item : list) {
    const YAML::Node name = item.IsMap() ? item["name"] : YAML::Node();
    if (!name.IsDefined() || !name.IsScalar() || !seen.insert(name.Scalar()).second) return {};
    items.emplace_back(name.Scalar(), item);
  }
  return items;
}

void Diff(const YAML::Node& a, const YAML::Node& b, const std::string& path, std::vector<ConfigDifference>& out);

void DiffMaps(const YAML::Node& a, const YAML::Node& b, const std::string& path, std::vector<ConfigDifference>& out) {
  std::map<std::string, std::pair<YAML::Node, YAML::Node>> keys;
  for (const auto& kv : a) keys[Flow(kv.first)].first = kv.second;
  for (const auto& kv : b) keys[Flow(kv.first)].second = kv.second;
  for (const auto& [key, sides] : keys) Diff(sides.first, sides.second, path.empty() ? key : path + "." + key, out);
}

void DiffLists(const YAML::Node& a, const YAML::Node& b, const std::string& path, std::vector<ConfigDifference>& out) {
  auto named_a = NamedItems(a);
  auto named_b = NamedItems(b);
  if ((a.size() == 0 || !named_a.empty()) && (b.size() == 0 || !named_b.empty()) && (a.size() + b.size() > 0)) {
    // Named items in the order the newer text lists them, then the removed.
    std::map<std::string, YAML::Node> before(named_a.begin(), named_a.end());
    for (const auto& [name, item] : named_b) {
      auto it = before.find(name);
      Diff(it == before.end() ? YAML::Node() : it->second, item, path + "[" + name + "]", out);
      if (it != before.end()) before.erase(it);
    }
    for (const auto& [name, item] : named_a) {
      if (before.count(name)) Diff(item, YAML::Node(), path + "[" + name + "]", out);
    }
    return;
  }
  const bool scalars = [&] {
    for (const auto& list : {a, b}) {
      for (const auto& item : list) {
        if (!item.IsScalar()) return false;
      }
    }
    return true;
  }();
  if (scalars) {  // a list of names or numbers reads best whole
    if (Flow(a) != Flow(b)) out.push_back({path, Flow(a), Flow(b)});
    return;
  }
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    Diff(i < a.size() ? a[i] : YAML::Node(), i < b.size() ? b[i] : YAML::Node(), path + "[" + std::to_string(i) + "]",
         out);
  }
}

// An absent key and an explicit null mean the same (config/yaml_reader.h).
bool Present(const YAML::Node& node) {
  return node.IsDefined() && !node.IsNull();
}

void Diff(const YAML::Node& a, const YAML::Node& b, const std::string& path, std::vector<ConfigDifference>& out) {
  if (!Present(a) && !Present(b)) return;
  if (!Present(a) || !Present(b)) {
    out.push_back({path, Present(a) ? Flow(a) : std::string(kAbsent), Present(b) ? Flow(b) : std::string(kAbsent)});
    return;
  }
  if (a.IsMap() && b.IsMap()) return DiffMaps(a, b, path, out);
  if (a.IsSequence() && b.IsSequence()) return DiffLists(a, b, path, out);
  if (Flow(a) != Flow(b)) out.push_back({path, Flow(a), Flow(b)});
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// The section a path is in: "queues", "alerts.rules", "scheduler.fairshare_gpu_weight".
std::string_view TopKey(std::string_view path) {
  return path.substr(0, path.find_first_of(".["));
}

}  // namespace

std::vector<ConfigDifference> DiffConfigTexts(std::string_view before, std::string_view after) {
  std::vector<ConfigDifference> out;
  YAML::Node a, b;
  try {
    a = YAML::Load(std::string(before));
    b = YAML::Load(std::string(after));
  } catch (const YAML::Exception& e) {
    out.push_back({"", "(unreadable)", e.what()});
    return out;
  }
  Diff(a, b, "", out);
  return out;
}

ChangeClass ClassifyDifference(const ConfigDifference& d) {
  const std::string_view path = d.path;
  const std::string_view top = TopKey(path);
  if (top == "server" || top == "store") return {ChangeScope::kLocal, ""};
  if (top == "queues") {
    // queues[NAME].pool of a queue on both sides: its pending jobs were
    // routed to the old pool, and its nodes' usage is counted there.
    const size_t close = path.find(']');
    if (close != std::string_view::npos && path.substr(close + 1) == ".pool" && d.before != kAbsent &&
        d.after != kAbsent) {
      return {ChangeScope::kRestart,
              "a queue's pool is fixed while it runs: its jobs were routed to the old pool; add a new queue instead"};
    }
    return {ChangeScope::kLive, ""};
  }
  // baseline: read by `unisched baseline` from the version in force, at each run.
  // storage: each launch reads the shared file systems of the version in force.
  if (top == "routing" || top == "projects" || top == "users" || top == "baseline" || top == "storage" ||
      StartsWith(path, "alerts.rules") || path == "scheduler.fairshare_gpu_weight" ||
      path == "scheduler.kill_invalid_dependency" || path == "scheduler.event_pass_depth") {
    return {ChangeScope::kLive, ""};
  }
  if (path == "alerts" && (d.before == kAbsent || d.after == kAbsent)) {
    return {ChangeScope::kRestart, "the alert webhook is started with the daemon; change alerts.rules alone"};
  }
  static const std::map<std::string_view, std::string_view> kWhy = {
      {"pools", "pools and their backends are set up at start"},
      {"nodes", "nodes are set up at start (agents, node states, local executors)"},
      {"executor", "how attempts are launched is set up at start"},
      {"health", "agents learn their heartbeat settings when they register"},
      {"sandboxes", "the sandbox runtime is set up at start"},
      {"images", "images are set up at start; change them live with POST /v1/images"},
      {"access", "the access rules and the identity provider's keys are loaded at start"},
      {"alerts", "the alert webhook is started with the daemon"},
      {"scheduler", "the decay of recorded fair-share usage is set at start"},
  };
  auto why = kWhy.find(top);
  return {ChangeScope::kRestart, std::string(why != kWhy.end() ? why->second : "this section is read at start") +
                                     "; restart the daemon with the new file and --apply-config"};
}

Config WithLocalSections(Config cluster, const Config& local) {
  cluster.server = local.server;
  cluster.store = local.store;
  return cluster;
}

Result<Config> MergeCanary(const Config& current, const Config& candidate, const std::string& queue) {
  const model::QueueSpec* tried = candidate.cluster.FindQueue(queue);
  if (tried == nullptr || current.cluster.FindQueue(queue) == nullptr) {
    return Error::Unprocessable("invalid_value",
                                "canary_queue: queue " + queue + " must exist in the current and the new version",
                                "canary_queue");
  }
  if (tried->pool != current.cluster.FindQueue(queue)->pool) {
    return Error::Unprocessable("not_live", "canary_queue: queue " + queue + " changes pool, which needs a restart",
                                "canary_queue");
  }
  Config merged = current;
  for (auto& q : merged.cluster.queues) {
    if (q.name == queue) q = *tried;
  }
  merged.canary_queue = queue;
  merged.canary_version = candidate.version;
  merged.canary_number = candidate.number;
  return merged;
}

}  // namespace unisched::config
