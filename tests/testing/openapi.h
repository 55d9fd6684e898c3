// Reading docs/openapi.yaml in tests: the unit tests check the route table
// against it, the integration walk sends every documented bound to the daemon.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <string>

namespace unisched::testing {

// The node `start_node` refers to through $ref ("#/components/schemas/JobState").
// (Node::reset, not =: assigning to a yaml-cpp node writes into the document
// it refers to.)
inline YAML::Node ResolveRef(const YAML::Node& doc, const YAML::Node& start_node) {
  YAML::Node node;
  node.reset(start_node);
  while (node && node.IsMap() && node["$ref"]) {
    const std::string ref = node["$ref"].as<std::string>();
    YAML::Node at;
    at.reset(doc);
    size_t start = 2;  // past "#/"
    while (start < ref.size()) {
      const size_t slash = std::min(ref.find('/', start), ref.size());
      const YAML::Node next = at[ref.substr(start, slash - start)];
      at.reset(next);
      start = slash + 1;
    }
    node.reset(at);
  }
  return node;
}

}  // namespace unisched::testing
