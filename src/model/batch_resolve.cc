// Slurm batch options resolved into a job (model/batch_script.h): values
// (time, memory, GPUs, array indices), the job's shape and names, and
// --export's rules. Reading the script and its options is batch_script.cc.

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <limits>
#include <tuple>
#include <utility>

#include "model/batch_errors.h"
#include "unisched/model/batch_script.h"
#include "unisched/model/job_array.h"
#include "unisched/model/output_pattern.h"
#include "unisched/model/words.h"

namespace unisched::model {
namespace {

// ---- values ------------------------------------------------------------------

// A whole decimal number of at most 12 digits (no sign, no blanks).
std::optional<int64_t> Whole(std::string_view text) {
  if (text.empty() || text.size() > 12) return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

// "[model:]count" of --gpus, --gpus-per-node and --gpus-per-task.
struct GpuCount {
  std::string model;
  int64_t count = 0;
};
std::optional<GpuCount> ParseGpuCount(std::string_view text) {
  GpuCount g;
  if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    g.model = std::string(text.substr(0, colon));
    if (g.model.empty() || g.model.find(':') != std::string::npos) return std::nullopt;
    text.remove_prefix(colon + 1);
  }
  auto n = Whole(text);
  if (!n) return std::nullopt;
  g.count = *n;
  return g;
}

// --gres: "gpu", "gpu:2", "gpu:a100:2", "gpu:a100", several with ','; only
// gpu is a GRES unisched has (the others are warned about).
Result<std::optional<GpuCount>> ParseGres(const BatchOptions::Setting& s, std::vector<BatchWarning>& warnings) {
  const std::string fix = "; write --gres=gpu:N or --gres=gpu:MODEL:N, e.g. --gres=gpu:a100:2";
  if (s.value == "none") return std::optional<GpuCount>(GpuCount{});
  std::optional<GpuCount> gpu;
  for (const std::string& item : Split(s.value, ',')) {
    std::vector<std::string> parts = Split(item, ':');
    if (parts.empty() || parts.size() > 3 || item.back() == ':' || item.find("::") != std::string::npos) {
      return Invalid(s.source.Where() + ": '" + item + "' is not a GRES" + fix);
    }
    if (parts[0] != "gpu") {
      warnings.push_back({s.source, "GRES " + parts[0] + " is not supported: ignored (unisched has gpu only)"});
      continue;
    }
    if (gpu) return Invalid(s.source.Where() + ": gpu is named twice; name it once" + fix);
    GpuCount g{{}, 1};
    if (parts.size() == 3) {
      g.model = parts[1];
    }
    if (parts.size() >= 2) {
      if (auto n = Whole(parts.back())) {
        g.count = *n;
      } else if (parts.size() == 2) {
        g.model = parts[1];  // "gpu:a100": one of that model
      } else {
        return Invalid(s.source.Where() + ": the GPU count '" + parts.back() + "' is not a whole number" + fix);
      }
    }
    gpu = g;
  }
  return gpu;
}

std::string Upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// ---- the job ------------------------------------------------------------------

class Resolver {
 public:
  Resolver(const BatchOptions& options, const SubmitContext& context) : options_(options), context_(context) {
    out_.warnings = options.warnings;
  }

  Result<BatchRequest> Run() {
    for (auto step : {&Resolver::Names, &Resolver::Shape, &Resolver::Memory, &Resolver::Gpus, &Resolver::Time,
                      &Resolver::Files, &Resolver::Export, &Resolver::Rest}) {
      if (Status s = (this->*step)(); !s.ok()) return s.error();
    }
    return std::move(out_);
  }

 private:
  const BatchOptions::Setting* Get(std::string_view setting) const {
    auto it = options_.settings.find(std::string(setting));
    return it == options_.settings.end() ? nullptr : &it->second;
  }
  template <class T>
  void Set(std::optional<T>& field, T value, const char* path, const BatchOptions::Setting& from) {
    field = std::move(value);
    out_.sources[path] = from.source;
  }
  // Field "script" for a directive's value, the option's name for the
  // command line's.
  Error Bad(const BatchOptions::Setting& s, const std::string& why) const {
    Error e = Invalid(s.source.Where() + ": " + why);
    if (s.source.line == 0) e.field = s.option;
    return e;
  }
  void Warn(const BatchOptions::Setting& s, std::string message) {
    out_.warnings.push_back({s.source, std::move(message)});
  }
  // A count of at least `min` (and at most `max`), or an error saying so.
  Result<int64_t> Count(const BatchOptions::Setting& s, std::string_view text, int64_t min, int64_t max,
                        const char* what) const {
    auto n = Whole(text);
    if (!n || *n < min || *n > max) {
      return Bad(s, std::string(what) + " must be a whole number from " + std::to_string(min) + " to " +
                        std::to_string(max) + ", not '" + std::string(text) + "'");
    }
    return *n;
  }

