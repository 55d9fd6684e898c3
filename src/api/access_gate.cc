#include "api/access_gate.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <utility>

namespace unisched::api {
namespace {

std::vector<auth::Cidr> Ranges(const std::vector<std::string>& texts) {
  // Validated on the way in (ValidateConfig, the token endpoints).
  std::vector<auth::Cidr> out;
  for (const auto& text : texts) {
    if (auto parsed = auth::ParseCidr(text); parsed.cidr) out.push_back(*parsed.cidr);
  }
  return out;
}

// The tighter of two limits; a limit of 0 is none.
auth::RateLimit Tighter(const auth::RateLimit& a, const auth::RateLimit& b) {
  if (!a.limited()) return b;
  if (!b.limited()) return a;
  auto burst = [](const auth::RateLimit& l) { return l.burst > 0 ? l.burst : l.requests_per_second; };
  return {std::min(a.requests_per_second, b.requests_per_second), std::min(burst(a), burst(b))};
}

std::string DescribeLimit(const auth::RateLimit& l) {
  char text[96];
  std::snprintf(text, sizeof text, "%g requests/s (burst %g)", l.requests_per_second,
                std::max(1.0, l.burst > 0 ? l.burst : l.requests_per_second));
  return text;
}

}  // namespace

std::optional<std::string_view> BearerCredentials(std::string_view header) {
  // The scheme is case-insensitive and may be followed by several spaces
  // (RFC 9110 11.1 and 11.4), so "bearer <token>" from some clients works.
  static constexpr std::string_view kScheme = "bearer";
  if (header.size() <= kScheme.size() ||
      !std::equal(kScheme.begin(), kScheme.end(), header.begin(),
                  [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); })) {
    return std::nullopt;
  }
  std::string_view rest = header.substr(kScheme.size());
  if (rest.front() != ' ' && rest.front() != '\t') return std::nullopt;
  const size_t start = rest.find_first_not_of(" \t");
  if (start == std::string_view::npos) return std::nullopt;
  rest = rest.substr(start);
  const size_t end = rest.find_last_not_of(" \t");
  return rest.substr(0, end + 1);
}

AccessGate::AccessGate(const config::AccessSettings& settings, bool agents_need_client_cert, const store::Store& store,
                       const Clock& clock, std::string job_token_secret)
    : store_(store),
      clock_(clock),
      agents_need_client_cert_(agents_need_client_cert),
      job_token_secret_(std::move(job_token_secret)) {
  for (const auto& [role, rule] : settings.roles) {
    roles_[role] = RoleRule{Ranges(rule.allow_from), {rule.requests_per_second, rule.burst}};
  }
  if (settings.jwt.enabled()) {
    jwt_ = std::make_unique<auth::JwtVerifier>(settings.jwt);
    jwt_leeway_ = std::chrono::seconds(settings.jwt.leeway_seconds);
    // The daemon checked the file at start (Daemon::Start); a file broken
    // since leaves every JWT refused, with the reason in the answer.
    (void)jwt_->Load();
  }
}

void AccessGate::Invalidate() {
  std::lock_guard lock(mu_);
  cache_.clear();
  ++generation_;
}

std::map<std::string, Timestamp> AccessGate::TakeLastUse() {
  std::lock_guard lock(mu_);
  return std::exchange(last_use_, {});
}

std::variant<AccessGate::Credential, Refusal> AccessGate::UserCredential(const std::string& name) const {
  auto user = store_.GetUser(name);
  if (!user) return Refusal{Error::Unauthenticated("the token's user no longer exists"), 0, "invalid"};
  Credential c;
  c.principal.user = user->name;
  c.principal.role = auth::ParseRole(user->role).value_or(auth::Role::kUser);
  c.principal.projects = user->projects;
  c.principal.queues = user->queues;
  c.principal.unix_user = user->unix_user;
  c.role = std::string(auth::ToString(c.principal.role));
  if (auto it = roles_.find(c.role); it != roles_.end()) c.limit = it->second.limit;
  return c;
}

std::variant<AccessGate::Credential, Refusal> AccessGate::ResolveJwt(std::string_view bearer, Timestamp now) const {
  auto claims = jwt_->Verify(bearer, now);
  if (!claims.ok()) return Refusal{claims.error(), 0, "invalid"};
  auto resolved = UserCredential(claims->user);
  if (auto* refusal = std::get_if<Refusal>(&resolved)) {
    refusal->error.message = "the identity provider's user '" + claims->user +
                             "' is not a unisched user: a platform-admin creates it (POST /v1/users)";
    return resolved;
  }
  Credential& c = std::get<Credential>(resolved);
  // One bucket per user: a portal's JWTs for one user are many.
  c.token_id = "jwt:" + claims->user;
  c.expires_at = claims->expires_at + jwt_leeway_;  // as Verify counts it
  c.jwt = true;
  return resolved;
}

