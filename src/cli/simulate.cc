// `unisched simulate`: flags, progress bar, output. The replay itself is
// src/sim (sim::RunSimulation).

#include "cli/simulate.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>

#include "cli/args.h"

namespace unisched::cli {
namespace {

int SimulateUsageFailure(const std::string& message) {
  std::cerr << "error: " << message << "\n" << kSimulateUsage << "\n";
  return 2;
}

// A bar on stderr, redrawn in place; only for a terminal, so logs and pipes
// stay clean.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  ~ProgressBar() { Finish(); }

  void Update(int64_t done, int64_t total) {
    if (!enabled_ || total <= 0) return;
    const int percent = static_cast<int>(done * 100 / total);
    if (percent == last_percent_) return;
    last_percent_ = percent;
    constexpr int kWidth = 40;
    const int filled = percent * kWidth / 100;
    std::cerr << "\r[" << std::string(static_cast<size_t>(filled), '#')
              << std::string(static_cast<size_t>(kWidth - filled), '.') << "] " << percent << "% (" << done << "/"
              << total << " events)" << std::flush;
    drawn_ = true;
    if (done >= total) Finish();  // before the log lines that follow the replay
  }

  void Finish() {
    if (drawn_) std::cerr << "\r\033[K" << std::flush;  // erase the bar
    drawn_ = false;
  }

 private:
  bool enabled_;
  bool drawn_ = false;
  int last_percent_ = -1;
};

}  // namespace

nlohmann::json SimulationJson(const sim::SimulationReport& report) {
  const sim::Metrics& m = report.result.metrics;
  nlohmann::json out = {{"jobs", m.jobs},
                        {"avg_wait_seconds", m.avg_wait_seconds},
                        {"avg_bounded_slowdown", m.avg_bounded_slowdown},
                        {"utilization", m.utilization},
                        {"makespan_seconds", m.makespan_seconds}};
  const sim::PredictionAccuracy& p = report.result.prediction;
  if (p.predicted > 0) {
    out["predicted_jobs"] = p.predicted;
    out["prediction_mae_seconds"] = p.MeanAbsoluteError();
    out["prediction_under_share"] = p.UnderShare();
  }
  if (const sim::EstimateAccuracy& e = report.result.estimates; e.estimated > 0) {
    out["estimated_jobs"] = e.estimated;
    out["estimate_error_median_seconds"] = e.median_error_seconds;
    out["estimate_error_p90_seconds"] = e.p90_error_seconds;
    out["estimate_early_median_seconds"] = e.median_early_seconds;
    out["estimate_late_share"] = e.LateShare();
  }
  if (report.format == sim::TraceFormat::kPhilly) {
    out["avg_jct_seconds"] = m.avg_jct_seconds;
    out["gpu_utilization"] = m.utilization;  // the pool's resource is its GPUs
  }
  return out;
}

int RunSimulate(const std::vector<std::string>& words) {
  auto parsed = ParseArgs(words, {{"trace", true, false},
                                  {"config", true, false},
                                  {"processors", true, false},
                                  {"gpus", true, false},
                                  {"policy", true, false},
                                  {"starts", true, false},
                                  {"planned-share", true, false}});
  if (!parsed.ok()) return SimulateUsageFailure(parsed.error().message);
  const ParsedArgs& args = *parsed;
  if (args.Has("help")) {
    std::cout << kSimulateUsage << "\n";
    return 0;
  }
  if (!args.positionals.empty()) return SimulateUsageFailure("unexpected argument '" + args.positionals[0] + "'");
  if (!args.rest.empty()) return SimulateUsageFailure("unexpected argument '" + args.rest[0] + "'");

  sim::SimulateOptions options;
  options.trace_path = args.Get("trace").value_or("");
  if (options.trace_path.empty()) return SimulateUsageFailure("--trace FILE is required");
  options.config_path = args.Get("config").value_or("");
  for (const char* flag : {"processors", "gpus"}) {
    if (auto value = args.Get(flag)) {
      auto n = ParseInteger(*value, flag);
      if (!n.ok()) return SimulateUsageFailure(n.error().message);
      if (*n <= 0 || *n > (1 << 24)) return SimulateUsageFailure(std::string("--") + flag + " must be in 1..16777216");
      (std::string(flag) == "processors" ? options.processors : options.gpus) = static_cast<int>(*n);
    }
  }
  if (auto policy = args.Get("policy")) {
    options.policy = model::ParseBackfillChoice(*policy);
    if (!options.policy) {
      return SimulateUsageFailure("unknown --policy '" + *policy +
                                  "' (expected fcfs, easy, conservative, easy-predicted or conservative-predicted)");
    }
  }

  if (auto share = args.Get("planned-share")) {
    // A number here; its range is RunSimulation's to check.
    char* end = nullptr;
    options.planned_share = std::strtod(share->c_str(), &end);
    if (share->empty() || end != share->c_str() + share->size()) {
      return SimulateUsageFailure("--planned-share must be a number in (0, 1], e.g. 0.2");
    }
  }

  ProgressBar bar(isatty(STDERR_FILENO) == 1);
  auto report =
      sim::RunSimulation(options, std::cerr, [&bar](int64_t done, int64_t total) { bar.Update(done, total); });
  bar.Finish();
  if (!report.ok()) {
    if (report.error().code == "usage") return SimulateUsageFailure(report.error().message);
    std::cerr << "error: " << report.error().message << "\n";
    return 1;
  }
  if (auto path = args.Get("starts")) {
    std::ofstream out(*path, std::ios::binary | std::ios::trunc);
    out << sim::FormatStarts(*report);
    out.close();
    if (!out) {
      std::cerr << "error: cannot write the starts to " << *path << ": " << std::strerror(errno) << "\n";
      return 1;
    }
  }
  if (args.Has("json")) {
    std::cout << SimulationJson(*report).dump() << "\n";
  } else {
    std::cout << sim::FormatSummary(*report);
  }
  return 0;
}

}  // namespace unisched::cli