  Status Names() {
    if (auto* s = Get("job-name")) Set(out_.name, s->value, "name", *s);
    if (auto* s = Get("partition")) {
      if (s->value.empty() || s->value.find(',') != std::string::npos) {
        return Bad(*s, "name one queue (unisched runs a job in one queue; -p takes no list)");
      }
      Set(out_.queue, s->value, "queue", *s);
    }
    if (auto* s = Get("account")) {
      if (s->value.empty()) return Bad(*s, "name a project");
      Set(out_.project, s->value, "project", *s);
    }
    return Status::Ok();
  }

  // -N, -n, --ntasks-per-node and -c -> nodes, tasks per node and CPUs per
  // node: every node of a unisched job runs as many tasks, so -n must
  // divide evenly among the nodes.
  Status Shape() {
    constexpr int64_t kMax = 1 << 20;
    const auto* nodes_s = Get("nodes");
    const auto* ntasks_s = Get("ntasks");
    const auto* per_node_s = Get("ntasks-per-node");
    const auto* cpt_s = Get("cpus-per-task");
    std::optional<int64_t> nodes, ntasks, per_node, cpus_per_task;
    if (nodes_s) {
      std::string_view text = nodes_s->value;
      // "2-4": Slurm picks 2 to 4; unisched allocates exactly the minimum.
      if (const size_t dash = text.find('-'); dash != std::string_view::npos) {
        auto max = Count(*nodes_s, text.substr(dash + 1), 1, kMax, "-N's maximum");
        if (!max.ok()) return max.error();
        text = text.substr(0, dash);
        Warn(*nodes_s, "unisched allocates an exact number of nodes: " + std::string(text) + " (the minimum)");
      }
      auto n = Count(*nodes_s, text, 1, kMax, "-N (nodes)");
      if (!n.ok()) return n.error();
      nodes = *n;
    }
    if (ntasks_s) {
      auto n = Count(*ntasks_s, ntasks_s->value, 1, kMax, "-n (tasks)");
      if (!n.ok()) return n.error();
      ntasks = *n;
    }
    if (per_node_s) {
      auto n = Count(*per_node_s, per_node_s->value, 1, kMax, "--ntasks-per-node");
      if (!n.ok()) return n.error();
      per_node = *n;
    }
    if (cpt_s) {
      auto n = Count(*cpt_s, cpt_s->value, 1, kMax, "-c (CPUs per task)");
      if (!n.ok()) return n.error();
      cpus_per_task = *n;
    }
    const BatchOptions::Setting* shape_source = per_node_s ? per_node_s : ntasks_s;
    if (ntasks && per_node) {
      if (!nodes) {
        if (*ntasks % *per_node != 0) {
          return Bad(*ntasks_s, "-n " + std::to_string(*ntasks) + " is not a multiple of --ntasks-per-node " +
                                    std::to_string(*per_node) + "; every node runs as many tasks");
        }
        nodes = *ntasks / *per_node;
        nodes_s = ntasks_s;
      } else if (*ntasks != *nodes * *per_node) {
        return Bad(*ntasks_s, "-n " + std::to_string(*ntasks) + " is not -N " + std::to_string(*nodes) +
                                  " x --ntasks-per-node " + std::to_string(*per_node) +
                                  "; give two of the three (every node runs as many tasks)");
      }
    } else if (ntasks) {
      const int64_t n = nodes.value_or(1);
      if (*ntasks % n != 0) {
        return Bad(*ntasks_s, "-n " + std::to_string(*ntasks) + " tasks do not divide evenly among " +
                                  std::to_string(n) +
                                  " nodes; unisched runs as many tasks on every node: give a "
                                  "multiple of -N, or --ntasks-per-node");
      }
      per_node = *ntasks / n;
    }
    if (nodes) Set(out_.nodes, *nodes, "resources.nodes", *nodes_s);
    if (per_node) Set(out_.tasks_per_node, *per_node, "resources.tasks_per_node", *shape_source);
    if (per_node || cpus_per_task) {
      const int64_t cpus = per_node.value_or(1) * cpus_per_task.value_or(1);
      if (cpus > kMax) return Bad(cpt_s ? *cpt_s : *shape_source, "asks for more than 2^20 CPUs per node");
      Set(out_.cpus, cpus, "resources.cpus", cpt_s ? *cpt_s : *shape_source);
    }
    return Status::Ok();
  }

