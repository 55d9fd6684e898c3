// squeue's and sacct's views (cli/slurm_views.h).

#include "cli/slurm_views.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <optional>

#include "cli/args.h"
#include "cli/format.h"
#include "unisched/model/job_array.h"

namespace unisched::cli {
namespace {

using nlohmann::json;

std::string Text(const json& job, const char* key) {
  auto it = job.find(key);
  if (it == job.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

// A job's id as Slurm prints it: "123_7" for a task of an array, and for an
// array's waiting tasks "123_[5-99%10]" (its waiting indices and cap).
std::string SlurmJobId(const json& job) {
  if (job.contains("array_job_id") && job["array_job_id"].is_string()) {
    return job["array_job_id"].get<std::string>() + "_" + std::to_string(job.value("array_task_id", int64_t{0}));
  }
  if (job.contains("array") && job["array"].is_object()) {
    const json& array = job["array"];
    const std::string waiting = array.value("waiting", "");
    if (!waiting.empty()) {
      const int64_t cap = array.value("max_running", int64_t{0});
      return Text(job, "id") + "_[" + waiting + (cap > 0 ? "%" + std::to_string(cap) : "") + "]";
    }
  }
  return Text(job, "id");
}

int64_t Int(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_number() ? it->get<int64_t>() : 0;
}

std::optional<Timestamp> TimeOf(const json& job, const char* key) {
  const std::string text = Text(job, key);
  return text.empty() ? std::nullopt : ParseRfc3339(text);
}

// Slurm's elapsed form: M:SS under an hour, H:MM:SS under a day, D-HH:MM:SS.
std::string SlurmDuration(int64_t seconds) {
  if (seconds < 0) seconds = 0;
  char buf[64];
  if (seconds < 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(seconds / 60),
                  static_cast<long long>(seconds % 60));
    return buf;
  }
  if (seconds < 86400) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(seconds / 3600),
                  static_cast<long long>(seconds % 3600 / 60), static_cast<long long>(seconds % 60));
    return buf;
  }
  return FormatDuration(seconds);
}

// How long the job has run: since its start, up to its end or now.
int64_t UsedSeconds(const json& job, Timestamp now) {
  auto started = TimeOf(job, "started_at");
  if (!started) return 0;
  const Timestamp until = TimeOf(job, "ended_at").value_or(now);
  return std::chrono::duration_cast<std::chrono::seconds>(until - *started).count();
}

std::string Limit(const json& job) {
  const int64_t limit = Int(job.value("resources", json::object()), "walltime_seconds");
  return limit > 0 ? SlurmDuration(limit) : "UNLIMITED";
}

std::string NodeList(const json& job) {
  std::string list;
  for (const auto& n : job.value("nodes", json::array())) {
    if (n.is_string()) list += (list.empty() ? "" : ",") + n.get<std::string>();
  }
  return list;
}

std::string FirstReason(const json& job) {
  const json reasons = job.value("pending_reasons", json::array());
  if (!reasons.empty() && reasons[0].is_object()) return reasons[0].value("code", "");
  return job.value("state", "") == "HELD" ? "Held" : "None";
}

std::string ExitCode(const json& job) {
  // Slurm's code:signal. The API's exit_code is 128+N for a job killed by
  // signal N (as a shell reports it); the attempt's reason says which it was.
  const auto code = job.find("exit_code");
  const int64_t value = code != job.end() && code->is_number() ? code->get<int64_t>() : 0;
  const json attempts = job.value("attempts", json::array());
  const std::string state = job.value("state", "");
  // As Slurm's: a job stopped at its time limit 0:0, one cancelled (SIGTERM)
  // or killed 0:N.
  if (value > 128 && state == "TIMEOUT") return "0:0";
  if (value > 128 && value < 128 + 65) {
    const std::string reason =
        !attempts.empty() && attempts.back().is_object() ? attempts.back().value("reason", "") : std::string();
    if (state == "CANCELLED" || reason.rfind("killed by signal " + std::to_string(value - 128), 0) == 0) {
      return "0:" + std::to_string(value - 128);
    }
  }
  return std::to_string(value) + ":0";
}

// Slurm's times: 2026-12-07T06:51:18 (UTC here), or `none` when not yet.
std::string SlurmTime(const json& rfc3339, const char* none) {
  if (!rfc3339.is_string() || rfc3339.get<std::string>().size() < 19) return none;
  return rfc3339.get<std::string>().substr(0, 19);
}
std::string SacctTime(const json& rfc3339) {
  return SlurmTime(rfc3339, "Unknown");
}

bool Waits(const json& job) {
  const std::string state = job.value("state", "");
  return state == "PENDING" || state == "HELD";
}

std::string Fit(std::string value, int width, bool right) {
  if (width <= 0) return value;
  const auto w = static_cast<size_t>(width);
  if (value.size() > w) value.resize(w);
  const std::string pad(w - value.size(), ' ');
  return right ? pad + value : value + pad;
}

}  // namespace

