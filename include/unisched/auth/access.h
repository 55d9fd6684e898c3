#pragma once
// Where a credential may be used from and how often (docs/access.md): client
// address ranges (CIDR) and a token bucket per credential. Pure: addresses
// come in as text and time as an argument, so the rules are tested with
// tables and a fake clock.

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unisched/common/time.h"

namespace unisched::auth {

// An IPv4 or IPv6 address as 16 bytes; IPv4 is held IPv4-mapped
// (::ffff:a.b.c.d), so a v4 range also matches a v4 client seen on a dual
// stack listener.
struct IpAddress {
  std::array<uint8_t, 16> bytes{};
};

// "10.1.2.3", "::1", "[::1]:8642", "10.1.2.3:51234" (a peer as the listener
// formats it): the address, without the port.
std::optional<IpAddress> ParseIpAddress(std::string_view text);

struct Cidr {
  IpAddress network;
  int prefix_bits = 128;  // over the 16-byte form: a v4 "/8" is 96 + 8
};

// "10.0.0.0/8", "2001:db8::/32", or one address (a /32 or /128). Bits set
// beyond the prefix are an error ("10.0.0.1/8": did you mean 10.0.0.0/8?),
// as they are in most firewalls, because they usually are a typo.
struct CidrParse {
  std::optional<Cidr> cidr;
  std::string error;  // why not, when cidr is empty
};
CidrParse ParseCidr(std::string_view text);

bool Contains(const Cidr& range, const IpAddress& address);
// True when `ranges` is empty (no restriction) or one contains `address`.
bool AllowedFrom(const std::vector<Cidr>& ranges, const IpAddress& address);

// A token bucket: `rate` tokens a second up to `burst`; a request takes one.
// Starts full, so a client's first `burst` requests pass at once.
class TokenBucket {
 public:
  TokenBucket(double rate, double burst, Timestamp now);
  // 0 when the request may go now (a token was taken); otherwise the seconds
  // until a token will be there, and nothing is taken.
  double Take(Timestamp now);

  double capacity() const { return burst_; }
  Timestamp last_seen() const { return last_; }

 private:
  double rate_;
  double burst_;
  double tokens_;
  Timestamp last_;
};

// A credential's limit: requests a second and the burst (<= 0: the rate,
// at least 1). A rate <= 0 is no limit.
struct RateLimit {
  double requests_per_second = 0;
  double burst = 0;
  bool limited() const { return requests_per_second > 0; }
};

// One bucket per key (a token's id), thread-safe. A key's bucket is made on
// its first request with the limit given then; a changed limit (config
// reload, a new token) starts a new bucket.
class RateLimiter {
 public:
  // 0: go; otherwise seconds to wait (the 429's Retry-After).
  double Take(const std::string& key, const RateLimit& limit, Timestamp now);

 private:
  struct Entry {
    RateLimit limit;
    TokenBucket bucket;
  };
  // Buckets idle long enough to have refilled are the same as new ones, so
  // they are dropped when the map grows past this many.
  static constexpr size_t kPruneAbove = 16384;
  std::mutex mu_;
  std::map<std::string, Entry, std::less<>> buckets_;  // GUARDED_BY(mu_)
};

}  // namespace unisched::auth
