// SecretVault: see unisched/service/secret_vault.h.

#include "unisched/service/secret_vault.h"

namespace unisched::service {

Result<store::SecretRecord> SecretVault::Sealed(const std::string& project, const std::string& name,
                                                const std::string& value, const std::string& description,
                                                const std::string& who) const {
  auto sealed = box_.Seal(value, Context(project, name));
  if (!sealed.ok()) return sealed.error();
  store::SecretRecord record;
  record.project = project;
  record.name = name;
  record.sealed = std::move(*sealed);
  record.description = description;
  record.created_by = record.updated_by = who;
  record.created_at = record.updated_at = clock_.Now();
  return record;
}

Result<store::SecretRecord> SecretVault::Create(const std::string& project, const std::string& name,
                                                const std::string& value, const std::string& description,
                                                const std::string& who) {
  auto record = Sealed(project, name, value, description, who);
  if (!record.ok()) return record.error();
  if (Status s = store_.InsertSecret(*record); !s.ok()) return s.error();
  return record;
}

Result<store::SecretRecord> SecretVault::Rotate(const std::string& project, const std::string& name,
                                                const std::string& value, const std::string& description,
                                                const std::string& who) {
  auto record = Sealed(project, name, value, description, who);
  if (!record.ok()) return record.error();
  auto rotated = store_.RotateSecret(*record);
  if (!rotated.ok()) return rotated.error();
  if (!rotated->has_value()) {
    return Error::NotFound("project " + project + " has no secret named '" + name + "'; POST /v1/secrets makes one");
  }
  return std::move(**rotated);
}
Result<std::string> SecretVault::Reveal(const std::string& project, const std::string& name) const {
  auto found = store_.GetSecret(project, name);
  if (!found.ok()) return found.error();
  if (!found->has_value()) {
    return Error::NotFound("project " + project + " has no secret named '" + name + "' (deleted since the job was " +
                           "submitted?)");
  }
  return box_.Open((*found)->sealed, Context(project, name));
}

Result<SecretVault::StoreKeys> SecretVault::RevealStoreKeys(const config::ObjectStore& store) const {
  StoreKeys keys;
  for (auto [secret, out] :
       {std::pair{&store.access_key_secret, &keys.access_key}, std::pair{&store.secret_key_secret, &keys.secret_key}}) {
    auto value = Reveal(store.credentials_project, *secret);
    if (!value.ok()) {
      Error e = value.error();
      e.message = "the credentials of object store '" + store.name + "' (secret '" + *secret + "' of project " +
                  store.credentials_project + ") cannot be read: " + e.message;
      return e;
    }
    *out = std::move(value).value();
  }
  return keys;
}

}  // namespace unisched::service