std::variant<AccessGate::Credential, Refusal> AccessGate::Resolve(const std::string& hash, std::string_view bearer,
                                                                  Timestamp now) const {
  if (jwt_ && auth::LooksLikeJwt(bearer)) return ResolveJwt(bearer, now);
  auto token = store_.FindToken(hash);
  if (!token || (token->kind != "user" && token->kind != "node")) {
    return Refusal{Error::Unauthenticated("invalid token: ask an admin for one (POST /v1/users/{name}/tokens)"), 0,
                   "invalid"};
  }
  if (token->revoked_at) {
    return Refusal{{ErrorKind::kUnauthenticated,
                    "token_revoked",
                    "token " + token->id + " was revoked at " + FormatRfc3339(*token->revoked_at) +
                        "; create a new one (POST /v1/users/{name}/tokens)",
                    {}},
                   0,
                   "revoked"};
  }
  Credential c;
  if (token->kind == "node") {
    // A node agent's token: it acts for the nodes of one pool, nothing else.
    c.principal.user = "node:" + token->pool;
    c.principal.node_pool = token->pool;
    c.role = "node";
    if (auto it = roles_.find(c.role); it != roles_.end()) c.limit = it->second.limit;
  } else {
    auto user = UserCredential(token->user);
    if (std::holds_alternative<Refusal>(user)) return user;
    c = std::move(std::get<Credential>(user));
  }
  c.token_id = token->id;
  c.expires_at = token->expires_at;
  c.token_ranges = Ranges(token->allow_from);
  c.limit = Tighter({token->requests_per_second, token->burst}, c.limit);
  return c;
}

std::variant<auth::Principal, Refusal> AccessGate::Admit(const HttpRequest& request) {
  const std::string header = request.Header("authorization");
  auto bearer = BearerCredentials(header);
  if (!bearer) {
    return Refusal{Error::Unauthenticated("missing bearer token: send 'Authorization: Bearer <token>'"), 0, "missing"};
  }
  // A job's own token (UNISCHED_JOB_TOKEN): checked by its mac, nothing
  // stored; it acts for that job's steps only (Api::Handle holds it to them).
  if (auth::LooksLikeJobToken(*bearer)) {
    auto job = auth::CheckJobToken(job_token_secret_, *bearer);
    if (!job) {
      return Refusal{Error::Unauthenticated("invalid job token: use the UNISCHED_JOB_TOKEN of a running job"), 0,
                     "invalid"};
    }
    auth::Principal principal;
    principal.user = "job:" + std::to_string(job->first);
    principal.job_id = job->first;
    principal.job_attempt = job->second;
    return principal;
  }
  const std::string hash = auth::HashToken(*bearer);
  const Timestamp now = clock_.Now();
  // The credential from the cache, or read from the store and cached. A
  // read that raced with Invalidate (a token revoked meanwhile) is read again.
  Credential credential;
  for (int read = 0;; ++read) {
    std::unique_lock lock(mu_);
    auto it = cache_.find(hash);
    if (it == cache_.end()) {
      const uint64_t generation = generation_;
      lock.unlock();  // the store read is not done under the lock
      auto resolved = Resolve(hash, *bearer, now);
      if (auto* refusal = std::get_if<Refusal>(&resolved)) return std::move(*refusal);
      lock.lock();
      if (generation != generation_) {
        if (read == 0) continue;
        // Changing again and again: use this answer, but do not keep it.
        credential = std::move(std::get<Credential>(resolved));
        break;
      }
      if (cache_.size() >= kMaxCached) cache_.clear();
      it = cache_.insert_or_assign(hash, std::move(std::get<Credential>(resolved))).first;
    }
    Credential& cached = it->second;
    if (!cached.jwt && (!cached.last_use_noted || now - *cached.last_use_noted >= kLastUseGranularity)) {
      cached.last_use_noted = now;
      last_use_[hash] = now;
    }
    credential = cached;
    break;
  }
  if (credential.expires_at && now >= *credential.expires_at) {
    return Refusal{{ErrorKind::kUnauthenticated,
                    "token_expired",
                    "token " + credential.token_id + " expired at " + FormatRfc3339(*credential.expires_at) +
                        "; create a new one (POST /v1/users/{name}/tokens)",
                    {}},
                   0,
                   "expired"};
  }
  const RoleRule* rule = nullptr;
  if (auto it = roles_.find(credential.role); it != roles_.end()) rule = &it->second;
  const bool role_restricted = rule != nullptr && !rule->ranges.empty();
  if (role_restricted || !credential.token_ranges.empty()) {
    const auto address = auth::ParseIpAddress(request.remote);
    const bool allowed = address && (!role_restricted || auth::AllowedFrom(rule->ranges, *address)) &&
                         (credential.token_ranges.empty() || auth::AllowedFrom(credential.token_ranges, *address));
    if (!allowed) {
      const std::string where = request.remote.empty() ? "an unknown address" : request.remote;
      return Refusal{Error::Forbidden("this token may not be used from " + where + ": see allow_from of token " +
                                          credential.token_id + " and of access.roles." + credential.role,
                                      "address_not_allowed"),
                     0, ""};
    }
  }
  if (agents_need_client_cert_ && credential.role == "node" && request.client_subject.empty()) {
    return Refusal{Error::Forbidden("a node token works only over a connection with a client certificate signed by "
                                    "server.tls.client_ca_file (unisched agent --client-cert/--client-key)",
                                    "client_certificate_required"),
                   0, ""};
  }
  if (credential.limit.limited()) {
    const double wait = limiter_.Take(credential.token_id, credential.limit, now);
    if (wait > 0) {
      return Refusal{{ErrorKind::kRateLimited,
                      "rate_limited",
                      "token " + credential.token_id + " may make " + DescribeLimit(credential.limit) +
                          "; retry after the Retry-After header's seconds",
                      {}},
                     wait,
                     ""};
    }
  }
  return std::move(credential.principal);
}

}  // namespace unisched::api