  Status Memory() {
    const auto* s = Get("memory");
    if (s == nullptr) return Status::Ok();
    auto mb = ParseSlurmMemoryMb(s->value);
    if (!mb) {
      return Bad(*s, "'" + s->value +
                         "' is not a size; give a whole number with an optional unit K, M, G or T (M when none), "
                         "e.g. --" +
                         s->option + "=4G");
    }
    if (s->option == "mem") {
      if (*mb == 0) {
        Warn(*s,
             "--mem=0 (all of a node's memory) is not supported: the queue's default memory applies; give "
             "a size");
        return Status::Ok();
      }
      Set(out_.memory_mb, *mb, "resources.memory_mb", *s);
      return Status::Ok();
    }
    // --mem-per-cpu: times the CPUs of a node (the body's, else as asked;
    // 1 by default).
    const int64_t cpus = std::max<int64_t>(context_.cpus.value_or(out_.cpus.value_or(1)), 1);
    if (*mb == 0 || *mb > (int64_t{1} << 40) / cpus) {
      return Bad(*s, "gives " + std::to_string(*mb) + " MB x " + std::to_string(cpus) +
                         " CPUs per node; give a size above 0 and at most 2^40 MB per node");
    }
    Set(out_.memory_mb, *mb * cpus, "resources.memory_mb", *s);
    return Status::Ok();
  }

  Status Gpus() {
    const auto* s = Get("gpus");
    if (s == nullptr) return Status::Ok();
    std::optional<GpuCount> per_node;
    if (s->option == "gres") {
      auto gres = ParseGres(*s, out_.warnings);
      if (!gres.ok()) return gres.error();
      per_node = *gres;
    } else {
      auto g = ParseGpuCount(s->value);
      if (!g) {
        return Bad(*s, "'" + s->value + "' is not [MODEL:]COUNT; write e.g. --" + s->option + "=2 or --" + s->option +
                           "=a100:2");
      }
      if (s->option == "gpus") {
        // The job's total: the same number on each of its nodes.
        const int64_t nodes = out_.nodes.value_or(1);
        if (g->count % nodes != 0) {
          return Bad(*s, std::to_string(g->count) + " GPUs do not divide evenly among " + std::to_string(nodes) +
                             " nodes; unisched gives every node as many: use --gpus-per-node");
        }
        g->count /= nodes;
      } else if (s->option == "gpus-per-task") {
        g->count *= out_.tasks_per_node.value_or(1);
      }
      per_node = *g;
    }
    if (!per_node) return Status::Ok();  // only GRES unisched does not have
    if (per_node->count > 1024) return Bad(*s, "asks for more than 1024 GPUs per node");
    Set(out_.gpus, per_node->count, "resources.gpus", *s);
    if (!per_node->model.empty()) Set(out_.gpu_model, per_node->model, "resources.gpu_model", *s);
    return Status::Ok();
  }

  Status Time() {
    const auto* s = Get("time");
    if (s == nullptr) return Status::Ok();
    auto seconds = ParseSlurmTime(s->value);
    if (!seconds) {
      return Bad(*s, "'" + s->value +
                         "' is not a time; Slurm's formats: minutes, minutes:seconds, hours:minutes:seconds, "
                         "days-hours, days-hours:minutes, days-hours:minutes:seconds (e.g. 90, 1:30:00, 2-12)");
    }
    if (*seconds == kUnlimitedTime || *seconds == 0) {
      Warn(*s,
           "unisched has no unlimited wall time: the queue's default applies (at most its "
           "max_walltime_hours); give a time");
      return Status::Ok();
    }
    Set(out_.walltime_seconds, *seconds, "resources.walltime_seconds", *s);
    return Status::Ok();
  }

