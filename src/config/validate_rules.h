#pragma once
// The rules values of a Config follow (validate.cc): name formats, numbers
// that must be positive, names unique within a section and references to
// them. Internal to the config module.

#include <algorithm>
#include <charconv>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/errors.h"

namespace unisched::config::internal {

inline constexpr size_t kMaxNameLength = 63;

inline bool IsLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// Pools, queues, projects and rules: lowercase letters, digits, '-' and '_',
// starting and ending with a letter or digit. They appear in URLs, metric
// labels and file names, so they are kept that plain.
inline bool IsPlainName(std::string_view name, std::string_view extra_inner) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  if (!IsLowerAlnum(name.front()) || !IsLowerAlnum(name.back())) return false;
  for (char c : name) {
    if (!IsLowerAlnum(c) && c != '-' && c != '_' && extra_inner.find(c) == std::string_view::npos) return false;
  }
  return true;
}

// architecture-spec-purpose: at least three '-'-separated parts, the first
// of [a-z0-9_], the others of [a-z0-9_.], e.g. x86-c64m256-hpc-01.
inline bool IsNodeName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  size_t parts = 0;
  size_t start = 0;
  while (true) {
    const size_t end = name.find('-', start);
    const std::string_view part = name.substr(start, end == std::string_view::npos ? end : end - start);
    if (part.empty()) return false;
    for (char c : part) {
      if (!IsLowerAlnum(c) && c != '_' && (parts == 0 || c != '.')) return false;
    }
    ++parts;
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts >= 3;
}

// The portable POSIX user name shape useradd accepts by default.
inline bool IsUnixUserName(std::string_view name) {
  if (!name.empty() && name.back() == '$') name.remove_suffix(1);
  if (name.empty() || name.size() > 32) return false;
  if (!((name.front() >= 'a' && name.front() <= 'z') || name.front() == '_')) return false;
  for (char c : name) {
    if (!IsLowerAlnum(c) && c != '_' && c != '-') return false;
  }
  return true;
}

inline bool IsListenAddress(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view host = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return false;
  } else if (host.find(':') != std::string_view::npos) {
    return false;  // an IPv6 address must be bracketed: [::1]:8642
  }
  if (port.empty() || port.size() > 5) return false;
  int value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  return ec == std::errc() && end == port.data() + port.size() && value >= 0 && value <= 65535;
}

template <class T>
void Positive(Errors& errors, const std::string& path, T value, std::string_view hint = {}) {
  if (value > 0) return;
  std::string message = "must be > 0";
  if (!hint.empty()) {
    message += "; ";
    message += hint;
  }
  errors.Add(path, std::move(message));
}

template <class T>
void NonNegative(Errors& errors, const std::string& path, T value, std::string_view hint = {}) {
  if (value >= 0) return;
  std::string message = "must be >= 0";
  if (!hint.empty()) {
    message += "; ";
    message += hint;
  }
  errors.Add(path, std::move(message));
}

// Checks the shape of a name and that it is not taken; returns whether the
// name is usable as a reference target.
class NameRegistry {
 public:
  NameRegistry(std::string noun, std::string section) : noun_(std::move(noun)), section_(std::move(section)) {}

  void Add(Errors& errors, const std::string& path, const std::string& name, bool shape_ok,
           std::string_view shape_rule) {
    if (name.empty()) {
      errors.Add(path, "must not be empty; give the " + noun_ + " a name");
      return;
    }
    if (!shape_ok) errors.Add(path, "invalid " + noun_ + " name '" + name + "'; " + std::string(shape_rule));
    const auto [it, inserted] = first_use_.emplace(name, path);
    if (!inserted) {
      errors.Add(path, "duplicate " + noun_ + " name '" + name + "' (first defined at " + it->second +
                           "); names must be unique");
      return;
    }
    names_.push_back(name);
  }

  bool Has(const std::string& name) const { return first_use_.count(name) != 0; }
  const std::vector<std::string>& names() const { return names_; }

  // Records "unknown <noun>" at path unless name is defined. Empty names are
  // skipped: their own "missing" error is already there.
  bool CheckReference(Errors& errors, const std::string& path, const std::string& name) const {
    if (name.empty() || Has(name)) return !name.empty();
    errors.Add(path, "unknown " + noun_ + " '" + name + "'; defined " + section_ + ": " + JoinNames(names_) +
                         DidYouMean(name, names_));
    return false;
  }

 private:
  std::string noun_;
  std::string section_;
  std::map<std::string, std::string> first_use_;  // name -> path where it is defined
  std::vector<std::string> names_;                // in file order, for messages
};

inline constexpr std::string_view kPlainNameRule =
    "use lowercase letters, digits, '-' and '_', starting and ending with a letter or digit, at most 63 "
    "characters";
inline constexpr std::string_view kNodeNameRule =
    "name nodes architecture-spec-purpose: at least three lowercase parts joined by '-', e.g. "
    "x86-c64m256-hpc-01";
inline constexpr std::string_view kUserNameRule =
    "use lowercase letters, digits, '.', '-' and '_', starting and ending with a letter or digit, at most 63 "
    "characters";
inline constexpr std::string_view kUnixUserRule =
    "must be a Unix user name: a lowercase letter or '_', then lowercase letters, digits, '_' or '-', at most "
    "32 characters";

}  // namespace unisched::config::internal
