#pragma once
// Users, token hashes and node states in SQLite (unisched/store/identity.h,
// unisched/store/nodes.h). Internal to src/store.

#include <optional>
#include <string>
#include <vector>

#include "store/sqlite_db.h"
#include "unisched/store/identity.h"
#include "unisched/store/nodes.h"

namespace unisched::store::sqlite {

Status UpsertUser(Connection& c, const UserRecord& user);
Status InsertToken(Connection& c, const TokenRecord& token);
Status SetNodeState(Connection& c, const NodeStateRecord& node);

std::optional<TokenRecord> FindToken(Connection& c, const std::string& hash);
std::optional<UserRecord> GetUser(Connection& c, const std::string& name);
std::vector<UserRecord> ListUsers(Connection& c);
std::vector<NodeStateRecord> LoadNodeStates(Connection& c);

}  // namespace unisched::store::sqlite
