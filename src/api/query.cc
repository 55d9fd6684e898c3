// Query parameters checked by the contract's status rule (api.h, QueryParam).

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "api/text.h"
#include "unisched/api/api.h"

namespace unisched::api {
namespace {

std::string Bounds(const QueryParam& p) {
  return std::to_string(p.min) + " to " + std::to_string(p.max);
}

std::string ChoiceList(const QueryParam& p) {
  std::string out;
  for (const auto& c : p.choices) out += (out.empty() ? "" : ", ") + c;
  return out;
}

}  // namespace

std::optional<Error> CheckQueryValue(const QueryParam& p, const std::string& value) {
  if (!IsUtf8(value)) {
    return Error::BadRequest("malformed_value", p.name + " is not valid UTF-8 text; percent-encode UTF-8 bytes",
                             p.name);
  }
  switch (p.kind) {
    case QueryParam::Kind::kInteger: {
      auto number = ParseInt64(value);
      if (!number) {
        return Error::BadRequest(
            "malformed_value",
            p.name + " must be a whole number written in digits (from " + Bounds(p) + "), got '" + value + "'", p.name);
      }
      if (*number < p.min || *number > p.max) {
        return Error::Unprocessable("invalid_value", p.name + " must be from " + Bounds(p) + ", got " + value, p.name);
      }
      return std::nullopt;
    }
    case QueryParam::Kind::kTime:
      if (!ParseRfc3339(value)) {
        return Error::BadRequest("malformed_value",
                                 p.name + " must be an RFC 3339 time, e.g. 2026-12-01T00:00:00Z, got '" + value + "'",
                                 p.name);
      }
      return std::nullopt;
    case QueryParam::Kind::kChoice:
      if (std::find(p.choices.begin(), p.choices.end(), value) == p.choices.end()) {
        return Error::Unprocessable("invalid_value",
                                    p.name + " '" + value + "' is not known; use one of " + ChoiceList(p), p.name);
      }
      return std::nullopt;
    case QueryParam::Kind::kChoiceList: {
      size_t start = 0;
      while (start <= value.size()) {
        const size_t comma = std::min(value.find(',', start), value.size());
        const std::string item = value.substr(start, comma - start);
        if (std::find(p.choices.begin(), p.choices.end(), item) == p.choices.end()) {
          return Error::Unprocessable(
              "invalid_value",
              p.name + " '" + item + "' is not known; use any of " + ChoiceList(p) + ", separated by commas", p.name);
        }
        start = comma + 1;
      }
      return std::nullopt;
    }
    case QueryParam::Kind::kText:
      if (value.size() > p.max_length) {
        return Error::Unprocessable("invalid_value",
                                    p.name + " must be at most " + std::to_string(p.max_length) + " bytes", p.name);
      }
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace unisched::api
