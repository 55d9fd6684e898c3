#pragma once
// Internal to src/config: the error list that parsing and validation fill in,
// key-path helpers and the wording helpers shared by both steps. Every check
// appends and carries on, so one run reports every problem of a file.

#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "unisched/config/config.h"

namespace unisched::config::internal {

class Errors {
 public:
  void Add(std::string path, std::string message);
  // Marks a path whose value could not be read, without a message of its
  // own, so that later checks do not repeat the problem in other words.
  void MarkBroken(std::string path);

  // True when path, or a key path that contains it, could not be read.
  bool IsBroken(std::string_view path) const;
  const std::vector<ConfigError>& list() const { return list_; }
  std::vector<ConfigError> Take() { return std::move(list_); }

 private:
  std::vector<ConfigError> list_;
  std::set<std::string, std::less<>> broken_;
};

// "a.b" from ("a", "b"); "b" from ("", "b").
std::string JoinKey(std::string_view parent, std::string_view key);
// "a[2]" from ("a", 2).
std::string JoinIndex(std::string_view parent, size_t index);

// "a, b, c", or "(none)" for an empty list.
std::string JoinNames(const std::vector<std::string>& names);
// " (did you mean 'x'?)" when one candidate is within a small edit distance
// of word, else "".
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace unisched::config::internal
