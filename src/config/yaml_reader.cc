// Typed reads from a yaml-cpp tree, each reporting a wrong shape as one error.

#include "config/yaml_reader.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <set>

namespace unisched::config::internal {
namespace {

// yaml-cpp tags plain scalars "?" and quoted or block scalars "!"; an
// explicit !!str tag also makes a string.
bool IsPlainScalar(const YAML::Node& node) {
  return node.IsScalar() && node.Tag() != "!" && node.Tag() != "tag:yaml.org,2002:str";
}

std::string Quote(std::string_view text) {
  constexpr size_t kMax = 40;
  std::string shown(text.substr(0, kMax));
  if (text.size() > kMax) shown += "...";
  return "'" + shown + "'";
}

// Appends advice for the common slip of quoting a number or a boolean.
std::string GotWhat(const YAML::Node& node) {
  std::string got = "got " + Describe(node);
  if (node.IsScalar() && !IsPlainScalar(node)) got += " (write numbers and true/false without quotes)";
  return got;
}

}  // namespace

bool IsSet(const YAML::Node& node) {
  return node.IsDefined() && !node.IsNull();
}

std::string Describe(const YAML::Node& node) {
  if (!IsSet(node)) return "nothing";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a map";
  if (!IsPlainScalar(node)) return "the quoted string \"" + node.Scalar() + "\"";
  return Quote(node.Scalar());
}

std::optional<std::string> ReadString(const YAML::Node& node, const std::string& path, Errors& errors) {
  if (!node.IsScalar()) {
    errors.Add(path, "must be a string; got " + Describe(node));
    return std::nullopt;
  }
  return node.Scalar();
}

std::optional<int64_t> ReadInteger(const YAML::Node& node, const std::string& path, int64_t min, int64_t max,
                                   Errors& errors) {
  if (node.IsScalar() && IsPlainScalar(node)) {
    std::string_view text = node.Scalar();
    if (!text.empty() && text.front() == '+') text.remove_prefix(1);
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (!text.empty() && end == text.data() + text.size()) {
      if (ec == std::errc() && value >= min && value <= max) return value;
      errors.Add(path, "must be an integer between " + std::to_string(min) + " and " + std::to_string(max) + "; got " +
                           Describe(node));
      return std::nullopt;
    }
  }
  errors.Add(path, "must be an integer; " + GotWhat(node));
  return std::nullopt;
}

std::optional<double> ReadNumber(const YAML::Node& node, const std::string& path, Errors& errors) {
  if (node.IsScalar() && IsPlainScalar(node)) {
    std::string_view text = node.Scalar();
    if (!text.empty() && text.front() == '+') text.remove_prefix(1);
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (!text.empty() && end == text.data() + text.size() && ec == std::errc() && std::isfinite(value)) {
      return value;
    }
  }
  errors.Add(path, "must be a number; " + GotWhat(node));
  return std::nullopt;
}

std::optional<bool> ReadBool(const YAML::Node& node, const std::string& path, Errors& errors) {
  if (node.IsScalar() && IsPlainScalar(node)) {
    const std::string& text = node.Scalar();
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
  }
  errors.Add(path, "must be true or false; " + GotWhat(node));
  return std::nullopt;
}

std::optional<model::Labels> ReadStringMap(const YAML::Node& node, const std::string& path, Errors& errors) {
  if (!node.IsMap()) {
    errors.Add(path, "must be a map of names to values; got " + Describe(node));
    return std::nullopt;
  }
  // Good entries are kept beside the bad ones so later checks see them.
  model::Labels labels;
  for (const auto& entry : node) {
    if (!entry.first.IsScalar() || entry.first.Scalar().empty()) {
      errors.Add(path, "keys must be non-empty strings; got " + Describe(entry.first));
      continue;
    }
    const std::string& key = entry.first.Scalar();
    const std::string key_path = JoinKey(path, key);
    if (labels.count(key) != 0) {
      errors.Add(key_path, "duplicate key '" + key + "'; give each key once");
      continue;
    }
    if (!entry.second.IsScalar()) {
      errors.Add(key_path, "must be a string value; got " + Describe(entry.second));
      continue;
    }
    labels.emplace(key, entry.second.Scalar());
  }
  return labels;
}

std::optional<std::map<std::string, double>> ReadNumberMap(const YAML::Node& node, const std::string& path,
                                                           Errors& errors) {
  if (!node.IsMap()) {
    errors.Add(path, "must be a map of names to numbers; got " + Describe(node));
    return std::nullopt;
  }
  std::map<std::string, double> numbers;
  for (const auto& entry : node) {
    if (!entry.first.IsScalar() || entry.first.Scalar().empty()) {
      errors.Add(path, "keys must be non-empty names; got " + Describe(entry.first));
      continue;
    }
    const std::string& key = entry.first.Scalar();
    const std::string key_path = JoinKey(path, key);
    if (numbers.count(key) != 0) {
      errors.Add(key_path, "duplicate key '" + key + "'; give each key once");
      continue;
    }
    auto value = ReadNumber(entry.second, key_path, errors);
    if (value) numbers.emplace(key, *value);
  }
  return numbers;
}

std::optional<std::vector<std::string>> ReadStringList(const YAML::Node& node, const std::string& path,
                                                       Errors& errors) {
  if (!node.IsSequence()) {
    errors.Add(path, "must be a list of strings; got " + Describe(node));
    return std::nullopt;
  }
  std::vector<std::string> items;
  size_t index = 0;
  for (const auto& item : node) {
    auto text = ReadString(item, JoinIndex(path, index++), errors);
    if (text) items.push_back(std::move(*text));
  }
  return items;
}

MapReader::MapReader(const YAML::Node& node, std::string path, std::vector<std::string> keys, Errors& errors)
    : path_(std::move(path)), keys_(std::move(keys)), errors_(errors) {
  if (!IsSet(node)) {
    is_map_ = true;
    return;
  }
  if (!node.IsMap()) {
    // The document itself has no key path to name; say what it is instead.
    const std::string subject =
        path_.empty() ? "the configuration must be a map of sections (" : "must be a map (keys: ";
    errors_.Add(path_, subject + JoinNames(keys_) + "); got " + Describe(node));
    return;
  }
  is_map_ = true;
  std::set<std::string> seen;
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) {
      errors_.Add(path_, "keys must be plain names; got " + Describe(entry.first));
      continue;
    }
    const std::string& key = entry.first.Scalar();
    if (!seen.insert(key).second) {
      errors_.Add(PathOf(key), "duplicate key '" + key + "'; give each key once");
      continue;
    }
    if (std::find(keys_.begin(), keys_.end(), key) == keys_.end()) {
      errors_.Add(PathOf(key),
                  "unknown key '" + key + "'; expected one of: " + JoinNames(keys_) + DidYouMean(key, keys_));
      continue;
    }
    entries_.emplace_back(key, entry.second);
  }
}

