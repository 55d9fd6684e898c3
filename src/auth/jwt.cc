#include "unisched/auth/jwt.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <vector>

namespace unisched::auth {

using nlohmann::json;

namespace {

// A token longer than this is refused unread: an IdP's tokens are a few KiB.
constexpr size_t kMaxTokenBytes = 16 * 1024;
// RSA keys shorter than this are refused (NIST SP 800-131A).
constexpr int kMinRsaBits = 2048;

std::optional<std::string> Base64UrlDecode(std::string_view in) {
  static const auto kTable = [] {
    std::array<int8_t, 256> t{};
    t.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(alphabet[i])] = static_cast<int8_t>(i);
    return t;
  }();
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = kTable[static_cast<unsigned char>(c)];
    if (v < 0) return std::nullopt;  // padding and other alphabets are not base64url as JWS uses it
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (bits >= 6) return std::nullopt;  // a lone sixth of a byte: not a valid length
  return out;
}

Error Refused(const std::string& why) {
  return {ErrorKind::kUnauthenticated, "invalid_jwt", "JWT refused: " + why, {}};
}

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using Pkey = std::shared_ptr<EVP_PKEY>;

struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
using Bn = std::unique_ptr<BIGNUM, BnFree>;

Bn BnOf(const std::string& bytes) {
  return Bn(BN_bin2bn(reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()), nullptr));
}

// A public key from OSSL_PARAMs built by `push`.
template <class Push>
Pkey KeyFromParams(const char* type, Push push) {
  OSSL_PARAM_BLD* bld = OSSL_PARAM_BLD_new();
  if (bld == nullptr) return nullptr;
  EVP_PKEY* pkey = nullptr;
  OSSL_PARAM* params = nullptr;
  EVP_PKEY_CTX* ctx = nullptr;
  if (push(bld) && (params = OSSL_PARAM_BLD_to_param(bld)) != nullptr &&
      (ctx = EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr)) != nullptr && EVP_PKEY_fromdata_init(ctx) == 1) {
    if (EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1) pkey = nullptr;
  }
  EVP_PKEY_CTX_free(ctx);
  OSSL_PARAM_free(params);
  OSSL_PARAM_BLD_free(bld);
  return Pkey(pkey, PkeyFree());
}

}  // namespace

class JwksKeys {
 public:
  struct Key {
    Pkey pkey;
    std::string alg;  // RS256 | ES256: what the key signs with
  };
  std::map<std::string, Key> by_kid;
};

bool LooksLikeJwt(std::string_view token) {
  // A JWS header is a JSON object, so its base64url starts "eyJ" ('{"').
  return token.size() > 3 && token.substr(0, 3) == "eyJ" && std::count(token.begin(), token.end(), '.') == 2;
}

