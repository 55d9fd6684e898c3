#pragma once
// Changes between two config versions (docs/config-versions.md): what
// differs, key path by key path; which of those may change while the daemon
// runs; and a canary, one queue trying a new version while the others keep
// the current one. Pure: texts and configs in, values out.

#include <string>
#include <string_view>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/config/config.h"

namespace unisched::config {

// One key path whose value differs, e.g. queues[ai-training].policy.max_concurrency:
// "8" -> "4". Lists of named items are keyed by name (queues[ai-training]),
// others by index; an item or section on one side only is one entry whose
// other side is "(absent)"; values are YAML in flow style.
struct ConfigDifference {
  std::string path;
  std::string before;
  std::string after;
  std::string ToString() const { return path + ": " + before + " -> " + after; }
};
inline constexpr std::string_view kAbsent = "(absent)";

// The differences between two config texts that both load (LoadConfigText),
// in key order; empty when they mean the same tree (comments, layout and
// key order aside).
std::vector<ConfigDifference> DiffConfigTexts(std::string_view before, std::string_view after);

// How a difference may be applied:
//  kLocal: server and store, a replica's own (its address, its state
//          directory, its database): always read from that replica's file,
//          never from a stored version, so never part of a change.
//  kLive:  queues, routing, projects, users, alert rules, the fair-share
//          GPU weight: applied between two scheduling cycles.
//  kRestart: everything else; `reason` says why it needs a restart.
enum class ChangeScope { kLocal, kLive, kRestart };
struct ChangeClass {
  ChangeScope scope = ChangeScope::kLive;
  std::string reason;  // with kRestart
};
ChangeClass ClassifyDifference(const ConfigDifference& difference);

// A replica's config: a cluster version with the replica's own server and
// store sections (from its file; --listen and --state-dir applied).
Config WithLocalSections(Config cluster, const Config& local);

// The config in force while `candidate` is tried on `queue`: `current`
// with queue's entry (policy, limits, order, workload kinds, tier) from
// `candidate`; jobs admitted to that queue record candidate's version.
// The rest of candidate (other queues, routing rules, projects, users,
// alert rules) waits for the promotion. An error (field "canary_queue")
// when the queue is missing from either version or changes pool.
Result<Config> MergeCanary(const Config& current, const Config& candidate, const std::string& queue);

}  // namespace unisched::config
