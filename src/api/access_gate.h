#pragma once
// The API's door (docs/access.md): who a bearer token is, whether it may be
// used now (not expired, not revoked), from this client address (the role's
// and the token's ranges), at this rate (one token bucket per token, the
// tighter of the role's and the token's limits). Resolved tokens are cached,
// so a request reads the store only for a token it has not seen since the
// last change to users or tokens; the times tokens were last used are
// gathered here and written once a minute.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "unisched/api/http.h"
#include "unisched/auth/access.h"
#include "unisched/auth/auth.h"
#include "unisched/auth/jwt.h"
#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/config/config.h"
#include "unisched/store/store.h"

namespace unisched::api {

// Why a request was turned away at the door.
struct Refusal {
  Error error;                     // 401, 403 or 429
  double retry_after_seconds = 0;  // 429: when a token will be in the bucket
  std::string reason;              // for the unauthenticated tally: missing | invalid | expired | revoked
};

class AccessGate {
 public:
  // Last use is written at this granularity: one write per token a minute
  // at most, so a busy token costs the store nothing per request.
  static constexpr auto kLastUseGranularity = std::chrono::minutes(1);

  // `agents_need_client_cert`: node tokens only with a verified client
  // certificate (server.tls.agents_need_client_cert).
  // `job_token_secret`: checks job tokens (empty: none is accepted).
  AccessGate(const config::AccessSettings& settings, bool agents_need_client_cert, const store::Store& store,
             const Clock& clock, std::string job_token_secret = {});

  // The caller, or why not.
  std::variant<auth::Principal, Refusal> Admit(const HttpRequest& request);
  // Forget cached tokens (a user or token changed).
  void Invalidate();
  // The last-use times gathered since the previous call (token hash -> time).
  std::map<std::string, Timestamp> TakeLastUse();

 private:
  struct Credential {
    auth::Principal principal;
    std::string token_id;
    std::string role;  // the access.roles key: user | queue-admin | platform-admin | node
    std::optional<Timestamp> expires_at;
    std::vector<auth::Cidr> token_ranges;
    auth::RateLimit limit;  // the tighter of the role's and the token's
    std::optional<Timestamp> last_use_noted;
    bool jwt = false;  // from the IdP: no stored token to note the use of
  };
  struct RoleRule {
    std::vector<auth::Cidr> ranges;
    auth::RateLimit limit;
  };

  // A unisched token by its hash, or a JWT (its text) from the IdP.
  std::variant<Credential, Refusal> Resolve(const std::string& hash, std::string_view bearer, Timestamp now) const;
  std::variant<Credential, Refusal> ResolveJwt(std::string_view bearer, Timestamp now) const;
  // The principal of a stored user, with its role's limits.
  std::variant<Credential, Refusal> UserCredential(const std::string& name) const;

  const store::Store& store_;
  const Clock& clock_;
  std::map<std::string, RoleRule> roles_;
  auth::RateLimiter limiter_;
  std::unique_ptr<auth::JwtVerifier> jwt_;  // null: JWTs are not accepted
  std::chrono::seconds jwt_leeway_{0};
  bool agents_need_client_cert_ = false;
  const std::string job_token_secret_;
  // Distinct credentials cached at most; beyond, the cache starts afresh (a
  // portal's JWTs are many and short-lived).
  static constexpr size_t kMaxCached = 100'000;

  std::mutex mu_;
  std::unordered_map<std::string, Credential> cache_;  // GUARDED_BY(mu_): token hash -> credential
  // Counts Invalidate calls: a token read from the store before one is not
  // cached after it, so a revocation that commits while a request reads the
  // token cannot be undone by that request's stale copy.
  uint64_t generation_ = 0;                    // GUARDED_BY(mu_)
  std::map<std::string, Timestamp> last_use_;  // GUARDED_BY(mu_): not yet written
};

// The token of an "Authorization: Bearer <token>" header, if it has one.
std::optional<std::string_view> BearerCredentials(std::string_view header);

}  // namespace unisched::api
