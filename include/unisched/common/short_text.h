#pragma once
// Comparing and hashing short names (queues, projects, users, nodes) in
// place, for loops that look up one per job: a name is mostly under 16
// bytes, and a call to memcmp or to std::hash's byte loop for each cost more
// than the work it did (docs/benchmarks.md, the 10,000-node cycle).

#include <cstdint>
#include <cstring>
#include <string_view>

namespace unisched {

namespace short_text_detail {
// Whether the first and the last sizeof(Word) bytes of x and y (n of them,
// at least one Word) are equal: two loads each, overlapping below 2 Words.
template <class Word>
inline bool SameEnds(const char* x, const char* y, size_t n) {
  Word x0, y0, x1, y1;
  std::memcpy(&x0, x, sizeof(Word));
  std::memcpy(&y0, y, sizeof(Word));
  std::memcpy(&x1, x + n - sizeof(Word), sizeof(Word));
  std::memcpy(&y1, y + n - sizeof(Word), sizeof(Word));
  return ((x0 ^ y0) | (x1 ^ y1)) == 0;
}
}  // namespace short_text_detail

// a == b, by loads of a fixed size: the first and the last eight (or four)
// bytes, overlapping when the names are shorter than twice that.
inline bool SameShortText(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  if (n >= 8 && n <= 16) return short_text_detail::SameEnds<uint64_t>(a.data(), b.data(), n);
  if (n >= 4 && n < 8) return short_text_detail::SameEnds<uint32_t>(a.data(), b.data(), n);
  if (n < 4) {  // (an empty view may have no data)
    for (size_t i = 0; i < n; ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }
  return std::memcmp(a.data(), b.data(), n) == 0;
}

// A cheap hash of a name: its length and its first and last eight bytes,
// each multiplied by an odd constant. Names that differ only in their middle
// bytes collide: enough for the few thousand names of one cycle, whose equal
// hashes are still compared in full. The low bits vary little between names
// that differ only in their last bytes: take a table's slot from the top
// bits of a further multiply (Fibonacci hashing), not from the low bits.
inline uint64_t ShortTextHash(std::string_view s) {
  const size_t n = s.size();
  uint64_t head = 0, tail = 0;
  if (n >= 8) {
    std::memcpy(&head, s.data(), 8);
    std::memcpy(&tail, s.data() + n - 8, 8);  // overlaps head below 16 bytes
  } else if (n >= 4) {
    uint32_t first, last;
    std::memcpy(&first, s.data(), 4);
    std::memcpy(&last, s.data() + n - 4, 4);
    head = first;
    tail = last;
  } else {
    for (size_t i = 0; i < n; ++i) head = head << 8 | static_cast<unsigned char>(s[i]);
  }
  return (head * 0x9E3779B97F4A7C15ULL) ^ (tail * 0xC2B2AE3D27D4EB4FULL) ^ n;
}

}  // namespace unisched
