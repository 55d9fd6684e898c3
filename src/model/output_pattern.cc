// Slurm's output file patterns: see output_pattern.h.

#include "unisched/model/output_pattern.h"

#include <cctype>
#include <string>

namespace unisched::model {

namespace {

constexpr size_t kMaxPatternBytes = 4096;
constexpr std::string_view kLetters = "jtNuxAa%";

// One "%[width]letter" at text[at] (text[at] == '%'): its letter's index
// in the text and the width, or npos when it is not one.
size_t ParseDirective(std::string_view text, size_t at, int* width) {
  size_t i = at + 1;
  *width = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && *width < 100) {
    *width = *width * 10 + (text[i] - '0');
    ++i;
  }
  return i < text.size() && kLetters.find(text[i]) != std::string_view::npos ? i : std::string_view::npos;
}

std::string Padded(const std::string& value, int width) {
  return static_cast<int>(value.size()) >= width ? value
                                                 : std::string(static_cast<size_t>(width) - value.size(), '0') + value;
}

}  // namespace

std::string CheckOutputPattern(std::string_view pattern) {
  if (pattern.empty()) return "must not be empty; omit it for no output file";
  if (pattern.size() > kMaxPatternBytes) return "is longer than 4096 bytes";
  if (pattern.find('\0') != std::string_view::npos) return "must not contain a NUL byte";
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') continue;
    int width = 0;
    const size_t letter = ParseDirective(pattern, i, &width);
    if (letter == std::string_view::npos) {
      return "has an unknown pattern at '" + std::string(pattern.substr(i, 3)) +
             "'; use %j (job id), %t (task rank), %N (node), %u (user), %x (job name), %A and %a (array job id "
             "and index), %% (a '%'), optionally with a width (%5j)";
    }
    i = letter;
  }
  return {};
}

std::string ExpandOutputPattern(std::string_view pattern, const OutputPlace& place) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    int width = 0;
    const size_t letter = pattern[i] == '%' ? ParseDirective(pattern, i, &width) : std::string_view::npos;
    if (letter == std::string_view::npos) {
      out += pattern[i];
      continue;
    }
    std::string value;
    switch (pattern[letter]) {
      case 'j':
        value = Padded(std::to_string(place.job), width);
        break;
      case 'A':
        value = Padded(std::to_string(place.array_job > 0 ? place.array_job : place.job), width);
        break;
      case 'a':
        // Slurm's NO_VAL for a job that is no array's task.
        value = Padded(place.array_job > 0 ? std::to_string(place.array_index) : std::string("4294967294"), width);
        break;
      case 't':
        value = Padded(std::to_string(place.task), width);
        break;
      case 'N':
        value = place.node;
        break;
      case 'u':
        value = place.user;
        break;
      case 'x':
        value = place.name;
        break;
      default:
        value = "%";
    }
    out += value;
    i = letter;
  }
  return out;
}

}  // namespace unisched::model
