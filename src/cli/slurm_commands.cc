// squeue, sacct, scancel, scontrol update over the API (cli/slurm_commands.h).

#include "cli/slurm_commands.h"

#include <algorithm>
#include <set>

#include "cli/slurm_views.h"
#include "unisched/model/job_array.h"

namespace unisched::cli {
namespace {

using nlohmann::json;

constexpr const char* kWaitingOrRunning[] = {"PENDING", "HELD", "RUNNING"};

// The caller's user name (for --me).
std::optional<std::string> Me(Session& session) {
  auto who = session.CallJson("GET", "/v1/whoami");
  if (!who) return std::nullopt;
  return who->value("user", "");
}

// Every job of GET /v1/jobs with these filters, page after page.
std::optional<std::vector<json>> ListAll(Session& session, const std::vector<std::pair<std::string, std::string>>& q) {
  std::vector<json> jobs;
  std::string cursor;
  for (;;) {
    auto query = q;
    query.emplace_back("limit", "1000");
    query.emplace_back("cursor", cursor);
    auto page = session.CallJson("GET", "/v1/jobs" + BuildQuery(query));
    if (!page) return std::nullopt;
    for (auto& job : (*page)["jobs"]) jobs.push_back(std::move(job));
    cursor = page->contains("next_cursor") && (*page)["next_cursor"].is_string()
                 ? (*page)["next_cursor"].get<std::string>()
                 : "";
    if (cursor.empty()) return jobs;
  }
}

// The jobs of `states` (all states when empty) matching the filters, in id order.
std::optional<std::vector<json>> JobsIn(Session& session, const std::vector<std::string>& states,
                                        const std::vector<std::pair<std::string, std::string>>& filters) {
  std::vector<json> all;
  for (const std::string& state : states.empty() ? std::vector<std::string>{""} : states) {
    auto q = filters;
    q.emplace_back("state", state);
    auto jobs = ListAll(session, q);
    if (!jobs) return std::nullopt;
    for (auto& j : *jobs) all.push_back(std::move(j));
  }
  auto id = [](const json& j) { return std::atoll(j.value("id", "0").c_str()); };
  std::sort(all.begin(), all.end(), [&](const json& a, const json& b) { return id(a) < id(b); });
  return all;
}

// --state: one state, or ALL; default the waiting and running ones.
Result<std::vector<std::string>> StatesOf(const ParsedArgs& args, bool default_active) {
  const std::string state = Upper(args.Get("state").value_or(""));
  if (state == "ALL" || (state.empty() && !default_active)) return std::vector<std::string>{};
  if (state.empty()) return std::vector<std::string>(std::begin(kWaitingOrRunning), std::end(kWaitingOrRunning));
  static const std::set<std::string> kStates = {"PENDING",   "HELD",    "RUNNING", "COMPLETED",
                                                "CANCELLED", "TIMEOUT", "FAILED",  "NODE_FAIL"};
  if (!kStates.count(state)) {
    return UsageError("--state " + state +
                          " is not a state; use PENDING, HELD, RUNNING, COMPLETED, FAILED, "
                          "CANCELLED, TIMEOUT, NODE_FAIL or ALL",
                      "state");
  }
  return std::vector<std::string>{state};
}

// --me or --user U, as a filter (empty: every user the caller may see).
std::optional<std::string> UserFilter(Session& session, const ParsedArgs& args) {
  if (args.Has("me")) return Me(session);
  return args.Get("user").value_or("");
}

// "2026-12-01" or RFC 3339 -> a time.
Result<Timestamp> ParseWhen(const std::string& text, const char* flag) {
  const std::string full = text.size() == 10 ? text + "T00:00:00Z" : text;
  if (auto t = ParseRfc3339(full)) return *t;
  return UsageError(
      std::string("--") + flag + " '" + text + "' is not a time; write 2026-12-01 or 2026-12-01T08:00:00Z", flag);
}

}  // namespace

std::vector<FlagSpec> SqueueFlags() {
  return {{"me", false, false},   {"user", true, false},    {"state", true, false},
          {"queue", true, false}, {"project", true, false}, {"format", true, false, 'o'}};
}
std::vector<FlagSpec> SacctFlags() {
  return {{"me", false, false},          {"user", true, false},  {"starttime", true, false, 'S'},
          {"endtime", true, false, 'E'}, {"state", true, false}, {"format", true, false, 'o'}};
}
std::vector<FlagSpec> ScancelFlags() {
  return {{"me", false, false},
          {"user", true, false},
          {"name", true, false},
          {"state", true, false},
          {"queue", true, false}};
}
std::vector<FlagSpec> UpdateFlags() {
  return {{"time", true, false, 't'}, {"walltime", true, false}, {"priority", true, false}, {"queue", true, false}};
}

int RunSqueue(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure) {
  if (!args.positionals.empty()) return usage_failure("unexpected argument '" + args.positionals[0] + "'");
  auto states = StatesOf(args, /*default_active=*/true);
  if (!states.ok()) return usage_failure(states.error().message);
  const std::string format = args.Get("format").value_or(kSqueueDefaultFormat);
  auto check = FormatSqueue({}, format, Timestamp{});
  if (!check.ok()) return usage_failure(check.error().message);
  auto user = UserFilter(session, args);
  if (!user) return 1;
  auto jobs = JobsIn(
      session, *states,
      {{"user", *user}, {"queue", args.Get("queue").value_or("")}, {"project", args.Get("project").value_or("")}});
  if (!jobs) return 1;
  if (args.Has("json")) {
    std::cout << json{{"jobs", *jobs}}.dump() << "\n";
    return 0;
  }
  std::cout << FormatSqueue(*jobs, format,
                            std::chrono::time_point_cast<Timestamp::duration>(std::chrono::system_clock::now()))
                   .value();
  return 0;
}

int RunSacct(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure) {
  if (!args.positionals.empty()) return usage_failure("unexpected argument '" + args.positionals[0] + "'");
  const Timestamp now = std::chrono::time_point_cast<Timestamp::duration>(std::chrono::system_clock::now());
  Timestamp start = now - std::chrono::hours(24), end = now;
  if (auto s = args.Get("starttime")) {
    auto t = ParseWhen(*s, "starttime");
    if (!t.ok()) return usage_failure(t.error().message);
    start = *t;
  }
  if (auto e = args.Get("endtime")) {
    auto t = ParseWhen(*e, "endtime");
    if (!t.ok()) return usage_failure(t.error().message);
    end = *t;
  }
  if (end < start) return usage_failure("--endtime is before --starttime");
  auto states = StatesOf(args, /*default_active=*/false);
  if (!states.ok()) return usage_failure(states.error().message);
  const std::string format = args.Get("format").value_or(kSacctDefaultFormat);
  auto check = FormatSacct({}, json::object(), format, now);
  if (!check.ok()) return usage_failure(check.error().message);
  auto user = UserFilter(session, args);
  if (!user) return 1;
  auto listed = JobsIn(session, *states, {{"user", *user}});
  if (!listed) return 1;
  // Active in the window, as sacct selects: submitted before its end, and
  // not ended before its start.
  std::vector<json> jobs;
  for (auto& job : *listed) {
    auto submitted = ParseRfc3339(job.value("submitted_at", ""));
    auto ended = job.contains("ended_at") && job["ended_at"].is_string()
                     ? ParseRfc3339(job["ended_at"].get<std::string>())
                     : std::nullopt;
    if (submitted && *submitted > end) continue;
    if (ended && *ended < start) continue;
    jobs.push_back(std::move(job));
  }
  // Each job's ledger totals: charges of the window's jobs may end after
  // it (a job still running), so the usage is not cut to the window's end;
  // none is before the earliest of their submissions, where it starts.
  json usage_by_job = json::object();
  if (!jobs.empty()) {
    Timestamp earliest = end;
    for (const auto& job : jobs) {
      if (auto submitted = ParseRfc3339(job.value("submitted_at", ""))) earliest = std::min(earliest, *submitted);
    }
    auto usage = session.CallJson("GET", "/v1/usage?group_by=job&from=" + FormatRfc3339(earliest));
    if (!usage) return 1;
    for (const auto& row : (*usage)["rows"]) {
      if (row.contains("job") && row["job"].is_string()) usage_by_job[row["job"].get<std::string>()] = row;
    }
  }
  if (args.Has("json")) {
    json out = json::array();
    for (const auto& job : jobs) {
      const std::string id = job.value("id", "");
      out.push_back({{"job", job}, {"usage", usage_by_job.value(id, json::object())}});
    }
    std::cout << json{{"jobs", out}}.dump() << "\n";
    return 0;
  }
  std::cout << FormatSacct(jobs, usage_by_job, format, now).value();
  return 0;
}

int RunScancel(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure) {
  // Slurm's task ranges, 123_[1-5,9]: one id per task (docs/arrays.md).
  std::vector<std::string> ids;
  for (const std::string& id : args.positionals) {
    const size_t open = id.find("_[");
    if (open == std::string::npos || id.back() != ']') {
      ids.push_back(id);
      continue;
    }
    auto tasks = model::IndexSet::Parse(id.substr(open + 2, id.size() - open - 3), "job id");
    if (!tasks.ok()) return usage_failure(id + ": " + tasks.error().message);
    if (tasks->Count() > 10000) return usage_failure(id + ": at most 10000 tasks at once; cancel the array by its id");
    for (int64_t index : tasks->First(tasks->Count())) ids.push_back(id.substr(0, open) + "_" + std::to_string(index));
  }
  const bool filtered =
      args.Has("me") || args.Has("user") || args.Has("name") || args.Has("state") || args.Has("queue");
  if (ids.empty() && !filtered) {
    return usage_failure("scancel needs job IDs or a filter (--me, --user, --name, --state, --queue)");
  }
  if (filtered) {
    auto states = StatesOf(args, /*default_active=*/true);
    if (!states.ok()) return usage_failure(states.error().message);
    for (const auto& s : *states) {
      if (s != "PENDING" && s != "HELD" && s != "RUNNING") {
        return usage_failure("--state " + s + ": only PENDING, HELD or RUNNING jobs can be cancelled");
      }
    }
    auto user = UserFilter(session, args);
    if (!user) return 1;
    auto jobs = JobsIn(session, *states, {{"user", *user}, {"queue", args.Get("queue").value_or("")}});
    if (!jobs) return 1;
    const std::string name = args.Get("name").value_or("");
    std::set<std::string> chosen(ids.begin(), ids.end());
    ids.clear();
    for (const auto& job : *jobs) {
      if (!name.empty() && job.value("name", "") != name) continue;
      // IDs and filters together: the IDs that match the filters (Slurm's rule).
      if (!chosen.empty() && !chosen.count(job.value("id", ""))) continue;
      ids.push_back(job.value("id", ""));
    }
  }
  int status = 0;
  json results = json::array();
  for (const auto& id : ids) {
    auto job = session.CallJson("DELETE", "/v1/jobs/" + UrlEncode(id));
    if (!job) {
      status = 1;
      continue;
    }
    if (args.Has("json")) {
      results.push_back(*job);
    } else {
      std::cout << (job->value("state", "") == "CANCELLED" ? "Cancelled job " + id : "Cancel requested for job " + id)
                << "\n";
    }
  }
  if (args.Has("json")) std::cout << json{{"jobs", results}}.dump() << "\n";
  if (ids.empty() && !args.Has("json")) std::cout << "No job matched\n";
  return status;
}

int RunUpdate(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure) {
  if (args.positionals.size() != 1) return usage_failure("update needs exactly one job ID");
  json body = json::object();
  if (args.Has("time") && args.Has("walltime")) return usage_failure("give either --time or --walltime, not both");
  if (auto t = args.Get("time")) {
    auto seconds = ParseDuration(*t);
    if (!seconds.ok()) return usage_failure(seconds.error().message);
    body["resources"]["walltime_seconds"] = *seconds;
  }
  if (auto w = args.Get("walltime")) {
    auto seconds = ParseInteger(*w, "walltime");
    if (!seconds.ok()) return usage_failure(seconds.error().message);
    body["resources"]["walltime_seconds"] = *seconds;
  }
  if (auto p = args.Get("priority")) {
    auto n = ParseInteger(*p, "priority");
    if (!n.ok()) return usage_failure(n.error().message);
    body["priority"] = *n;
  }
  if (auto q = args.Get("queue")) body["queue"] = *q;
  if (body.empty()) return usage_failure("nothing to change: give --time, --priority or --queue");
  auto job = session.CallJson("PATCH", "/v1/jobs/" + UrlEncode(args.positionals[0]), body.dump(),
                              {{"Content-Type", "application/json"}});
  if (!job) return 1;
  if (args.Has("json")) {
    std::cout << job->dump() << "\n";
  } else {
    std::cout << "Updated job " << args.positionals[0] << " (queue " << job->value("queue", "") << ", time limit "
              << FormatDuration(job->value("resources", json::object()).value("walltime_seconds", int64_t{0}))
              << ", priority " << job->value("priority", 0) << ")\n";
  }
  return 0;
}

}  // namespace unisched::cli
