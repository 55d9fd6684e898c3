// Secrets in SQL (sql_secrets.h): the table secrets (migration 16).

#include "store/sql_secrets.h"

namespace unisched::store::sql {

namespace {

constexpr const char* kColumns =
    "SELECT project, name, version, sealed, description, created_by, created_at, updated_by, updated_at FROM secrets";

SecretRecord RecordFrom(const Statement& read) {
  return {read.Text(0),
          read.Text(1),
          read.Int(2),
          read.Text(3),
          read.Text(4),
          read.Text(5),
          FromUnixMillis(read.Int(6)),
          read.Text(7),
          FromUnixMillis(read.Int(8))};
}

}  // namespace

Status InsertSecret(Connection& c, const SecretRecord& s) {
  auto insert = c.Prepare(
      "INSERT INTO secrets(project, name, version, sealed, description, created_by, created_at, updated_by, "
      "updated_at) VALUES(?1, ?2, 1, ?3, ?4, ?5, ?6, ?5, ?6)");
  if (!insert.ok()) return insert.error();
  insert->Bind(1, s.project)
      .Bind(2, s.name)
      .Bind(3, s.sealed)
      .Bind(4, s.description)
      .Bind(5, s.created_by)
      .Bind(6, ToUnixMillis(s.created_at));
  if (Status done = insert->Run(); !done) {
    if (insert->violation() == Violation::kPrimaryKey || insert->violation() == Violation::kUnique) {
      return Error::Conflict("secret_exists", "project " + s.project + " already has a secret named " + s.name +
                                                  "; PUT /v1/secrets/" + s.project + "/" + s.name +
                                                  " rotates its value");
    }
    return done;
  }
  return Status::Ok();
}

Result<std::optional<SecretRecord>> RotateSecret(Connection& c, const SecretRecord& s) {
  auto update = c.Prepare(
      "UPDATE secrets SET version = version + 1, sealed = ?3, "
      "description = CASE WHEN ?4 = '' THEN description ELSE ?4 END, updated_by = ?5, updated_at = ?6 "
      "WHERE project = ?1 AND name = ?2");
  if (!update.ok()) return update.error();
  update->Bind(1, s.project)
      .Bind(2, s.name)
      .Bind(3, s.sealed)
      .Bind(4, s.description)
      .Bind(5, s.updated_by)
      .Bind(6, ToUnixMillis(s.updated_at));
  if (Status done = update->Run(); !done) return done.error();
  if (c.ChangedRows() == 0) return std::optional<SecretRecord>();
  return GetSecret(c, s.project, s.name);
}

Result<std::optional<SecretRecord>> GetSecret(Connection& c, const std::string& project, const std::string& name) {
  auto read = c.Prepare(std::string(kColumns) + " WHERE project = ?1 AND name = ?2");
  if (!read.ok()) return read.error();
  read->Bind(1, project).Bind(2, name);
  auto row = read->Step();
  if (!row.ok()) return row.error();
  if (!*row) return std::optional<SecretRecord>();
  return std::optional<SecretRecord>(RecordFrom(*read));
}

Result<std::vector<SecretRecord>> ListSecrets(Connection& c, const std::string& project) {
  auto read =
      c.Prepare(std::string(kColumns) + (project.empty() ? "" : " WHERE project = ?1") + " ORDER BY project, name");
  if (!read.ok()) return read.error();
  if (!project.empty()) read->Bind(1, project);
  std::vector<SecretRecord> secrets;
  while (true) {
    auto row = read->Step();
    if (!row.ok()) return row.error();
    if (!*row) break;
    secrets.push_back(RecordFrom(*read));
  }
  return secrets;
}

Result<bool> DeleteSecret(Connection& c, const std::string& project, const std::string& name) {
  auto del = c.Prepare("DELETE FROM secrets WHERE project = ?1 AND name = ?2");
  if (!del.ok()) return del.error();
  del->Bind(1, project).Bind(2, name);
  if (Status done = del->Run(); !done) return done.error();
  return c.ChangedRows() > 0;
}

}  // namespace unisched::store::sql
