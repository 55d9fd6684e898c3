// SameShortText and ShortTextHash: every length around their load sizes
// (0-3 bytewise, 4-7 and 8-16 by overlapping loads, longer by memcmp), and a
// difference at every position.

#include "unisched/common/short_text.h"

#include <gtest/gtest.h>

#include <string>

namespace unisched {
namespace {

std::string Name(size_t length) {
  std::string s;
  for (size_t i = 0; i < length; ++i) s += static_cast<char>('a' + (i * 7) % 26);
  return s;
}

TEST(ShortTextTest, EqualNamesOfEveryLengthAreTheSameAndHashAlike) {
  for (size_t n = 0; n <= 40; ++n) {
    const std::string a = Name(n);
    const std::string b = Name(n);  // another copy: compared by content, not address
    EXPECT_TRUE(SameShortText(a, b)) << n;
    EXPECT_EQ(ShortTextHash(a), ShortTextHash(b)) << n;
  }
  EXPECT_TRUE(SameShortText(std::string_view(), std::string_view()));
  EXPECT_TRUE(SameShortText(std::string_view(), ""));
}

TEST(ShortTextTest, ADifferenceAtAnyPositionIsSeen) {
  for (size_t n = 1; n <= 40; ++n) {
    const std::string a = Name(n);
    for (size_t at = 0; at < n; ++at) {
      std::string b = a;
      b[at] = static_cast<char>(b[at] ^ 0x20);
      EXPECT_FALSE(SameShortText(a, b)) << "length " << n << ", differing at " << at;
      EXPECT_FALSE(SameShortText(b, a)) << "length " << n << ", differing at " << at;
    }
  }
}

TEST(ShortTextTest, NamesOfDifferentLengthsDiffer) {
  // "user-1" is a prefix of "user-12": equal loads over the shorter length
  // must not make them equal.
  EXPECT_FALSE(SameShortText("user-1", "user-12"));
  EXPECT_FALSE(SameShortText("", "a"));
  EXPECT_FALSE(SameShortText("project-1234567", "project-12345678"));
  EXPECT_NE(ShortTextHash("user-1"), ShortTextHash("user-12"));
}

TEST(ShortTextTest, NamesThatDifferInTheirLastBytesHashApart) {
  // The scheduler's scope table tells users apart by these hashes first.
  EXPECT_NE(ShortTextHash("user-17"), ShortTextHash("user-18"));
  EXPECT_NE(ShortTextHash("project-3"), ShortTextHash("project-4"));
  EXPECT_NE(ShortTextHash("hpc"), ShortTextHash("hpd"));
  EXPECT_NE(ShortTextHash("a-rather-long-queue-name-1"), ShortTextHash("a-rather-long-queue-name-2"));
}

}  // namespace
}  // namespace unisched
