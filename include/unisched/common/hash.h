#pragma once
// A short, stable name for a text: 16 lowercase hex digits of its 64-bit
// FNV-1a hash. Not for security: for names and versions that must be equal
// for equal texts on every host (config versions, runtime directories).

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace unisched {

inline std::string Fnv1a64Hex(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash));
  return out;
}

}  // namespace unisched
