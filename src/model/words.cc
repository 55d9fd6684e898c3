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

bool IsUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    // The sequence length, and the range its second byte must fall in to
    // exclude overlong forms (E0, F0), surrogates (ED) and > U+10FFFF (F4).
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      if (c == 0xE0) low = 0xA0;
      if (c == 0xED) high = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      if (c == 0xF0) low = 0x90;
      if (c == 0xF4) high = 0x8F;
    } else {
      return false;
    }
    if (i + length > text.size()) return false;
    const auto second = static_cast<unsigned char>(text[i + 1]);
    if (second < low || second > high) return false;
    for (size_t k = 2; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if (next < 0x80 || next > 0xBF) return false;
    }
    i += length;
  }
  return true;
}

int DevicesOfModel(const NodeSpec& node, const std::string& model) {
  int n = 0;
  for (const auto& d : node.gpus) {
    if (GpuModelMatches(d.model, model)) ++n;
  }
  return n;
}

}  // namespace unisched::model