  Status Files() {
    for (const auto& [setting, field, path] : {std::tuple{"output", &out_.output_file, "output_file"},
                                               std::tuple{"error", &out_.error_file, "error_file"}}) {
      const auto* s = Get(setting);
      if (s == nullptr) continue;
      if (std::string why = CheckOutputPattern(s->value); !why.empty()) return Bad(*s, "'" + s->value + "' " + why);
      Set(*field, s->value, path, *s);
    }
    if (const auto* s = Get("chdir")) {
      if (s->value.empty()) return Bad(*s, "name a directory");
      std::string dir = s->value;
      if (dir.front() != '/') {
        if (context_.directory.empty()) {
          return Bad(*s, "'" + dir + "' is relative and the API has no submit directory; give an absolute path");
        }
        dir = context_.directory + (context_.directory.back() == '/' ? "" : "/") + dir;
      }
      Set(out_.workdir, std::move(dir), "workdir", *s);
    }
    return Status::Ok();
  }

  // --export: ALL (sbatch's default where there is a submitting
  // environment), NONE, or NAME and NAME=VALUE items (alone: only those;
  // after ALL: those too).
  Status Export() {
    const auto* s = Get("export");
    std::map<std::string, std::string> env;
    bool all = context_.environment.has_value();  // sbatch's default
    bool any = context_.environment.has_value();
    std::vector<std::pair<std::string, std::optional<std::string>>> named;
    if (s != nullptr) {
      any = true;
      all = false;
      const std::vector<std::string> items = Split(s->value, ',');
      if (items.empty()) return Bad(*s, "give ALL, NONE or a list of NAME and NAME=VALUE");
      for (const std::string& item : items) {
        const std::string upper = Upper(item);
        if (upper == "ALL") {
          all = true;
        } else if (upper == "NONE" || upper == "NIL") {
          if (items.size() > 1) {
            return Bad(*s,
                       item + " takes nothing with it; list the variables alone (--export=A,B=1) to pass only them");
          }
        } else {
          const size_t eq = item.find('=');
          const std::string name = item.substr(0, eq);
          if (!IsEnvName(name)) {
            return Bad(*s,
                       "'" + name + "' is not a variable name (letters, digits and '_', not starting with a digit)");
          }
          if (name.rfind("UNISCHED_", 0) == 0) {
            return Bad(*s, name +
                               ": unisched's own variables are never passed to a job (the scheduler sets "
                               "UNISCHED_JOB_ID and the others itself)");
          }
          named.emplace_back(name, eq == std::string::npos ? std::nullopt : std::optional(item.substr(eq + 1)));
        }
      }
    }
    const BatchOptions::Setting fallback{"export", "ALL", {0, "--export=ALL (sbatch's default)"}};
    const BatchOptions::Setting& from = s != nullptr ? *s : fallback;
    if (all && context_.environment) {
      std::vector<std::string> credentials;
      for (const auto& [name, value] : *context_.environment) {
        const ExportRule rule = ExportRuleFor(name, value);
        if (rule == ExportRule::kCopied) env[name] = value;
        // One named in the list (--export=ALL,NAME) is passed on below.
        const std::string& variable = name;  // clang 14 cannot capture a structured binding
        const bool named_here =
            std::any_of(named.begin(), named.end(), [&variable](const auto& n) { return n.first == variable; });
        if (rule == ExportRule::kCredential && !named_here) credentials.push_back(name);
      }
      if (!credentials.empty()) {
        Warn(from, "not copied, as they look like credentials: " + Join(credentials, ',') +
                       "; name one (--export=ALL,NAME) to pass it on");
      }
    } else if (all) {
      Warn(from, "POST /v1/jobs has no submitting environment to copy; put the variables in env");
    }
    for (const auto& [name, value] : named) {
      if (value) {
        env[name] = *value;
      } else if (!context_.environment) {
        Warn(from, name + ": POST /v1/jobs has no submitting environment to read it from; give " + name + "=VALUE");
      } else if (auto it = context_.environment->find(name); it != context_.environment->end()) {
        env[name] = it->second;
      } else {
        Warn(from, name + " is not set in the submitting environment: not passed on");
      }
    }
    // As sbatch sets them, whatever --export says.
    if (!context_.directory.empty()) env["SLURM_SUBMIT_DIR"] = context_.directory;
    if (!context_.host.empty()) env["SLURM_SUBMIT_HOST"] = context_.host;
    if (any || !env.empty()) Set(out_.env, std::move(env), "env", from);
    return Status::Ok();
  }

