// `unisched baseline` (baseline_command.h): the kernels a job runs, the
// run, and reading and comparing recorded runs.

#include "cli/baseline_command.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

extern char** environ;  // the kernel reports OpenBLAS's variables

#include "cli/baseline_run.h"
#include "unisched/baseline/machine.h"
#include "unisched/dgemm/dgemm.h"
#include "unisched/model/words.h"

namespace unisched::cli {

namespace {

using nlohmann::json;

// --NAME as an integer in [min, max] into `out` (left as it is when absent);
// the usage error's message otherwise.
std::optional<std::string> IntegerFlag(const ParsedArgs& args, const std::string& name, int64_t min, int64_t max,
                                       int& out) {
  auto text = args.Get(name);
  if (!text) return std::nullopt;
  auto n = ParseInteger(*text, name);
  if (!n.ok()) return n.error().message;
  if (*n < min || *n > max) {
    return "--" + name + " must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + *text;
  }
  out = static_cast<int>(*n);
  return std::nullopt;
}

// --margin: a percentage, 0 to 1000 (latencies may double and more).
std::optional<std::string> MarginFlag(const ParsedArgs& args, double& out) {
  auto text = args.Get("margin");
  if (!text) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text->c_str(), &end);
  if (text->empty() || *end != '\0' || !(value >= 0 && value <= 1000)) {
    return "--margin must be a percentage from 0 to 1000, e.g. 10, got '" + *text + "'";
  }
  out = value;
  return std::nullopt;
}

// This program's path: what the jobs run (the same path on every node).
std::string OwnBinary() {
  char path[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string("unisched");
}

// Three significant digits or so: 1234 -> "1234", 41.52 -> "41.5", 0.5 -> "0.50".
std::string Number(double value) {
  char text[32];
  const double size = value < 0 ? -value : value;
  std::snprintf(text, sizeof text, size >= 100 ? "%.0f" : size >= 10 ? "%.1f" : "%.2f", value);
  return text;
}

// `unisched baseline dgemm --mpi`, one rank of an MPI job (dgemm.h, "Across
// nodes"): rank 0 prints the report, the other ranks nothing.
int RunDistributedDgemm(int size, int repeats, int threads) {
  auto measured = dgemm::MeasureDistributed(size, repeats, threads);
  if (!measured.ok()) {
    std::cerr << "unisched baseline dgemm --mpi: " << measured.error().message << "\n";
    return 1;
  }
  if (measured->rank != 0) return 0;
  const json report = {{"kernel", "dgemm_mpi"},
                       {"gflops", measured->gflops},
                       {"size", measured->size},
                       {"repeats", measured->repeats},
                       {"seconds", measured->seconds},
                       {"threads", measured->threads},
                       {"ranks", measured->ranks},
                       {"nodes", measured->nodes},
                       {"rank_multiply_seconds", measured->rank_seconds},
                       {"checksum_error", measured->checksum_error},
                       {"mpi", measured->mpi_library},
                       {"blas", {{"library", measured->library.path}, {"config", measured->library.config}}}};
  std::cout << report.dump() << std::endl;
  return 0;
}

// `unisched baseline dgemm`: one JSON line, what baseline::KernelReport reads.
int RunDgemm(const std::vector<std::string>& words) {
  auto args = ParseArgs(
      words, {{"size", true, false}, {"repeat", true, false}, {"threads", true, false}, {"mpi", false, false}});
  const std::string usage = "usage: unisched baseline dgemm [--size N] [--repeat R] [--threads T] [--mpi]";
  if (!args.ok() || !args->positionals.empty()) {
    std::cerr << "error: " << (args.ok() ? "unexpected argument '" + args->positionals[0] + "'" : args.error().message)
              << "\n"
              << usage << "\n";
    return 2;
  }
  int size = 2048, repeats = 3, threads = dgemm::DefaultThreads();
  for (auto problem : {IntegerFlag(*args, "size", 1, 65536, size), IntegerFlag(*args, "repeat", 1, 1000, repeats),
                       IntegerFlag(*args, "threads", 1, 4096, threads)}) {
    if (problem) {
      std::cerr << "error: " << *problem << "\n" << usage << "\n";
      return 2;
    }
  }
  if (args->Has("mpi")) return RunDistributedDgemm(size, repeats, threads);
  auto measured = dgemm::Measure(size, repeats, threads);
  if (!measured.ok()) {
    std::cerr << "unisched baseline dgemm: " << measured.error().message << "\n";
    return 1;
  }
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
  };
  // OpenBLAS's own variables change what it does (OPENBLAS_L2_SIZE=512
  // left this machine's figure at 60% of a clean environment's): recorded
  // with the figure. A job has only those its `env` gives it.
  json tuning = json::object();
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const size_t eq = text.find('=');
    if (text.rfind("OPENBLAS_", 0) == 0 || text.rfind("GOTO_", 0) == 0 || text.rfind("OMP_", 0) == 0) {
      tuning[text.substr(0, eq)] = eq == std::string::npos ? "" : text.substr(eq + 1);
    }
  }
  const json report = {{"kernel", "dgemm"},
                       {"gflops", measured->gflops},
                       {"size", measured->size},
                       {"repeats", measured->repeats},
                       {"seconds", measured->seconds},
                       {"threads", measured->threads},
                       {"blas",
                        {{"library", measured->library.path},
                         {"config", measured->library.config},
                         {"core", measured->library.core},
                         {"environment", tuning}}},
                       {"machine", baseline::ToJson(baseline::ReadMachineFacts())},
                       {"node", env("UNISCHED_NODE")},
                       {"rank", env("UNISCHED_RANK")}};
  std::cout << report.dump() << std::endl;
  return 0;
}