std::string CompactState(const std::string& state) {
  static const std::map<std::string, std::string> kCodes = {
      {"PENDING", "PD"}, {"HELD", "PD"},      {"RUNNING", "R"},  {"COMPLETED", "CD"},
      {"FAILED", "F"},   {"CANCELLED", "CA"}, {"TIMEOUT", "TO"}, {"NODE_FAIL", "NF"}};
  auto it = kCodes.find(state);
  return it == kCodes.end() ? state : it->second;
}

std::vector<json> ExpandArrays(const std::vector<json>& jobs, bool expand) {
  std::vector<json> out;
  out.reserve(jobs.size());
  for (const auto& job : jobs) {
    const json array = job.value("array", json());
    if (!array.is_object()) {
      out.push_back(job);
      continue;
    }
    const std::string waiting = array.value("waiting", "");
    if (waiting.empty()) continue;  // every task started: they are the rows
    if (!expand) {
      out.push_back(job);
      continue;
    }
    auto indices = model::IndexSet::Parse(waiting, "waiting");
    if (!indices.ok()) {
      out.push_back(job);
      continue;
    }
    for (int64_t index : indices->First(indices->Count())) {
      json task = job;
      task.erase("array");
      task["array_job_id"] = Text(job, "id");
      task["array_task_id"] = index;
      task["started_at"] = nullptr;
      task["ended_at"] = nullptr;
      out.push_back(std::move(task));
    }
  }
  return out;
}