  Status Rest() {
    if (const auto* s = Get("array")) {
      auto spec = ParseArraySpec(s->value, "script");
      if (!spec.ok()) return Bad(*s, spec.error().message);
      // Passed on as written (the server reads it again); the cap apart.
      std::optional<int64_t> max_running;
      if (spec->max_running > 0) max_running = spec->max_running;
      Set(out_.array, BatchArray{s->value.substr(0, s->value.find('%')), max_running}, "array", *s);
    }
    if (const auto* s = Get("dependency")) {
      if (s->value.empty()) return Bad(*s, "give dependencies, e.g. --dependency=afterok:12:13");
      Set(out_.dependency, s->value, "dependency", *s);
    }
    if (const auto* s = Get("requeue")) {
      if (s->option == "no-requeue") {
        Set(out_.max_retries, 0, "max_retries", *s);
        Warn(*s,
             "the job is never retried after a failure (max_retries 0); after a node failure it is requeued "
             "as its queue's requeue_on_node_fail says (there is no per-job setting)");
      } else {
        Warn(*s,
             "a job is requeued after a node failure or preemption as its queue's policy says "
             "(requeue_on_node_fail, preempt_action), retried after a failure per max_retries; there is no "
             "per-job setting");
      }
    }
    if (const auto* s = Get("constraint")) {
      Labels labels;
      // Slurm's features ANDed with '&' (or ','): each a label KEY=VALUE,
      // or a NAME meaning label NAME=true.
      std::string text = s->value;
      std::replace(text.begin(), text.end(), ',', '&');
      for (const std::string& item : Split(text, '&')) {
        if (item.find_first_of("|[]*()!") != std::string::npos) {
          return Bad(*s,
                     "only all-of constraints are supported: labels KEY=VALUE or NAME (NAME=true) joined with "
                     "'&', e.g. --constraint='interconnect=ib&gpu.memory=large'");
        }
        const size_t eq = item.find('=');
        if (eq == 0) return Bad(*s, "'" + item + "' has no label name");
        labels[item.substr(0, eq)] = eq == std::string::npos ? "true" : item.substr(eq + 1);
      }
      if (labels.empty()) return Bad(*s, "give at least one label, e.g. --constraint=interconnect=ib");
      Set(out_.constraints, std::move(labels), "constraints", *s);
    }
    if (const auto* s = Get("hold")) Set(out_.hold, true, "hold", *s);
    if (const auto* s = Get("begin")) {
      auto when = ParseSlurmWhen(s->value, context_.now);
      if (!when) {
        return Bad(
            *s, "'" + s->value + "' is not a time; write 16:00, now+1hour, 2026-12-24T08:00 (UTC) or an RFC 3339 time");
      }
      Set(out_.begin_at, FormatRfc3339(*when), "begin_at", *s);
    }
    out_.parsable = Get("parsable") != nullptr;
    out_.wait = Get("wait") != nullptr;
    if (const auto* s = Get("wrap")) {
      if (s->value.empty()) return Bad(*s, "give the command to run, e.g. --wrap='hostname'");
      out_.wrap = s->value;
    }
    return Status::Ok();
  }

