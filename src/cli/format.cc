// Tables, job detail blocks and error lines for the command-line client.

#include "cli/format.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <sstream>

namespace unisched::cli {
namespace {

using nlohmann::json;

// obj[key], or null when obj is not an object or lacks the key.
const json& At(const json& obj, const char* key) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

const json& ListOf(const json& body, const char* key) {
  static const json kEmpty = json::array();
  const json& list = At(body, key);
  return list.is_array() ? list : kEmpty;
}

// "used/total" from two JSON numbers; a list counts its elements.
std::string Ratio(const json& used, const json& total) {
  auto text = [](const json& v) { return v.is_array() ? std::to_string(v.size()) : CellText(v); };
  return text(used) + "/" + text(total);
}

std::string KeyValues(const json& obj, const char* skip = nullptr) {
  std::string out;
  if (!obj.is_object()) return out;
  for (const auto& [key, value] : obj.items()) {
    if (skip && key == skip) continue;
    if (!out.empty()) out += ",";
    out += key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
  }
  return out;
}

}  // namespace

std::string FormatTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(header.size(), 0);
  for (size_t c = 0; c < header.size(); ++c) widths[c] = header[c].size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < header.size(); ++c) {
      const std::string& cell = c < cells.size() ? cells[c] : std::string();
      text += cell;
      if (c + 1 < header.size()) text.append(widths[c] - cell.size() + 2, ' ');
    }
    text.erase(text.find_last_not_of(' ') + 1);  // an empty last cell leaves no trailing blanks
    out += text + "\n";
  };
  line(header);
  for (const auto& row : rows) line(row);
  return out;
}

std::string CellText(const json& value) {
  if (value.is_null()) return "-";
  if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    return s.empty() ? "-" : s;
  }
  if (value.is_array()) {
    if (value.empty()) return "-";
    std::string out;
    for (const auto& v : value) out += (out.empty() ? "" : ",") + (v.is_string() ? v.get<std::string>() : v.dump());
    return out;
  }
  if (value.is_object()) {
    std::string out = KeyValues(value);
    return out.empty() ? "-" : out;
  }
  return value.dump();
}

std::string Upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::toupper(c); });
  return text;
}

std::string FormatDuration(int64_t seconds) {
  if (seconds < 0) seconds = 0;
  const int64_t days = seconds / 86400;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", static_cast<long long>(seconds % 86400 / 3600),
                static_cast<long long>(seconds % 3600 / 60), static_cast<long long>(seconds % 60));
  return days > 0 ? std::to_string(days) + "-" + buf : std::string(buf);
}

std::string ShortTime(const json& rfc3339) {
  if (!rfc3339.is_string()) return "-";
  std::string t = rfc3339.get<std::string>();
  if (t.size() >= 19 && t[10] == 'T') {
    t[10] = ' ';
    t.resize(19);
  }
  return t;
}