// `unisched baseline gpu-check`: the device file of each GPU the job was
// given (CUDA_VISIBLE_DEVICES), `pattern` with {index} replaced by its
// index (baseline.gpu_device), a character device or missing. Declared GPUs
// on a machine without them have none.
int RunGpuCheck(const std::string& pattern) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  json report = {{"visible", json::array()}, {"present", json::array()}, {"missing", json::array()}};
  for (const std::string& index : model::Split(visible ? visible : "", ',')) {
    report["visible"].push_back(index);
    std::string device = pattern;
    for (size_t at = device.find("{index}"); at != std::string::npos; at = device.find("{index}", at + index.size())) {
      device.replace(at, 7, index);
    }
    struct stat st {};
    const bool present = ::stat(device.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
    report[present ? "present" : "missing"].push_back(device);
  }
  std::cout << report.dump() << std::endl;
  return 0;
}

int PrintRun(const json& run, bool as_json) {
  if (as_json) {
    std::cout << run.dump() << "\n";
  } else {
    std::cout << FormatBaseline(run);
  }
  return 0;
}

// Compares `current` with `previous`, prints it, and returns the exit status.
int PrintComparison(json current, const json& previous, double margin, bool as_json) {
  const auto changes = baseline::Compare(baseline::FiguresOf(previous), baseline::FiguresOf(current), margin);
  int worse = 0;
  json listed = json::array();
  for (const auto& c : changes) {
    worse += c.flagged ? 1 : 0;
    listed.push_back(baseline::ToJson(c));
  }
  if (as_json) {
    current["comparison"] = {
        {"previous", previous.value("id", "")}, {"margin_percent", margin}, {"changes", listed}, {"worse", worse}};
    std::cout << current.dump() << "\n";
  } else {
    std::cout << FormatComparison(changes, previous, margin);
  }
  return worse > 0 ? kBaselineWorse : 0;
}

}  // namespace

std::vector<FlagSpec> BaselineFlags() {
  return {{"pools", true, false},   {"size", true, false},   {"repeat", true, false},   {"samples", true, false},
          {"timeout", true, false}, {"binary", true, false}, {"compare", false, false}, {"margin", true, false},
          {"limit", true, false},   {"mpirun", true, false}};
}

