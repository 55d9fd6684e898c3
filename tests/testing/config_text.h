#pragma once
// The default config's text (config/unisched.yaml) and one-place edits of
// it, for tests that need the default with one key changed.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace unisched::testing {

inline std::string DefaultConfigText() {
  std::ifstream file(std::string(UNISCHED_SOURCE_DIR) + "/config/unisched.yaml");
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// `text` with the first `from` replaced by `to`; a `from` that is missing
// fails the test (the default config changed under it).
inline std::string ReplaceOnce(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

}  // namespace unisched::testing