std::string ShellJoin(const json& argv) {
  if (!argv.is_array()) return CellText(argv);
  std::string out;
  for (const auto& word_json : argv) {
    const std::string word = word_json.is_string() ? word_json.get<std::string>() : word_json.dump();
    const bool plain = !word.empty() && word.find_first_not_of(
                                            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                            "-_./=:,+@%") == std::string::npos;
    if (!out.empty()) out += ' ';
    if (plain) {
      out += word;
    } else {
      out += '\'';
      for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

std::string FormatApiError(int status, const std::string& body) {
  json parsed = json::parse(body, nullptr, false);
  const json& error = At(parsed, "error");
  if (At(error, "message").is_string()) {
    std::string line = "error: " + At(error, "message").get<std::string>();
    if (const json& field = At(error, "field"); field.is_string() && !field.get<std::string>().empty()) {
      line += " (field: " + field.get<std::string>() + ")";
    }
    return line;
  }
  std::string text = body;
  text.erase(text.find_last_not_of(" \r\n\t") + 1);
  if (auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  return "error: HTTP " + std::to_string(status) + (text.empty() ? "" : ": " + text);
}

std::string FormatJobsTable(const json& list) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& j : ListOf(list, "jobs")) {
    rows.push_back({CellText(At(j, "id")), CellText(At(j, "name")), CellText(At(j, "user")), CellText(At(j, "project")),
                    CellText(At(j, "queue")), CellText(At(j, "pool")), CellText(At(j, "state")),
                    CellText(At(j, "nodes")), ShortTime(At(j, "submitted_at"))});
  }
  return FormatTable({"ID", "NAME", "USER", "PROJECT", "QUEUE", "POOL", "STATE", "NODES", "SUBMITTED"}, rows);
}

std::string FormatNodesTable(const json& list) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& n : ListOf(list, "nodes")) {
    const json& res = At(n, "resources");
    const json& alloc = At(n, "allocated");
    rows.push_back({CellText(At(n, "name")), CellText(At(n, "pool")), CellText(At(n, "state")),
                    Ratio(At(alloc, "cpus"), At(res, "cpus")), Ratio(At(alloc, "memory_mb"), At(res, "memory_mb")),
                    Ratio(At(alloc, "gpus"), At(res, "gpus")), CellText(At(n, "reason")), CellText(At(n, "labels"))});
  }
  return FormatTable({"NAME", "POOL", "STATE", "CPUS", "MEMORY_MB", "GPUS", "REASON", "LABELS"}, rows);
}

std::string FormatSandboxesTable(const json& list) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& b : ListOf(list, "sandboxes")) {
    rows.push_back({CellText(At(b, "id")), CellText(At(b, "state")), CellText(At(b, "image")), CellText(At(b, "user")),
                    CellText(At(b, "project")), CellText(At(b, "queue")), CellText(At(b, "execs")),
                    CellText(At(b, "created_at"))});
  }
  return FormatTable({"ID", "STATE", "IMAGE", "USER", "PROJECT", "QUEUE", "EXECS", "CREATED"}, rows);
}

std::string FormatQueuesTable(const json& list) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& q : ListOf(list, "queues")) {
    const json& policy = At(q, "policy");
    const json& type = policy.is_object() ? At(policy, "type") : policy;
    rows.push_back({CellText(At(q, "name")), CellText(At(q, "pool")), CellText(type),
                    CellText(At(policy, "preemptible")), CellText(At(policy, "max_walltime_hours")),
                    CellText(At(policy, "max_concurrency")), CellText(At(q, "pending")), CellText(At(q, "running"))});
  }
  return FormatTable(
      {"NAME", "POOL", "POLICY", "PREEMPTIBLE", "MAX_WALLTIME_H", "MAX_CONCURRENCY", "PENDING", "RUNNING"}, rows);
}

std::string FormatPoolsTable(const json& list) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : ListOf(list, "pools")) {
    const json& cap = At(p, "capacity");
    const json& alloc = At(p, "allocated");
    const json& nodes = At(p, "nodes");
    rows.push_back({CellText(At(p, "name")), CellText(At(p, "kind")),
                    nodes.is_array() ? std::to_string(nodes.size()) : CellText(nodes),
                    Ratio(At(alloc, "cpus"), At(cap, "cpus")), Ratio(At(alloc, "memory_mb"), At(cap, "memory_mb")),
                    Ratio(At(alloc, "gpus"), At(cap, "gpus")), CellText(At(p, "labels"))});
  }
  return FormatTable({"NAME", "KIND", "NODES", "CPUS", "MEMORY_MB", "GPUS", "LABELS"}, rows);
}

std::string FormatEventsTable(const json& list) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : ListOf(list, "events")) {
    rows.push_back({ShortTime(At(e, "time")), CellText(At(e, "kind")), CellText(At(e, "message"))});
  }
  return FormatTable({"TIME", "KIND", "MESSAGE"}, rows);
}

