#pragma once
// Secrets (docs/secrets.md): what the API and the launch path do with them,
// over the store's sealed rows and the daemon's key. A value goes in through
// Create or Rotate and comes out only through Reveal, for a launch; nothing
// here logs, returns or stores it in the clear.

#include <optional>
#include <string>
#include <vector>

#include "unisched/auth/secret_box.h"
#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/config/config.h"
#include "unisched/store/store.h"

namespace unisched::service {

class SecretVault {
 public:
  // Largest value: a key file or a kubeconfig fits, a data set does not.
  static constexpr size_t kMaxValueBytes = 64 << 10;

  SecretVault(store::Store& store, auth::SecretBox box, const Clock& clock)
      : store_(store), box_(std::move(box)), clock_(clock) {}

  // A new secret of `project` (kConflict secret_exists when it has one).
  Result<store::SecretRecord> Create(const std::string& project, const std::string& name, const std::string& value,
                                     const std::string& description, const std::string& who);
  // A new value for an existing secret, its version counted up (kNotFound
  // when there is none). `description` empty: kept.
  Result<store::SecretRecord> Rotate(const std::string& project, const std::string& name, const std::string& value,
                                     const std::string& description, const std::string& who);
  // The current value, for a launch; kNotFound when it was deleted.
  Result<std::string> Reveal(const std::string& project, const std::string& name) const;

  // An object store's keys (config storage.object_stores): its two
  // credential secrets, for a launch's staging or the lifecycle. An error
  // names the store and the secret, with Reveal's kind. The caller audits
  // each use (StoreKeySecrets).
  struct StoreKeys {
    std::string access_key;
    std::string secret_key;
  };
  Result<StoreKeys> RevealStoreKeys(const config::ObjectStore& store) const;
  // The secrets RevealStoreKeys reads: "secret/<project>/<name>", as audit targets.
  static std::vector<std::string> StoreKeySecrets(const config::ObjectStore& store) {
    return {"secret/" + store.credentials_project + "/" + store.access_key_secret,
            "secret/" + store.credentials_project + "/" + store.secret_key_secret};
  }

  const std::string& key_id() const { return box_.key_id(); }

 private:
  // The record of `value` sealed for (project, name), made or set by `who` now.
  Result<store::SecretRecord> Sealed(const std::string& project, const std::string& name, const std::string& value,
                                     const std::string& description, const std::string& who) const;
  // What binds a sealed value to its row (auth::SecretBox's context).
  static std::string Context(const std::string& project, const std::string& name) { return project + "/" + name; }

  store::Store& store_;
  auth::SecretBox box_;
  const Clock& clock_;
};

}  // namespace unisched::service
