#include "testing/jwt_maker.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>

#include <stdexcept>

#include "unisched/auth/auth.h"

namespace unisched::testing {

struct JwtMaker::Key {
  EVP_PKEY* pkey = nullptr;
  ~Key() { EVP_PKEY_free(pkey); }
};

JwtMaker::JwtMaker(Alg alg, std::string kid) : alg_(alg), kid_(std::move(kid)), key_(std::make_unique<Key>()) {
  key_->pkey = alg == Alg::kRs256 ? EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t{2048})
                                  : EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  if (key_->pkey == nullptr) throw std::runtime_error("key generation failed");
}

JwtMaker::~JwtMaker() = default;

std::string JwtMaker::Base64Url(const std::string& bytes) {
  return auth::Base64UrlEncode(bytes);
}

namespace {
std::string BnBytes(const BIGNUM* bn, int width = 0) {
  std::string out(static_cast<size_t>(width > 0 ? width : BN_num_bytes(bn)), '\0');
  BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(out.size()));
  return out;
}
}  // namespace

nlohmann::json JwtMaker::PublicJwk() const {
  if (alg_ == Alg::kRs256) {
    BIGNUM *n = nullptr, *e = nullptr;
    EVP_PKEY_get_bn_param(key_->pkey, OSSL_PKEY_PARAM_RSA_N, &n);
    EVP_PKEY_get_bn_param(key_->pkey, OSSL_PKEY_PARAM_RSA_E, &e);
    nlohmann::json jwk = {{"kty", "RSA"},
                          {"kid", kid_},
                          {"alg", "RS256"},
                          {"use", "sig"},
                          {"n", Base64Url(BnBytes(n))},
                          {"e", Base64Url(BnBytes(e))}};
    BN_free(n);
    BN_free(e);
    return jwk;
  }
  unsigned char point[65];
  size_t len = 0;
  EVP_PKEY_get_octet_string_param(key_->pkey, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point, &len);
  const std::string raw(reinterpret_cast<char*>(point), len);  // 0x04 || x || y
  return {{"kty", "EC"},
          {"kid", kid_},
          {"alg", "ES256"},
          {"use", "sig"},
          {"crv", "P-256"},
          {"x", Base64Url(raw.substr(1, 32))},
          {"y", Base64Url(raw.substr(33, 32))}};
}

std::string JwtMaker::Sign(const nlohmann::json& payload, nlohmann::json header) const {
  if (!header.contains("alg")) header["alg"] = alg_ == Alg::kRs256 ? "RS256" : "ES256";
  if (!header.contains("kid")) header["kid"] = kid_;
  if (!header.contains("typ")) header["typ"] = "JWT";
  const std::string signing_input = Base64Url(header.dump()) + "." + Base64Url(payload.dump());
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  size_t len = 0;
  EVP_DigestSignInit(md, nullptr, EVP_sha256(), nullptr, key_->pkey);
  EVP_DigestSign(md, nullptr, &len, reinterpret_cast<const unsigned char*>(signing_input.data()), signing_input.size());
  std::string sig(len, '\0');
  EVP_DigestSign(md, reinterpret_cast<unsigned char*>(sig.data()), &len,
                 reinterpret_cast<const unsigned char*>(signing_input.data()), signing_input.size());
  sig.resize(len);
  EVP_MD_CTX_free(md);
  if (alg_ == Alg::kEs256) {
    // DER (what OpenSSL makes) to r || s (what JWS carries).
    const unsigned char* p = reinterpret_cast<const unsigned char*>(sig.data());
    ECDSA_SIG* ecdsa = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size()));
    const BIGNUM *r = nullptr, *s = nullptr;
    ECDSA_SIG_get0(ecdsa, &r, &s);
    sig = BnBytes(r, 32) + BnBytes(s, 32);
    ECDSA_SIG_free(ecdsa);
  }
  return signing_input + "." + Base64Url(sig);
}

}  // namespace unisched::testing