std::string FormatJobDetail(const json& job) {
  std::vector<std::pair<std::string, std::string>> lines;
  auto add = [&](const char* key, std::string value) { lines.emplace_back(key, std::move(value)); };

  add("ID", CellText(At(job, "id")));
  add("Name", CellText(At(job, "name")));
  add("User", CellText(At(job, "user")));
  add("Project", CellText(At(job, "project")));
  add("Queue", CellText(At(job, "queue")));
  add("Pool", CellText(At(job, "pool")));
  std::string state = CellText(At(job, "state"));
  if (const json& reason = At(job, "state_reason"); reason.is_string() && !reason.get<std::string>().empty()) {
    state += " (" + reason.get<std::string>() + ")";
  }
  add("State", state);
  add("Routing", CellText(At(At(job, "routing"), "reason")));

  const json& workload = At(job, "workload");
  std::string wl = CellText(At(workload, "kind"));
  if (std::string features = KeyValues(workload, "kind"); !features.empty()) wl += " (" + features + ")";
  add("Workload", wl);

  const json& res = At(job, "resources");
  std::string resources;
  for (const char* key : {"nodes", "cpus", "memory_mb", "gpus"}) {
    if (!At(res, key).is_null())
      resources += std::string(resources.empty() ? "" : " ") + key + "=" + CellText(At(res, key));
  }
  if (const json& model = At(res, "gpu_model"); model.is_string() && !model.get<std::string>().empty()) {
    resources += " gpu_model=" + model.get<std::string>();
  }
  if (const json& wt = At(res, "walltime_seconds"); wt.is_number_integer()) {
    resources += " walltime=" + FormatDuration(wt.get<int64_t>());
  }
  add("Resources", resources.empty() ? "-" : resources);
  add("Constraints", CellText(At(job, "constraints")));
  add("Command", ShellJoin(At(job, "command")));
  // A batch script: its #! line and length (--json has the whole text).
  if (const json& script = At(job, "script"); script.is_string() && !script.get<std::string>().empty()) {
    const std::string& text = script.get_ref<const std::string&>();
    const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + (text.back() != '\n');
    add("Script", text.substr(0, text.find('\n')) + " (" + std::to_string(lines) + " lines; --json shows it)");
  }
  if (const json& workdir = At(job, "workdir"); workdir.is_string() && !workdir.get<std::string>().empty()) {
    add("Workdir", workdir.get<std::string>());
  }
  std::string priority = CellText(At(job, "priority"));
  if (const json& f = At(job, "priority_factors"); f.is_object()) {
    // The named terms that sum to the priority (docs/policy/priority.md).
    std::string terms;
    for (const char* key : {"fairshare", "age", "tier", "size", "adjustment"}) {
      if (!At(f, key).is_null()) terms += std::string(terms.empty() ? "" : " + ") + key + " " + CellText(At(f, key));
    }
    if (!terms.empty()) priority += " (" + terms + ")";
  }
  add("Priority", priority);
  add("Nodes", CellText(At(job, "nodes")));
  add("Exit code", CellText(At(job, "exit_code")));
  add("Submitted", ShortTime(At(job, "submitted_at")));
  add("Started", ShortTime(At(job, "started_at")));
  add("Ended", ShortTime(At(job, "ended_at")));
  if (job.is_object() && job.contains("estimated_start")) add("Est. start", ShortTime(At(job, "estimated_start")));
  // Only in pools that plan with predicted run times (docs/policy/backfill.md).
  if (const json& predicted = At(job, "predicted_run_seconds"); predicted.is_number_integer()) {
    std::string text = FormatDuration(predicted.get<int64_t>());
    if (const json& wt = At(At(job, "resources"), "walltime_seconds");
        wt.is_number_integer() && wt.get<int64_t>() > 0) {
      text += " (of " + FormatDuration(wt.get<int64_t>()) + " requested)";
    }
    add("Predicted", text);
  }

  const json& attempts = At(job, "attempts");
  add("Attempts", attempts.is_array() ? std::to_string(attempts.size()) : "0");

  size_t width = 0;
  for (const auto& [key, value] : lines) width = std::max(width, key.size());
  std::string out;
  for (const auto& [key, value] : lines) {
    out += key + ":" + std::string(width - key.size() + 1, ' ') + value + "\n";
  }
  if (attempts.is_array()) {
    for (const auto& a : attempts) {
      std::string line = "  #" + CellText(At(a, "attempt")) + " " + CellText(At(a, "state"));
      if (!At(a, "exit_code").is_null()) line += " exit " + CellText(At(a, "exit_code"));
      line += " on " + CellText(At(a, "nodes")) + ", " + ShortTime(At(a, "started_at")) + " .. " +
              ShortTime(At(a, "ended_at"));
      if (const json& reason = At(a, "reason"); reason.is_string() && !reason.get<std::string>().empty()) {
        line += " (" + reason.get<std::string>() + ")";
      }
      out += line + "\n";
    }
  }
  const json& reasons = At(job, "pending_reasons");
  if (reasons.is_array() && !reasons.empty()) {
    out += "Pending reasons:\n";
    for (const auto& r : reasons) out += "  " + CellText(At(r, "code")) + ": " + CellText(At(r, "message")) + "\n";
  }
  return out;
}