  const BatchOptions& options_;
  const SubmitContext& context_;
  BatchRequest out_;
};

}  // namespace

// Slurm's times (sacct -S/-E, sbatch --begin): YYYY-MM-DD[THH:MM[:SS]] (UTC, or RFC 3339 with its zone),
// HH:MM[:SS] (today), MMDD[YY], MM/DD[/YY], now[{+|-}N[seconds|minutes|
// hours|days|weeks]], today, midnight, noon, tomorrow.
std::optional<Timestamp> ParseSlurmWhen(std::string_view text_view, Timestamp now) {
  const std::string text(text_view);
  auto failure = [] { return std::optional<Timestamp>(); };
  const std::string lower = [&] {
    std::string t = text;
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
    return t;
  }();
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  const int64_t midnight = now_s - (now_s % 86400 + 86400) % 86400;
  auto at = [](int64_t seconds) { return Timestamp{} + std::chrono::seconds(seconds); };
  if (lower == "now") return now;
  if (lower == "today" || lower == "midnight") return at(midnight);
  if (lower == "noon") return at(midnight + 12 * 3600);
  if (lower == "tomorrow") return at(midnight + 86400);
  if (lower.rfind("now", 0) == 0 && lower.size() > 4 && (lower[3] == '-' || lower[3] == '+')) {
    size_t i = 4;
    int64_t n = 0;
    while (i < lower.size() && std::isdigit(static_cast<unsigned char>(lower[i]))) n = n * 10 + (lower[i++] - '0');
    if (i == 4 || n > 100000000) return failure();
    const std::string unit = lower.substr(i);
    int64_t scale = 0;
    for (const auto& [names, seconds] :
         std::vector<std::pair<std::vector<std::string>, int64_t>>{{{"", "s", "sec", "second", "seconds"}, 1},
                                                                   {{"m", "min", "minute", "minutes"}, 60},
                                                                   {{"h", "hour", "hours"}, 3600},
                                                                   {{"d", "day", "days"}, 86400},
                                                                   {{"w", "week", "weeks"}, 604800}}) {
      if (std::find(names.begin(), names.end(), unit) != names.end()) scale = seconds;
    }
    if (scale == 0) return failure();
    return at(now_s + (lower[3] == '-' ? -1 : 1) * n * scale);
  }
  auto digits = [&](size_t from, size_t count) -> std::optional<int> {
    if (from + count > text.size()) return std::nullopt;
    int v = 0;
    for (size_t i = from; i < from + count; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
      v = v * 10 + (text[i] - '0');
    }
    return v;
  };
  // HH:MM[:SS], today.
  if ((text.size() == 5 || text.size() == 8) && text[2] == ':') {
    auto h = digits(0, 2), m = digits(3, 2);
    auto sec = text.size() == 8 && text[5] == ':' ? digits(6, 2) : std::optional<int>(0);
    if (!h || !m || !sec || *h > 23 || *m > 59 || *sec > 59) return failure();
    return at(midnight + *h * 3600 + *m * 60 + *sec);
  }
  // A date and time without a zone is UTC (the daemon's times are).
  auto civil = [&](int year, int month, int day, int seconds) -> std::optional<Timestamp> {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", year, month, day, seconds / 3600,
                  seconds % 3600 / 60, seconds % 60);
    if (auto t = ParseRfc3339(buf)) return *t;
    return failure();
  };
  const int this_year = [&] {
    const std::string iso = FormatRfc3339(now);
    return std::atoi(iso.substr(0, 4).c_str());
  }();
  // MMDD[YY] and MM/DD[/YY].
  if (text.size() == 4 || text.size() == 6) {
    auto mm = digits(0, 2), dd = digits(2, 2);
    auto yy = text.size() == 6 ? digits(4, 2) : std::optional<int>(this_year % 100);
    if (mm && dd && yy) return civil(2000 + *yy, *mm, *dd, 0);
  }
  if ((text.size() == 5 || text.size() == 8) && text[2] == '/') {
    auto mm = digits(0, 2), dd = digits(3, 2);
    auto yy = text.size() == 8 && text[5] == '/' ? digits(6, 2) : std::optional<int>(this_year % 100);
    if (mm && dd && yy) return civil(2000 + *yy, *mm, *dd, 0);
  }
  // YYYY-MM-DD[THH:MM[:SS]], or RFC 3339 with its zone.
  if (auto t = ParseRfc3339(text)) return *t;
  if (text.size() >= 10 && text[4] == '-' && text[7] == '-') {
    auto y = digits(0, 4), mo = digits(5, 2), d = digits(8, 2);
    if (!y || !mo || !d) return failure();
    if (text.size() == 10) return civil(*y, *mo, *d, 0);
    if (text[10] != 'T' && text[10] != ' ') return failure();
    auto h = digits(11, 2), mi = digits(14, 2);
    if (!h || !mi || text.size() < 16 || text[13] != ':') return failure();
    int sec = 0;
    if (text.size() == 19 && text[16] == ':') {
      auto s = digits(17, 2);
      if (!s) return failure();
      sec = *s;
    } else if (text.size() != 16) {
      return failure();
    }
    if (*h > 23 || *mi > 59 || sec > 59) return failure();
    return civil(*y, *mo, *d, *h * 3600 + *mi * 60 + sec);
  }
  return failure();
}