Result<std::shared_ptr<const JwksKeys>> JwtVerifier::ParseJwks(std::string_view text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("keys") || !doc["keys"].is_array()) {
    return Error::Unprocessable("invalid_jwks", "a JWKS is a JSON object with a \"keys\" list (RFC 7517)");
  }
  auto keys = std::make_shared<JwksKeys>();
  for (size_t i = 0; i < doc["keys"].size(); ++i) {
    const json& k = doc["keys"][i];
    const std::string where = "keys[" + std::to_string(i) + "]";
    if (!k.is_object()) return Error::Unprocessable("invalid_jwks", where + " is not an object");
    const std::string kty = k.value("kty", "");
    const std::string use = k.value("use", "sig");
    if (use != "sig") continue;  // encryption keys sign nothing
    auto field = [&](const char* name) -> std::optional<std::string> {
      if (!k.contains(name) || !k[name].is_string()) return std::nullopt;
      return Base64UrlDecode(k[name].get<std::string>());
    };
    JwksKeys::Key key;
    if (kty == "RSA") {
      auto n = field("n"), e = field("e");
      if (!n || !e) return Error::Unprocessable("invalid_jwks", where + ": an RSA key needs n and e (base64url)");
      Bn bn_n = BnOf(*n), bn_e = BnOf(*e);
      key.pkey = KeyFromParams("RSA", [&](OSSL_PARAM_BLD* bld) {
        return OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn_n.get()) == 1 &&
               OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, bn_e.get()) == 1;
      });
      if (key.pkey && EVP_PKEY_get_bits(key.pkey.get()) < kMinRsaBits) {
        return Error::Unprocessable("invalid_jwks", where + ": RSA keys shorter than 2048 bits are refused");
      }
      key.alg = "RS256";
    } else if (kty == "EC") {
      auto x = field("x"), y = field("y");
      if (k.value("crv", "") != "P-256" || !x || !y || x->size() != 32 || y->size() != 32) {
        return Error::Unprocessable("invalid_jwks", where + ": an EC key must be P-256 with 32-byte x and y");
      }
      std::string point = "\x04" + *x + *y;  // uncompressed point (SEC 1, 2.3.3)
      key.pkey = KeyFromParams("EC", [&](OSSL_PARAM_BLD* bld) {
        return OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) == 1 &&
               OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()) == 1;
      });
      key.alg = "ES256";
    } else {
      continue;  // other key types sign with algorithms not accepted here
    }
    if (!key.pkey) return Error::Unprocessable("invalid_jwks", where + ": not a valid " + kty + " public key");
    if (k.contains("alg") && k["alg"] != key.alg) continue;  // e.g. an RSA key for PS256
    keys->by_kid[k.value("kid", "")] = std::move(key);
  }
  if (keys->by_kid.empty()) {
    return Error::Unprocessable("invalid_jwks", "the JWKS holds no RS256 or ES256 signing key");
  }
  return std::shared_ptr<const JwksKeys>(std::move(keys));
}

JwtVerifier::JwtVerifier(JwtSettings settings) : settings_(std::move(settings)) {}
JwtVerifier::~JwtVerifier() = default;

Status JwtVerifier::Load() {
  struct stat st {};
  if (::stat(settings_.jwks_file.c_str(), &st) != 0) {
    return Error::Unprocessable("invalid_jwks", "cannot read the JWKS file " + settings_.jwks_file);
  }
  std::ifstream in(settings_.jwks_file);
  std::stringstream text;
  text << in.rdbuf();
  auto keys = ParseJwks(text.str());
  if (!keys.ok()) {
    Error e = keys.error();
    e.message = settings_.jwks_file + ": " + e.message;
    return e;
  }
  std::lock_guard lock(mu_);
  keys_ = std::move(keys).value();
  loaded_mtime_ns_ = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  return Status::Ok();
}

std::shared_ptr<const JwksKeys> JwtVerifier::Keys() {
  std::lock_guard lock(mu_);
  return keys_;
}

bool JwtVerifier::ReloadIfChanged() {
  struct stat st {};
  if (::stat(settings_.jwks_file.c_str(), &st) != 0) return false;
  {
    std::lock_guard lock(mu_);
    if (int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec == loaded_mtime_ns_) return false;
  }
  return Load().ok();
}