Result<std::string> FormatSqueue(const std::vector<json>& jobs, const std::string& format, Timestamp now, bool header) {
  struct Piece {
    std::string literal;
    char field = 0;
    int width = 0;
    bool right = false;
  };
  std::vector<Piece> pieces;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      if (pieces.empty() || pieces.back().field) pieces.emplace_back();
      pieces.back().literal += format[i];
      continue;
    }
    Piece p;
    ++i;
    if (i < format.size() && format[i] == '%') {
      pieces.push_back({"%", 0, 0, false});
      continue;
    }
    bool left = false;
    if (i < format.size() && format[i] == '-') left = true, ++i;
    if (i < format.size() && format[i] == '.') p.right = true, ++i;
    while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i]))) {
      p.width = p.width * 10 + (format[i++] - '0');
      if (p.width > 1000) return UsageError("--format: a width above 1000", "format");
    }
    if (left) p.right = false;
    if (i >= format.size()) return UsageError("--format ends inside a field: '" + format + "'", "format");
    p.field = format[i];
    if (std::string("ijuaPqtTMlDCbRrNQVSeEAFKLpZocm").find(p.field) == std::string::npos) {
      return UsageError(std::string("--format: %") + p.field +
                            " is not a field; use i j u a P q t T M l D C b R r N Q V S e E A F K L p Z o c m "
                            "(docs/slurm.md)",
                        "format");
    }
    pieces.push_back(p);
  }
  auto value = [&](const json& job, char field) -> std::string {
    const json resources = job.value("resources", json::object());
    const bool waiting = job.value("state", "") == "PENDING" || job.value("state", "") == "HELD";
    switch (field) {
      case 'i':
        return SlurmJobId(job);
      case 'j':
        return Text(job, "name");
      case 'u':
        return Text(job, "user");
      case 'a':
        return Text(job, "project");
      case 'P':
        return Text(job, "queue");
      case 'q':
        return Text(job, "pool");
      case 't':
        return CompactState(job.value("state", ""));
      case 'T':
        return job.value("state", "");
      case 'M':
        return waiting ? "0:00" : SlurmDuration(UsedSeconds(job, now));
      case 'l':
        return Limit(job);
      case 'D':
        return std::to_string(std::max<int64_t>(1, Int(resources, "nodes")));
      case 'C':
        return std::to_string(Int(resources, "nodes") * Int(resources, "cpus"));
      case 'b':
        return Int(resources, "gpus") > 0 ? "gpu:" + std::to_string(Int(resources, "gpus")) : "N/A";
      case 'R':
        return waiting ? "(" + FirstReason(job) + ")" : NodeList(job);
      case 'r':
        return waiting ? FirstReason(job) : "None";
      case 'N':
        return NodeList(job);
      case 'Q':
        return Text(job, "priority");
      case 'V':
        return SlurmTime(job.value("submitted_at", json()), "N/A");
      case 'S':
        return SlurmTime(job.value(waiting ? "estimated_start" : "started_at", json()), "N/A");
      case 'e':
        return SlurmTime(job.value("ended_at", json()), "N/A");
      case 'E': {
        const std::string dependency = Text(job, "dependency");
        return dependency.empty() ? "(null)" : dependency;
      }
      case 'A':
      case 'F':
        return job.contains("array_job_id") && job["array_job_id"].is_string() ? Text(job, "array_job_id")
                                                                               : Text(job, "id");
      case 'K':
        if (job.contains("array_task_id") && job["array_task_id"].is_number()) {
          return std::to_string(job["array_task_id"].get<int64_t>());
        }
        if (job.contains("array") && job["array"].is_object()) {
          const int64_t cap = Int(job["array"], "max_running");
          return "[" + job["array"].value("waiting", "") + (cap > 0 ? "%" + std::to_string(cap) : "") + "]";
        }
        return "N/A";
      case 'L': {
        const int64_t limit = Int(resources, "walltime_seconds");
        if (limit <= 0) return "UNLIMITED";
        return SlurmDuration(std::max<int64_t>(0, limit - (waiting ? 0 : UsedSeconds(job, now))));
      }
      case 'p':
        return Text(job, "priority");
      case 'Z':
        return job.value("workdir", json()).is_string() && !job["workdir"].get<std::string>().empty()
                   ? job["workdir"].get<std::string>()
                   : "(null)";
      case 'o': {
        std::string command;
        for (const auto& word : job.value("command", json::array())) {
          if (word.is_string()) command += (command.empty() ? "" : " ") + word.get<std::string>();
        }
        return command;
      }
      case 'c':
        return std::to_string(std::max<int64_t>(1, Int(resources, "cpus")));
      case 'm':
        return std::to_string(Int(resources, "memory_mb")) + "M";
    }
    return "";
  };
  auto line = [&](const std::function<std::string(char)>& cell) {
    std::string out;
    for (const auto& p : pieces) out += p.field ? Fit(cell(p.field), p.width, p.right) : p.literal;
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  static const std::map<char, const char*> kHeaders = {{'i', "JOBID"},
                                                       {'j', "NAME"},
                                                       {'u', "USER"},
                                                       {'a', "ACCOUNT"},
                                                       {'P', "PARTITION"},
                                                       {'q', "POOL"},
                                                       {'t', "ST"},
                                                       {'T', "STATE"},
                                                       {'M', "TIME"},
                                                       {'l', "TIME_LIMIT"},
                                                       {'D', "NODES"},
                                                       {'C', "CPUS"},
                                                       {'b', "TRES_PER_NODE"},
                                                       {'R', "NODELIST(REASON)"},
                                                       {'r', "REASON"},
                                                       {'N', "NODELIST"},
                                                       {'Q', "PRIORITY"},
                                                       {'V', "SUBMIT_TIME"},
                                                       {'S', "START_TIME"},
                                                       {'e', "END_TIME"},
                                                       {'E', "DEPENDENCY"},
                                                       {'A', "ARRAY_JOB_ID"},
                                                       {'F', "ARRAY_JOB_ID"},
                                                       {'K', "ARRAY_TASK_ID"},
                                                       {'L', "TIME_LEFT"},
                                                       {'p', "PRIORITY"},
                                                       {'Z', "WORK_DIR"},
                                                       {'o', "COMMAND"},
                                                       {'c', "MIN_CPUS"},
                                                       {'m', "MIN_MEMORY"}};
  std::string out = header ? line([](char f) { return std::string(kHeaders.at(f)); }) : std::string();
  for (const auto& job : jobs) out += line([&](char f) { return value(job, f); });
  return out;
}

