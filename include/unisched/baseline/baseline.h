#pragma once
// The performance baseline (launch check 6, docs/baseline.md): what a run
// measured, as figures, and the comparison of two runs. Pure functions over
// values, shared by `unisched baseline` (which measures) and the API (which
// records); the facts of a machine are in machine.h.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace unisched::baseline {

// Which way a figure improves: throughput up, latency down.
enum class Better { kHigher, kLower };
const char* ToString(Better better);  // "higher", "lower"
std::optional<Better> ParseBetter(const std::string& text);

// One measured figure of a run, e.g. dgemm_gflops of one node, or
// job_start_ms_p99 of a pool.
struct Figure {
  std::string name;  // what was measured: dgemm_gflops, job_start_ms_p50, ...
  std::string pool;  // empty: not of one pool
  std::string node;  // empty: of the whole pool (or cluster)
  double value = 0;
  std::string unit;  // "GFLOP/s", "ms", "x"
  Better better = Better::kHigher;
  nlohmann::json detail = nlohmann::json::object();  // how it was measured (threads, samples, jobs, ...)

  // What identifies the figure across runs: name, pool and node.
  std::string Key() const;
};

nlohmann::json ToJson(const Figure& figure);
// The figures of a stored run (its "figures"); entries that are not
// figures are left out.
std::vector<Figure> FiguresOf(const nlohmann::json& run);

// One figure as two runs have it.
struct Change {
  std::string key;
  std::string unit;
  Better better = Better::kHigher;
  std::optional<double> before;   // absent: a figure the previous run did not have
  std::optional<double> after;    // absent: a figure this run did not measure (skipped)
  std::optional<double> percent;  // (after - before) / before x 100, when both exist and before is not 0
  bool flagged = false;           // worse by more than the margin
};

// `current` against `previous`, figure by figure by Key(): current's
// figures in their order, then those only `previous` has. A figure is
// flagged when it got worse by more than `margin_percent`: a throughput
// (Better::kHigher) that fell below before x (1 - margin/100), a latency
// (Better::kLower) that rose above before x (1 + margin/100). A figure on
// one side only, or with a previous value of 0, is listed, never flagged.
std::vector<Change> Compare(const std::vector<Figure>& previous, const std::vector<Figure>& current,
                            double margin_percent);
nlohmann::json ToJson(const Change& change);

// The nearest-rank percentile: the smallest sample with at least p% of
// the samples at or below it (p in (0, 100]); with 2 samples p50 is the
// smaller and p99 the larger. nullopt without samples.
std::optional<double> Percentile(std::vector<double> samples, double p);

// What `unisched baseline dgemm` printed: the last line of `output` that
// is a JSON object with a numeric "gflops" (the job's other output, such
// as a library's warnings, is skipped over). nullopt when there is none.
std::optional<nlohmann::json> KernelReport(const std::string& output);

}  // namespace unisched::baseline
