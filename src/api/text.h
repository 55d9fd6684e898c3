#pragma once
// Checks of text and numbers as clients send them, shared by the query
// parameters and the JSON bodies of the API.

#include <cstdint>
#include <optional>
#include <string_view>

#include "unisched/model/words.h"

namespace unisched::api {

// Whether `text` is well-formed UTF-8 (model/words.h).
using model::IsUtf8;

// A decimal integer: an optional '-' and digits only, within int64; nullopt
// otherwise ("1e9", "+1", " 1", "0x10" and 2^63 are not).
std::optional<int64_t> ParseInt64(std::string_view text);

}  // namespace unisched::api
