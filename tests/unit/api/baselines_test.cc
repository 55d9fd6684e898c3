// /v1/baselines without a socket (api_fixture.h): a run is checked, kept
// with what the daemon adds, listed newest first; a bad one is refused with
// its field and changes nothing.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api_fixture.h"

namespace unisched::api {
namespace {

using nlohmann::json;

class BaselinesApiTest : public ApiFixture {
 protected:
  static json Run(json figures = json::array()) {
    return {{"pools", {"gpu-train-pool", "cpu-hpc-pool"}},
            {"parameters", {{"size", 256}, {"repeats", 2}, {"samples", 2}}},
            {"figures", std::move(figures)},
            {"skipped", {{{"name", "gpu_speedup"}, {"pool", "gpu-train-pool"}, {"reason", "declared devices only"}}}},
            {"nodes", {{"x86-c64m256-hpc-01", {{"cpus", 2}, {"blas", {{"core", "Haswell"}}}}}}},
            {"jobs", {"7", "8"}}};
  }
  static json Dgemm(double value) {
    return {{"name", "dgemm_gflops"}, {"pool", "cpu-hpc-pool"}, {"node", "x86-c64m256-hpc-01"}, {"value", value},
            {"unit", "GFLOP/s"},      {"better", "higher"},     {"detail", {{"threads", 2}}}};
  }
  json List(const std::string& query = "") {
    HttpRequest r;
    r.method = "GET";
    r.path = "/v1/baselines";
    r.target = r.path + (query.empty() ? "" : "?" + query);
    r.remote = "127.0.0.1:40000";
    if (auto eq = query.find('='); eq != std::string::npos) r.query[query.substr(0, eq)] = query.substr(eq + 1);
    r.headers["authorization"] = "Bearer alice-token";
    auto response = api_->HandleSync(r);
    EXPECT_EQ(response.status, 200) << response.body;
    return json::parse(response.body, nullptr, false).value("baselines", json::array());
  }
};

TEST_F(BaselinesApiTest, ARunIsKeptWithWhatTheDaemonAddsAndAnyUserReadsIt) {
  auto posted = Do("POST", "/v1/baselines", Run({Dgemm(41.5)}).dump());
  ASSERT_EQ(posted.status, 201) << posted.body;
  const json run = json::parse(posted.body);
  EXPECT_EQ(run["id"], "1");
  EXPECT_EQ(run["created_by"], "admin");
  EXPECT_EQ(run["created_at"], FormatRfc3339(clock_.Now()));
  EXPECT_EQ(run["pools"], json({"cpu-hpc-pool", "gpu-train-pool"})) << "sorted";
  EXPECT_EQ(run["config"]["digest"], config_.version);
  EXPECT_GT(run["server"]["cpus"].get<int>(), 0);
  EXPECT_FALSE(run["server"]["hostname"].get<std::string>().empty());
  EXPECT_EQ(run["figures"][0]["value"], 41.5);
  EXPECT_EQ(run["figures"][0]["detail"]["threads"], 2);
  EXPECT_EQ(run["skipped"][0]["reason"], "declared devices only");
  EXPECT_EQ(run["nodes"]["x86-c64m256-hpc-01"]["blas"]["core"], "Haswell");

  ASSERT_EQ(Do("POST", "/v1/baselines", Run({Dgemm(40)}).dump()).status, 201);
  json other = Run();
  other["pools"] = {"cpu-hpc-pool"};
  other["skipped"] = json::array();
  ASSERT_EQ(Do("POST", "/v1/baselines", other.dump()).status, 201);

  const json all = List();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]["id"], "3") << "newest first";
  const json same = List("pools=gpu-train-pool,cpu-hpc-pool");
  ASSERT_EQ(same.size(), 2u) << "exactly these pools, in any order";
  EXPECT_EQ(same[0]["id"], "2");
  EXPECT_EQ(same[0]["figures"][0]["value"], 40);
  auto one = Do("GET", "/v1/baselines/1", "", "alice-token");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(json::parse(one.body)["figures"][0]["value"], 41.5);
  for (const char* missing : {"/v1/baselines/4", "/v1/baselines/0", "/v1/baselines/abc"}) {
    EXPECT_EQ(Do("GET", missing).status, 404) << missing;
  }
}

TEST_F(BaselinesApiTest, OnlyPlatformAdminsRecord) {
  auto refused = Do("POST", "/v1/baselines", Run().dump(), "alice-token");
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_TRUE(List().empty());
}

TEST_F(BaselinesApiTest, ABadRunIsRefusedWithItsFieldAndChangesNothing) {
  struct Case {
    std::string name;
    std::function<void(json&)> change;
    int status;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"no pools", [](json& r) { r.erase("pools"); }, 422, "pools"},
      {"no pool", [](json& r) { r["pools"] = json::array(); }, 422, "pools"},
      {"an unknown pool", [](json& r) { r["pools"][1] = "nope"; }, 422, "pools[1]"},
      {"a pool twice", [](json& r) { r["pools"][1] = "gpu-train-pool"; }, 422, "pools"},
      {"pools not a list", [](json& r) { r["pools"] = "cpu-hpc-pool"; }, 400, "pools"},
      {"no figures", [](json& r) { r.erase("figures"); }, 422, "figures"},
      {"an unknown key", [](json& r) { r["figurez"] = json::array(); }, 422, "figurez"},
      {"a value that is text", [](json& r) { r["figures"][0]["value"] = "fast"; }, 400, "figures[0].value"},
      {"a negative value", [](json& r) { r["figures"][0]["value"] = -1; }, 422, "figures[0].value"},
      {"no value", [](json& r) { r["figures"][0].erase("value"); }, 422, "figures[0].value"},
      {"no unit", [](json& r) { r["figures"][0].erase("unit"); }, 422, "figures[0].unit"},
      {"a name with capitals", [](json& r) { r["figures"][0]["name"] = "DGEMM"; }, 422, "figures[0].name"},
      {"better is neither", [](json& r) { r["figures"][0]["better"] = "faster"; }, 422, "figures[0].better"},
      {"a figure of another pool", [](json& r) { r["figures"][0]["pool"] = "inference-pool"; }, 422, "figures[0].pool"},
      {"a figure key unknown", [](json& r) { r["figures"][0]["colour"] = "red"; }, 422, "figures[0].colour"},
      {"detail not an object", [](json& r) { r["figures"][0]["detail"] = 3; }, 400, "figures[0].detail"},
      {"a skip without a reason", [](json& r) { r["skipped"][0].erase("reason"); }, 422, "skipped[0].reason"},
      {"a parameter out of range", [](json& r) { r["parameters"]["size"] = 0; }, 422, "parameters.size"},
      {"an unknown parameter", [](json& r) { r["parameters"]["colour"] = 1; }, 422, "parameters.colour"},
      {"a node's facts not an object", [](json& r) { r["nodes"]["n"] = 1; }, 400, "nodes.n"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    json run = Run({Dgemm(41.5)});
    c.change(run);
    auto r = Do("POST", "/v1/baselines", run.dump());
    EXPECT_EQ(r.status, c.status) << r.body;
    const json body = json::parse(r.body, nullptr, false);
    EXPECT_EQ(body["error"]["field"], c.field) << r.body;
    EXPECT_FALSE(body["error"]["message"].get<std::string>().empty());
  }
  EXPECT_EQ(Do("POST", "/v1/baselines", "[1]").status, 400);
  EXPECT_TRUE(List().empty()) << "nothing was stored";
}

}  // namespace
}  // namespace unisched::api
