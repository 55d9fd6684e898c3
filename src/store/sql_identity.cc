#include "store/sql_identity.h"

#include "store/sql_common.h"

namespace unisched::store::sql {
namespace {

constexpr const char* kUserColumns = "SELECT name, role, projects, queues, unix_user, from_config FROM users";

constexpr const char* kTokenColumns =
    "SELECT hash, \"user\", kind, pool, created_at, id, name, expires_at, revoked_at, last_used_at, allow_from, "
    "requests_per_second, burst FROM tokens";

std::optional<Timestamp> OptionalTime(const Statement& stmt, int column) {
  if (stmt.IsNull(column)) return std::nullopt;
  return FromUnixMillis(stmt.Int(column));
}

std::optional<int64_t> OptionalMillis(const std::optional<Timestamp>& t) {
  if (!t) return std::nullopt;
  return ToUnixMillis(*t);
}

TokenRecord TokenFromRow(const Statement& stmt) {
  TokenRecord t;
  t.hash = stmt.Text(0);
  t.user = stmt.Text(1);
  t.kind = stmt.Text(2);
  t.pool = stmt.Text(3);
  t.created_at = FromUnixMillis(stmt.Int(4));
  t.id = stmt.Text(5);
  t.name = stmt.Text(6);
  t.expires_at = OptionalTime(stmt, 7);
  t.revoked_at = OptionalTime(stmt, 8);
  t.last_used_at = OptionalTime(stmt, 9);
  t.allow_from = ParseJsonList(stmt.Text(10));
  t.requests_per_second = stmt.Double(11);
  t.burst = stmt.Double(12);
  return t;
}

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
  auto stmt = c.Prepare(
      "INSERT INTO tokens(hash, \"user\", kind, pool, created_at, id, name, expires_at, revoked_at, last_used_at, "
      "allow_from, requests_per_second, burst) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, token.hash)
      .Bind(2, token.user)
      .Bind(3, token.kind)
      .Bind(4, token.pool)
      .Bind(5, ToUnixMillis(token.created_at))
      .Bind(6, token.id.empty() ? TokenId(token.hash) : token.id)
      .Bind(7, token.name)
      .Bind(8, OptionalMillis(token.expires_at))
      .Bind(9, OptionalMillis(token.revoked_at))
      .Bind(10, OptionalMillis(token.last_used_at))
      .Bind(11, JsonList(token.allow_from))
      .BindReal(12, token.requests_per_second)
      .BindReal(13, token.burst);
  Status s = stmt->Run();
  if (!s && stmt->violation() != Violation::kNone) {
    return Error::Conflict("token_exists", "a token with this hash already exists");
  }
  return s;
}

Status RevokeToken(Connection& c, const std::string& id, Timestamp at) {
  auto stmt = c.Prepare("UPDATE tokens SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, ToUnixMillis(at)).Bind(2, id);
  if (Status s = stmt->Run(); !s) return s;
  if (c.ChangedRows() == 0) return Error::NotFound("no token " + id);
  return Status::Ok();
}

Status TouchTokens(Connection& c, const std::map<std::string, Timestamp>& last_used) {
  for (const auto& [hash, at] : last_used) {
    auto stmt = c.Prepare(
        "UPDATE tokens SET last_used_at = ?1 WHERE hash = ?2 AND (last_used_at IS NULL OR last_used_at < ?1)");
    if (!stmt.ok()) return stmt.error();
    stmt->Bind(1, ToUnixMillis(at)).Bind(2, hash);
    if (Status s = stmt->Run(); !s) return s;
  }
  return Status::Ok();
}

Status AllocateUnixId(Connection& c, const std::string& kind, const std::string& name, int64_t min, int64_t max) {
  auto next = c.Prepare(
      "SELECT (SELECT id FROM unix_ids WHERE kind = ?1 AND name = ?2), "
      "coalesce((SELECT max(id) + 1 FROM unix_ids WHERE kind = ?1 AND id BETWEEN ?3 AND ?4), ?3)");
  if (!next.ok()) return next.error();
  next->Bind(1, kind).Bind(2, name).Bind(3, min).Bind(4, max);
  auto row = next->Step();
  if (!row.ok()) return row.error();
  if (!next->IsNull(0)) return Status::Ok();  // allocated before
  const int64_t id = next->Int(1);
  if (id > max) {
    return Error::Conflict("id_range_exhausted", "no " + kind + " id is left in " + std::to_string(min) + ".." +
                                                     std::to_string(max) + " for '" + name +
                                                     "': widen executor.user_accounts");
  }
  auto insert = c.Prepare("INSERT INTO unix_ids(kind, name, id) VALUES(?, ?, ?)");
  if (!insert.ok()) return insert.error();
  insert->Bind(1, kind).Bind(2, name).Bind(3, id);
  return insert->Run();
}

Status SetNodeState(Connection& c, const NodeStateRecord& node) {
  auto stmt = c.Prepare(
      "INSERT INTO node_states(name, state, reason) VALUES(?, ?, ?) "
      "ON CONFLICT(name) DO UPDATE SET state = excluded.state, reason = excluded.reason");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, node.name).Bind(2, model::ToString(node.state)).Bind(3, node.reason);
  return stmt->Run();
}

Status SetNodeIdleSince(Connection& c, const std::string& node, std::optional<Timestamp> since) {
  auto stmt = since ? c.Prepare(
                          "INSERT INTO node_idle(name, since) VALUES(?, ?) "
                          "ON CONFLICT(name) DO UPDATE SET since = excluded.since")
                    : c.Prepare("DELETE FROM node_idle WHERE name = ?");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, node);
  if (since) stmt->Bind(2, ToUnixMillis(*since));
  return stmt->Run();
}

std::optional<TokenRecord> FindToken(Connection& c, const std::string& hash) {
  auto stmt = OrThrow(c.Prepare(std::string(kTokenColumns) + " WHERE hash = ?"));
  stmt.Bind(1, hash);
  if (!OrThrow(stmt.Step())) return std::nullopt;
  return TokenFromRow(stmt);
}

std::optional<TokenRecord> FindTokenById(Connection& c, const std::string& id) {
  auto stmt = OrThrow(c.Prepare(std::string(kTokenColumns) + " WHERE id = ?"));
  stmt.Bind(1, id);
  if (!OrThrow(stmt.Step())) return std::nullopt;
  return TokenFromRow(stmt);
}

std::vector<TokenRecord> ListTokens(Connection& c, const TokenFilter& filter) {
  auto stmt =
      OrThrow(c.Prepare(std::string(kTokenColumns) +
                        " WHERE (?1 = '' OR \"user\" = ?1) AND (?2 = '' OR kind = ?2) ORDER BY created_at, id"));
  stmt.Bind(1, filter.user).Bind(2, filter.kind);
  std::vector<TokenRecord> tokens;
  while (OrThrow(stmt.Step())) tokens.push_back(TokenFromRow(stmt));
  return tokens;
}

std::optional<int64_t> FindUnixId(Connection& c, const std::string& kind, const std::string& name) {
  auto stmt = OrThrow(c.Prepare("SELECT id FROM unix_ids WHERE kind = ? AND name = ?"));
  stmt.Bind(1, kind).Bind(2, name);
  if (!OrThrow(stmt.Step())) return std::nullopt;
  return stmt.Int(0);
}

std::vector<UnixIdRecord> ListUnixIds(Connection& c) {
  auto stmt = OrThrow(c.Prepare("SELECT kind, name, id FROM unix_ids ORDER BY kind, id"));
  std::vector<UnixIdRecord> out;
  while (OrThrow(stmt.Step())) out.push_back({stmt.Text(0), stmt.Text(1), stmt.Int(2)});
  return out;
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

std::map<std::string, Timestamp> LoadNodeIdleSince(Connection& c) {
  auto stmt = OrThrow(c.Prepare("SELECT name, since FROM node_idle"));
  std::map<std::string, Timestamp> idle;
  while (OrThrow(stmt.Step())) idle.emplace(stmt.Text(0), FromUnixMillis(stmt.Int(1)));
  return idle;
}

}  // namespace unisched::store::sql