Result<JwtClaims> JwtVerifier::Verify(std::string_view token, Timestamp now) {
  if (token.size() > kMaxTokenBytes) return Refused("longer than 16 KiB");
  const size_t dot1 = token.find('.');
  const size_t dot2 = token.find('.', dot1 + 1);
  if (dot1 == std::string_view::npos || dot2 == std::string_view::npos || token.find('.', dot2 + 1) != token.npos) {
    return Refused("not a JWS compact serialization (header.payload.signature)");
  }
  auto header_text = Base64UrlDecode(token.substr(0, dot1));
  auto payload_text = Base64UrlDecode(token.substr(dot1 + 1, dot2 - dot1 - 1));
  auto signature = Base64UrlDecode(token.substr(dot2 + 1));
  if (!header_text || !payload_text || !signature) return Refused("a part is not base64url");
  const json header = json::parse(*header_text, nullptr, false);
  const json payload = json::parse(*payload_text, nullptr, false);
  if (!header.is_object() || !payload.is_object()) return Refused("its header or payload is not a JSON object");

  // The algorithm is the key's, never the token's choice: a token that names
  // another (none, HS256 with the public key as secret) is refused.
  const std::string alg = header.value("alg", "");
  if (alg != "RS256" && alg != "ES256") return Refused("alg " + alg + " is not accepted (RS256 or ES256)");
  const std::string kid = header.contains("kid") && header["kid"].is_string() ? header["kid"].get<std::string>() : "";
  auto keys = Keys();
  auto find = [&](const std::shared_ptr<const JwksKeys>& k) -> const JwksKeys::Key* {
    if (!k) return nullptr;
    auto it = k->by_kid.find(kid);
    if (it == k->by_kid.end() && kid.empty() && k->by_kid.size() == 1) it = k->by_kid.begin();
    return it == k->by_kid.end() ? nullptr : &it->second;
  };
  const JwksKeys::Key* key = find(keys);
  if (key == nullptr && ReloadIfChanged()) key = find(keys = Keys());
  if (key == nullptr) return Refused("no key '" + kid + "' in " + settings_.jwks_file);
  if (key->alg != alg) return Refused("alg " + alg + " does not match key '" + kid + "' (" + key->alg + ")");

  std::string der;
  if (alg == "ES256") {
    // JWS carries r || s (RFC 7518 3.4); OpenSSL verifies DER.
    if (signature->size() != 64) return Refused("an ES256 signature is 64 bytes");
    ECDSA_SIG* sig = ECDSA_SIG_new();
    ECDSA_SIG_set0(sig, BnOf(signature->substr(0, 32)).release(), BnOf(signature->substr(32)).release());
    unsigned char* out = nullptr;
    const int len = i2d_ECDSA_SIG(sig, &out);
    if (len > 0) der.assign(reinterpret_cast<char*>(out), static_cast<size_t>(len));
    OPENSSL_free(out);
    ECDSA_SIG_free(sig);
  } else {
    der = *signature;
  }
  const std::string_view signed_part = token.substr(0, dot2);
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  const bool valid =
      md != nullptr && EVP_DigestVerifyInit(md, nullptr, EVP_sha256(), nullptr, key->pkey.get()) == 1 &&
      EVP_DigestVerify(md, reinterpret_cast<const unsigned char*>(der.data()), der.size(),
                       reinterpret_cast<const unsigned char*>(signed_part.data()), signed_part.size()) == 1;
  EVP_MD_CTX_free(md);
  if (!valid) return Refused("bad signature");

  const auto leeway = std::chrono::seconds(settings_.leeway_seconds);
  auto time_claim = [&](const char* name) -> std::optional<Timestamp> {
    if (!payload.contains(name) || !payload[name].is_number()) return std::nullopt;
    const double seconds = payload[name].get<double>();
    if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e11) return std::nullopt;
    return FromUnixMillis(static_cast<int64_t>(seconds * 1000));
  };
  const auto exp = time_claim("exp");
  if (!exp) return Refused("no exp claim (tokens must expire)");
  if (now >= *exp + leeway) return Refused("expired at " + FormatRfc3339(*exp));
  if (auto nbf = time_claim("nbf"); nbf && now + leeway < *nbf)
    return Refused("not valid before " + FormatRfc3339(*nbf));
  if (payload.value("iss", json()) != settings_.issuer) return Refused("issuer is not " + settings_.issuer);
  const json aud = payload.value("aud", json());
  const bool audience_ok = aud == settings_.audience ||
                           (aud.is_array() && std::find(aud.begin(), aud.end(), settings_.audience) != aud.end());
  if (!audience_ok) return Refused("audience does not include " + settings_.audience);
  const json user = payload.value(settings_.user_claim, json());
  if (!user.is_string() || user.get<std::string>().empty()) {
    return Refused("no " + settings_.user_claim + " claim naming the user");
  }
  return JwtClaims{user.get<std::string>(), *exp, kid};
}

}  // namespace unisched::auth
