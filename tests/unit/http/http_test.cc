// The Beast-free helpers of the HTTP module: the error body, query parsing
// and percent-decoding.

#include "unisched/api/http.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace unisched::api {
namespace {

TEST(PercentDecodeTest, Table) {
  struct Case {
    std::string in;
    std::string want;
  };
  const Case cases[] = {
      {"", ""},
      {"plain", "plain"},
      {"a%20b", "a b"},
      {"%2Fv1%2fjobs", "/v1/jobs"},
      {"a+b", "a+b"},    // '+' is only a space inside a query
      {"100%", "100%"},  // truncated escape kept literally
      {"%4", "%4"},
      {"%zz", "%zz"},  // not hex
      {"%E2%9C%93", "\xE2\x9C\x93"},
      {"%00x", std::string("\0x", 2)},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.in);
    EXPECT_EQ(PercentDecode(c.in), c.want);
  }
}

TEST(ParseQueryTest, Table) {
  using Map = std::map<std::string, std::string>;
  struct Case {
    std::string in;
    Map want;
  };
  const Case cases[] = {
      {"", {}},
      {"a=1", {{"a", "1"}}},
      {"a=1&b=x%20y", {{"a", "1"}, {"b", "x y"}}},
      {"name=a+b", {{"name", "a b"}}},
      {"flag", {{"flag", ""}}},
      {"a=&b=2", {{"a", ""}, {"b", "2"}}},
      {"&&a=1&", {{"a", "1"}}},
      {"a=1&a=2", {{"a", "1"}}},  // first wins
      {"k%3D=v%26w", {{"k=", "v&w"}}},
      {"x=a=b", {{"x", "a=b"}}},
      {"cursor=MTIz%3D%3D&limit=0", {{"cursor", "MTIz=="}, {"limit", "0"}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.in);
    EXPECT_EQ(ParseQuery(c.in), c.want);
  }
}

TEST(ErrorResponseTest, HasTheContractShape) {
  HttpResponse r = ErrorResponse(422, "invalid_resources", "gpus must be >= 0", "resources.gpus");
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.content_type, "application/json");
  auto body = nlohmann::json::parse(r.body);
  EXPECT_EQ(body,
            nlohmann::json::parse(
                R"({"error":{"code":"invalid_resources","message":"gpus must be >= 0","field":"resources.gpus"}})"));
}

TEST(ErrorResponseTest, OmitsAnEmptyField) {
  auto body = nlohmann::json::parse(ErrorResponse(404, "not_found", "no job 7").body);
  EXPECT_FALSE(body["error"].contains("field"));
  EXPECT_EQ(body["error"]["code"], "not_found");
}

TEST(ErrorResponseTest, InvalidUtf8InTheMessageDoesNotThrow) {
  HttpResponse r = ErrorResponse(400, "bad", std::string("bad byte \xff here"));
  EXPECT_TRUE(nlohmann::json::accept(r.body));
}

TEST(HttpRequestTest, HeaderLooksUpLowerCaseNames) {
  HttpRequest r;
  r.headers["idempotency-key"] = "k1";
  EXPECT_EQ(r.Header("idempotency-key"), "k1");
  EXPECT_EQ(r.Header("authorization"), "");
}

}  // namespace
}  // namespace unisched::api
