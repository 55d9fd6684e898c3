#pragma once
// Secrets at rest (docs/secrets.md): AES-256-GCM through OpenSSL, under one
// key kept in a file outside the database (0600, 32 random bytes as hex).
// A sealed value is text, "v1.<key id>.<nonce>.<ciphertext and tag>" (hex),
// bound to where it belongs by its associated data (project and name), so a
// sealed value copied onto another secret's row does not open.

#include <string>
#include <string_view>

#include "unisched/common/status.h"

namespace unisched::auth {

class SecretBox {
 public:
  static constexpr size_t kKeyBytes = 32;    // AES-256
  static constexpr size_t kNonceBytes = 12;  // GCM's 96-bit IV, random per seal
  static constexpr size_t kTagBytes = 16;

  // The key of `path`. A missing file is created (0600, a new random key)
  // when `create`; one that group or others may read is refused, as ssh
  // refuses such a private key, and so is a file not holding 64 hex digits.
  static Result<SecretBox> OpenKeyFile(const std::string& path, bool create);
  // A box over `key` (kKeyBytes raw bytes), for tests.
  static Result<SecretBox> FromKey(std::string_view key);

  // Encrypts `plain` under a fresh random nonce, bound to `context` (who it
  // belongs to, e.g. "project/name"): the same context opens it.
  Result<std::string> Seal(std::string_view plain, std::string_view context) const;
  // The value sealed by Seal with the same key and context; an error names
  // which check failed (another key, another context, a damaged value),
  // never the value.
  Result<std::string> Open(std::string_view sealed, std::string_view context) const;

  // 16 hex digits of SHA-256 of the key: which key sealed a value, so that a
  // replica holding another key file says so instead of failing to decrypt.
  const std::string& key_id() const { return key_id_; }

 private:
  std::string key_;
  std::string key_id_;
};

}  // namespace unisched::auth
