// The API's door: tokens that expire and are revoked, listed without their
// secret; client address ranges and rate limits by role and by token
// (docs/access.md). Driven with a fake clock.

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "api_fixture.h"
#include "testing/jwt_maker.h"

namespace unisched::api {
namespace {

using nlohmann::json;

class AccessTest : public ApiFixture {
 protected:
  void AdjustConfig(config::Config& config) override {
    config.access.roles["user"] = {{}, /*requests_per_second=*/2, /*burst=*/3};
    config.access.roles["platform-admin"] = {{"127.0.0.0/8", "::1/128"}, 0, 0};
  }
  // A new token for `user` with the options in `body`; its secret.
  std::string NewToken(const std::string& user, const json& body, const std::string& as = "admin-token") {
    auto r = Do("POST", "/v1/users/" + user + "/tokens", body.dump(), as);
    EXPECT_EQ(r.status, 201) << r.body;
    return json::parse(r.body).value("token", "");
  }
};

TEST_F(AccessTest, ATokenExpiresAtItsTime) {
  auto r = Do("POST", "/v1/users/alice/tokens", R"({"name": "ci", "expires_in_seconds": 60})");
  ASSERT_EQ(r.status, 201) << r.body;
  const json made = json::parse(r.body);
  EXPECT_EQ(made["name"], "ci");
  EXPECT_EQ(made["state"], "active");
  EXPECT_EQ(made["expires_at"], FormatRfc3339(clock_.Now() + std::chrono::seconds(60)));
  const std::string token = made["token"];
  EXPECT_EQ(Do("GET", "/v1/whoami", "", token).status, 200);
  clock_.Advance(std::chrono::seconds(59));
  EXPECT_EQ(Do("GET", "/v1/whoami", "", token).status, 200);
  clock_.Advance(std::chrono::seconds(1));
  auto expired = Do("GET", "/v1/whoami", "", token);
  EXPECT_EQ(expired.status, 401);
  EXPECT_EQ(json::parse(expired.body)["error"]["code"], "token_expired");
  // Its other tokens still work.
  EXPECT_EQ(Do("GET", "/v1/whoami", "", "alice-token").status, 200);
}

TEST_F(AccessTest, ARevokedTokenStopsAtOnceAndListsWithoutItsSecret) {
  // Alice's role allows 2 requests/s: a second between her calls.
  auto as_alice = [this](const std::string& method, const std::string& path) {
    clock_.Advance(std::chrono::seconds(1));
    return Do(method, path, "", "alice-token");
  };
  const std::string token = NewToken("alice", {{"name", "laptop"}}, "alice-token");
  EXPECT_EQ(Do("GET", "/v1/whoami", "", token).status, 200);  // now cached
  auto list = as_alice("GET", "/v1/users/alice/tokens");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(list.body.find(token), std::string::npos);
  EXPECT_EQ(list.body.find(auth::HashToken(token)), std::string::npos);
  std::string id;
  const json listed = json::parse(list.body);
  for (const auto& t : listed["tokens"]) {
    EXPECT_FALSE(t.contains("token"));
    if (t["name"] == "laptop") id = t["id"];
  }
  ASSERT_EQ(id, store::TokenId(auth::HashToken(token))) << list.body;

  auto revoked = as_alice("DELETE", "/v1/users/alice/tokens/" + id);
  ASSERT_EQ(revoked.status, 200) << revoked.body;
  EXPECT_EQ(json::parse(revoked.body)["state"], "revoked");
  auto refused = Do("GET", "/v1/whoami", "", token);
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(json::parse(refused.body)["error"]["code"], "token_revoked");
  EXPECT_EQ(as_alice("GET", "/v1/whoami").status, 200);
  // Revoking again is harmless; another user's token is not found for her.
  EXPECT_EQ(as_alice("DELETE", "/v1/users/alice/tokens/" + id).status, 200);
  const std::string admin_id = store::TokenId(auth::HashToken("admin-token"));
  EXPECT_EQ(as_alice("DELETE", "/v1/users/alice/tokens/" + admin_id).status, 404);
  EXPECT_EQ(as_alice("DELETE", "/v1/users/admin/tokens/" + admin_id).status, 403);
  EXPECT_EQ(as_alice("GET", "/v1/users/admin/tokens").status, 403);
  EXPECT_EQ(Do("GET", "/v1/whoami").status, 200);
}

TEST_F(AccessTest, LastUseIsRecordedToTheMinute) {
  const std::string token = NewToken("alice", json::object());
  const Timestamp used = clock_.Now();
  EXPECT_EQ(Do("GET", "/v1/whoami", "", token).status, 200);
  api_->FlushAudit(clock_.Now());
  store_->WriteSync([](store::Transaction&) { return Status::Ok(); });  // after the flush's write
  auto record = store_->FindToken(auth::HashToken(token));
  ASSERT_TRUE(record && record->last_used_at);
  EXPECT_EQ(*record->last_used_at, used);
  auto list = json::parse(Do("GET", "/v1/users/alice/tokens").body)["tokens"];
  bool seen = false;
  for (const auto& t : list) seen |= t["last_used_at"] == FormatRfc3339(used);
  EXPECT_TRUE(seen) << list.dump();
}

TEST_F(AccessTest, ATokensAddressRangesAndItsRolesMustBothAllowTheClient) {
  const std::string token = NewToken("alice", {{"allow_from", {"192.168.0.0/16"}}});
  EXPECT_EQ(Do("GET", "/v1/whoami", "", token, "192.168.7.1:5000").status, 200);
  auto refused = Do("GET", "/v1/whoami", "", token, "10.0.0.1:5000");
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(json::parse(refused.body)["error"]["code"], "address_not_allowed");
  // The platform-admin role is confined to the loopback by the config.
  EXPECT_EQ(Do("GET", "/v1/whoami", "", "admin-token", "[::1]:6000").status, 200);
  EXPECT_EQ(Do("GET", "/v1/whoami", "", "admin-token", "10.0.0.1:5000").status, 403);
  EXPECT_EQ(Do("GET", "/v1/whoami", "", "admin-token", "").status, 403);  // an unknown peer is not inside
  // Alice's role has no ranges: her plain token works from anywhere.
  EXPECT_EQ(Do("GET", "/v1/whoami", "", "alice-token", "10.0.0.1:5000").status, 200);
}

TEST_F(AccessTest, ATokenOverItsRateGets429WithRetryAfterAndOthersDoNot) {
  // The user role: 2 requests/s, burst 3.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Do("GET", "/v1/whoami", "", "alice-token").status, 200) << i;
  auto limited = Do("GET", "/v1/whoami", "", "alice-token");
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(json::parse(limited.body)["error"]["code"], "rate_limited");
  std::string retry_after;
  for (const auto& [name, value] : limited.headers) {
    if (name == "Retry-After") retry_after = value;
  }
  EXPECT_EQ(retry_after, "1");  // half a second, rounded up
  // Another token of the same user has its own bucket; admins have no limit.
  const std::string second = NewToken("alice", json::object());
  EXPECT_EQ(Do("GET", "/v1/whoami", "", second).status, 200);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(Do("GET", "/v1/whoami").status, 200);
  clock_.Advance(std::chrono::milliseconds(500));
  EXPECT_EQ(Do("GET", "/v1/whoami", "", "alice-token").status, 200);
  // A token's own limit is tighter than its role's: 1 a minute.
  const std::string slow = NewToken("alice", {{"requests_per_second", 1.0 / 60}});
  EXPECT_EQ(Do("GET", "/v1/whoami", "", slow).status, 200);
  EXPECT_EQ(Do("GET", "/v1/whoami", "", slow).status, 429);
}

TEST_F(AccessTest, BadTokenOptionsAreRefusedAndNothingIsMade) {
  struct Case {
    const char* body;
    int status;
    const char* field;
  };
  const std::vector<Case> cases = {
      {R"({"expires_in_seconds": 0})", 422, "expires_in_seconds"},
      {R"({"expires_in_seconds": "1d"})", 400, "expires_in_seconds"},
      {R"({"expires_at": "tomorrow"})", 400, "expires_at"},
      {R"({"expires_at": "2001-01-01T00:00:00Z"})", 422, "expires_at"},
      {R"({"expires_in_seconds": 60, "expires_at": "2099-01-01T00:00:00Z"})", 422, "expires_at"},
      {R"({"allow_from": ["10.0.0.1/8"]})", 422, "allow_from[0]"},
      {R"({"allow_from": "10.0.0.0/8"})", 400, "allow_from"},
      {R"({"requests_per_second": -1})", 422, "requests_per_second"},
      {R"({"burst": "many"})", 400, "burst"},
      {R"({"scope": "all"})", 422, "scope"},
  };
  const size_t before = store_->ListTokens({"alice", ""}).size();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    auto r = Do("POST", "/v1/users/alice/tokens", c.body);
    EXPECT_EQ(r.status, c.status) << r.body;
    EXPECT_EQ(json::parse(r.body)["error"].value("field", ""), c.field) << r.body;
  }
  EXPECT_EQ(store_->ListTokens({"alice", ""}).size(), before);
}

TEST_F(AccessTest, NodeTokensAreListedAndRevokedByAdminsOnly) {
  auto made = Do("POST", "/v1/node-tokens", R"({"pool": "cpu-hpc-pool", "expires_in_seconds": 3600})");
  ASSERT_EQ(made.status, 201) << made.body;
  const json token = json::parse(made.body);
  EXPECT_EQ(token["pool"], "cpu-hpc-pool");
  EXPECT_EQ(token["kind"], "node");
  EXPECT_EQ(Do("GET", "/v1/node-tokens", "", "alice-token").status, 403);
  auto list = json::parse(Do("GET", "/v1/node-tokens").body)["tokens"];
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["id"], token["id"]);
  EXPECT_EQ(Do("DELETE", "/v1/node-tokens/" + token["id"].get<std::string>(), "", "alice-token").status, 403);
  EXPECT_EQ(Do("DELETE", "/v1/node-tokens/" + token["id"].get<std::string>()).status, 200);
  auto refused = Do("POST", "/v1/agents/heartbeat", "{}", token["token"]);
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(Do("DELETE", "/v1/node-tokens/tok_0000000000000000").status, 404);
}

}  // namespace
}  // namespace unisched::api

