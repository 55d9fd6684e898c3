// RunSimulation: options -> trace -> cluster -> replay -> report.

#include "unisched/sim/simulate.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <utility>
#include <variant>

#include "unisched/config/config.h"

namespace unisched::sim {
namespace {

Error UsageProblem(std::string message) {
  return Error::BadRequest("usage", std::move(message));
}

std::string Fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

}  // namespace

Result<SimulationReport> RunSimulation(const SimulateOptions& options, std::ostream& log,
                                       const ProgressCallback& progress) {
  if (options.trace_path.empty()) return UsageProblem("--trace FILE is required");
  const bool configured = !options.config_path.empty();
  if (configured && (options.processors || options.gpus)) {
    return UsageProblem(
        "--processors and --gpus describe a cluster without a config; with --config the cluster is "
        "the config's");
  }
  if (!configured && !options.processors && !options.gpus) {
    return UsageProblem("without --config, give the cluster size: --processors N (SWF) or --gpus N (Philly CSV)");
  }
  if (options.processors && *options.processors <= 0) return UsageProblem("--processors must be > 0");
  if (options.gpus && *options.gpus <= 0) return UsageProblem("--gpus must be > 0");
  if (options.planned_share && !(*options.planned_share > 0 && *options.planned_share <= 1)) {
    return UsageProblem("--planned-share must be a number in (0, 1], e.g. 0.2");
  }

  std::optional<config::Config> config;
  if (configured) {
    auto loaded = config::LoadConfigFile(options.config_path);
    if (auto* errors = std::get_if<std::vector<config::ConfigError>>(&loaded)) {
      std::string message = "invalid config " + options.config_path + ":";
      for (const auto& e : *errors) message += "\n  " + e.ToString();
      return Error::BadRequest("bad_config", std::move(message));
    }
    config = std::move(std::get<config::Config>(loaded));
  }

  auto text = ReadTraceFile(options.trace_path);
  if (!text.ok()) return text.error();
  const TraceFormat format = DetectFormat(*text);
  if (!configured) {
    if (format == TraceFormat::kSwf && !options.processors) {
      return UsageProblem(options.trace_path + " is an SWF trace: give --processors N (or --config FILE)");
    }
    if (format == TraceFormat::kPhilly && !options.gpus) {
      return UsageProblem(options.trace_path + " is a Philly GPU trace: give --gpus N (or --config FILE)");
    }
  }

  SimCluster cluster;
  const model::BackfillChoice default_mode = options.policy.value_or(model::BackfillChoice{});
  if (configured) {
    auto built = ConfiguredCluster(*config, format, options.policy);
    if (!built.ok()) return built.error();
    cluster = std::move(*built);
  } else if (format == TraceFormat::kSwf) {
    cluster = CpuCluster(*options.processors, default_mode);
  } else {
    cluster = GpuCluster(*options.gpus, default_mode);
  }

  if (options.planned_share) {
    for (auto& pool : cluster.config.pools) pool.planned_share = *options.planned_share;
  }

  SimulationReport report;
  report.format = format;
  report.cluster = cluster.description;
  report.policy = configured && !options.policy ? "as configured" : model::BackfillChoiceName(default_mode);

  const int max_size = static_cast<int>(std::min<int64_t>(cluster.capacity, std::numeric_limits<int>::max()));
  Trace trace;
  if (format == TraceFormat::kSwf) {
    trace = ParseSwf(*text, max_size);
  } else {
    auto parsed = ParsePhilly(*text, max_size);
    if (!parsed.ok()) return parsed.error();
    trace = std::move(*parsed);
  }
  text = std::string();  // the text is no longer needed; free it before the replay
  report.cleaning = trace.cleaning;
  log << "simulate: " << options.trace_path << " (" << ToString(format) << "): " << trace.cleaning.Summary() << "\n";

  // With a configured pool of several nodes, a job may be no larger than the
  // pool and still fit no node shape: it would wait forever, so it is dropped.
  std::vector<TraceJob> jobs;
  jobs.reserve(trace.jobs.size());
  std::map<int, bool> fits;  // by size
  for (auto& job : trace.jobs) {
    auto known = fits.find(job.size);
    if (known == fits.end()) {
      known = fits.emplace(job.size, cluster.CanEverFit(cluster.RequestFor(job.size, 1))).first;
    }
    if (known->second) {
      jobs.push_back(std::move(job));
    } else {
      ++report.dropped_unplaceable;
    }
  }
  if (report.dropped_unplaceable > 0) {
    log << "simulate: dropped " << report.dropped_unplaceable << " jobs that fit no node of pool " << cluster.pool
        << "\n";
  }
  if (jobs.empty()) return Error::BadRequest("empty_trace", "no job of " + options.trace_path + " is left to replay");

  log << "simulate: replaying " << jobs.size() << " jobs on " << cluster.description << ", backfill " << report.policy
      << "\n";
  const auto started = std::chrono::steady_clock::now();
  report.result = Simulate(jobs, cluster, progress);
  report.replay_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  log << "simulate: " << report.result.passes << " scheduling passes in " << Fixed(report.replay_seconds, 2)
      << " s (longest queue: " << report.result.max_pending << " jobs)\n";
  report.starts.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (report.result.start_ms[i] >= 0) report.starts.push_back({jobs[i].source_id, report.result.start_ms[i]});
  }
  // A trace's ids mostly follow the file: then they are in order already.
  auto by_id = [](const auto& a, const auto& b) { return a.source_id < b.source_id; };
  if (!std::is_sorted(report.starts.begin(), report.starts.end(), by_id)) {
    std::sort(report.starts.begin(), report.starts.end(), by_id);
  }
  if (report.result.never_started > 0) {
    return Error::Unprocessable("jobs_never_started",
                                std::to_string(report.result.never_started) +
                                    " jobs were still pending when no event was left (quota or limits of queue " +
                                    cluster.queue + " hold them forever?)");
  }
  return report;
}

