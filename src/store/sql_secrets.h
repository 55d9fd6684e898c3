#pragma once
// Secrets (unisched/store/secrets.h) in SQL, for SQLite and PostgreSQL
// alike, on the connection given (the store's lease connection). Internal
// to src/store.

#include <optional>
#include <string>
#include <vector>

#include "store/sql.h"
#include "unisched/store/secrets.h"

namespace unisched::store::sql {

Status InsertSecret(Connection& c, const SecretRecord& secret);
Result<std::optional<SecretRecord>> RotateSecret(Connection& c, const SecretRecord& secret);
Result<std::optional<SecretRecord>> GetSecret(Connection& c, const std::string& project, const std::string& name);
Result<std::vector<SecretRecord>> ListSecrets(Connection& c, const std::string& project);
Result<bool> DeleteSecret(Connection& c, const std::string& project, const std::string& name);

}  // namespace unisched::store::sql