namespace unisched::api {
namespace {

// A portal calls the API with its logged-in user's JWT from the IdP.
class JwtAccessTest : public ApiFixture {
 protected:
  void AdjustConfig(config::Config& config) override {
    std::ofstream(dir_ + "/jwks.json") << nlohmann::json{{"keys", {idp_.PublicJwk()}}}.dump();
    config.access.jwt.jwks_file = dir_ + "/jwks.json";
    config.access.jwt.issuer = "https://idp.example.org";
    config.access.jwt.audience = "unisched";
    config.access.jwt.user_claim = "preferred_username";
    config.access.roles["user"] = {{"10.0.0.0/8"}, 1, 2};
  }
  std::string TokenFor(const std::string& user, int64_t lifetime_seconds = 300) {
    const int64_t now = ToUnixMillis(clock_.Now()) / 1000;
    return idp_.Sign({{"iss", "https://idp.example.org"},
                      {"aud", "unisched"},
                      {"preferred_username", user},
                      {"exp", now + lifetime_seconds}});
  }
  testing::JwtMaker idp_{testing::JwtMaker::Alg::kEs256, "idp-key"};
};

TEST_F(JwtAccessTest, AJwtActsAsItsUserWithItsRolesLimits) {
  const std::string token = TokenFor("alice");
  auto who = Do("GET", "/v1/whoami", "", token, "10.1.1.1:4000");
  ASSERT_EQ(who.status, 200) << who.body;
  EXPECT_EQ(nlohmann::json::parse(who.body)["user"], "alice");
  EXPECT_EQ(nlohmann::json::parse(who.body)["role"], "user");
  // Her role's ranges and rate apply: burst 2, then 429; elsewhere 403.
  EXPECT_EQ(Do("GET", "/v1/whoami", "", token, "10.1.1.1:4000").status, 200);
  EXPECT_EQ(Do("GET", "/v1/whoami", "", token, "10.1.1.1:4000").status, 429);
  EXPECT_EQ(Do("GET", "/v1/whoami", "", token, "192.168.1.1:4000").status, 403);
  // A second JWT of hers shares her bucket: the limit is per user.
  EXPECT_EQ(Do("GET", "/v1/whoami", "", TokenFor("alice", 600), "10.1.1.1:4000").status, 429);
}

TEST_F(JwtAccessTest, UnknownUsersForeignKeysAndExpiredTokensAre401) {
  auto unknown = Do("GET", "/v1/whoami", "", TokenFor("mallory"));
  EXPECT_EQ(unknown.status, 401);
  EXPECT_NE(unknown.body.find("not a unisched user"), std::string::npos) << unknown.body;
  testing::JwtMaker stranger(testing::JwtMaker::Alg::kEs256, "idp-key");
  const int64_t now = ToUnixMillis(clock_.Now()) / 1000;
  auto forged = Do("GET", "/v1/whoami", "",
                   stranger.Sign({{"iss", "https://idp.example.org"},
                                  {"aud", "unisched"},
                                  {"preferred_username", "admin"},
                                  {"exp", now + 300}}));
  EXPECT_EQ(forged.status, 401);
  EXPECT_EQ(nlohmann::json::parse(forged.body)["error"]["code"], "invalid_jwt");
  const std::string short_lived = TokenFor("admin", 10);
  EXPECT_EQ(Do("GET", "/v1/whoami", "", short_lived).status, 200);
  clock_.Advance(std::chrono::seconds(10 + 60));  // its exp and the default leeway
  auto expired = Do("GET", "/v1/whoami", "", short_lived);
  EXPECT_EQ(expired.status, 401);
  EXPECT_EQ(nlohmann::json::parse(expired.body)["error"]["code"], "token_expired");
  // Plain unisched tokens work beside JWTs.
  EXPECT_EQ(Do("GET", "/v1/whoami").status, 200);
}

}  // namespace
}  // namespace unisched::api