std::optional<int> RunBaselineKernel(const std::vector<std::string>& words) {
  if (words.empty()) return std::nullopt;
  if (words[0] == "dgemm") return RunDgemm({words.begin() + 1, words.end()});
  if (words[0] == "gpu-check") {
    auto args = ParseArgs({words.begin() + 1, words.end()}, {{"device", true, false}});
    const std::string device = args.ok() ? args->Get("device").value_or("/dev/nvidia{index}") : "";
    if (!args.ok() || !args->positionals.empty() || device.find("{index}") == std::string::npos) {
      std::cerr << "error: "
                << (!args.ok()                   ? args.error().message
                    : !args->positionals.empty() ? "unexpected argument '" + args->positionals[0] + "'"
                                                 : "--device must hold {index}, e.g. /dev/nvidia{index}")
                << "\nusage: unisched baseline gpu-check [--device /dev/nvidia{index}]\n";
      return 2;
    }
    return RunGpuCheck(device);
  }
  return std::nullopt;
}

int RunBaseline(Session& session, const ParsedArgs& args, const std::function<int(const std::string&)>& usage_failure) {
  const std::string sub = args.positionals.empty() ? "" : args.positionals[0];
  const bool as_json = args.Has("json");
  double margin = 10;
  if (auto problem = MarginFlag(args, margin)) return usage_failure(*problem);
  const std::vector<std::string> pools = model::Split(args.Get("pools").value_or(""), ',');
  const std::string pools_query = model::Join(pools, ',');

  if (sub == "list") {
    int limit = 20;
    if (auto problem = IntegerFlag(args, "limit", 1, 1000, limit)) return usage_failure(*problem);
    std::string raw;
    auto list = session.CallJson(
        "GET", "/v1/baselines" + BuildQuery({{"limit", std::to_string(limit)}, {"pools", pools_query}}), {}, {}, &raw);
    if (!list) return 1;
    if (as_json) {
      PrintBody(raw);
      return 0;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& run : list->value("baselines", json::array())) {
      rows.push_back({CellText(run.value("id", json())), ShortTime(run.value("created_at", json())),
                      CellText(run.value("pools", json())), std::to_string(run.value("figures", json::array()).size()),
                      std::to_string(run.value("skipped", json::array()).size()),
                      CellText(run.value("created_by", json()))});
    }
    std::cout << FormatTable({"ID", "RECORDED", "POOLS", "FIGURES", "SKIPPED", "BY"}, rows);
    return 0;
  }
  if (sub == "show") {
    if (args.positionals.size() != 2) return usage_failure("baseline show needs one run ID");
    auto run = session.CallJson("GET", "/v1/baselines/" + UrlEncode(args.positionals[1]));
    return run ? PrintRun(*run, as_json) : 1;
  }
  if (sub == "compare") {
    if (args.positionals.size() != 3) return usage_failure("baseline compare needs two run IDs: OLD NEW");
    auto old_run = session.CallJson("GET", "/v1/baselines/" + UrlEncode(args.positionals[1]));
    auto new_run = old_run ? session.CallJson("GET", "/v1/baselines/" + UrlEncode(args.positionals[2])) : std::nullopt;
    if (!new_run) return 1;
    return PrintComparison(*new_run, *old_run, margin, as_json);
  }
  if (!sub.empty())
    return usage_failure("unknown baseline subcommand '" + sub + "' (list, show, compare, dgemm, gpu-check)");

  BaselineOptions options;
  options.pools = pools;
  options.binary = args.Get("binary").value_or(OwnBinary());
  options.mpirun = args.Get("mpirun").value_or(options.mpirun);
  for (auto problem :
       {IntegerFlag(args, "size", 16, 65536, options.size), IntegerFlag(args, "repeat", 1, 1000, options.repeats),
        IntegerFlag(args, "samples", 1, 1000, options.samples),
        IntegerFlag(args, "timeout", 1, 7 * 86400, options.job_timeout_seconds)}) {
    if (problem) return usage_failure(*problem);
  }
  // Only platform-admins may record a run: say so before measuring anything.
  auto who = session.CallJson("GET", "/v1/whoami");
  if (!who) return 1;
  if (who->value("role", "") != "platform-admin") {
    std::cerr << "error: only platform-admins may record a baseline run; " << who->value("user", "this token")
              << " is a " << who->value("role", "user") << "\n";
    return 1;
  }
  auto measured = MeasureBaseline(session, options, std::cerr);
  if (!measured) return 1;
  auto recorded = session.CallJson("POST", "/v1/baselines", measured->dump());
  if (!recorded) return 1;
  if (!args.Has("compare")) return PrintRun(*recorded, as_json);
  if (!as_json) std::cout << FormatBaseline(*recorded) << "\n";
  // The newest run of the same pools before this one.
  const std::string recorded_pools = CellText(recorded->value("pools", json::array()));  // "a,b"
  auto runs = session.CallJson("GET", "/v1/baselines" + BuildQuery({{"limit", "2"}, {"pools", recorded_pools}}));
  if (!runs) return 1;
  for (const auto& run : runs->value("baselines", json::array())) {
    if (run.value("id", "") != recorded->value("id", "")) return PrintComparison(*recorded, run, margin, as_json);
  }
  if (as_json) {
    (*recorded)["comparison"] = nullptr;
    std::cout << recorded->dump() << "\n";
  } else {
    std::cout << "No earlier run of these pools to compare with.\n";
  }
  return 0;
}

