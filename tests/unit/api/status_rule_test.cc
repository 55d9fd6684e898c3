// The contract's status rule in its parts (unparsable -> 400 malformed_*,
// parsed but invalid -> 422), the route table against docs/openapi.yaml,
// and the audit tally of refused requests.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <set>

#include "api/audit_trail.h"
#include "api/body.h"
#include "api/text.h"
#include "testing/openapi.h"
#include "unisched/api/api.h"

namespace unisched::api {
namespace {

using nlohmann::json;

TEST(TextTest, Utf8) {
  EXPECT_TRUE(IsUtf8(""));
  EXPECT_TRUE(IsUtf8("plain ascii"));
  EXPECT_TRUE(IsUtf8("gr\xC3\xBC\xC3\x9F \xE2\x82\xAC \xF0\x9F\x98\x80"));  // ü ß € 😀
  EXPECT_FALSE(IsUtf8("\xFF"));
  EXPECT_FALSE(IsUtf8("\xC3"));              // cut short
  EXPECT_FALSE(IsUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsUtf8("\xE0\x80\xAF"));      // overlong
  EXPECT_FALSE(IsUtf8("\xED\xA0\x80"));      // a surrogate
  EXPECT_FALSE(IsUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
}

TEST(TextTest, Int64) {
  EXPECT_EQ(ParseInt64("0"), 0);
  EXPECT_EQ(ParseInt64("-12"), -12);
  EXPECT_EQ(ParseInt64("9223372036854775807"), INT64_MAX);
  for (const char* bad : {"", "9223372036854775808", "1e9", "+1", " 1", "1 ", "0x10", "1.0", "-"}) {
    EXPECT_FALSE(ParseInt64(bad)) << bad;
  }
}

TEST(QueryRuleTest, UnparsableIs400AndInvalidIs422) {
  struct Case {
    QueryParam param;
    std::string value;
    ErrorKind kind;  // kInternal: valid
    const char* code;
  };
  const auto limit = QueryParam::Integer("limit", 1, 10000);
  const auto state = QueryParam::Choice("state", {"firing", "resolved"});
  const auto groups = QueryParam::ChoiceList("group_by", {"user", "project"});
  const auto since = QueryParam::Time("since");
  const auto kind = QueryParam::Text("kind", 8);
  const std::vector<Case> cases = {
      {limit, "1", ErrorKind::kInternal, ""},
      {limit, "10000", ErrorKind::kInternal, ""},
      {limit, "0", ErrorKind::kUnprocessable, "invalid_value"},
      {limit, "10001", ErrorKind::kUnprocessable, "invalid_value"},
      {limit, "-1", ErrorKind::kUnprocessable, "invalid_value"},
      {limit, "1e9", ErrorKind::kBadRequest, "malformed_value"},
      {limit, "ten", ErrorKind::kBadRequest, "malformed_value"},
      {limit, "99999999999999999999", ErrorKind::kBadRequest, "malformed_value"},
      {state, "firing", ErrorKind::kInternal, ""},
      {state, "FIRING", ErrorKind::kUnprocessable, "invalid_value"},
      {groups, "user,project,user", ErrorKind::kInternal, ""},
      {groups, "user,", ErrorKind::kUnprocessable, "invalid_value"},
      {groups, "queue", ErrorKind::kUnprocessable, "invalid_value"},
      {since, "2026-12-01T00:00:00Z", ErrorKind::kInternal, ""},
      {since, "yesterday", ErrorKind::kBadRequest, "malformed_value"},
      {kind, "drain", ErrorKind::kInternal, ""},
      {kind, "123456789", ErrorKind::kUnprocessable, "invalid_value"},
      {kind, "\xFF", ErrorKind::kBadRequest, "malformed_value"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.param.name + "=" + c.value);
    auto error = CheckQueryValue(c.param, c.value);
    if (c.kind == ErrorKind::kInternal) {
      EXPECT_FALSE(error) << error->message;
      continue;
    }
    ASSERT_TRUE(error);
    EXPECT_EQ(error->kind, c.kind);
    EXPECT_EQ(error->code, c.code);
    EXPECT_EQ(error->field, c.param.name);
  }
}

TEST(BodyRuleTest, UnparsableIs400AndInvalidIs422) {
  EXPECT_EQ(body::ParseObject("{", "{}").error().code, "malformed_json");
  EXPECT_EQ(body::ParseObject("[1]", "{}").error().code, "malformed_json");
  EXPECT_EQ(body::ParseObject(std::string("{}") + '\0', "{}").error().code, "malformed_json");
  EXPECT_EQ(body::ParseObject("{} {}", "{}").error().code, "malformed_json");
  EXPECT_EQ(body::ParseObject("\"\xFF\"", "{}").error().code, "malformed_json");
  EXPECT_TRUE(body::ParseObject("", "{}", /*empty_ok=*/true).ok());
  EXPECT_FALSE(body::ParseObject("", "{}").ok());

  struct Case {
    const char* text;
    ErrorKind kind;  // kInternal: valid
  };
  const std::vector<Case> cases = {
      {R"({"n": 5})", ErrorKind::kInternal},
      {R"({"n": -5})", ErrorKind::kUnprocessable},
      {R"({"n": 11})", ErrorKind::kUnprocessable},
      {R"({"n": "5"})", ErrorKind::kBadRequest},
      {R"({"n": 5.0})", ErrorKind::kBadRequest},
      {R"({"n": 9223372036854775808})", ErrorKind::kBadRequest},
      {R"({"n": 18446744073709551615})", ErrorKind::kBadRequest},
      {R"({"n": 1e30})", ErrorKind::kBadRequest},
      {R"({"n": -9223372036854775808})", ErrorKind::kUnprocessable},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    int64_t out = 0;
    auto error = body::ReadInt(json::parse(c.text), "n", "n", 0, 10, out);
    if (c.kind == ErrorKind::kInternal) {
      EXPECT_FALSE(error);
      EXPECT_EQ(out, 5);
      continue;
    }
    ASSERT_TRUE(error);
    EXPECT_EQ(error->kind, c.kind);
    EXPECT_EQ(error->code, c.kind == ErrorKind::kBadRequest ? "malformed_value" : "invalid_value");
    EXPECT_EQ(error->field, "n");
  }
  std::string text;
  EXPECT_EQ(body::ReadString(json{{"s", 1}}, "s", "s", 10, text)->code, "malformed_value");
  EXPECT_EQ(body::ReadString(json{{"s", std::string("a\0b", 3)}}, "s", "s", 10, text)->code, "invalid_value");
  EXPECT_EQ(body::ReadString(json{{"s", "12345678901"}}, "s", "s", 10, text)->code, "invalid_value");
  EXPECT_EQ(body::CheckKeys(json{{"x", 1}}, "limits", {"cpus"})->field, "limits.x");
  EXPECT_EQ(body::CheckKeys(json{{"x", 1}}, "", {"cpus"})->kind, ErrorKind::kUnprocessable);
}

// Every route is in docs/openapi.yaml with the same query parameters and
// the same bounds, and the document names no route the API lacks.
TEST(OpenApiAgreementTest, RoutesAndTheirQueryParametersAreDocumentedWithTheirBounds) {
  const YAML::Node doc = YAML::LoadFile(std::string(UNISCHED_SOURCE_DIR) + "/docs/openapi.yaml");
  char tmpl[] = "/tmp/unisched-openapi-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  auto store = store::Store::Open({dir + "/db", "off", 1});
  ASSERT_TRUE(store.ok());
  const config::LiveConfig config{config::Config{}};
  metrics::Metrics metrics;
  FakeClock clock;
  ApiContext ctx;  // Routes() reads only the route table
  ctx.config = &config;
  ctx.store = store->get();
  ctx.metrics = &metrics;
  ctx.clock = &clock;
  const Api api(ctx);
  std::set<std::pair<std::string, std::string>> routes;
  for (const auto& route : api.Routes()) {
    SCOPED_TRACE(route.method + " " + route.path);
    routes.insert({route.method, route.path});
    std::string method = route.method;
    for (auto& c : method) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const YAML::Node path_item = doc["paths"][route.path];
    ASSERT_TRUE(path_item) << "path not in docs/openapi.yaml";
    const YAML::Node operation = path_item[method];
    ASSERT_TRUE(operation) << "method not in docs/openapi.yaml";
    std::map<std::string, YAML::Node> documented;
    for (const auto& params : {path_item["parameters"], operation["parameters"]}) {
      for (const auto& p : params) {
        const YAML::Node param = unisched::testing::ResolveRef(doc, p);
        if (param["in"].as<std::string>() == "query") documented[param["name"].as<std::string>()] = param;
      }
    }
    std::set<std::string> declared;
    for (const QueryParam& q : route.query) {
      SCOPED_TRACE(q.name);
      declared.insert(q.name);
      ASSERT_TRUE(documented.count(q.name)) << "query parameter not documented";
      const YAML::Node schema = unisched::testing::ResolveRef(doc, documented[q.name]["schema"]);
      switch (q.kind) {
        case QueryParam::Kind::kInteger:
          EXPECT_EQ(schema["type"].as<std::string>(), "integer");
          ASSERT_TRUE(schema["minimum"] && schema["maximum"]) << "bounds not stated";
          EXPECT_EQ(schema["minimum"].as<int64_t>(), q.min);
          EXPECT_EQ(schema["maximum"].as<int64_t>(), q.max);
          break;
        case QueryParam::Kind::kTime:
          EXPECT_EQ(schema["format"].as<std::string>(), "date-time");
          break;
        case QueryParam::Kind::kChoice:
          EXPECT_EQ(schema["enum"].as<std::vector<std::string>>(), q.choices);
          break;
        case QueryParam::Kind::kChoiceList:
          EXPECT_EQ(schema["type"].as<std::string>(), "array");
          EXPECT_EQ(schema["items"]["enum"].as<std::vector<std::string>>(), q.choices);
          break;
        case QueryParam::Kind::kText:
          ASSERT_TRUE(schema["maxLength"]) << "bound not stated";
          EXPECT_EQ(schema["maxLength"].as<size_t>(), q.max_length);
          break;
      }
    }
    for (const auto& [name, param] : documented) EXPECT_TRUE(declared.count(name)) << name << " is not read";
  }
  for (const auto& path : doc["paths"]) {
    for (const auto& op : path.second) {
      std::string method = op.first.as<std::string>();
      if (method == "parameters") continue;
      for (auto& c : method) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      EXPECT_TRUE(routes.count({method, path.first.as<std::string>()}))
          << method << " " << path.first.as<std::string>() << " is documented but not served";
    }
  }
  (*store)->Close();
  std::filesystem::remove_all(dir);
}

// Refused requests are tallied per address and minute: one record each,
// written when the minute is over.
TEST(AuditTrailTest, RefusedRequestsBecomeOneRecordPerAddressAndMinute) {
  char tmpl[] = "/tmp/unisched-audit-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  auto store = store::Store::Open({dir + "/db", "normal", 64});
  ASSERT_TRUE(store.ok());
  metrics::Metrics metrics;
  FakeClock clock(FromUnixMillis(1'800'000'010'000));  // 10 s past a minute
  AuditTrail audit(**store, metrics, clock);
  for (int i = 0; i < 5; ++i) audit.CountUnauthenticated("10.0.0.1:5555", "missing");
  for (int i = 0; i < 3; ++i) audit.CountUnauthenticated("[::1]:80", "invalid");
  audit.Flush(clock.Now());  // the minute is not over: nothing yet
  EXPECT_TRUE((*store)->ListAudit(100).empty());
  clock.Advance(std::chrono::seconds(60));
  audit.CountUnauthenticated("10.0.0.1:5556", "missing");  // the next minute: the last one's go first
  // The store writes asynchronously; a WriteSync is ordered after it.
  ASSERT_TRUE((*store)->WriteSync([](store::Transaction&) { return Status::Ok(); }).ok());
  auto records = (*store)->ListAudit(100);
  ASSERT_EQ(records.size(), 2u);
  std::map<std::string, std::string> by_address;
  for (const auto& r : records) {
    EXPECT_EQ(r.actor, "anonymous");
    EXPECT_EQ(r.action, "auth_failed");
    EXPECT_EQ(ToUnixMillis(r.time), 1'800'000'000'000);  // the minute's start
    by_address[r.target] = r.result;
  }
  EXPECT_EQ(by_address["10.0.0.1"], "401 x5");
  EXPECT_EQ(by_address["::1"], "401 x3");
  audit.Flush(clock.Now(), /*all=*/true);
  ASSERT_TRUE((*store)->WriteSync([](store::Transaction&) { return Status::Ok(); }).ok());
  EXPECT_EQ((*store)->ListAudit(100).size(), 3u);
  EXPECT_EQ(AuditTrail::BoundedTarget(std::string(10000, 'p')).size(), AuditTrail::kMaxTargetBytes + 16);
  (*store)->Close();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace unisched::api
