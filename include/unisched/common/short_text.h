#pragma once
// Comparing and hashing short names (queues, projects, users, nodes) in
// place, for loops that look up one per job: a name is mostly under 16
// bytes, and a call to memcmp or to std::hash's byte loop for each cost more
// than the work it did (docs/benchmarks.md, the 10,000-node cycle).

#include <cstdint>
#include <cstring>
#include <string_view>

namespace unisched {

// a == b, by loads of a fixed size: the first and the last eight (or four)
// bytes, overlapping when the names are shorter than twice that.
inline bool SameShortText(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  const char* x = a.data();
  const char* y = b.data();
  if (n >= 8 && n <= 16) {
    uint64_t x0, y0, x1, y1;
    std::memcpy(&x0, x, 8);
    std::memcpy(&y0, y, 8);
    std::memcpy(&x1, x + n - 8, 8);
    std::memcpy(&y1, y + n - 8, 8);
    return ((x0 ^ y0) | (x1 ^ y1)) == 0;
  }
  if (n >= 4 && n < 8) {
    uint32_t x0, y0, x1, y1;
    std::memcpy(&x0, x, 4);
    std::memcpy(&y0, y, 4);
    std::memcpy(&x1, x + n - 4, 4);
    std::memcpy(&y1, y + n - 4, 4);
    return ((x0 ^ y0) | (x1 ^ y1)) == 0;
  }
  if (n < 4) {  // (an empty view may have no data)
    for (size_t i = 0; i < n; ++i) {
      if (x[i] != y[i]) return false;
    }
    return true;
  }
  return std::memcmp(x, y, n) == 0;
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