std::string FormatSummary(const SimulationReport& report) {
  const Metrics& m = report.result.metrics;
  const bool gpus = report.format == TraceFormat::kPhilly;
  std::string text;
  auto line = [&](const std::string& label, const std::string& value) {
    text += label + std::string(label.size() < 26 ? 26 - label.size() : 1, ' ') + value + "\n";
  };
  line("cluster", report.cluster);
  line("backfill", report.policy);
  line("jobs", std::to_string(m.jobs));
  line("average wait", Fixed(m.avg_wait_seconds, 1) + " s");
  line("average bounded slowdown", Fixed(m.avg_bounded_slowdown, 2) + " (threshold 10 s)");
  if (gpus) line("average completion time", Fixed(m.avg_jct_seconds, 1) + " s");
  line(gpus ? "GPU utilization" : "utilization", Fixed(m.utilization, 4));
  line("makespan", Fixed(m.makespan_seconds, 0) + " s");
  if (const PredictionAccuracy& p = report.result.prediction; p.predicted > 0) {
    line("predicted jobs", std::to_string(p.predicted) + " (the others' users had not run a job yet)");
    line("prediction error", Fixed(p.MeanAbsoluteError(), 0) + " s mean absolute, " + Fixed(100 * p.UnderShare(), 1) +
                                 "% predicted too short");
  }
  if (const EstimateAccuracy& e = report.result.estimates; e.estimated > 0) {
    line("estimated at submit", std::to_string(e.estimated) + " jobs (the others started at once or got none)");
    line("estimate error", Fixed(e.median_error_seconds, 0) + " s median, " + Fixed(e.p90_error_seconds, 0) +
                               " s p90; " + Fixed(100 * e.LateShare(), 1) + "% started later than estimated");
  }
  return text;
}

std::string FormatStarts(const SimulationReport& report) {
  std::string text;
  text.reserve(report.starts.size() * 20);
  for (const auto& start : report.starts) {
    text += std::to_string(start.source_id);
    text += ' ';
    if (start.start_ms % 1000 == 0) {
      text += std::to_string(start.start_ms / 1000);
    } else {
      text += Fixed(static_cast<double>(start.start_ms) / 1000.0, 3);
    }
    text += '\n';
  }
  return text;
}

}  // namespace unisched::sim
