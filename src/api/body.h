#pragma once
// Reading the JSON bodies of the API by the contract's status rule: a body
// or value that cannot be parsed as its type (not JSON, a NUL byte or
// anything after the JSON, the wrong JSON type, a number that is not a whole
// number or does not fit its integer type) is 400 (`malformed_json` for the
// body, `malformed_value` for a field); a value that parses but is out of
// range, unknown (a field name included) or unsatisfiable is 422
// (`invalid_value`, `unknown_field`). Every error names its field.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "unisched/common/status.h"

namespace unisched::api::body {

// The body as a JSON object. `example` shows the expected shape in the
// error message. An empty body is an empty object when `empty_ok`.
Result<nlohmann::json> ParseObject(const std::string& text, const std::string& example, bool empty_ok = false);

// 422 `unknown_field` for the first key of `obj` not in `allowed`.
std::optional<Error> CheckKeys(const nlohmann::json& obj, const std::string& prefix,
                               const std::set<std::string>& allowed);

// 400 `malformed_value`: `field` is not of the `expected` type.
Error WrongType(const std::string& field, const std::string& expected, const nlohmann::json& got);

// An integer field in [min, max]: absent or null leaves `out` as it is.
std::optional<Error> ReadInt(const nlohmann::json& obj, const char* key, const std::string& field, int64_t min,
                             int64_t max, int64_t& out);

// A string field without NUL bytes, at most `max_bytes` long, not empty
// unless `empty_ok`: absent or null leaves `out` as it is.
std::optional<Error> ReadString(const nlohmann::json& obj, const char* key, const std::string& field, size_t max_bytes,
                                std::string& out, bool empty_ok = true);

// A list of such strings; empty strings in it only with `items_may_be_empty`.
std::optional<Error> ReadStringList(const nlohmann::json& obj, const char* key, const std::string& field,
                                    size_t max_bytes, std::vector<std::string>& out, bool items_may_be_empty = false);

// 422 unless `text` holds no NUL byte (which would cut it short at exec).
std::optional<Error> CheckNoNul(const std::string& text, const std::string& field);

}  // namespace unisched::api::body