std::string FormatBaseline(const json& run) {
  std::ostringstream out;
  const json config = run.value("config", json::object());
  out << "Baseline run " << run.value("id", "?") << " of " << CellText(run.value("pools", json::array()))
      << ", recorded " << ShortTime(run.value("created_at", json())) << " by " << run.value("created_by", "?")
      << " (config version " << CellText(config.value("version", json())) << ")\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& f : baseline::FiguresOf(run)) {
    rows.push_back(
        {f.name, f.pool.empty() ? "-" : f.pool, f.node.empty() ? "-" : f.node, Number(f.value) + " " + f.unit});
  }
  out << FormatTable({"FIGURE", "POOL", "NODE", "VALUE"}, rows);
  const json skipped = run.value("skipped", json::array());
  if (!skipped.empty()) out << "Skipped:\n";
  for (const auto& s : skipped) {
    std::string where = s.value("pool", "");
    if (s.contains("node")) where += (where.empty() ? "" : "/") + s.value("node", "");
    out << "  " << s.value("name", "") << (where.empty() ? "" : " " + where) << ": " << s.value("reason", "") << "\n";
  }
  return out.str();
}

std::string FormatComparison(const std::vector<baseline::Change>& changes, const json& previous,
                             double margin_percent) {
  std::ostringstream out;
  out << "Compared with run " << previous.value("id", "?") << " of " << ShortTime(previous.value("created_at", json()))
      << " (worse by more than " << Number(margin_percent) << "% is flagged):\n";
  std::vector<std::vector<std::string>> rows;
  int worse = 0;
  for (const auto& c : changes) {
    const std::string before = c.before ? Number(*c.before) : "-";
    const std::string after = c.after ? Number(*c.after) : "-";
    std::string change = c.percent ? std::string(*c.percent >= 0 ? "+" : "") + Number(*c.percent) + "%"
                                   : (!c.before  ? "new"
                                      : !c.after ? "not measured"
                                                 : "-");
    worse += c.flagged ? 1 : 0;
    rows.push_back({c.key, before + " -> " + after + " " + c.unit, change, c.flagged ? "WORSE" : ""});
  }
  out << FormatTable({"FIGURE", "BEFORE -> AFTER", "CHANGE", ""}, rows);
  out << (worse == 0 ? std::string("No figure got worse by more than the margin.\n")
                     : std::to_string(worse) + " figure(s) got worse by more than " + Number(margin_percent) + "%.\n");
  return out.str();
}

}  // namespace unisched::cli
