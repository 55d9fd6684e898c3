#include "unisched/auth/access.h"

#include <gtest/gtest.h>

namespace unisched::auth {
namespace {

TEST(AccessTest, AddressRangesMatchTheirAddressesOnly) {
  struct Case {
    const char* range;
    const char* address;
    bool inside;
  };
  const std::vector<Case> cases = {
      {"10.0.0.0/8", "10.1.2.3", true},
      {"10.0.0.0/8", "11.0.0.1", false},
      {"10.0.0.0/8", "10.1.2.3:51234", true},  // a peer as the listener formats it
      {"192.168.1.0/24", "192.168.1.255", true},
      {"192.168.1.0/24", "192.168.2.1", false},
      {"192.168.1.128/25", "192.168.1.127", false},
      {"192.168.1.128/25", "192.168.1.200", true},
      {"127.0.0.1", "127.0.0.1", true},  // one address is a /32
      {"127.0.0.1", "127.0.0.2", false},
      {"0.0.0.0/0", "203.0.113.9", true},
      {"0.0.0.0/0", "2001:db8::1", false},      // every v4 address, no v6 one
      {"10.0.0.0/8", "::ffff:10.9.9.9", true},  // v4 seen on a dual-stack listener
      {"::1/128", "[::1]:8642", true},
      {"::1/128", "::2", false},
      {"2001:db8::/32", "2001:db8:ffff::1", true},
      {"2001:db8::/32", "2001:db9::1", false},
      {"::/0", "10.0.0.1", true},  // all of v6 includes the v4-mapped range
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.range) + " vs " + c.address);
    auto range = ParseCidr(c.range);
    ASSERT_TRUE(range.cidr) << range.error;
    auto address = ParseIpAddress(c.address);
    ASSERT_TRUE(address);
    EXPECT_EQ(Contains(*range.cidr, *address), c.inside);
  }
}

TEST(AccessTest, MalformedRangesAreRefusedWithAHint) {
  struct Case {
    const char* text;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"10.0.0.0/33", "0..32"},
      {"10.0.0.0/", "0..32"},
      {"10.0.0.0/x", "0..32"},
      {"::/129", "0..128"},
      {"10.0.0.300/8", "10.0.0.0/8"},
      {"", "not an address range"},
      {"10.0.0.1/8", "did you mean 10.0.0.0/8"},
      {"2001:db8::1/32", "did you mean 2001:db8::/32"},
      {"example.org/8", "not an address range"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto parsed = ParseCidr(c.text);
    EXPECT_FALSE(parsed.cidr);
    EXPECT_NE(parsed.error.find(c.says), std::string::npos) << parsed.error;
  }
}

TEST(AccessTest, NoRangesAllowEveryAddressAndAListAllowsItsOwn) {
  const auto address = *ParseIpAddress("10.1.2.3");
  EXPECT_TRUE(AllowedFrom({}, address));
  const std::vector<Cidr> ranges = {*ParseCidr("192.168.0.0/16").cidr, *ParseCidr("10.1.0.0/16").cidr};
  EXPECT_TRUE(AllowedFrom(ranges, address));
  EXPECT_FALSE(AllowedFrom(ranges, *ParseIpAddress("10.2.0.1")));
  EXPECT_FALSE(ParseIpAddress(""));
  EXPECT_FALSE(ParseIpAddress("host:80"));
}

TEST(AccessTest, TheBucketAllowsItsBurstThenItsRate) {
  const Timestamp t0 = FromUnixMillis(1'000'000);
  TokenBucket bucket(/*rate=*/10, /*burst=*/5, t0);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(bucket.Take(t0), 0) << i;
  // Empty: the next token comes in 1/10 s.
  EXPECT_DOUBLE_EQ(bucket.Take(t0), 0.1);
  EXPECT_EQ(bucket.Take(t0 + std::chrono::milliseconds(100)), 0);
  EXPECT_GT(bucket.Take(t0 + std::chrono::milliseconds(150)), 0);
  // Idle for a long time: full again, never fuller than the burst.
  const Timestamp later = t0 + std::chrono::seconds(60);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(bucket.Take(later), 0) << i;
  EXPECT_GT(bucket.Take(later), 0);
  // A clock that steps back refills nothing and does not break the bucket.
  EXPECT_GT(bucket.Take(t0), 0);
}

TEST(AccessTest, ABurstOfZeroIsTheRateAndAtLeastOne) {
  const Timestamp t0 = FromUnixMillis(0);
  TokenBucket slow(0.5, 0, t0);
  EXPECT_EQ(slow.Take(t0), 0);
  EXPECT_DOUBLE_EQ(slow.Take(t0), 2.0);  // one token every 2 s
  TokenBucket fast(3, 0, t0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(fast.Take(t0), 0);
  EXPECT_GT(fast.Take(t0), 0);
}

TEST(AccessTest, TheLimiterKeepsABucketPerKeyAndNoneWithoutALimit) {
  RateLimiter limiter;
  const Timestamp t0 = FromUnixMillis(0);
  const RateLimit one_a_second{1, 1};
  EXPECT_EQ(limiter.Take("a", one_a_second, t0), 0);
  EXPECT_GT(limiter.Take("a", one_a_second, t0), 0);
  EXPECT_EQ(limiter.Take("b", one_a_second, t0), 0);  // another key, its own bucket
  for (int i = 0; i < 100; ++i) EXPECT_EQ(limiter.Take("c", RateLimit{}, t0), 0);
  // A changed limit starts a new, full bucket.
  EXPECT_EQ(limiter.Take("a", RateLimit{2, 2}, t0), 0);
}

}  // namespace
}  // namespace unisched::auth
