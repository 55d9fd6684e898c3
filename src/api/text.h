#pragma once
// Checks of text and numbers as clients send them, shared by the query
// parameters and the JSON bodies of the API.

#include <cstdint>
#include <optional>
#include <string_view>

namespace unisched::api {

// Whether `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF).
bool IsUtf8(std::string_view text);

// A decimal integer: an optional '-' and digits only, within int64; nullopt
// otherwise ("1e9", "+1", " 1", "0x10" and 2^63 are not).
std::optional<int64_t> ParseInt64(std::string_view text);

}  // namespace unisched::api
