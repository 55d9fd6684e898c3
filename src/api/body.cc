#include "api/body.h"

namespace unisched::api::body {

using nlohmann::json;

Result<json> ParseObject(const std::string& text, const std::string& example, bool empty_ok) {
  if (text.empty() && empty_ok) return json::object();
  // A raw NUL byte is never part of a JSON text (inside strings it is
  // written \u0000); nlohmann's parser would take it for the end of input
  // and accept whatever came before it.
  if (text.find('\0') != std::string::npos) {
    return Error::BadRequest("malformed_json",
                             "the request body holds a NUL byte, which JSON does not allow; send the JSON text only");
  }
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return Error::BadRequest("malformed_json",
                             "the request body is not valid JSON (UTF-8 text, one value, nothing "
                             "after it); expected an object such as " +
                                 example);
  }
  if (!parsed.is_object()) {
    return Error::BadRequest(
        "malformed_json", "the request body must be a JSON object such as " + example + ", got " + parsed.type_name());
  }
  return parsed;
}

std::optional<Error> CheckKeys(const json& obj, const std::string& prefix, const std::set<std::string>& allowed) {
  for (const auto& [key, value] : obj.items()) {
    (void)value;
    if (allowed.count(key)) continue;
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    const std::string field = prefix.empty() ? key : prefix + "." + key;
    return Error::Unprocessable("unknown_field", "unknown field '" + field + "'; expected one of: " + list, field);
  }
  return std::nullopt;
}

Error WrongType(const std::string& field, const std::string& expected, const json& got) {
  return Error::BadRequest("malformed_value", field + " must be " + expected + ", got " + got.type_name(), field);
}

std::optional<Error> ReadInt(const json& obj, const char* key, const std::string& field, int64_t min, int64_t max,
                             int64_t& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  const std::string bounds = std::to_string(min) + " and " + std::to_string(max);
  // nlohmann keeps integers beyond int64 as unsigned, and beyond uint64 as
  // doubles: both are numbers this field cannot hold, not values out of range.
  if (it->is_number_float() || (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{INT64_MAX})) {
    return Error::BadRequest("malformed_value",
                             field + " must be a whole number between " + bounds + ", got " + it->dump(), field);
  }
  if (!it->is_number_integer()) return WrongType(field, "an integer", *it);
  const int64_t v = it->get<int64_t>();
  if (v < min || v > max) {
    return Error::Unprocessable("invalid_value", field + " must be between " + bounds + ", got " + std::to_string(v),
                                field);
  }
  out = v;
  return std::nullopt;
}

std::optional<Error> CheckNoNul(const std::string& text, const std::string& field) {
  if (text.find('\0') == std::string::npos) return std::nullopt;
  return Error::Unprocessable("invalid_value", field + " must not contain NUL bytes (\\u0000)", field);
}

namespace {
std::optional<Error> CheckText(const std::string& text, const std::string& field, size_t max_bytes, bool empty_ok) {
  if (auto e = CheckNoNul(text, field)) return e;
  if (text.size() > max_bytes) {
    return Error::Unprocessable("invalid_value", field + " must be at most " + std::to_string(max_bytes) + " bytes",
                                field);
  }
  if (!empty_ok && text.empty()) return Error::Unprocessable("invalid_value", field + " must not be empty", field);
  return std::nullopt;
}
}  // namespace

std::optional<Error> ReadString(const json& obj, const char* key, const std::string& field, size_t max_bytes,
                                std::string& out, bool empty_ok) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return WrongType(field, "a string", *it);
  const auto& text = it->get_ref<const std::string&>();
  if (auto e = CheckText(text, field, max_bytes, empty_ok)) return e;
  out = text;
  return std::nullopt;
}

std::optional<Error> ReadStringList(const json& obj, const char* key, const std::string& field, size_t max_bytes,
                                    std::vector<std::string>& out, bool items_may_be_empty) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) return WrongType(field, "a list of strings", *it);
  std::vector<std::string> items;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& item = (*it)[i];
    const std::string item_field = field + "[" + std::to_string(i) + "]";
    if (!item.is_string()) return WrongType(item_field, "a string", item);
    if (auto e = CheckText(item.get_ref<const std::string&>(), item_field, max_bytes, items_may_be_empty)) return e;
    items.push_back(item.get<std::string>());
  }
  out = std::move(items);
  return std::nullopt;
}

}  // namespace unisched::api::body
