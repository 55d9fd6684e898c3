#pragma once
// Whole-file reads shared by the supervisor, the executor and containment
// (cgroup control files, attempt files): small, allocation-light, no streams.

#include <optional>
#include <string>

namespace unisched::containment {

// Everything readable from fd until EOF (retrying EINTR); fd stays open.
std::string ReadAll(int fd);
// A whole small file; nullopt if it cannot be opened.
std::optional<std::string> ReadWholeFile(const std::string& path);

}  // namespace unisched::containment