std::optional<int64_t> ParseSlurmTime(std::string_view text) {
  const std::string upper = Upper(text);
  if (upper == "INFINITE" || upper == "UNLIMITED" || upper == "-1") return kUnlimitedTime;
  // As Slurm's _is_valid_timespec: digits, at most one '-' before any
  // ':', at most two ':', and digits on both sides of each separator.
  const size_t dash = text.find('-');
  if (dash != text.rfind('-')) return std::nullopt;
  std::string_view clock = dash == std::string_view::npos ? text : text.substr(dash + 1);
  int64_t days = 0;
  if (dash != std::string_view::npos) {
    auto d = Whole(text.substr(0, dash));
    if (!d || d > 100'000) return std::nullopt;
    days = *d;
  }
  std::vector<int64_t> fields;
  size_t from = 0;
  while (true) {
    const size_t colon = clock.find(':', from);
    auto v = Whole(clock.substr(from, colon == std::string_view::npos ? std::string_view::npos : colon - from));
    if (!v || *v > 100'000'000) return std::nullopt;
    fields.push_back(*v);
    if (colon == std::string_view::npos) break;
    from = colon + 1;
  }
  if (fields.size() > 3) return std::nullopt;
  int64_t h = 0, m = 0, s = 0;
  if (dash != std::string_view::npos) {
    // days-hours[:minutes[:seconds]]
    h = fields[0];
    m = fields.size() > 1 ? fields[1] : 0;
    s = fields.size() > 2 ? fields[2] : 0;
  } else if (fields.size() == 3) {
    h = fields[0], m = fields[1], s = fields[2];
  } else {
    // minutes[:seconds]
    m = fields[0];
    s = fields.size() > 1 ? fields[1] : 0;
  }
  return ((days * 24 + h) * 60 + m) * 60 + s;
}

std::optional<int64_t> ParseSlurmMemoryMb(std::string_view text) {
  if (text.empty()) return std::nullopt;
  int shift = 0;  // in powers of 1024 from MB: K -1, M (or none) 0, G 1, T 2
  if (const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
      !std::isdigit(static_cast<unsigned char>(unit))) {
    const std::string_view units = "KMGT";
    const size_t at = units.find(unit);
    if (at == std::string_view::npos) return std::nullopt;
    shift = static_cast<int>(at) - 1;
    text.remove_suffix(1);
  }
  auto n = Whole(text);
  if (!n) return std::nullopt;
  if (shift < 0) return (*n + 1023) / 1024;
  constexpr int64_t kMaxMb = int64_t{1} << 40;
  const int64_t factor = int64_t{1} << (10 * shift);
  if (*n > kMaxMb / factor) return std::nullopt;
  return *n * factor;
}

bool IsEnvName(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

ExportRule ExportRuleFor(std::string_view name, std::string_view value) {
  if (!IsEnvName(name)) return ExportRule::kNotAName;
  const std::string upper = Upper(name);
  auto starts = [&](std::string_view prefix) { return upper.rfind(prefix, 0) == 0; };
  auto ends = [&](std::string_view suffix) {
    return upper.size() >= suffix.size() && upper.compare(upper.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  auto has = [&](std::string_view part) { return upper.find(part) != std::string::npos; };
  if (starts("UNISCHED_")) return ExportRule::kUnisched;
  for (std::string_view prefix : {"SLURM_", "SBATCH_", "SRUN_", "SALLOC_"}) {
    if (starts(prefix)) return ExportRule::kScheduler;
  }
  for (std::string_view session : {"USER", "LOGNAME", "PWD", "OLDPWD", "SHLVL", "_"}) {
    if (upper == session) return ExportRule::kSession;
  }
  // Secrets by their usual names: tokens, passwords, keys, and the
  // handles that stand for a credential (an SSH agent, a Kerberos cache,
  // an X authority file).
  for (std::string_view part :
       {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE_KEY", "API_KEY", "ACCESS_KEY"}) {
    if (has(part)) return ExportRule::kCredential;
  }
  for (std::string_view suffix : {"_KEY", "_PWD", "_PASS", "_PASSPHRASE"}) {
    if (ends(suffix)) return ExportRule::kCredential;
  }
  for (std::string_view handle :
       {"SSH_AUTH_SOCK", "SSH_AGENT_PID", "KRB5CCNAME", "XAUTHORITY", "DOCKER_AUTH_CONFIG", "NETRC"}) {
    if (upper == handle) return ExportRule::kCredential;
  }
  if (!IsUtf8(value)) return ExportRule::kNotText;
  return ExportRule::kCopied;
}

Result<BatchRequest> ResolveBatchOptions(const BatchOptions& options, const SubmitContext& context) {
  return Resolver(options, context).Run();
}

}  // namespace unisched::model