std::string FormatWhoAmI(const json& who) {
  std::string out;
  out += "User:     " + CellText(At(who, "user")) + "\n";
  out += "Role:     " + CellText(At(who, "role")) + "\n";
  out += "Projects: " + CellText(At(who, "projects")) + "\n";
  if (const json& queues = At(who, "queues"); queues.is_array() && !queues.empty()) {
    out += "Queues:   " + CellText(queues) + "\n";
  }
  return out;
}

std::string FormatQuantity(const json& value) {
  if (value.is_number_integer()) return value.dump();
  if (!value.is_number()) return CellText(value);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", value.get<double>());
  std::string text = buf;
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text == "-0" ? "0" : text;
}

namespace {

// The metric columns of GET /v1/usage, in the contract's order.
constexpr const char* kUsageMetrics[] = {"cpu_core_seconds", "cpu_seconds_used", "memory_mb_seconds", "gpu_seconds",
                                         "instance_seconds", "instance_minutes", "storage_gb_hours",  "network_bytes",
                                         "network_bytes_in", "network_bytes_out"};
constexpr const char* kUsageGroupOrder[] = {"user", "project", "queue", "pool", "workload_kind", "tier", "job", "hour"};

template <size_t N>
bool Contains(const char* const (&list)[N], const std::string& key) {
  return std::find(std::begin(list), std::end(list), key) != std::end(list);
}

void AddOnce(std::vector<std::string>& keys, const std::string& key) {
  if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
}

}  // namespace

