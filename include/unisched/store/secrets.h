#pragma once
// Secrets in the store (docs/secrets.md): one row per (project, name), its
// value sealed (auth::SecretBox: AES-256-GCM under a key that is not in the
// database), so the database, its backups and its replicas hold no secret in
// the clear. A rotation replaces the value and counts the version up; a job
// gets the value current when its attempt launches.
//
// Like config versions, these go through the store's lease connection, not
// the write queue: a write is committed when it returns.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"

namespace unisched::store {

struct SecretRecord {
  std::string project;
  std::string name;
  int64_t version = 1;      // 1 when made, +1 each rotation
  std::string sealed;       // auth::SecretBox::Seal of the value, context "project/name"
  std::string description;  // what it is for, shown in lists
  std::string created_by;
  Timestamp created_at{};
  std::string updated_by;  // who set the current version
  Timestamp updated_at{};
};

class Secrets {
 public:
  virtual ~Secrets() = default;
  // Stores a new secret (version 1); kConflict "secret_exists" when the
  // project already has one of that name.
  virtual Status InsertSecret(const SecretRecord& secret) = 0;
  // Replaces the value (and the description when `secret.description` is
  // not empty) of an existing secret, counting its version up; returns the
  // record as stored, or nullopt when there is no such secret.
  virtual Result<std::optional<SecretRecord>> RotateSecret(const SecretRecord& secret) = 0;
  virtual Result<std::optional<SecretRecord>> GetSecret(const std::string& project, const std::string& name) = 0;
  // By project and name; `project` empty: every project's.
  virtual Result<std::vector<SecretRecord>> ListSecrets(const std::string& project) = 0;
  // Whether there was one to delete.
  virtual Result<bool> DeleteSecret(const std::string& project, const std::string& name) = 0;
};

}  // namespace unisched::store
