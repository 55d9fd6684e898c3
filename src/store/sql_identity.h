#pragma once
// Users, token hashes and node states in SQLite (unisched/store/identity.h,
// unisched/store/nodes.h). Internal to src/store.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "store/sql.h"
#include "unisched/store/identity.h"
#include "unisched/store/nodes.h"

namespace unisched::store::sql {

Status UpsertUser(Connection& c, const UserRecord& user);
Status InsertToken(Connection& c, const TokenRecord& token);
Status RevokeToken(Connection& c, const std::string& id, Timestamp at);
Status TouchTokens(Connection& c, const std::map<std::string, Timestamp>& last_used);
Status AllocateUnixId(Connection& c, const std::string& kind, const std::string& name, int64_t min, int64_t max);
std::optional<int64_t> FindUnixId(Connection& c, const std::string& kind, const std::string& name);
std::vector<UnixIdRecord> ListUnixIds(Connection& c);
Status SetNodeState(Connection& c, const NodeStateRecord& node);
Status SetNodeIdleSince(Connection& c, const std::string& node, std::optional<Timestamp> since);

std::optional<TokenRecord> FindToken(Connection& c, const std::string& hash);
std::optional<TokenRecord> FindTokenById(Connection& c, const std::string& id);
std::vector<TokenRecord> ListTokens(Connection& c, const TokenFilter& filter);
std::optional<UserRecord> GetUser(Connection& c, const std::string& name);
std::vector<UserRecord> ListUsers(Connection& c);
std::vector<NodeStateRecord> LoadNodeStates(Connection& c);
std::map<std::string, Timestamp> LoadNodeIdleSince(Connection& c);

}  // namespace unisched::store::sql
