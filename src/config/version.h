#pragma once
// Internal to src/config: the content hash that becomes Config.version.

#include <string>
#include <string_view>

namespace unisched::config::internal {

// 16 lowercase hex digits of the FNV-1a 64 hash of text.
std::string ContentVersion(std::string_view text);

}  // namespace unisched::config::internal
