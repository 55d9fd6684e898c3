// JWTs from the centre's identity provider, with keys and tokens the test
// makes (testing/jwt_maker.h): what is accepted, and each way a token is
// refused, including the classic attacks (alg none, HS256 keyed with the
// public key, a key the JWKS lacks).

#include "unisched/auth/jwt.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "testing/jwt_maker.h"

namespace unisched::auth {
namespace {

using nlohmann::json;
using testing::JwtMaker;

class JwtTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/unisched-jwt-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    WriteJwks({rsa_.PublicJwk(), ec_.PublicJwk()});
    settings_.jwks_file = dir_ + "/jwks.json";
    settings_.issuer = "https://idp.example.org/realms/hpc";
    settings_.audience = "unisched";
    settings_.user_claim = "preferred_username";
    settings_.leeway_seconds = 30;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void WriteJwks(const json& keys) { std::ofstream(dir_ + "/jwks.json") << json{{"keys", keys}}.dump(); }
  json Claims() const {
    const int64_t now = ToUnixMillis(now_) / 1000;
    return {{"iss", settings_.issuer},
            {"aud", {"portal", "unisched"}},
            {"sub", "f1c2-uuid"},
            {"preferred_username", "alice"},
            {"iat", now},
            {"exp", now + 300}};
  }

  std::string dir_;
  JwtSettings settings_;
  JwtMaker rsa_{JwtMaker::Alg::kRs256, "rsa-1"};
  JwtMaker ec_{JwtMaker::Alg::kEs256, "ec-1"};
  Timestamp now_ = FromUnixMillis(1'800'000'000'000);
};

TEST_F(JwtTest, TokensSignedByTheIdpsKeysAreAccepted) {
  JwtVerifier verifier(settings_);
  ASSERT_TRUE(verifier.Load().ok());
  for (const JwtMaker* maker : {&rsa_, &ec_}) {
    const std::string token = maker->Sign(Claims());
    EXPECT_TRUE(LooksLikeJwt(token));
    auto claims = verifier.Verify(token, now_);
    ASSERT_TRUE(claims.ok()) << claims.error().message;
    EXPECT_EQ(claims->user, "alice");
    EXPECT_EQ(claims->expires_at, now_ + std::chrono::seconds(300));
  }
  json single_audience = Claims();
  single_audience["aud"] = "unisched";
  EXPECT_TRUE(verifier.Verify(rsa_.Sign(single_audience), now_).ok());
  EXPECT_FALSE(LooksLikeJwt("usk_abcdef"));
}

TEST_F(JwtTest, EachFlawIsRefusedWithItsReason) {
  JwtVerifier verifier(settings_);
  ASSERT_TRUE(verifier.Load().ok());
  JwtMaker stranger(JwtMaker::Alg::kRs256, "rsa-1");  // same kid, another key
  auto with = [&](const char* key, json value) {
    json c = Claims();
    if (value.is_null()) {
      c.erase(key);
    } else {
      c[key] = std::move(value);
    }
    return rsa_.Sign(c);
  };
  const std::string good = rsa_.Sign(Claims());
  std::string tampered = good;
  tampered[good.find('.') + 5] ^= 1;  // one bit of the payload
  const std::string header_none = JwtMaker::Base64Url(R"({"alg":"none","kid":"rsa-1"})");
  const std::string payload = JwtMaker::Base64Url(Claims().dump());
  const int64_t now = ToUnixMillis(now_) / 1000;
  struct Case {
    const char* name;
    std::string token;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"another key with the same kid", stranger.Sign(Claims()), "bad signature"},
      {"a changed payload", tampered, "bad signature"},
      {"alg none", header_none + "." + payload + ".", "alg none is not accepted"},
      {"HS256 keyed with the public key", rsa_.Sign(Claims(), {{"alg", "HS256"}}), "alg HS256 is not accepted"},
      {"an EC alg on an RSA key", rsa_.Sign(Claims(), {{"alg", "ES256"}}), "does not match key"},
      {"a kid the JWKS lacks", rsa_.Sign(Claims(), {{"kid", "rotated-away"}}), "no key 'rotated-away'"},
      {"expired beyond the leeway", with("exp", now - 31), "expired at"},
      {"no exp", with("exp", nullptr), "no exp claim"},
      {"not yet valid", with("nbf", now + 60), "not valid before"},
      {"another issuer", with("iss", "https://evil.example.org"), "issuer is not"},
      {"another audience", with("aud", "grafana"), "audience does not include unisched"},
      {"no user claim", with("preferred_username", nullptr), "no preferred_username claim"},
      {"a user claim that is not text", with("preferred_username", 42), "no preferred_username claim"},
      {"two parts", "eyJhbGciOiJSUzI1NiJ9.e30", "not a JWS compact serialization"},
      {"not base64url", "eyJ!.e30.sig", "not base64url"},
      {"a header that is not JSON", JwtMaker::Base64Url("{oops") + "." + payload + ".c2ln", "not a JSON object"},
      {"far too long", "eyJ" + std::string(20000, 'a') + ".a.a", "longer than 16 KiB"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = verifier.Verify(c.token, now_);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind, ErrorKind::kUnauthenticated);
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
  }
  // Within the leeway an expired token still passes (clock skew).
  EXPECT_TRUE(verifier.Verify(with("exp", now - 10), now_).ok());
}

TEST_F(JwtTest, ARotatedKeyIsPickedUpFromTheFile) {
  JwtVerifier verifier(settings_);
  ASSERT_TRUE(verifier.Load().ok());
  JwtMaker next(JwtMaker::Alg::kEs256, "ec-2");
  const std::string token = next.Sign(Claims());
  EXPECT_FALSE(verifier.Verify(token, now_).ok());
  ::usleep(20'000);  // a later modification time
  WriteJwks({ec_.PublicJwk(), next.PublicJwk()});
  auto claims = verifier.Verify(token, now_);
  EXPECT_TRUE(claims.ok()) << claims.error().message;
}

TEST_F(JwtTest, ABrokenJwksSaysWhatIsWrong) {
  struct Case {
    std::string text;
    const char* says;
  };
  JwtMaker weak_holder(JwtMaker::Alg::kEs256, "x");
  json bad_ec = weak_holder.PublicJwk();
  bad_ec["x"] = "AAAA";
  const std::vector<Case> cases = {
      {"not json", "a JWKS is a JSON object"},
      {R"({"keys": {}})", "a JWKS is a JSON object"},
      {R"({"keys": [{"kty": "RSA", "kid": "a"}]})", "needs n and e"},
      {json{{"keys", {bad_ec}}}.dump(), "must be P-256"},
      {R"({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]})", "no RS256 or ES256 signing key"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto keys = JwtVerifier::ParseJwks(c.text);
    ASSERT_FALSE(keys.ok());
    EXPECT_NE(keys.error().message.find(c.says), std::string::npos) << keys.error().message;
  }
  JwtSettings missing = settings_;
  missing.jwks_file = dir_ + "/nowhere.json";
  JwtVerifier verifier(missing);
  EXPECT_FALSE(verifier.Load().ok());
  EXPECT_FALSE(verifier.Verify(rsa_.Sign(Claims()), now_).ok());  // refuses everything
}

}  // namespace
}  // namespace unisched::auth
