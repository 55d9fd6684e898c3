// Figures, comparisons and percentiles of baseline runs
// (unisched/baseline/baseline.h).

#include "unisched/baseline/baseline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

namespace unisched::baseline {

using nlohmann::json;

const char* ToString(Better better) {
  return better == Better::kHigher ? "higher" : "lower";
}

std::optional<Better> ParseBetter(const std::string& text) {
  if (text == "higher") return Better::kHigher;
  if (text == "lower") return Better::kLower;
  return std::nullopt;
}

std::string Figure::Key() const {
  std::string key = name;
  if (!pool.empty()) key += " " + pool;
  if (!node.empty()) key += (pool.empty() ? " " : "/") + node;
  return key;
}

json ToJson(const Figure& f) {
  json out = {{"name", f.name}, {"value", f.value}, {"unit", f.unit}, {"better", ToString(f.better)}};
  if (!f.pool.empty()) out["pool"] = f.pool;
  if (!f.node.empty()) out["node"] = f.node;
  if (f.detail.is_object() && !f.detail.empty()) out["detail"] = f.detail;
  return out;
}

std::vector<Figure> FiguresOf(const json& run) {
  std::vector<Figure> figures;
  if (!run.is_object() || !run.contains("figures") || !run["figures"].is_array()) return figures;
  for (const auto& item : run["figures"]) {
    if (!item.is_object() || !item.contains("value") || !item["value"].is_number()) continue;
    auto text = [&item](const char* key) {
      auto it = item.find(key);
      return it != item.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    Figure f;
    f.name = text("name");
    f.pool = text("pool");
    f.node = text("node");
    f.unit = text("unit");
    f.value = item["value"].get<double>();
    f.better = ParseBetter(text("better")).value_or(Better::kHigher);
    if (item.contains("detail") && item["detail"].is_object()) f.detail = item["detail"];
    if (!f.name.empty()) figures.push_back(std::move(f));
  }
  return figures;
}

std::vector<Change> Compare(const std::vector<Figure>& previous, const std::vector<Figure>& current,
                            double margin_percent) {
  std::map<std::string, const Figure*> before;
  for (const auto& f : previous) before.emplace(f.Key(), &f);
  std::vector<Change> changes;
  auto add = [&](const Figure& f, std::optional<double> old_value, std::optional<double> new_value) {
    Change c;
    c.key = f.Key();
    c.unit = f.unit;
    c.better = f.better;
    c.before = old_value;
    c.after = new_value;
    if (old_value && new_value && *old_value != 0) {
      c.percent = (*new_value - *old_value) / *old_value * 100.0;
      const double worse_by = f.better == Better::kHigher ? -*c.percent : *c.percent;
      c.flagged = worse_by > margin_percent;
    }
    changes.push_back(std::move(c));
  };
  for (const auto& f : current) {
    auto it = before.find(f.Key());
    add(f, it == before.end() ? std::nullopt : std::optional<double>(it->second->value), f.value);
    if (it != before.end()) before.erase(it);
  }
  for (const auto& f : previous) {
    if (before.count(f.Key())) add(f, f.value, std::nullopt);
  }
  return changes;
}

json ToJson(const Change& c) {
  auto number = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  return {{"figure", c.key},
          {"unit", c.unit},
          {"better", ToString(c.better)},
          {"before", number(c.before)},
          {"after", number(c.after)},
          {"percent", number(c.percent)},
          {"flagged", c.flagged}};
}

std::optional<double> Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return std::nullopt;
  std::sort(samples.begin(), samples.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(samples.size()));
  const size_t index = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(samples.size()))) - 1;
  return samples[index];
}

std::optional<json> KernelReport(const std::string& output) {
  std::istringstream lines(output);
  std::optional<json> found;
  std::string line;
  while (std::getline(lines, line)) {
    json parsed = json::parse(line, nullptr, false);
    if (parsed.is_object() && parsed.contains("gflops") && parsed["gflops"].is_number()) found = std::move(parsed);
  }
  return found;
}

}  // namespace unisched::baseline
