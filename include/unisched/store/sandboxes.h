#pragma once
// The store's sandboxes (docs/sandboxes.md) and the versions of their images.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"

namespace unisched::store {

// A sandbox: its JSON record and the columns queries need.
struct SandboxRow {
  int64_t id = 0;
  std::string state;   // running | deleted | reclaimed | lost | failed
  std::string record;  // JSON
  Timestamp created_at{};
  std::optional<Timestamp> ended_at{};
};

// One version of an image; `spec` is JSON (rootfs, binds).
struct ImageVersionRow {
  std::string name, version, spec, created_by;
  Timestamp created_at{};
};

class SandboxWrites {
 public:
  virtual ~SandboxWrites() = default;
  // Inserts or replaces a sandbox by id. Idempotent.
  virtual Status PutSandbox(const SandboxRow& sandbox) = 0;
  // Adds an image version. Idempotent: an existing name:version is left as
  // it is (its spec is never rewritten).
  virtual Status PutImageVersion(const ImageVersionRow& image) = 0;
  // Makes `version` the image's current one (pushed on its stack). Not
  // idempotent: each call pushes one.
  virtual Status PushImageCurrent(const std::string& name, const std::string& version, Timestamp at) = 0;
  // Takes the top off the image's stack (rollback). Not idempotent: each
  // call pops one; on an empty stack it changes nothing.
  virtual Status PopImageCurrent(const std::string& name) = 0;
};

class SandboxReads {
 public:
  virtual ~SandboxReads() = default;
  virtual std::optional<SandboxRow> GetSandbox(int64_t id) const = 0;
  // Newest first; active_only: not ended.
  virtual std::vector<SandboxRow> ListSandboxes(bool active_only, int limit) const = 0;
  // 0 when there is none.
  virtual int64_t MaxSandboxId() const = 0;
  // By name, then creation time.
  virtual std::vector<ImageVersionRow> ListImageVersions() const = 0;
  // Each image's stack of current versions, oldest first (the last is current).
  virtual std::map<std::string, std::vector<std::string>> ImageCurrentStacks() const = 0;
};

}  // namespace unisched::store
