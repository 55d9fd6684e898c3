#pragma once
// The store's identities: users (from the config or the admin API) and the
// hashes of their API tokens and of node tokens.

#include <map>
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
  // Names the token in lists and revocation: TokenId(hash). Derived from the
  // hash, so it says nothing of the token itself.
  std::string id{};
  std::string name{};  // a label its owner chose ("ci", "portal"); may be empty
  std::optional<Timestamp> expires_at{};
  std::optional<Timestamp> revoked_at{};
  std::optional<Timestamp> last_used_at{};  // kept to the minute (TouchTokens)
  std::vector<std::string> allow_from{};    // CIDR ranges; empty: any address
  double requests_per_second = 0;           // 0: the role's limit only
  double burst = 0;
};

// "tok_" and the first 16 hex digits of the token's hash.
inline std::string TokenId(const std::string& hash) {
  return "tok_" + hash.substr(0, 16);
}

// Which tokens ListTokens returns.
struct TokenFilter {
  std::string user;  // empty: every user
  std::string kind;  // "user" | "node"; empty: both
};

// A Unix id allocated to a unisched user (its uid) or project (its group's
// gid), once and for good (executor.user_accounts, docs/accounts.md).
struct UnixIdRecord {
  std::string kind;  // "user" | "project"
  std::string name;
  int64_t id = 0;
};

class IdentityWrites {
 public:
  virtual ~IdentityWrites() = default;
  // Inserts or replaces the user of this name. Idempotent.
  virtual Status UpsertUser(const UserRecord& user) = 0;
  // Not idempotent: a second token of the same hash fails (kConflict
  // "token_exists") and changes nothing.
  virtual Status InsertToken(const TokenRecord& token) = 0;
  // Revokes the token of this id at `at`: kNotFound when there is none;
  // revoking a revoked token keeps the first time. Idempotent.
  virtual Status RevokeToken(const std::string& id, Timestamp at) = 0;
  // Records when tokens were last used (hash -> time); a time older than
  // the stored one is ignored. Tokens that no longer exist are skipped.
  virtual Status TouchTokens(const std::map<std::string, Timestamp>& last_used) = 0;
  // Gives `name` of `kind` an id from [min, max] unless it has one: the one
  // after the highest of that kind in the range (ids are never reused, so a
  // file a deleted user left is never another's). kConflict
  // "id_range_exhausted" when none is left. Idempotent.
  virtual Status AllocateUnixId(const std::string& kind, const std::string& name, int64_t min, int64_t max) = 0;
};

class IdentityReads {
 public:
  virtual ~IdentityReads() = default;
  virtual std::optional<TokenRecord> FindToken(const std::string& hash) const = 0;
  virtual std::optional<TokenRecord> FindTokenById(const std::string& id) const = 0;
  virtual std::optional<int64_t> FindUnixId(const std::string& kind, const std::string& name) const = 0;
  // By kind, then id.
  virtual std::vector<UnixIdRecord> ListUnixIds() const = 0;
  // By creation time, oldest first.
  virtual std::vector<TokenRecord> ListTokens(const TokenFilter& filter) const = 0;
  virtual std::optional<UserRecord> GetUser(const std::string& name) const = 0;
  // By name.
  virtual std::vector<UserRecord> ListUsers() const = 0;
};

}  // namespace unisched::store