YAML::Node MapReader::Get(std::string_view key) const {
  for (const auto& [name, value] : entries_) {
    if (name == key) return value;
  }
  return YAML::Node();
}

bool MapReader::Require(std::string_view key, std::string_view hint) {
  if (Has(key)) return true;
  // A map that is not a map already has its error; its keys are not missing.
  if (!is_map_) return false;
  std::string message = "missing required key '" + std::string(key) + "'";
  if (!hint.empty()) {
    message += "; ";
    message += hint;
  }
  errors_.Add(PathOf(key), std::move(message));
  return false;
}

bool MapReader::Read(std::string_view key, std::string& out) {
  const YAML::Node node = Get(key);
  if (!IsSet(node)) return false;
  auto value = ReadString(node, PathOf(key), errors_);
  if (!value) return false;
  out = std::move(*value);
  return true;
}

bool MapReader::Read(std::string_view key, int& out) {
  const YAML::Node node = Get(key);
  if (!IsSet(node)) return false;
  auto value =
      ReadInteger(node, PathOf(key), std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), errors_);
  if (!value) return false;
  out = static_cast<int>(*value);
  return true;
}

bool MapReader::Read(std::string_view key, int64_t& out) {
  const YAML::Node node = Get(key);
  if (!IsSet(node)) return false;
  auto value =
      ReadInteger(node, PathOf(key), std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), errors_);
  if (!value) return false;
  out = *value;
  return true;
}

bool MapReader::Read(std::string_view key, double& out) {
  const YAML::Node node = Get(key);
  if (!IsSet(node)) return false;
  auto value = ReadNumber(node, PathOf(key), errors_);
  if (!value) return false;
  out = *value;
  return true;
}

bool MapReader::Read(std::string_view key, bool& out) {
  const YAML::Node node = Get(key);
  if (!IsSet(node)) return false;
  auto value = ReadBool(node, PathOf(key), errors_);
  if (!value) return false;
  out = *value;
  return true;
}

bool MapReader::Read(std::string_view key, model::Labels& out) {
  const YAML::Node node = Get(key);
  if (!IsSet(node)) return false;
  auto value = ReadStringMap(node, PathOf(key), errors_);
  if (!value) return false;
  out = std::move(*value);
  return true;
}

bool MapReader::Read(std::string_view key, std::map<std::string, double>& out) {
  const YAML::Node node = Get(key);
  if (!IsSet(node)) return false;
  auto value = ReadNumberMap(node, PathOf(key), errors_);
  if (!value) return false;
  out = std::move(*value);
  return true;
}

bool MapReader::Read(std::string_view key, std::vector<std::string>& out) {
  const YAML::Node node = Get(key);
  if (!IsSet(node)) return false;
  auto value = ReadStringList(node, PathOf(key), errors_);
  if (!value) return false;
  out = std::move(*value);
  return true;
}

}  // namespace unisched::config::internal
