#pragma once
// An identity provider for tests: makes RSA-2048 and EC P-256 key pairs,
// publishes their public halves as a JWKS document and signs JWTs with them
// (RS256, ES256), all with OpenSSL, offline.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace unisched::testing {

class JwtMaker {
 public:
  enum class Alg { kRs256, kEs256 };
  // A fresh key pair of `alg` named `kid`.
  JwtMaker(Alg alg, std::string kid);
  ~JwtMaker();
  JwtMaker(const JwtMaker&) = delete;
  JwtMaker& operator=(const JwtMaker&) = delete;

  // The public key as one JWKS entry ({"kty", "kid", "alg", "use", ...}).
  nlohmann::json PublicJwk() const;
  // header.payload.signature, signed with this key; `header` gets alg and kid
  // unless it has them.
  std::string Sign(const nlohmann::json& payload, nlohmann::json header = nlohmann::json::object()) const;

  static std::string Base64Url(const std::string& bytes);

 private:
  struct Key;
  Alg alg_;
  std::string kid_;
  std::unique_ptr<Key> key_;
};

}  // namespace unisched::testing
