// The operators' own tools read only series unisched exports: the Grafana
// dashboard (docs/grafana/unisched.json) and the alert rules
// (docs/prometheus/alerts.yml) are checked against a live daemon's
// /metrics, every dashboard query parses as PromQL (promtool), and
// docs/metrics.md lists exactly the series the daemon exports.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;

std::string SourceFile(const std::string& path) {
  return ReadFile(std::string(UNISCHED_SOURCE_DIR) + "/" + path);
}

// Every unisched_ name a text mentions.
std::set<std::string> NamesIn(const std::string& text) {
  std::set<std::string> names;
  static const std::regex kName(R"(\bunisched_[a-z0-9_]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kName); it != std::sregex_iterator(); ++it) {
    names.insert(it->str());
  }
  return names;
}

// The families a scrape declares (# TYPE lines), and for histograms their
// _bucket, _sum and _count series.
std::set<std::string> ExportedSeries(const std::string& scrape, std::set<std::string>* families) {
  std::set<std::string> series;
  std::istringstream lines(scrape);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string hash, type, name, kind;
    if (!(words >> hash >> type >> name >> kind) || hash != "#" || type != "TYPE") continue;
    if (name.rfind("unisched_", 0) != 0) continue;
    families->insert(name);
    series.insert(name);
    if (kind == "histogram" || kind == "summary") {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) series.insert(name + suffix);
    }
  }
  return series;
}

// Every `expr` of the dashboard's panels (rows' nested panels too).
void CollectExprs(const json& panels, std::vector<std::string>& out) {
  for (const auto& panel : panels) {
    for (const auto& target : panel.value("targets", json::array())) {
      if (target.contains("expr")) out.push_back(target["expr"].get<std::string>());
    }
    if (panel.contains("panels")) CollectExprs(panel["panels"], out);
  }
}

TEST(DashboardTest, TheDashboardAndTheAlertRulesReadOnlySeriesTheDaemonExports) {
  TestDaemon d;
  d.Start();
  // Work that gives the labelled series their first children.
  const std::string id = d.Submit(ShellJob("hpc-precision", "true"));
  d.WaitTerminal(id);
  const std::string running = d.Submit(ShellJob("hpc-precision", "sleep 30"));
  json waiting = ShellJob("hpc-precision", "true");
  waiting["dependency"] = "afterok:" + running;
  const std::string pending = d.Submit(waiting);
  d.WaitJob(pending, [](const json& j) { return !j["pending_reasons"].empty(); });
  const std::string wrong = "not-a-token";
  d.Call("GET", "/v1/jobs", {}, {}, &wrong);
  const Reply metrics = d.Call("GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  std::set<std::string> families;
  const std::set<std::string> exported = ExportedSeries(metrics.body, &families);
  ASSERT_GT(families.size(), 20u) << metrics.body;
  d.Call("DELETE", "/v1/jobs/" + pending);
  d.Call("DELETE", "/v1/jobs/" + running);

  const json dashboard = json::parse(SourceFile("docs/grafana/unisched.json"));
  std::vector<std::string> exprs;
  CollectExprs(dashboard["panels"], exprs);
  ASSERT_GT(exprs.size(), 25u);
  std::set<std::string> dashboard_names;
  for (const auto& e : exprs) {
    for (const auto& n : NamesIn(e)) dashboard_names.insert(n);
  }
  for (const auto& n : dashboard_names) EXPECT_TRUE(exported.count(n)) << "the dashboard reads " << n;
  for (const auto& n : NamesIn(SourceFile("docs/prometheus/alerts.yml"))) {
    EXPECT_TRUE(exported.count(n)) << "an alert rule reads " << n;
  }
  // Each exported family is shown somewhere on the dashboard but the
  // deprecated one, so a new series is not forgotten there.
  for (const auto& f : families) {
    if (f == "unisched_ledger_charged") continue;  // deprecated (docs/metrics.md)
    bool shown = false;
    for (const auto& n : dashboard_names) shown = shown || n == f || n.rfind(f + "_", 0) == 0;
    EXPECT_TRUE(shown) << f << " is on no dashboard panel";
  }

  // docs/metrics.md documents exactly what is exported (replicas.md the
  // replica series).
  std::set<std::string> documented = NamesIn(SourceFile("docs/metrics.md"));
  for (const auto& n : NamesIn(SourceFile("docs/replicas.md"))) documented.insert(n);
  for (const auto& f : families) EXPECT_TRUE(documented.count(f)) << f << " is not in docs/metrics.md";

  // Every query parses as PromQL: promtool checks them as recording rules
  // (Grafana's interval variables given a value).
  const std::string dir = d.state_dir() + "/dashboard-rules";
  std::filesystem::create_directories(dir);
  std::ofstream rules(dir + "/rules.yml");
  rules << "groups:\n  - name: dashboard\n    rules:\n";
  for (size_t i = 0; i < exprs.size(); ++i) {
    std::string e = std::regex_replace(exprs[i], std::regex(R"(\$__rate_interval)"), "5m");
    e = std::regex_replace(e, std::regex(R"(\$__range)"), "1h");
    rules << "      - record: dashboard:query" << i << "\n        expr: '" << e << "'\n";
  }
  rules.close();
  const std::string command = "promtool check rules " + dir + "/rules.yml > " + dir + "/promtool.out 2>&1";
  const int status = std::system(command.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(dir + "/promtool.out");
}

}  // namespace
}  // namespace unisched::testing
