#pragma once
// Typed fields out of a parsed JSON document, with the path of the first
// field at fault in the error: the one reader of the documents unisched
// writes itself (stored job objects, attempts' spec and result files, the
// agents' wire messages). Request bodies from clients are read by the API's
// own checks (src/api/body.h), which add limits and a fix to each error.

#include <charconv>
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/common/time.h"
#include "unisched/model/job.h"

namespace unisched::codec {

using json = nlohmann::json;

// Reads typed fields out of a JSON object, remembering the first error with
// the path of the field at fault. Absent and null fields keep the default;
// once an error is recorded every further read is a no-op.
class JsonReader {
 public:
  // `code`: the error code of what is read ("invalid_job_document", "bad_spec", ...).
  explicit JsonReader(std::string code) : code_(std::move(code)) {}

  bool failed() const { return error_.has_value(); }
  Error TakeError() { return std::move(*error_); }

  // The member `key` of `obj`, or nullptr if absent or null (or `obj` is
  // not an object: check that where it matters).
  const json* Field(const json& obj, const char* key) {
    if (failed() || !obj.is_object()) return nullptr;
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
  }

  void Fail(const std::string& path, const std::string& what) {
    if (!failed()) error_ = Error::BadRequest(code_, path + ": " + what, path);
  }

  void String(const json& obj, const char* key, const std::string& path, std::string& out) {
    if (const json* v = Field(obj, key)) {
      if (!v->is_string()) return Fail(path, "must be a string");
      out = v->get<std::string>();
    }
  }

  void Bool(const json& obj, const char* key, const std::string& path, bool& out) {
    if (const json* v = Field(obj, key)) {
      if (!v->is_boolean()) return Fail(path, "must be a boolean");
      out = v->get<bool>();
    }
  }

  template <class Int>
  void Integer(const json& obj, const char* key, const std::string& path, Int& out) {
    if (const json* v = Field(obj, key)) IntegerValue(*v, path, out);
  }

  template <class Int>
  void IntegerValue(const json& v, const std::string& path, Int& out) {
    if (failed()) return;
    if (v.is_number_unsigned()) {
      const auto u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<Int>::max())) return Fail(path, "is out of range");
      out = static_cast<Int>(u);
    } else if (v.is_number_integer()) {
      const auto i = v.get<int64_t>();
      if (i < std::numeric_limits<Int>::min() || i > std::numeric_limits<Int>::max()) {
        return Fail(path, "is out of range");
      }
      out = static_cast<Int>(i);
    } else {
      Fail(path, "must be an integer");
    }
  }

  // A job id: a decimal string (as the API writes ids), or a number.
  void JobIdValue(const json& v, const std::string& path, model::JobId& out) {
    if (failed()) return;
    if (!v.is_string()) return IntegerValue(v, path, out);
    const std::string& text = v.get_ref<const std::string&>();
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, out);
    if (ec != std::errc() || ptr != end || text.empty()) Fail(path, "must be a decimal job id");
  }

  void OptionalInt(const json& obj, const char* key, const std::string& path, std::optional<int>& out) {
    if (const json* v = Field(obj, key)) {
      int i = 0;
      IntegerValue(*v, path, i);
      if (!failed()) out = i;
    }
  }

  void Double(const json& obj, const char* key, const std::string& path, double& out) {
    if (const json* v = Field(obj, key)) {
      if (!v->is_number()) return Fail(path, "must be a number");
      out = v->get<double>();
    }
  }

  void Time(const json& obj, const char* key, const std::string& path, std::optional<Timestamp>& out) {
    if (const json* v = Field(obj, key)) {
      if (!v->is_string()) return Fail(path, "must be an RFC 3339 timestamp string or null");
      auto t = ParseRfc3339(v->get_ref<const std::string&>());
      if (!t) return Fail(path, "is not an RFC 3339 timestamp");
      out = *t;
    }
  }

  void StringMap(const json& obj, const char* key, const std::string& path, std::map<std::string, std::string>& out) {
    if (const json* v = Field(obj, key)) {
      if (!v->is_object()) return Fail(path, "must be an object");
      out.clear();
      for (const auto& [k, value] : v->items()) {
        if (!value.is_string()) return Fail(path + "." + k, "must be a string");
        out[k] = value.get<std::string>();
      }
    }
  }

  void StringList(const json& obj, const char* key, const std::string& path, std::vector<std::string>& out) {
    if (const json* v = Field(obj, key)) {
      if (!v->is_array()) return Fail(path, "must be an array of strings");
      out.clear();
      for (size_t i = 0; i < v->size(); ++i) {
        if (!(*v)[i].is_string()) return Fail(path + "[" + std::to_string(i) + "]", "must be a string");
        out.push_back((*v)[i].get<std::string>());
      }
    }
  }

  void IntList(const json& obj, const char* key, const std::string& path, std::vector<int>& out) {
    if (const json* v = Field(obj, key)) {
      if (!v->is_array()) return Fail(path, "must be an array of integers");
      out.clear();
      for (size_t i = 0; i < v->size() && !failed(); ++i) {
        int value = 0;
        IntegerValue((*v)[i], path + "[" + std::to_string(i) + "]", value);
        out.push_back(value);
      }
    }
  }

  template <class E>
  void Enum(const json& obj, const char* key, const std::string& path, std::optional<E> (*parse)(std::string_view),
            E& out) {
    if (const json* v = Field(obj, key)) {
      if (!v->is_string()) return Fail(path, "must be a string");
      auto e = parse(v->get_ref<const std::string&>());
      if (!e) return Fail(path, "unknown value \"" + v->get<std::string>() + "\"");
      out = *e;
    }
  }

  // `key` as an array, or nullptr (absent, null, or wrong type: then failed()).
  const json* Array(const json& obj, const char* key, const std::string& path) {
    const json* v = Field(obj, key);
    if (v && !v->is_array()) {
      Fail(path, "must be an array");
      return nullptr;
    }
    return v;
  }

  const json* Object(const json& obj, const char* key, const std::string& path) {
    const json* v = Field(obj, key);
    if (v && !v->is_object()) {
      Fail(path, "must be an object");
      return nullptr;
    }
    return v;
  }

  // Fails unless `key` is present and not null: for fields every writer sets.
  bool Require(const json& obj, const char* key, const std::string& path) {
    if (failed()) return false;
    if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) {
      Fail(path, "is required");
      return false;
    }
    return true;
  }

 private:
  std::string code_;
  std::optional<Error> error_;
};

}  // namespace unisched::codec
