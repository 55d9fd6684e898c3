#pragma once
// The phrases and GPU-model matching that the router's refusals and the
// fitter's pending reasons share, so both say a thing the same way.

#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "unisched/model/cluster.h"

namespace unisched::model {

// The parts appended in order. Messages are built with it rather than
// `"literal" + std::string(...)`, which trips GCC 12's -Wrestrict false
// positive (PR 105329).
template <class... Parts>
std::string Cat(const Parts&... parts) {
  std::string out;
  ((out += parts), ...);
  return out;
}

// "1 GPU", "3 nodes": n and the word for it.
std::string Count(int64_t n, std::string_view one, std::string_view many);
// "4 GPUs (h100)", "1 GPU".
std::string GpuPhrase(int64_t n, const std::string& model);
// "a,b,c": the items with `separator` between them.
std::string Join(const std::vector<std::string>& items, char separator);
// "a,,b," -> {"a", "b"}: the non-empty items between separators.
std::vector<std::string> Split(std::string_view text, char separator);
// Whether `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF): what JSON bodies and a job's
// environment and script may hold.
bool IsUtf8(std::string_view text);
// "arch=x86, rack=r1".
std::string JoinLabels(const Labels& labels);

// GPU models compare without regard to case ("H100" is "h100"); an empty
// model asked for matches any. Inline: the fitter asks it for every GPU of
// every node it looks at in a scheduling cycle.
inline bool GpuModelMatches(std::string_view device_model, std::string_view asked) {
  if (asked.empty()) return true;
  if (device_model.size() != asked.size()) return false;
  for (size_t i = 0; i < asked.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(device_model[i])) !=
        std::tolower(static_cast<unsigned char>(asked[i]))) {
      return false;
    }
  }
  return true;
}
// The node's GPUs of `model` (empty: all of them).
int DevicesOfModel(const NodeSpec& node, const std::string& model);

}  // namespace unisched::model
