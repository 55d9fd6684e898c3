#include "store/sqlite_identity.h"

#include <sqlite3.h>

#include "store/sqlite_common.h"

namespace unisched::store::sqlite {
namespace {

constexpr const char* kUserColumns = "SELECT name, role, projects, queues, unix_user, from_config FROM users";

UserRecord UserFromRow(const Statement& stmt) {
  UserRecord user;
  user.name = stmt.Text(0);
  user.role = stmt.Text(1);
  user.projects = ParseJsonList(stmt.Text(2));
  user.queues = ParseJsonList(stmt.Text(3));
  user.unix_user = stmt.Text(4);
  user.from_config = stmt.Int(5) != 0;
  return user;
}

}  // namespace

Status UpsertUser(Connection& c, const UserRecord& user) {
  auto stmt = c.Prepare(
      "INSERT INTO users(name, role, projects, queues, unix_user, from_config) VALUES(?, ?, ?, ?, ?, ?) "
      "ON CONFLICT(name) DO UPDATE SET role = excluded.role, projects = excluded.projects, "
      "queues = excluded.queues, unix_user = excluded.unix_user, from_config = excluded.from_config");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, user.name)
      .Bind(2, user.role)
      .Bind(3, JsonList(user.projects))
      .Bind(4, JsonList(user.queues))
      .Bind(5, user.unix_user)
      .Bind(6, int64_t{user.from_config ? 1 : 0});
  return stmt->Run();
}

Status InsertToken(Connection& c, const TokenRecord& token) {
  auto stmt = c.Prepare("INSERT INTO tokens(hash, user, kind, pool, created_at) VALUES(?, ?, ?, ?, ?)");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, token.hash)
      .Bind(2, token.user)
      .Bind(3, token.kind)
      .Bind(4, token.pool)
      .Bind(5, ToUnixMillis(token.created_at));
  Status s = stmt->Run();
  if (!s && (stmt->last_error() & 0xff) == SQLITE_CONSTRAINT) {
    return Error::Conflict("token_exists", "a token with this hash already exists");
  }
  return s;
}

Status SetNodeState(Connection& c, const NodeStateRecord& node) {
  auto stmt = c.Prepare(
      "INSERT INTO node_states(name, state, reason) VALUES(?, ?, ?) "
      "ON CONFLICT(name) DO UPDATE SET state = excluded.state, reason = excluded.reason");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, node.name).Bind(2, model::ToString(node.state)).Bind(3, node.reason);
  return stmt->Run();
}

std::optional<TokenRecord> FindToken(Connection& c, const std::string& hash) {
  auto stmt = OrThrow(c.Prepare("SELECT hash, user, kind, pool, created_at FROM tokens WHERE hash = ?"));
  stmt.Bind(1, hash);
  if (!OrThrow(stmt.Step())) return std::nullopt;
  return TokenRecord{stmt.Text(0), stmt.Text(1), stmt.Text(2), stmt.Text(3), FromUnixMillis(stmt.Int(4))};
}

std::optional<UserRecord> GetUser(Connection& c, const std::string& name) {
  auto stmt = OrThrow(c.Prepare(std::string(kUserColumns) + " WHERE name = ?"));
  stmt.Bind(1, name);
  if (!OrThrow(stmt.Step())) return std::nullopt;
  return UserFromRow(stmt);
}

std::vector<UserRecord> ListUsers(Connection& c) {
  auto stmt = OrThrow(c.Prepare(std::string(kUserColumns) + " ORDER BY name"));
  std::vector<UserRecord> users;
  while (OrThrow(stmt.Step())) users.push_back(UserFromRow(stmt));
  return users;
}

std::vector<NodeStateRecord> LoadNodeStates(Connection& c) {
  auto stmt = OrThrow(c.Prepare("SELECT name, state, reason FROM node_states ORDER BY name"));
  std::vector<NodeStateRecord> nodes;
  while (OrThrow(stmt.Step())) {
    // A state this binary does not know is left out rather than guessed.
    if (auto state = model::ParseNodeState(stmt.Text(1))) nodes.push_back({stmt.Text(0), *state, stmt.Text(2)});
  }
  return nodes;
}

}  // namespace unisched::store::sqlite
