// The contract's status rule, walked over every endpoint that
// docs/openapi.yaml describes, against a running daemon: each query
// parameter and each integer and string field of a JSON body gets values
// that cannot be parsed as its type (400 malformed_*) and values that parse
// but break its documented bounds (422), and every answer's status must be
// one the document lists for the operation. The document is the source of
// the bounds, so a bound it states that the server does not hold (or the
// reverse, tested in tests/unit/api) fails here.

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "testing/daemon.h"
#include "testing/openapi.h"

namespace unisched::testing {
namespace {

using nlohmann::json;

// A YAML example as JSON (scalars that read as integers become integers).
json ToJson(const YAML::Node& node) {
  if (node.IsMap()) {
    json out = json::object();
    for (const auto& kv : node) out[kv.first.as<std::string>()] = ToJson(kv.second);
    return out;
  }
  if (node.IsSequence()) {
    json out = json::array();
    for (const auto& item : node) out.push_back(ToJson(item));
    return out;
  }
  if (node.IsNull()) return nullptr;
  const std::string text = node.as<std::string>();
  if (node.Tag() != "!" && !text.empty() && text.find_first_not_of("-0123456789") == std::string::npos && text != "-") {
    return std::stoll(text);
  }
  return text;
}

struct Expectation {
  std::string what;
  int status;
  std::string code_prefix;  // "malformed_" or "invalid_value" / "unknown_field"
  std::string field;        // empty: not checked
};

class StatusRuleTest : public SharedDaemonTest {
 protected:
  void SetUp() override {
    doc_ = YAML::LoadFile(std::string(UNISCHED_SOURCE_DIR) + "/docs/openapi.yaml");
    job_id_ = d().Submit({{"workload", {{"kind", "hpc"}}}, {"command", {"sleep", "600"}}});
    const Reply sandbox = d().Call("POST", "/v1/sandboxes", std::string("{}"));
    if (sandbox.status == 201) sandbox_id_ = sandbox.json["id"];
    const Reply token = d().Call("POST", "/v1/node-tokens", json{{"pool", "cpu-hpc-pool"}});
    ASSERT_EQ(token.status, 201) << token.body;
    node_token_ = token.json["token"];
  }
  void TearDown() override {
    d().Call("DELETE", "/v1/jobs/" + job_id_);
    if (!sandbox_id_.empty()) d().Call("DELETE", "/v1/sandboxes/" + sandbox_id_);
  }

  // The path with its parameters filled in, or empty when the daemon has
  // nothing to fill one with (no sandbox without root).
  std::string Fill(const std::string& templ) const {
    std::string out = templ;
    auto put = [&out](const std::string& name, const std::string& value) {
      const size_t at = out.find("{" + name + "}");
      if (at != std::string::npos) out.replace(at, name.size() + 2, value);
    };
    if (templ.rfind("/v1/sandboxes/", 0) == 0) {
      if (sandbox_id_.empty()) return {};
      put("id", sandbox_id_);
    }
    put("id", job_id_);
    put("name", templ.rfind("/v1/nodes/", 0) == 0    ? "x86-c64m256-hpc-01"
                : templ.rfind("/v1/users/", 0) == 0  ? "admin"
                : templ.rfind("/v1/images/", 0) == 0 ? "host"
                                                     : "x");
    put("path", "probe.txt");
    return out;
  }

  void Expect(const std::string& method, const std::string& target, const std::string& body, const YAML::Node& op,
              const Expectation& e) {
    SCOPED_TRACE(method + " " + target.substr(0, 200) + ": " + e.what);
    const std::string* token = target.rfind("/v1/agents/", 0) == 0 ? &node_token_ : nullptr;
    const Reply r = d().Call(method, target, body, {}, token);
    ++checked_;
    EXPECT_EQ(r.status, e.status) << r.body;
    EXPECT_TRUE(op["responses"] && op["responses"][std::to_string(r.status)])
        << "status " << r.status << " is not among the operation's documented responses";
    if (r.status != e.status) return;
    ASSERT_TRUE(r.json.is_object() && r.json.contains("error")) << r.body;
    const std::string code = r.json["error"]["code"];
    EXPECT_EQ(code.rfind(e.code_prefix, 0), 0u) << r.body;
    if (!e.field.empty()) {
      EXPECT_EQ(r.json["error"].value("field", ""), e.field) << r.body;
    }
  }

  // Every unparsable and out-of-bounds value of one query parameter.
  void WalkQuery(const std::string& method, const std::string& path, const YAML::Node& op, const YAML::Node& param) {
    const std::string name = param["name"].as<std::string>();
    const YAML::Node schema = ResolveRef(doc_, param["schema"]);
    const std::string type = schema["type"] ? schema["type"].as<std::string>() : "";
    auto with = [&](const std::string& value) { return path + "?" + name + "=" + value; };
    auto malformed = [&](const std::string& why, const std::string& value) {
      Expect(method, with(value), "", op, {why, 400, "malformed_", name});
    };
    auto invalid = [&](const std::string& why, const std::string& value) {
      Expect(method, with(value), "", op, {why, 422, "invalid_value", name});
    };
    malformed("not UTF-8", "%FF%FE");
    if (type == "integer") {
      ASSERT_TRUE(schema["minimum"] && schema["maximum"]) << name << ": integer without stated bounds";
      malformed("not a number", "x1");
      malformed("not a whole number", "1.5");
      malformed("an exponent", "1e3");
      malformed("beyond int64", "99999999999999999999");
      const int64_t min = schema["minimum"].as<int64_t>();
      const int64_t max = schema["maximum"].as<int64_t>();
      if (min > INT64_MIN) invalid("below the minimum", std::to_string(min - 1));
      if (max < INT64_MAX) invalid("above the maximum", std::to_string(max + 1));
    } else if (type == "array") {
      ASSERT_TRUE(schema["items"]["enum"]) << name << ": list without its allowed values";
      invalid("an unknown item", "no-such-value");
    } else if (schema["enum"]) {
      invalid("not among the values", "no-such-value");
    } else if (schema["format"] && schema["format"].as<std::string>() == "date-time") {
      malformed("not a time", "yesterday");
    } else {
      ASSERT_TRUE(schema["maxLength"]) << name << ": text without a stated bound";
      invalid("too long", std::string(schema["maxLength"].as<size_t>() + 1, 'a'));
    }
  }

