// Shared phrases and GPU-model matching (model/words.h).

#include "unisched/model/words.h"

#include <algorithm>

namespace unisched::model {

std::string Count(int64_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

std::string GpuPhrase(int64_t n, const std::string& model) {
  std::string text = Count(n, "GPU", "GPUs");
  if (!model.empty()) text += " (" + model + ")";
  return text;
}

std::string Join(const std::vector<std::string>& items, char separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out.push_back(separator);
    out += item;
  }
  return out;
}

std::vector<std::string> Split(std::string_view text, char separator) {
  std::vector<std::string> items;
  size_t from = 0;
  while (from <= text.size()) {
    const size_t end = std::min(text.find(separator, from), text.size());
    if (end > from) items.emplace_back(text.substr(from, end - from));
    from = end + 1;
  }
  return items;
}

std::string JoinLabels(const Labels& labels) {
  std::string text;
  for (const auto& [key, value] : labels) {
    if (!text.empty()) text += ", ";
    text += key + "=" + value;
  }
  return text;
}

int DevicesOfModel(const NodeSpec& node, const std::string& model) {
  int n = 0;
  for (const auto& d : node.gpus) {
    if (GpuModelMatches(d.model, model)) ++n;
  }
  return n;
}

}  // namespace unisched::model
