// The Beast-free half of the HTTP module: the error body every handler and
// the server itself answer with, and query-string decoding.

#include "unisched/api/http.h"

#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace unisched::api {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

HttpResponse ErrorResponse(int status, const std::string& code, const std::string& message, const std::string& field) {
  nlohmann::json error = {{"code", code}, {"message", message}};
  if (!field.empty()) error["field"] = field;
  HttpResponse response;
  response.status = status;
  response.content_type = "application/json";
  // Invalid UTF-8 (e.g. echoed from a request) is replaced, never thrown on.
  response.body = nlohmann::json{{"error", error}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return response;
}

std::string PercentDecode(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      int hi = HexValue(text[i + 1]);
      int lo = HexValue(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    // A '%' not followed by two hex digits is kept literally: lenient, and
    // never turns garbage into a different valid value.
    out.push_back(text[i]);
  }
  return out;
}

std::map<std::string, std::string> ParseQuery(const std::string& query) {
  std::map<std::string, std::string> params;
  size_t start = 0;
  while (start <= query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string::npos) end = query.size();
    std::string pair = query.substr(start, end - start);
    if (!pair.empty()) {
      for (char& c : pair) {
        if (c == '+') c = ' ';
      }
      size_t eq = pair.find('=');
      std::string key = PercentDecode(pair.substr(0, eq));
      std::string value = eq == std::string::npos ? std::string() : PercentDecode(pair.substr(eq + 1));
      // The first occurrence wins, so a repeated parameter cannot override
      // one a proxy or client put first.
      params.emplace(std::move(key), std::move(value));
    }
    start = end + 1;
  }
  return params;
}

}  // namespace unisched::api
