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
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "unisched/api/http.h"
#include "unisched/auth/access.h"
#include "unisched/auth/auth.h"
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

  AccessGate(const config::AccessSettings& settings, const store::Store& store, const Clock& clock);

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
  };
  struct RoleRule {
    std::vector<auth::Cidr> ranges;
    auth::RateLimit limit;
  };

  std::variant<Credential, Refusal> Resolve(const std::string& hash) const;

  const store::Store& store_;
  const Clock& clock_;
  std::map<std::string, RoleRule> roles_;
  auth::RateLimiter limiter_;

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
