#include "store/sql_sandboxes.h"

#include <algorithm>

#include "store/sql_common.h"

namespace unisched::store::sql {
namespace {

constexpr const char* kSandboxColumns = "SELECT id, state, record, created_at, ended_at FROM sandboxes";

SandboxRow SandboxFrom(const Statement& stmt) {
  SandboxRow b;
  b.id = stmt.Int(0);
  b.state = stmt.Text(1);
  b.record = stmt.Text(2);
  b.created_at = FromUnixMillis(stmt.Int(3));
  if (!stmt.IsNull(4)) b.ended_at = FromUnixMillis(stmt.Int(4));
  return b;
}

}  // namespace

Status PutSandbox(Connection& c, const SandboxRow& b) {
  auto stmt = c.Prepare(
      "INSERT INTO sandboxes(id, state, record, created_at, ended_at) VALUES(?, ?, ?, ?, ?) ON CONFLICT(id) DO "
      "UPDATE SET state = excluded.state, record = excluded.record, created_at = excluded.created_at, "
      "ended_at = excluded.ended_at");
  if (!stmt.ok()) return stmt.error();
  std::optional<int64_t> ended;
  if (b.ended_at) ended = ToUnixMillis(*b.ended_at);
  stmt->Bind(1, b.id).Bind(2, b.state).Bind(3, b.record).Bind(4, ToUnixMillis(b.created_at)).Bind(5, ended);
  return stmt->Run();
}

Status PutImageVersion(Connection& c, const ImageVersionRow& i) {
  auto stmt = c.Prepare(
      "INSERT INTO images(name, version, spec, created_at, created_by) VALUES(?, ?, ?, ?, ?) ON CONFLICT DO "
      "NOTHING");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, i.name).Bind(2, i.version).Bind(3, i.spec).Bind(4, ToUnixMillis(i.created_at)).Bind(5, i.created_by);
  return stmt->Run();
}

Status PushImageCurrent(Connection& c, const std::string& name, const std::string& version, Timestamp at) {
  auto stmt = c.Prepare("INSERT INTO image_current(name, version, at) VALUES(?, ?, ?)");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, name).Bind(2, version).Bind(3, ToUnixMillis(at));
  return stmt->Run();
}

Status PopImageCurrent(Connection& c, const std::string& name) {
  auto stmt = c.Prepare("DELETE FROM image_current WHERE seq = (SELECT MAX(seq) FROM image_current WHERE name = ?)");
  if (!stmt.ok()) return stmt.error();
  stmt->Bind(1, name);
  return stmt->Run();
}

std::optional<SandboxRow> GetSandbox(Connection& c, int64_t id) {
  auto stmt = OrThrow(c.Prepare(std::string(kSandboxColumns) + " WHERE id = ?"));
  stmt.Bind(1, id);
  if (!OrThrow(stmt.Step())) return std::nullopt;
  return SandboxFrom(stmt);
}

std::vector<SandboxRow> ListSandboxes(Connection& c, bool active_only, int limit) {
  auto stmt = OrThrow(c.Prepare(std::string(kSandboxColumns) + (active_only ? " WHERE ended_at IS NULL" : "") +
                                " ORDER BY id DESC LIMIT " + std::to_string(std::max(limit, 0))));
  std::vector<SandboxRow> out;
  while (OrThrow(stmt.Step())) out.push_back(SandboxFrom(stmt));
  return out;
}

int64_t MaxSandboxId(Connection& c) {
  auto stmt = OrThrow(c.Prepare("SELECT COALESCE(MAX(id), 0) FROM sandboxes"));
  return OrThrow(stmt.Step()) ? stmt.Int(0) : 0;
}

std::vector<ImageVersionRow> ListImageVersions(Connection& c) {
  auto stmt =
      OrThrow(c.Prepare("SELECT name, version, spec, created_at, created_by FROM images ORDER BY name, created_at"));
  std::vector<ImageVersionRow> out;
  while (OrThrow(stmt.Step())) {
    ImageVersionRow i;
    i.name = stmt.Text(0);
    i.version = stmt.Text(1);
    i.spec = stmt.Text(2);
    i.created_at = FromUnixMillis(stmt.Int(3));
    i.created_by = stmt.Text(4);
    out.push_back(std::move(i));
  }
  return out;
}

std::map<std::string, std::vector<std::string>> ImageCurrentStacks(Connection& c) {
  auto stmt = OrThrow(c.Prepare("SELECT name, version FROM image_current ORDER BY seq"));
  std::map<std::string, std::vector<std::string>> out;
  while (OrThrow(stmt.Step())) out[stmt.Text(0)].push_back(stmt.Text(1));
  return out;
}

}  // namespace unisched::store::sql