Result<std::string> FormatSacct(const std::vector<json>& jobs, const json& usage_by_job, const std::string& format,
                                Timestamp now, const SacctLayout& layout) {
  struct Field {
    std::string name;  // as Slurm spells it
    int width = 0;
  };
  static const std::vector<std::string> kFields = {
      "JobID",  "JobName", "User",       "Account",   "Partition",  "State",      "ExitCode",  "Submit",
      "Start",  "End",     "Elapsed",    "Timelimit", "AllocCPUS",  "AllocNodes", "AllocGPUS", "NodeList",
      "Reason", "CPUTime", "CPUTimeRAW", "TotalCPU",  "GPUTimeRAW", "MaxRSS"};
  std::vector<Field> fields;
  size_t from = 0;
  while (from <= format.size()) {
    const size_t comma = format.find(',', from);
    std::string word = format.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    from = comma == std::string::npos ? format.size() + 1 : comma + 1;
    if (word.empty()) continue;
    Field f;
    if (const size_t pct = word.find('%'); pct != std::string::npos) {
      try {
        f.width = std::stoi(word.substr(pct + 1));
      } catch (const std::exception&) {
        return UsageError("--format: '" + word + "' has no width after %", "format");
      }
      word.resize(pct);
    }
    auto lower = [](std::string s) {
      std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
      return s;
    };
    auto known =
        std::find_if(kFields.begin(), kFields.end(), [&](const std::string& k) { return lower(k) == lower(word); });
    if (known == kFields.end()) {
      std::string list;
      for (const auto& k : kFields) list += (list.empty() ? "" : ",") + k;
      return UsageError("--format: '" + word + "' is not a field; fields: " + list, "format");
    }
    f.name = *known;
    if (f.width == 0) {
      f.width = f.name == "JobID" || f.name == "NodeList"                    ? 12
                : f.name == "Submit" || f.name == "Start" || f.name == "End" ? 19
                                                                             : 10;
    }
    fields.push_back(f);
  }
  if (fields.empty()) return UsageError("--format names no field", "format");
  auto metric = [&](const json& job, const char* name) -> std::optional<double> {
    auto row = usage_by_job.find(Text(job, "id"));
    if (row == usage_by_job.end() || !row->contains(name) || !(*row)[name].is_number()) return std::nullopt;
    return (*row)[name].get<double>();
  };
  auto value = [&](const json& job, const std::string& name) -> std::string {
    const json resources = job.value("resources", json::object());
    if (name == "JobID") return SlurmJobId(job);
    if (name == "JobName") return Text(job, "name");
    if (name == "User") return Text(job, "user");
    if (name == "Account") return Text(job, "project");
    if (name == "Partition") return Text(job, "queue");
    if (name == "State") return job.value("state", "");
    if (name == "ExitCode") return ExitCode(job);
    if (name == "Submit") return SacctTime(job.value("submitted_at", json()));
    // A waiting array's row has its first task's start: not its own.
    if (name == "Start") return Waits(job) ? "Unknown" : SacctTime(job.value("started_at", json()));
    if (name == "End") return SacctTime(job.value("ended_at", json()));
    if (name == "Elapsed") return FormatDuration(Waits(job) ? 0 : UsedSeconds(job, now));
    if (name == "Timelimit") {
      const int64_t limit = Int(resources, "walltime_seconds");
      return limit > 0 ? FormatDuration(limit) : "UNLIMITED";
    }
    if (name == "AllocCPUS") return std::to_string(Int(resources, "nodes") * Int(resources, "cpus"));
    if (name == "AllocNodes") return std::to_string(Int(resources, "nodes"));
    if (name == "AllocGPUS") return std::to_string(Int(resources, "nodes") * Int(resources, "gpus"));
    if (name == "NodeList") return NodeList(job);
    if (name == "Reason") {
      // Waiting: why, as Slurm's codes (JobHeldUser for a held job).
      if (job.value("state", "") == "HELD") return "JobHeldUser";
      if (Waits(job)) return FirstReason(job);
      return job.value("state_reason", "").empty() ? "None" : job.value("state_reason", "");
    }
    if (name == "CPUTime" || name == "CPUTimeRAW") {
      auto seconds = metric(job, "cpu_core_seconds");
      if (!seconds) return "";
      const auto whole = static_cast<int64_t>(std::llround(*seconds));
      return name == "CPUTime" ? FormatDuration(whole) : std::to_string(whole);
    }
    if (name == "TotalCPU") {
      auto seconds = metric(job, "cpu_seconds_used");
      return seconds ? FormatDuration(static_cast<int64_t>(std::llround(*seconds))) : "";
    }
    if (name == "GPUTimeRAW") {
      auto seconds = metric(job, "gpu_seconds");
      return seconds ? std::to_string(static_cast<int64_t>(std::llround(*seconds))) : "";
    }
    if (name == "MaxRSS") {
      int64_t most = 0;
      for (const auto& a : job.value("attempts", json::array())) {
        if (a.contains("usage") && a["usage"].is_object()) most = std::max(most, Int(a["usage"], "max_rss_kb"));
      }
      return most > 0 ? std::to_string(most) + "K" : "";
    }
    return "";
  };
  if (layout.parsable) {
    // -p / -P: no padding, no rule; '|' between fields (and after the last with -p).
    auto joined = [&](const std::function<std::string(const Field&)>& cell) {
      std::string row;
      for (size_t i = 0; i < fields.size(); ++i) row += (i ? "|" : "") + cell(fields[i]);
      return row + (layout.trailing_bar ? "|" : "") + "\n";
    };
    std::string out = layout.header ? joined([](const Field& f) { return f.name; }) : std::string();
    for (const auto& job : jobs) out += joined([&](const Field& f) { return value(job, f.name); });
    return out;
  }
  std::string out, rule;
  for (size_t i = 0; i < fields.size(); ++i) {
    out += (i ? " " : "") + Fit(fields[i].name, fields[i].width, false);
    rule += (i ? " " : "") + std::string(static_cast<size_t>(fields[i].width), '-');
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  out += "\n" + rule + "\n";
  if (!layout.header) out.clear();
  for (const auto& job : jobs) {
    std::string row;
    for (size_t i = 0; i < fields.size(); ++i) {
      // Text columns on the left, numbers on the right, as sacct prints them.
      const std::string v = value(job, fields[i].name);
      const bool number = fields[i].name != "JobID" && !v.empty() &&
                          std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); });
      row += (i ? " " : "") + Fit(v, fields[i].width, number);
    }
    while (!row.empty() && row.back() == ' ') row.pop_back();
    out += row + "\n";
  }
  return out;
}

}  // namespace unisched::cli
