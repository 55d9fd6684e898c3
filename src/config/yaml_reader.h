#pragma once
// Internal to src/config: typed reads from a yaml-cpp tree. Each read yields a
// value or records one error at its key path; none throws. This and the
// parser are the only places that include yaml-cpp.

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/errors.h"
#include "unisched/model/resources.h"

namespace unisched::config::internal {

// Absent keys and explicit nulls (`key:`, `key: ~`) both mean "not set".
bool IsSet(const YAML::Node& node);

// How the node reads in a message: "a list", "a map", "'abc'", or "the
// quoted string \"64\"".
std::string Describe(const YAML::Node& node);

// Scalar reads. Numbers and booleans must be plain (unquoted) scalars: a
// quoted "64" is a string in YAML, and is reported as such.
std::optional<std::string> ReadString(const YAML::Node& node, const std::string& path, Errors& errors);
std::optional<int64_t> ReadInteger(const YAML::Node& node, const std::string& path, int64_t min, int64_t max,
                                   Errors& errors);
std::optional<double> ReadNumber(const YAML::Node& node, const std::string& path, Errors& errors);
std::optional<bool> ReadBool(const YAML::Node& node, const std::string& path, Errors& errors);
// A map of scalar keys to scalar values (every scalar counts as text here, so
// `fp64: true` and `fp64: "true"` are the same label). A bad entry is one error
// and is left out; the good ones are returned, as for lists.
std::optional<model::Labels> ReadStringMap(const YAML::Node& node, const std::string& path, Errors& errors);
// A map of names to numbers, e.g. user_shares: {alice: 2, bob: 1}. Bad
// entries are reported at their own key path and left out, as above.
std::optional<std::map<std::string, double>> ReadNumberMap(const YAML::Node& node, const std::string& path,
                                                           Errors& errors);
std::optional<std::vector<std::string>> ReadStringList(const YAML::Node& node, const std::string& path, Errors& errors);

// Calls visit(item, item_path) for each item of a list; a node that is not a
// list is one error. Unset nodes visit nothing.
template <class Visit>
void ForEachItem(const YAML::Node& node, const std::string& path, Errors& errors, Visit&& visit) {
  if (!IsSet(node)) return;
  if (!node.IsSequence()) {
    errors.Add(path, "must be a list; got " + Describe(node));
    return;
  }
  size_t index = 0;
  for (const auto& item : node) {
    visit(item, JoinIndex(path, index));
    ++index;
  }
}

// A YAML map with a fixed set of keys. The constructor reports a node that is
// not a map, keys that are not scalars, duplicate keys and unknown keys. An
// unset node reads as an empty map.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string path, std::vector<std::string> keys, Errors& errors);

  bool is_map() const { return is_map_; }
  const std::string& path() const { return path_; }
  std::string PathOf(std::string_view key) const { return JoinKey(path_, key); }

  // The value of key: an unset node when absent or null.
  YAML::Node Get(std::string_view key) const;
  bool Has(std::string_view key) const { return IsSet(Get(key)); }

  // Records "missing required key" (plus hint) when key is unset.
  bool Require(std::string_view key, std::string_view hint = {});

  // Typed fields: out is left as it is when the key is unset or its value
  // has the wrong type (then an error is recorded). True when out was set.
  bool Read(std::string_view key, std::string& out);
  bool Read(std::string_view key, int& out);
  bool Read(std::string_view key, int64_t& out);
  bool Read(std::string_view key, double& out);
  bool Read(std::string_view key, bool& out);
  bool Read(std::string_view key, model::Labels& out);
  bool Read(std::string_view key, std::map<std::string, double>& out);
  bool Read(std::string_view key, std::vector<std::string>& out);
  template <class T>
  bool Read(std::string_view key, std::optional<T>& out) {
    T value{};
    if (!Read(key, value)) return false;
    out = std::move(value);
    return true;
  }

 private:
  std::string path_;
  std::vector<std::string> keys_;
  std::vector<std::pair<std::string, YAML::Node>> entries_;
  Errors& errors_;
  bool is_map_ = false;
};

// Reads a list of maps, one entry per item even when the item is broken,
// so that the index in every later key path is the item's place in the file.
template <class T, class ParseItem>
std::vector<T> ParseList(const MapReader& root, std::string_view key, Errors& errors, ParseItem parse_item) {
  std::vector<T> items;
  ForEachItem(root.Get(key), root.PathOf(key), errors, [&](const YAML::Node& item, const std::string& item_path) {
    items.push_back(parse_item(item, item_path, errors));
  });
  return items;
}

}  // namespace unisched::config::internal
