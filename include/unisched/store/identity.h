#pragma once
// The store's identities: users (from the config or the admin API) and the
// hashes of their API tokens and of node tokens.

#include <optional>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"

namespace unisched::store {

struct UserRecord {
  std::string name;
  std::string role;  // platform-admin | queue-admin | user
  std::vector<std::string> projects;
  std::vector<std::string> queues;
  std::string unix_user;
  bool from_config = false;
};

struct TokenRecord {
  std::string hash;  // hex SHA-256 of the token; the token itself is never stored
  std::string user;
  std::string kind = "user";  // user | node
  std::string pool;           // for node tokens
  Timestamp created_at{};
};

class IdentityWrites {
 public:
  virtual ~IdentityWrites() = default;
  // Inserts or replaces the user of this name. Idempotent.
  virtual Status UpsertUser(const UserRecord& user) = 0;
  // Not idempotent: a second token of the same hash fails (kConflict
  // "token_exists") and changes nothing.
  virtual Status InsertToken(const TokenRecord& token) = 0;
};

class IdentityReads {
 public:
  virtual ~IdentityReads() = default;
  virtual std::optional<TokenRecord> FindToken(const std::string& hash) const = 0;
  virtual std::optional<UserRecord> GetUser(const std::string& name) const = 0;
  // By name.
  virtual std::vector<UserRecord> ListUsers() const = 0;
};

}  // namespace unisched::store
