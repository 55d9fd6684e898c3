#pragma once
// Bearer JWTs signed by the centre's identity provider (docs/access.md,
// "The centre's identity provider"): RS256 and ES256 only, keys from a JWKS
// file, issuer and audience checked, one claim naming the unisched user. A
// portal that logged its user in through the IdP calls the API with the
// user's token; two-factor login stays the IdP's business.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "unisched/common/status.h"
#include "unisched/common/time.h"

namespace unisched::auth {

struct JwtSettings {
  std::string jwks_file;           // the IdP's public keys as a JWKS document (RFC 7517)
  std::string issuer;              // the token's "iss" must equal it
  std::string audience;            // the token's "aud" must be or contain it
  std::string user_claim = "sub";  // names the unisched user (who must exist)
  int leeway_seconds = 60;         // clock skew allowed on exp and nbf
  bool enabled() const { return !jwks_file.empty(); }
};

// What a verified token says.
struct JwtClaims {
  std::string user;      // the user_claim's value
  Timestamp expires_at;  // its "exp"
  std::string key_id;    // the key that signed it
};

// Whether `token` looks like a JWS compact serialization (three base64url
// parts, the header a JSON object), as opposed to a unisched token.
bool LooksLikeJwt(std::string_view token);

// The keys of a JWKS document (RSA and EC P-256 public keys), by kid.
class JwksKeys;

class JwtVerifier {
 public:
  explicit JwtVerifier(JwtSettings settings);
  ~JwtVerifier();
  JwtVerifier(const JwtVerifier&) = delete;
  JwtVerifier& operator=(const JwtVerifier&) = delete;

  // Loads the JWKS file; its error says what is wrong with it. A verifier
  // whose file could not be loaded refuses every token.
  Status Load();
  // The claims of a valid token at `now`, or kUnauthenticated with the
  // reason (expired, wrong issuer, bad signature, ...). A token signed with
  // a key id the loaded keys lack reloads the file once if it changed (the
  // IdP rotated its keys).
  Result<JwtClaims> Verify(std::string_view token, Timestamp now);

  // The keys of a JWKS document; for tests and `validate-config`.
  static Result<std::shared_ptr<const JwksKeys>> ParseJwks(std::string_view text);

 private:
  std::shared_ptr<const JwksKeys> Keys();
  bool ReloadIfChanged();

  JwtSettings settings_;
  std::mutex mu_;
  std::shared_ptr<const JwksKeys> keys_;  // GUARDED_BY(mu_)
  int64_t loaded_mtime_ns_ = -1;          // GUARDED_BY(mu_)
};

}  // namespace unisched::auth
