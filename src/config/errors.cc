// The error list and wording helpers of the config loader.

#include "config/errors.h"

#include <algorithm>
#include <limits>

namespace unisched::config::internal {
namespace {

// Levenshtein distance; the words compared are key and enum names, so the
// quadratic table is tiny.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

void Errors::Add(std::string path, std::string message) {
  broken_.insert(path);
  list_.push_back({std::move(path), std::move(message)});
}

void Errors::MarkBroken(std::string path) {
  broken_.insert(std::move(path));
}

bool Errors::IsBroken(std::string_view path) const {
  // A path is broken when it or one of its ancestors ("a.b" for "a.b.c" or
  // "a.b[1]") is recorded; "" (the document itself) is everyone's ancestor.
  if (broken_.count(std::string_view()) != 0) return true;
  for (size_t end = path.size();; --end) {
    if (end == path.size() || path[end] == '.' || path[end] == '[') {
      if (broken_.count(path.substr(0, end)) != 0) return true;
    }
    if (end == 0) return false;
  }
}

std::string JoinKey(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  std::string path(parent);
  path += '.';
  path += key;
  return path;
}

std::string JoinIndex(std::string_view parent, size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

std::string JoinNames(const std::vector<std::string>& names) {
  if (names.empty()) return "(none)";
  std::string out;
  for (const auto& name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  size_t best = std::numeric_limits<size_t>::max();
  const std::string* best_name = nullptr;
  for (const auto& candidate : candidates) {
    const size_t distance = EditDistance(word, candidate);
    if (distance < best) {
      best = distance;
      best_name = &candidate;
    }
  }
  // Two edits catch most typos ("max_concurency", "walltime_hours") without
  // suggesting unrelated short words.
  if (best_name == nullptr || best == 0 || best > 2 || best >= word.size()) return "";
  return " (did you mean '" + *best_name + "'?)";
}

}  // namespace unisched::config::internal