  // Each integer and string field of `schema` within `base` (the example),
  // replaced by values of the wrong type and out of bounds.
  void WalkBody(const std::string& method, const std::string& target, const YAML::Node& op, const json& base,
                const YAML::Node& schema_node, const std::string& prefix, const std::vector<std::string>& at) {
    const YAML::Node schema = ResolveRef(doc_, schema_node);
    if (!schema["properties"]) return;
    auto send = [&](const std::vector<std::string>& where, const json& value, const Expectation& e) {
      json body = base;
      json* slot = &body;
      for (const auto& key : where) slot = &(*slot)[key];
      *slot = value;
      Expect(method, target, body.dump(), op, e);
    };
    if (schema["additionalProperties"] && schema["additionalProperties"].IsScalar() &&
        !schema["additionalProperties"].as<bool>()) {
      std::vector<std::string> where = at;
      where.push_back("no_such_field");
      send(where, 1, {"an unknown field", 422, "unknown_field", prefix + "no_such_field"});
    }
    for (const auto& property : schema["properties"]) {
      const std::string key = property.first.as<std::string>();
      const YAML::Node p = ResolveRef(doc_, property.second);
      const std::string field = prefix + key;
      std::vector<std::string> where = at;
      where.push_back(key);
      const std::string type = p["type"] ? p["type"].as<std::string>() : "";
      if (type == "object") {
        json nested = base;
        for (const auto& k : where) nested = nested.is_object() && nested.contains(k) ? nested[k] : json();
        if (nested.is_object()) WalkBody(method, target, op, base, property.second, field + ".", where);
        continue;
      }
      if (type == "integer") {
        send(where, "7", {"an integer as text", 400, "malformed_", field});
        send(where, 1.5, {"not a whole number", 400, "malformed_", field});
        send(where, json::parse("18446744073709551615"), {"beyond int64", 400, "malformed_", field});
        send(where, json::parse("1e30"), {"beyond uint64", 400, "malformed_", field});
        ASSERT_TRUE(p["minimum"] && p["maximum"]) << field << ": integer without stated bounds";
        send(where, p["minimum"].as<int64_t>() - 1, {"below the minimum", 422, "invalid_value", field});
        send(where, p["maximum"].as<int64_t>() + 1, {"above the maximum", 422, "invalid_value", field});
      } else if (type == "string") {
        send(where, 42, {"a number for text", 400, "malformed_", field});
        if (p["maxLength"]) {
          send(where, std::string(p["maxLength"].as<size_t>() + 1, 'a'), {"too long", 422, "invalid_value", field});
        }
      } else if (type == "array") {
        send(where, "text", {"text for a list", 400, "malformed_", field});
      }
    }
  }

  YAML::Node doc_;
  std::string job_id_, sandbox_id_, node_token_;
  int checked_ = 0;
};

TEST_F(StatusRuleTest, EveryParameterAndBodyFieldFollowsTheRule) {
  const std::set<std::string> methods = {"get", "post", "put", "delete"};
  int operations = 0;
  for (const auto& path_item : doc_["paths"]) {
    const std::string templ = path_item.first.as<std::string>();
    const std::string path = Fill(templ);
    if (path.empty()) continue;
    for (const auto& entry : path_item.second) {
      const std::string lower = entry.first.as<std::string>();
      if (!methods.count(lower)) continue;
      std::string method = lower;
      for (auto& c : method) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      const YAML::Node op = entry.second;
      ++operations;
      std::vector<YAML::Node> params;
      for (const auto& list : {path_item.second["parameters"], op["parameters"]}) {
        for (const auto& p : list) params.push_back(ResolveRef(doc_, p));
      }
      for (const auto& param : params) {
        if (param["in"].as<std::string>() == "query") WalkQuery(method, path, op, param);
      }
      if (!op["requestBody"] || !op["requestBody"]["content"]["application/json"]) continue;
      const YAML::Node media = op["requestBody"]["content"]["application/json"];
      // The body as a whole.
      Expect(method, path, "{\"a\":", op, {"not JSON", 400, "malformed_json", ""});
      Expect(method, path, "[1,2]", op, {"not an object", 400, "malformed_json", ""});
      Expect(method, path, std::string("{}") + '\0', op, {"a NUL byte after it", 400, "malformed_json", ""});
      Expect(method, path, "{} {}", op, {"two values", 400, "malformed_json", ""});
      Expect(method, path, "{\"a\": \"\xFF\"}", op, {"not UTF-8", 400, "malformed_json", ""});
      if (media["example"]) WalkBody(method, path, op, ToJson(media["example"]), media["schema"], "", {});
    }
  }
  std::printf("%d answers checked over %d operations\n", checked_, operations);
  EXPECT_GE(operations, 35);
  EXPECT_GE(checked_, 150);
  // Nothing of it was accepted: the one job of SetUp is still the only one.
  EXPECT_EQ(d().Call("GET", "/v1/jobs?limit=0").json["total"], 1);
}

}  // namespace
}  // namespace unisched::testing
