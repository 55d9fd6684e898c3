// API tokens: users' and node agents' tokens, made with their limits (an
// expiry, client address ranges, a rate), listed without their secret, and
// revoked at once (docs/access.md).

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "api/body.h"
#include "api/call.h"
#include "api/responses.h"
#include "unisched/api/api.h"
#include "unisched/auth/access.h"

namespace unisched::api {

using nlohmann::json;

namespace {

// Ten years: a longer expiry is a typo (milliseconds for seconds) more often
// than a wish; a token that should never expire omits it.
constexpr int64_t kMaxLifetimeSeconds = 10LL * 366 * 24 * 3600;
constexpr size_t kMaxRanges = 64;

json OptionalTime(const std::optional<Timestamp>& t) {
  return t ? json(FormatRfc3339(*t)) : json(nullptr);
}

json TokenJson(const store::TokenRecord& t, Timestamp now) {
  std::string state = "active";
  if (t.revoked_at) {
    state = "revoked";
  } else if (t.expires_at && now >= *t.expires_at) {
    state = "expired";
  }
  json out = {{"id", t.id},
              {"kind", t.kind},
              {"name", t.name},
              {"state", state},
              {"created_at", FormatRfc3339(t.created_at)},
              {"expires_at", OptionalTime(t.expires_at)},
              {"last_used_at", OptionalTime(t.last_used_at)},
              {"revoked_at", OptionalTime(t.revoked_at)},
              {"allow_from", t.allow_from},
              {"requests_per_second", t.requests_per_second},
              {"burst", t.burst}};
  if (t.kind == "node") {
    out["pool"] = t.pool;
  } else {
    out["user"] = t.user;
  }
  return out;
}

std::optional<Error> ReadNonNegative(const json& obj, const char* key, double& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return body::WrongType(key, "a number", *it);
  const double value = it->get<double>();
  if (!(value >= 0) || value > 1e9) {
    return Error::Unprocessable("invalid_value", std::string(key) + " must be between 0 and 1e9; 0 sets no limit", key);
  }
  out = value;
  return std::nullopt;
}

// The limits a new token carries, from the body of its POST: name,
// expires_in_seconds or expires_at, allow_from, requests_per_second, burst.
std::optional<Error> ReadTokenOptions(const json& obj, Timestamp now, store::TokenRecord& out) {
  if (auto e = body::ReadString(obj, "name", "name", 64, out.name)) return e;
  int64_t expires_in = 0;
  if (auto e = body::ReadInt(obj, "expires_in_seconds", "expires_in_seconds", 1, kMaxLifetimeSeconds, expires_in)) {
    return e;
  }
  std::string expires_at;
  if (auto e = body::ReadString(obj, "expires_at", "expires_at", 64, expires_at)) return e;
  if (expires_in > 0 && !expires_at.empty()) {
    return Error::Unprocessable("invalid_value", "give expires_in_seconds or expires_at, not both", "expires_at");
  }
  if (expires_in > 0) out.expires_at = now + std::chrono::seconds(expires_in);
  if (!expires_at.empty()) {
    auto at = ParseRfc3339(expires_at);
    if (!at) {
      return Error::BadRequest("malformed_value", "expires_at must be an RFC 3339 time, e.g. 2027-01-31T00:00:00Z",
                               "expires_at");
    }
    if (*at <= now || *at - now > std::chrono::seconds(kMaxLifetimeSeconds)) {
      return Error::Unprocessable("invalid_value", "expires_at must be in the future and within ten years",
                                  "expires_at");
    }
    out.expires_at = *at;
  }
  if (auto e = body::ReadStringList(obj, "allow_from", "allow_from", 64, out.allow_from)) return e;
  if (out.allow_from.size() > kMaxRanges) {
    return Error::Unprocessable("invalid_value", "allow_from takes at most 64 ranges", "allow_from");
  }
  for (size_t i = 0; i < out.allow_from.size(); ++i) {
    auto parsed = auth::ParseCidr(out.allow_from[i]);
    if (!parsed.cidr)
      return Error::Unprocessable("invalid_value", parsed.error, "allow_from[" + std::to_string(i) + "]");
  }
  if (auto e = ReadNonNegative(obj, "requests_per_second", out.requests_per_second)) return e;
  if (auto e = ReadNonNegative(obj, "burst", out.burst)) return e;
  return std::nullopt;
}

const std::set<std::string> kTokenOptionKeys = {"name",       "expires_in_seconds",  "expires_at",
                                                "allow_from", "requests_per_second", "burst"};

}  // namespace

void Api::StoreNewToken(Call& call, store::TokenRecord record, const std::string& token) {
  record.id = store::TokenId(record.hash);
  auto reply = call.reply;
  const Timestamp now = ctx_.clock->Now();
  ctx_.store->Write([record](store::Transaction& t) { return t.InsertToken(record); },
                    [reply, token, record, now](Status s) {
                      if (!s.ok()) {
                        reply(FromError(s.error()));
                        return;
                      }
                      json out = TokenJson(record, now);
                      out["token"] = token;  // shown this once; the store keeps only its hash
                      reply(Json(201, out));
                    });
}

void Api::CreateToken(Call& call) {
  const std::string& name = call.Param("name");
  if (!auth::IsPlatformAdmin(*call.principal) && call.principal->user != name) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may create tokens for other users"));
    return;
  }
  const Timestamp now = ctx_.clock->Now();
  const std::string token = auth::GenerateToken();
  store::TokenRecord record{auth::HashToken(token), name, "user", "", now};
  auto body = body::ParseObject(call.request.body,
                                R"({"name": "ci", "expires_in_seconds": 86400, "allow_from": ["10.0.0.0/8"]})",
                                /*empty_ok=*/true);
  std::optional<Error> invalid = body.ok() ? body::CheckKeys(*body, "", kTokenOptionKeys) : body.error();
  if (!invalid) invalid = ReadTokenOptions(*body, now, record);
  if (invalid) {
    call.reply(FromError(*invalid));
    return;
  }
  if (!ctx_.store->GetUser(name)) {
    call.reply(ErrorResponse(404, "not_found", "no user " + name));
    return;
  }
  StoreNewToken(call, std::move(record), token);
}