std::string FormatUsageTable(const json& body, const std::vector<std::string>& group_by) {
  const json& rows = ListOf(body, "rows");
  // Group columns: those asked for, then any other non-numeric key (a
  // daemon's default grouping), in the contract's order.
  std::vector<std::string> groups = group_by;
  std::vector<std::string> other_groups, metrics, other_metrics;
  for (const auto& row : rows) {
    if (!row.is_object()) continue;
    for (const auto& [key, value] : row.items()) {
      if (Contains(kUsageMetrics, key)) continue;
      if (value.is_number()) {
        AddOnce(other_metrics, key);
      } else if (!Contains(kUsageGroupOrder, key)) {
        AddOnce(other_groups, key);
      }
    }
  }
  for (const char* key : kUsageGroupOrder) {
    for (const auto& row : rows) {
      if (row.is_object() && row.contains(key) && !row[key].is_number()) {
        AddOnce(groups, key);
        break;
      }
    }
  }
  for (const auto& key : other_groups) AddOnce(groups, key);
  for (const char* key : kUsageMetrics) {
    for (const auto& row : rows) {
      if (row.is_object() && row.contains(key)) {
        metrics.push_back(key);
        break;
      }
    }
  }
  metrics.insert(metrics.end(), other_metrics.begin(), other_metrics.end());

  std::vector<std::string> header;
  for (const auto& key : groups) header.push_back(Upper(key));
  for (const auto& key : metrics) header.push_back(Upper(key));
  if (header.empty()) header.push_back("USAGE");

  std::vector<std::vector<std::string>> lines;
  std::map<std::string, double> totals;
  for (const auto& row : rows) {
    std::vector<std::string> cells;
    for (const auto& key : groups) cells.push_back(CellText(At(row, key.c_str())));
    for (const auto& key : metrics) {
      const json& value = At(row, key.c_str());
      cells.push_back(FormatQuantity(value));
      if (value.is_number()) totals[key] += value.get<double>();
    }
    lines.push_back(std::move(cells));
  }
  if (rows.size() > 1) {
    std::vector<std::string> total_line(groups.size(), "");
    if (!total_line.empty()) total_line[0] = "TOTAL";
    for (const auto& key : metrics) {
      auto it = totals.find(key);
      total_line.push_back(it == totals.end() ? "-" : FormatQuantity(json(it->second)));
    }
    lines.push_back(std::move(total_line));
  }
  std::string out = FormatTable(header, lines);
  if (rows.empty()) {
    out += "(no usage recorded in this window)\n";
  } else if (!metrics.empty()) {
    out +=
        "(units: *_seconds are resource-seconds, 3600 = 1 hour; memory_mb_seconds MB x s; network_bytes bytes; "
        "\"-\" = not measured)\n";
  }
  return out;
}

int64_t DiscrepancyCount(const json& body) {
  int64_t total = 0;
  for (const char* key : {"missing", "duplicated", "mismatched"}) {
    if (const json& n = At(body, key); n.is_number_integer()) total += n.get<int64_t>();
  }
  return total;
}

std::string FormatReconcile(const json& body) {
  std::string out;
  out += "Attempts checked: " + CellText(At(body, "attempts_checked")) + "\n";
  out += "Missing:          " + CellText(At(body, "missing")) + "\n";
  out += "Duplicated:       " + CellText(At(body, "duplicated")) + "\n";
  out += "Mismatched:       " + CellText(At(body, "mismatched")) + "\n";
  if (const json& n = At(body, "unverifiable_attempts"); n.is_number_integer() && n.get<int64_t>() > 0) {
    out += "Unverifiable:     " + CellText(n) + " attempts (job records deleted after retention)\n";
  }
  const json& details = ListOf(body, "details");
  if (DiscrepancyCount(body) == 0 && details.empty()) return out + "The ledger reconciles: no discrepancies.\n";
  if (details.empty()) return out;
  std::vector<std::vector<std::string>> rows;
  for (const auto& d : details) {
    rows.push_back({CellText(At(d, "kind")), CellText(At(d, "job")), CellText(At(d, "attempt")),
                    CellText(At(d, "metric")), CellText(At(d, "detail")), CellText(At(d, "node")),
                    FormatQuantity(At(d, "expected")), FormatQuantity(At(d, "recorded"))});
  }
  return out + "\n" + FormatTable({"KIND", "JOB", "ATTEMPT", "METRIC", "DETAIL", "NODE", "EXPECTED", "RECORDED"}, rows);
}

}  // namespace unisched::cli

namespace unisched::cli {

std::string FormatConnectionError(const std::string& url, const std::string& code, const std::string& message) {
  std::string line = code == "timeout" ? "error: no answer from the unisched daemon at " + url + " (" + message + ")"
                                       : "error: cannot reach the unisched daemon at " + url + " (" + message + ")";
  line +=
      "\n  start it (unisched server --config config/unisched.yaml) or point UNISCHED_URL or --url at a running "
      "daemon";
  return line;
}

std::string HintForStatus(int status) {
  if (status == 401) {
    return "  hint: set UNISCHED_TOKEN or pass --token-file FILE; a daemon writes its admin token to "
           "<state-dir>/admin.token";
  }
  return {};
}

}  // namespace unisched::cli
