#include "unisched/auth/access.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

namespace unisched::auth {
namespace {

std::optional<IpAddress> ParseBare(std::string_view text) {
  if (text.empty() || text.size() > 64) return std::nullopt;
  const std::string s(text);
  IpAddress out;
  in_addr v4{};
  if (inet_pton(AF_INET, s.c_str(), &v4) == 1) {
    out.bytes[10] = 0xff;
    out.bytes[11] = 0xff;
    std::memcpy(out.bytes.data() + 12, &v4, 4);
    return out;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, s.c_str(), &v6) == 1) {
    std::memcpy(out.bytes.data(), &v6, 16);
    return out;
  }
  return std::nullopt;
}

}  // namespace

std::optional<IpAddress> ParseIpAddress(std::string_view text) {
  if (auto bare = ParseBare(text)) return bare;
  // "[v6]:port" and "v4:port", as the listener writes a peer.
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    return ParseBare(text.substr(1, close - 1));
  }
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || text.find(':') != colon) return std::nullopt;
  return ParseBare(text.substr(0, colon));
}

CidrParse ParseCidr(std::string_view text) {
  const size_t slash = text.find('/');
  const std::string_view host = text.substr(0, slash);
  auto address = ParseBare(host);
  if (!address) {
    return {std::nullopt,
            "'" + std::string(text) + "' is not an address range: write it as 10.0.0.0/8 or 2001:db8::/32"};
  }
  const bool v4 = host.find(':') == std::string_view::npos;
  const int width = v4 ? 32 : 128;
  int prefix = width;
  if (slash != std::string_view::npos) {
    const std::string_view bits = text.substr(slash + 1);
    auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), prefix);
    if (bits.empty() || ec != std::errc() || end != bits.data() + bits.size() || prefix < 0 || prefix > width) {
      return {std::nullopt, "'" + std::string(text) + "': the prefix length must be 0.." + std::to_string(width)};
    }
  }
  Cidr cidr{*address, prefix + (v4 ? 96 : 0)};
  // The host bits must be zero: "10.0.0.1/8" is more often a typo than
  // meant as 10.0.0.0/8.
  for (int bit = cidr.prefix_bits; bit < 128; ++bit) {
    if (cidr.network.bytes[bit / 8] & (0x80 >> (bit % 8))) {
      IpAddress network = cidr.network;
      for (int b = cidr.prefix_bits; b < 128; ++b) network.bytes[b / 8] &= static_cast<uint8_t>(~(0x80 >> (b % 8)));
      char buf[INET6_ADDRSTRLEN] = {};
      if (v4) {
        inet_ntop(AF_INET, network.bytes.data() + 12, buf, sizeof buf);
      } else {
        inet_ntop(AF_INET6, network.bytes.data(), buf, sizeof buf);
      }
      return {std::nullopt, "'" + std::string(text) + "' has bits set after the prefix; did you mean " +
                                std::string(buf) + "/" + std::to_string(prefix) + "?"};
    }
  }
  return {cidr, {}};
}

bool Contains(const Cidr& range, const IpAddress& address) {
  const int full_bytes = range.prefix_bits / 8;
  if (std::memcmp(range.network.bytes.data(), address.bytes.data(), static_cast<size_t>(full_bytes)) != 0) return false;
  const int rest = range.prefix_bits % 8;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (range.network.bytes[full_bytes] & mask) == (address.bytes[full_bytes] & mask);
}

bool AllowedFrom(const std::vector<Cidr>& ranges, const IpAddress& address) {
  if (ranges.empty()) return true;
  // A v4 range is held as ::ffff:a.b.c.d/(96 + n), so one comparison of the
  // 16-byte forms serves v4 and v6 alike.
  return std::any_of(ranges.begin(), ranges.end(), [&](const Cidr& r) { return Contains(r, address); });
}

TokenBucket::TokenBucket(double rate, double burst, Timestamp now)
    : rate_(rate), burst_(std::max(1.0, burst > 0 ? burst : rate)), tokens_(burst_), last_(now) {}

double TokenBucket::Take(Timestamp now) {
  // Refill for the time since the last request; a clock that stepped back
  // refills nothing rather than draining the bucket.
  const double elapsed = std::max(0.0, std::chrono::duration<double>(now - last_).count());
  tokens_ = std::min(burst_, tokens_ + elapsed * rate_);
  last_ = std::max(last_, now);
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return 0;
  }
  // One token arrives after (1 - tokens) / rate seconds.
  return (1.0 - tokens_) / rate_;
}

double RateLimiter::Take(const std::string& key, const RateLimit& limit, Timestamp now) {
  if (!limit.limited()) return 0;
  std::lock_guard lock(mu_);
  auto it = buckets_.find(key);
  if (it == buckets_.end() || it->second.limit.requests_per_second != limit.requests_per_second ||
      it->second.limit.burst != limit.burst) {
    if (buckets_.size() > kPruneAbove) {
      // A bucket idle for burst / rate seconds is full again: as good as new.
      for (auto e = buckets_.begin(); e != buckets_.end();) {
        const double idle = std::chrono::duration<double>(now - e->second.bucket.last_seen()).count();
        e = idle * e->second.limit.requests_per_second >= e->second.bucket.capacity() ? buckets_.erase(e)
                                                                                      : std::next(e);
      }
    }
    it = buckets_.insert_or_assign(key, Entry{limit, TokenBucket(limit.requests_per_second, limit.burst, now)}).first;
  }
  return it->second.bucket.Take(now);
}

}  // namespace unisched::auth