void Api::CreateNodeToken(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may create node tokens"));
    return;
  }
  const Timestamp now = ctx_.clock->Now();
  auto body = body::ParseObject(call.request.body, R"({"pool": "cpu-hpc-pool"})");
  store::TokenRecord record;
  std::set<std::string> keys = kTokenOptionKeys;
  keys.insert("pool");
  std::optional<Error> invalid = body.ok() ? body::CheckKeys(*body, "", keys) : body.error();
  if (!invalid) invalid = body::ReadString(*body, "pool", "pool", 256, record.pool);
  if (!invalid) invalid = ReadTokenOptions(*body, now, record);
  if (invalid) {
    call.reply(FromError(*invalid));
    return;
  }
  if (!ctx_.config->Current().cluster.FindPool(record.pool)) {
    std::string pools;
    for (const auto& p : ctx_.config->Current().cluster.pools) pools += (pools.empty() ? "" : ", ") + p.name;
    call.reply(ErrorResponse(422, "invalid_value", "pool must name a pool of the config (" + pools + ")", "pool"));
    return;
  }
  const std::string token = auth::GenerateToken();
  record.hash = auth::HashToken(token);
  record.user = "node:" + record.pool;
  record.kind = "node";
  record.created_at = now;
  StoreNewToken(call, std::move(record), token);
}

void Api::ListTokens(Call& call) {
  const std::string& name = call.Param("name");
  if (!auth::IsPlatformAdmin(*call.principal) && call.principal->user != name) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may list other users' tokens"));
    return;
  }
  if (!ctx_.store->GetUser(name)) {
    call.reply(ErrorResponse(404, "not_found", "no user " + name));
    return;
  }
  const Timestamp now = ctx_.clock->Now();
  json tokens = json::array();
  for (const auto& t : ctx_.store->ListTokens({name, "user"})) tokens.push_back(TokenJson(t, now));
  call.reply(Json(200, {{"tokens", std::move(tokens)}}));
}

void Api::ListNodeTokens(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may list node tokens"));
    return;
  }
  const Timestamp now = ctx_.clock->Now();
  json tokens = json::array();
  for (const auto& t : ctx_.store->ListTokens({"", "node"})) tokens.push_back(TokenJson(t, now));
  call.reply(Json(200, {{"tokens", std::move(tokens)}}));
}

void Api::RevokeToken(Call& call) {
  const std::string& name = call.Param("name");
  if (!auth::IsPlatformAdmin(*call.principal) && call.principal->user != name) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may revoke other users' tokens"));
    return;
  }
  auto token = ctx_.store->FindTokenById(call.Param("id"));
  if (!token || token->kind != "user" || token->user != name) {
    call.reply(ErrorResponse(404, "not_found", "user " + name + " has no token " + call.Param("id")));
    return;
  }
  RevokeTokenRecord(call, *token);
}

void Api::RevokeNodeToken(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may revoke node tokens"));
    return;
  }
  auto token = ctx_.store->FindTokenById(call.Param("id"));
  if (!token || token->kind != "node") {
    call.reply(ErrorResponse(404, "not_found", "no node token " + call.Param("id")));
    return;
  }
  RevokeTokenRecord(call, *token);
}

void Api::RevokeTokenRecord(Call& call, store::TokenRecord token) {
  const Timestamp now = ctx_.clock->Now();
  if (!token.revoked_at) token.revoked_at = now;
  auto reply = call.reply;
  ctx_.store->Write([id = token.id, now](store::Transaction& t) { return t.RevokeToken(id, now); },
                    [this, reply, token, now](Status s) {
                      if (!s.ok()) {
                        reply(FromError(s.error()));
                        return;
                      }
                      // Revoked at once: the next request with it reads the store again.
                      InvalidateCredentials();
                      reply(Json(200, TokenJson(token, now)));
                    });
}

}  // namespace unisched::api
