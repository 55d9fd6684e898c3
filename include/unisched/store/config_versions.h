#pragma once
// Config versions in the store (docs/config-versions.md, ADR 0007): every
// accepted config text, numbered 1, 2, ... in order of acceptance, and one
// head row saying which version the cluster runs, which one a canary queue
// tries, and which ran before. Once a cluster runs, the head's current
// version is its config; every replica reads it from here.
//
// Like the lease, these go through the store's lease connection, not the
// write queue: a change is committed when ChangeConfig returns.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"

namespace unisched::store {

struct ConfigVersionRecord {
  int64_t version = 0;  // 1, 2, ... in order of acceptance
  std::string digest;   // the text's content hash (config::Config::version)
  std::string text;     // the YAML as accepted
  std::string author;   // a user's name, or what applied it: "seed", "--apply-config", "SIGHUP"
  std::string comment;
  Timestamp created_at{};
};

struct ConfigHead {
  int64_t current = 0;       // the version the cluster runs; 0: none stored yet
  int64_t previous = 0;      // current before the last change of it (what rollback restores); 0: none
  int64_t canary = 0;        // a version tried on canary_queue only; 0: none
  std::string canary_queue;  // with canary
  int64_t changes = 0;       // raised by one at every change: what ChangeConfig compares
  Timestamp changed_at{};
  std::string changed_by;
};

// A change of the head, and optionally a version added with it.
struct ConfigChange {
  // The head's `changes` as the caller read it: when another change landed
  // since, nothing is written and ChangeConfig fails with kConflict, code
  // config_changed (read the head again and retry).
  int64_t expected_changes = 0;
  // Stored as the next version (its `version` is ignored); in `head`, the
  // number kAddedVersion stands for it.
  std::optional<ConfigVersionRecord> add;
  // The head afterwards (`changes` and `changed_at` are set by the store).
  ConfigHead head;
};
inline constexpr int64_t kAddedVersion = -1;

class ConfigVersions {
 public:
  virtual ~ConfigVersions() = default;
  virtual Result<ConfigHead> ReadConfigHead() = 0;
  // The version, or nullopt when there is none of that number.
  virtual Result<std::optional<ConfigVersionRecord>> ReadConfigVersion(int64_t version) = 0;
  // The newest `limit` versions, newest first, without their text.
  virtual Result<std::vector<ConfigVersionRecord>> ListConfigVersions(int limit) = 0;
  // Applies `change` at once, atomically; returns the head afterwards.
  virtual Result<ConfigHead> ChangeConfig(const ConfigChange& change) = 0;
};

}  // namespace unisched::store
