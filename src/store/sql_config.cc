// Config versions in SQL (sql_config.h): the table config_versions and the
// one row of config_head (migration 13).

#include "store/sql_config.h"

namespace unisched::store::sql {

namespace {

constexpr const char* kHeadColumns =
    "SELECT current_version, previous_version, canary_version, canary_queue, changes, changed_at, changed_by "
    "FROM config_head WHERE name = 'cluster'";

Result<ConfigHead> ReadHead(Connection& c, const std::string& suffix) {
  auto read = c.Prepare(kHeadColumns + suffix);
  if (!read.ok()) return read.error();
  auto row = read->Step();
  if (!row.ok()) return row.error();
  if (!*row) return Error::Internal("store: config_head has no row");
  ConfigHead head;
  head.current = read->Int(0);
  head.previous = read->Int(1);
  head.canary = read->Int(2);
  head.canary_queue = read->Text(3);
  head.changes = read->Int(4);
  head.changed_at = FromUnixMillis(read->Int(5));
  head.changed_by = read->Text(6);
  return head;
}

// Inside ChangeConfig's transaction; the caller rolls back on an error.
Result<ConfigHead> ChangeInTransaction(Connection& c, const ConfigChange& change) {
  auto head = ReadHead(c, c.LockReadRows());
  if (!head.ok()) return head.error();
  if (head->changes != change.expected_changes) {
    return Error::Conflict("config_changed", "the config changed meanwhile (change " + std::to_string(head->changes) +
                                                 ", expected " + std::to_string(change.expected_changes) +
                                                 "); read it again and retry");
  }
  int64_t added = 0;
  if (change.add) {
    auto max = c.Prepare("SELECT COALESCE(MAX(version), 0) FROM config_versions");
    if (!max.ok()) return max.error();
    auto row = max->Step();
    if (!row.ok()) return row.error();
    added = max->Int(0) + 1;
    auto insert = c.Prepare(
        "INSERT INTO config_versions(version, digest, text, author, comment, created_at) VALUES(?1, ?2, ?3, ?4, ?5, " +
        c.NowMillis() + ")");
    if (!insert.ok()) return insert.error();
    insert->Bind(1, added)
        .Bind(2, change.add->digest)
        .Bind(3, change.add->text)
        .Bind(4, change.add->author)
        .Bind(5, change.add->comment);
    if (Status s = insert->Run(); !s) return s.error();
  }
  auto resolve = [added](int64_t v) { return v == kAddedVersion ? added : v; };
  ConfigHead next = change.head;
  next.current = resolve(next.current);
  next.previous = resolve(next.previous);
  next.canary = resolve(next.canary);
  if (next.canary == 0) next.canary_queue.clear();
  auto update = c.Prepare(
      "UPDATE config_head SET current_version = ?1, previous_version = ?2, canary_version = ?3, canary_queue = ?4, "
      "changes = changes + 1, changed_at = " +
      c.NowMillis() + ", changed_by = ?5 WHERE name = 'cluster'");
  if (!update.ok()) return update.error();
  update->Bind(1, next.current)
      .Bind(2, next.previous)
      .Bind(3, next.canary)
      .Bind(4, next.canary_queue)
      .Bind(5, next.changed_by);
  if (Status s = update->Run(); !s) return s.error();
  return ReadHead(c, "");
}

}  // namespace

Result<ConfigHead> ReadConfigHead(Connection& c) {
  return ReadHead(c, "");
}

Result<std::optional<ConfigVersionRecord>> ReadConfigVersion(Connection& c, int64_t version) {
  auto read =
      c.Prepare("SELECT version, digest, text, author, comment, created_at FROM config_versions WHERE version = ?");
  if (!read.ok()) return read.error();
  read->Bind(1, version);
  auto row = read->Step();
  if (!row.ok()) return row.error();
  if (!*row) return std::optional<ConfigVersionRecord>();
  return std::optional<ConfigVersionRecord>(ConfigVersionRecord{
      read->Int(0), read->Text(1), read->Text(2), read->Text(3), read->Text(4), FromUnixMillis(read->Int(5))});
}

Result<std::vector<ConfigVersionRecord>> ListConfigVersions(Connection& c, int limit) {
  auto read = c.Prepare(
      "SELECT version, digest, author, comment, created_at FROM config_versions ORDER BY version DESC LIMIT ?");
  if (!read.ok()) return read.error();
  read->Bind(1, int64_t{limit});
  std::vector<ConfigVersionRecord> versions;
  while (true) {
    auto row = read->Step();
    if (!row.ok()) return row.error();
    if (!*row) break;
    versions.push_back({read->Int(0), read->Text(1), "", read->Text(2), read->Text(3), FromUnixMillis(read->Int(4))});
  }
  return versions;
}

Result<ConfigHead> ChangeConfig(Connection& c, const ConfigChange& change) {
  if (Status s = c.BeginWrite(); !s) return s.error();
  auto head = ChangeInTransaction(c, change);
  if (!head.ok()) {
    if (c.InTransaction()) c.Run("ROLLBACK");
    return head.error();
  }
  if (Status s = c.Run("COMMIT"); !s) {
    if (c.InTransaction()) c.Run("ROLLBACK");
    return s.error();
  }
  return head;
}

}  // namespace unisched::store::sql
