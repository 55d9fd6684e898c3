// squeue, sacct, scancel, scontrol update over the API (cli/slurm_commands.h).

#include "cli/slurm_commands.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "cli/job_wait.h"
#include "cli/slurm_views.h"
#include "unisched/model/batch_script.h"
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

// The jobs of `states` (all states when empty) matching the filters, in id order.
std::optional<std::vector<json>> JobsIn(Session& session, const std::vector<std::string>& states,
                                        const std::vector<std::pair<std::string, std::string>>& filters) {
  std::vector<json> all;
  for (const std::string& state : states.empty() ? std::vector<std::string>{""} : states) {
    auto q = filters;
    q.emplace_back("state", state);
    auto jobs = ListAllJobs(session, q);
    if (!jobs) return std::nullopt;
    for (auto& j : *jobs) all.push_back(std::move(j));
  }
  auto id = [](const json& j) { return std::atoll(j.value("id", "0").c_str()); };
  std::sort(all.begin(), all.end(), [&](const json& a, const json& b) { return id(a) < id(b); });
  return all;
}

// Slurm's comma lists (-u a,b; -t PD,R): the words, empties dropped.
std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> words;
  size_t from = 0;
  while (from <= text.size()) {
    const size_t comma = text.find(',', from);
    std::string word = text.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    if (!word.empty()) words.push_back(std::move(word));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return words;
}

// Every value a list flag was given (-u a,b -u c: a, b, c).
std::vector<std::string> ListOf(const ParsedArgs& args, const std::string& flag) {
  std::vector<std::string> all;
  for (const auto& value : args.All(flag)) {
    for (auto& word : SplitList(value)) all.push_back(std::move(word));
  }
  return all;
}

// --state (-t, -s): states or Slurm's compact codes, in a comma list, or
// ALL; default the waiting and running ones (squeue, scancel) or all (sacct).
Result<std::vector<std::string>> StatesOf(const ParsedArgs& args, bool default_active) {
  static const std::map<std::string, std::string> kCodes = {{"PD", "PENDING"},   {"R", "RUNNING"}, {"CD", "COMPLETED"},
                                                            {"CA", "CANCELLED"}, {"F", "FAILED"},  {"TO", "TIMEOUT"},
                                                            {"NF", "NODE_FAIL"}, {"H", "HELD"}};
  static const std::set<std::string> kStates = {"PENDING",   "HELD",    "RUNNING", "COMPLETED",
                                                "CANCELLED", "TIMEOUT", "FAILED",  "NODE_FAIL"};
  const std::vector<std::string> words = ListOf(args, "state");
  if (words.empty()) {
    if (!default_active) return std::vector<std::string>{};
    return std::vector<std::string>(std::begin(kWaitingOrRunning), std::end(kWaitingOrRunning));
  }
  std::set<std::string> states;
  for (const auto& word : words) {
    std::string state = Upper(word);
    if (state == "ALL") return std::vector<std::string>{};
    if (auto code = kCodes.find(state); code != kCodes.end()) state = code->second;
    if (state == "CANCELED") state = "CANCELLED";
    if (!kStates.count(state)) {
      return UsageError("--state " + word +
                            " is not a state; use PENDING (PD), HELD, RUNNING (R), COMPLETED (CD), FAILED (F), "
                            "CANCELLED (CA), TIMEOUT (TO), NODE_FAIL (NF) or ALL, or a comma list of them",
                        "state");
    }
    states.insert(state);
    // Slurm's PENDING covers a held job (PD, reason JobHeldUser).
    if (state == "PENDING") states.insert("HELD");
  }
  return std::vector<std::string>(states.begin(), states.end());
}

// The users to list: --me, --user U[,U...] (-u); empty: every user the
// caller may see (or, where `own_by_default`, the caller alone unless
// -a/--allusers, as sacct).
std::optional<std::vector<std::string>> UsersOf(Session& session, const ParsedArgs& args, bool own_by_default) {
  std::vector<std::string> users = ListOf(args, "user");
  if (args.Has("me") || (own_by_default && users.empty() && !args.Has("allusers"))) {
    auto me = Me(session);
    if (!me) return std::nullopt;
    users.push_back(*me);
  }
  return users;
}

// Slurm's task ranges, 123_[1-5,9]: one id per task (docs/arrays.md);
// other ids as they are.
Result<std::vector<std::string>> ExpandTaskRanges(const std::vector<std::string>& given) {
  std::vector<std::string> ids;
  for (const std::string& id : given) {
    const size_t open = id.find("_[");
    if (open == std::string::npos || id.back() != ']') {
      ids.push_back(id);
      continue;
    }
    auto tasks = model::IndexSet::Parse(id.substr(open + 2, id.size() - open - 3), "job id");
    if (!tasks.ok()) return UsageError(id + ": " + tasks.error().message);
    if (tasks->Count() > 10000) return UsageError(id + ": at most 10000 tasks at once; name the array by its id");
    for (int64_t index : tasks->First(tasks->Count())) ids.push_back(id.substr(0, open) + "_" + std::to_string(index));
  }
  return ids;
}

// Job ids as Slurm lists them: an array's tasks by (array, index), right
// after the array's own row.
std::pair<int64_t, int64_t> ListingKey(const json& job) {
  if (job.contains("array_job_id") && job["array_job_id"].is_string()) {
    return {std::atoll(job["array_job_id"].get<std::string>().c_str()), job.value("array_task_id", int64_t{0})};
  }
  return {std::atoll(job.value("id", "0").c_str()), -1};
}

// The jobs the filters select: by id (-j) or listed; states, users,
// queues (-p), projects (-A) and names (-n) each a list. A list of one is
// the server's filter; longer lists are applied here.
struct Selection {
  std::vector<std::string> ids, states, users, queues, projects, names;
};
std::optional<std::vector<json>> Select(Session& session, const Selection& s) {
  auto one = [](const std::vector<std::string>& v) { return v.size() == 1 ? v.front() : std::string(); };
  std::vector<json> jobs;
  if (!s.ids.empty()) {
    bool all_found = true;
    for (const auto& id : s.ids) {
      auto job = session.CallJson("GET", "/v1/jobs/" + UrlEncode(id));
      if (!job) {
        all_found = false;
        continue;
      }
      // An array named by its id: its tasks that started too (those
      // waiting are its own row, collapsed or expanded).
      if (job->contains("array") && (*job)["array"].is_object()) {
        // Past the started tasks (newest first) come the waiting ones: a
        // page that reaches them is the last needed.
        auto tasks = ListAllJobs(session, {{"array", id}}, [](const json& page) {
          return !page["jobs"].empty() && !page["jobs"].back().value("started_at", json()).is_string();
        });
        if (!tasks) return std::nullopt;
        for (auto& task : *tasks) {
          if (task.value("started_at", json()).is_string()) jobs.push_back(std::move(task));
        }
      }
      jobs.push_back(std::move(*job));
    }
    if (!all_found && jobs.empty()) return std::nullopt;
  } else {
    auto listed =
        JobsIn(session, s.states, {{"user", one(s.users)}, {"queue", one(s.queues)}, {"project", one(s.projects)}});
    if (!listed) return std::nullopt;
    jobs = std::move(*listed);
  }
  auto in = [](const std::vector<std::string>& list, const std::string& value) {
    return list.empty() || std::find(list.begin(), list.end(), value) != list.end();
  };
  std::vector<json> out;
  for (auto& job : jobs) {
    if (!s.states.empty() && !in(s.states, job.value("state", ""))) continue;
    if (!in(s.users, job.value("user", "")) || !in(s.queues, job.value("queue", "")) ||
        !in(s.projects, job.value("project", "")) || !in(s.names, job.value("name", ""))) {
      continue;
    }
    out.push_back(std::move(job));
  }
  std::stable_sort(out.begin(), out.end(), [](const json& a, const json& b) { return ListingKey(a) < ListingKey(b); });
  return out;
}

// "1-3,7,9-10": indices in increasing order, runs of consecutive ones joined.
std::string CompressIndices(const std::vector<int64_t>& indices) {
  std::string text;
  for (size_t i = 0; i < indices.size();) {
    size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    text += (text.empty() ? "" : ",") + std::to_string(indices[i]) +
            (j > i ? "-" + std::to_string(indices[j]) : std::string());
    i = j + 1;
  }
  return text;
}

// The row of an array's tasks that were cancelled before they started
// (GET /v1/jobs?array=ID&state=CANCELLED, those never started), as the
// array's id with their indices; null when there are none; nullopt when
// the daemon did not answer (reported).
std::optional<json> NeverStartedRow(Session& session, const json& parent) {
  const std::string id = parent.value("id", "");
  auto cancelled = ListAllJobs(session, {{"state", "CANCELLED"}, {"array", id}});
  if (!cancelled) return std::nullopt;
  std::vector<int64_t> indices;
  for (const auto& task : *cancelled) {
    if (!task.value("started_at", json()).is_string() && task.value("array_task_id", json()).is_number()) {
      indices.push_back(task["array_task_id"].get<int64_t>());
    }
  }
  if (indices.empty()) return json(nullptr);
  std::sort(indices.begin(), indices.end());
  json row = parent;
  row["state"] = "CANCELLED";
  row["state_reason"] = "cancelled before it started";
  row["array"]["waiting"] = CompressIndices(indices);
  row["array"]["max_running"] = 0;
  row["started_at"] = nullptr;
  row["exit_code"] = nullptr;
  row["nodes"] = json::array();
  row["attempts"] = json::array();
  return row;
}

// sacct's -S/-E (model::ParseSlurmWhen), a usage error naming the flag.
Result<Timestamp> ParseWhen(const std::string& text, const char* flag, Timestamp now) {
  if (auto t = model::ParseSlurmWhen(text, now)) return *t;
  return UsageError(std::string("--") + flag + " '" + text +
                        "' is not a time; write 2026-12-01, 2026-12-01T08:00[:00], 08:00, now-2hours, today "
                        "or an RFC 3339 time",
                    flag);
}

}  // namespace

std::vector<FlagSpec> SqueueFlags() {
  return {{"me", false, false},
          {"user", true, true, 'u'},
          {"state", true, true, 't', {"states"}},
          {"queue", true, true, 'p', {"partition"}},
          {"project", true, true, 'A', {"account"}},
          {"jobs", true, true, 'j', {"job"}},
          {"name", true, true, 'n'},
          {"array", false, false, 'r'},
          {"noheader", false, false, 'h'},
          {"long", false, false, 'l'},
          {"start", false, false},
          {"format", true, false, 'o'}};
}
std::vector<FlagSpec> SacctFlags() {
  return {{"me", false, false},
          {"user", true, true, 'u'},
          {"allusers", false, false, 'a'},
          {"jobs", true, true, 'j'},
          {"name", true, true, 0, {"jobname"}},
          {"queue", true, true, 'r', {"partition"}},
          {"project", true, true, 'A', {"account", "accounts"}},
          {"starttime", true, false, 'S'},
          {"endtime", true, false, 'E'},
          {"state", true, true, 's', {"states"}},
          {"allocations", false, false, 'X'},
          {"noheader", false, false, 'n'},
          {"parsable", false, false, 'p'},
          {"parsable2", false, false, 'P'},
          {"format", true, false, 'o'}};
}
std::vector<FlagSpec> ScancelFlags() {
  return {{"me", false, false},
          {"user", true, true, 'u'},
          {"name", true, true, 'n', {"jobname"}},
          {"state", true, true, 't', {"states"}},
          {"queue", true, true, 'p', {"partition"}},
          {"project", true, true, 'A', {"account"}}};
}
std::vector<FlagSpec> UpdateFlags() {
  return {{"time", true, false, 't'}, {"walltime", true, false}, {"priority", true, false}, {"queue", true, false}};
}

int RunSqueue(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure) {
  if (!args.positionals.empty()) return usage_failure("unexpected argument '" + args.positionals[0] + "'");
  auto states = StatesOf(args, /*default_active=*/!args.Has("jobs"));
  if (!states.ok()) return usage_failure(states.error().message);
  // --start: the waiting jobs and when they are expected to start.
  if (args.Has("start") && !args.Has("state")) *states = {"HELD", "PENDING"};
  const std::string format = args.Get("format").value_or(args.Has("start")  ? kSqueueStartFormat
                                                         : args.Has("long") ? kSqueueLongFormat
                                                                            : kSqueueDefaultFormat);
  auto check = FormatSqueue({}, format, Timestamp{});
  if (!check.ok()) return usage_failure(check.error().message);
  auto users = UsersOf(session, args, /*own_by_default=*/false);
  if (!users) return 1;
  auto ids = ExpandTaskRanges(ListOf(args, "jobs"));
  if (!ids.ok()) return usage_failure(ids.error().message);
  auto jobs =
      Select(session, {*ids, *states, *users, ListOf(args, "queue"), ListOf(args, "project"), ListOf(args, "name")});
  if (!jobs) return 1;
  if (args.Has("json")) {
    std::cout << json{{"jobs", *jobs}}.dump() << "\n";
    return 0;
  }
  std::cout << FormatSqueue(ExpandArrays(*jobs, args.Has("array")), format,
                            std::chrono::time_point_cast<Timestamp::duration>(std::chrono::system_clock::now()),
                            !args.Has("noheader"))
                   .value();
  return 0;
}

int RunSacct(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure) {
  if (!args.positionals.empty()) return usage_failure("unexpected argument '" + args.positionals[0] + "'");
  const Timestamp now = std::chrono::time_point_cast<Timestamp::duration>(std::chrono::system_clock::now());
  // As sacct: the last day by default, from any time when jobs are named (-j).
  Timestamp start = args.Has("jobs") ? Timestamp{} : now - std::chrono::hours(24), end = now;
  if (auto s = args.Get("starttime")) {
    auto t = ParseWhen(*s, "starttime", now);
    if (!t.ok()) return usage_failure(t.error().message);
    start = *t;
  }
  if (auto e = args.Get("endtime")) {
    auto t = ParseWhen(*e, "endtime", now);
    if (!t.ok()) return usage_failure(t.error().message);
    end = *t;
  }
  if (end < start) return usage_failure("--endtime is before --starttime");
  auto states = StatesOf(args, /*default_active=*/false);
  if (!states.ok()) return usage_failure(states.error().message);
  const std::string format = args.Get("format").value_or(kSacctDefaultFormat);
  auto check = FormatSacct({}, json::object(), format, now);
  if (!check.ok()) return usage_failure(check.error().message);
  // The caller's own jobs unless -a, -u or -j say otherwise (sacct's rule).
  auto users = UsersOf(session, args, /*own_by_default=*/!args.Has("jobs"));
  if (!users) return 1;
  auto ids = ExpandTaskRanges(ListOf(args, "jobs"));
  if (!ids.ok()) return usage_failure(ids.error().message);
  auto listed =
      Select(session, {*ids, *states, *users, ListOf(args, "queue"), ListOf(args, "project"), ListOf(args, "name")});
  if (!listed) return 1;
  // Active in the window, as sacct selects: submitted before its end, and
  // not ended before its start.
  std::vector<json> candidates = ExpandArrays(*listed, /*expand=*/false);
  // An array's tasks cancelled before they started, one row as Slurm's
  // sacct collapses them (123_[7-99]).
  if (states->empty() || std::find(states->begin(), states->end(), "CANCELLED") != states->end()) {
    for (const auto& job : *listed) {
      const json array = job.value("array", json());
      if (!array.is_object() || array.value("tasks", json::object()).value("failed", 0) == 0) continue;
      auto row = NeverStartedRow(session, job);
      if (!row) return 1;
      if (!row->is_null()) candidates.push_back(std::move(*row));
    }
  }
  std::vector<json> jobs;
  for (auto& job : candidates) {
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
  SacctLayout layout;
  layout.header = !args.Has("noheader");
  layout.parsable = args.Has("parsable") || args.Has("parsable2");
  layout.trailing_bar = args.Has("parsable") && !args.Has("parsable2");
  std::cout << FormatSacct(jobs, usage_by_job, format, now, layout).value();
  return 0;
}

int RunScancel(Session& session, const ParsedArgs& args, const UsageFailureFn& usage_failure) {
  auto expanded = ExpandTaskRanges(args.positionals);
  if (!expanded.ok()) return usage_failure(expanded.error().message);
  const std::vector<std::string> ids = std::move(expanded).value();
  const bool filtered = args.Has("me") || args.Has("user") || args.Has("name") || args.Has("state") ||
                        args.Has("queue") || args.Has("project");
  if (ids.empty() && !filtered) {
    return usage_failure("scancel needs job IDs or a filter (--me, -u USER, -n NAME, -t STATE, -p QUEUE, -A PROJECT)");
  }
  // What each DELETE names and how the answer names it (ID_INDEX for a task).
  std::vector<std::pair<std::string, std::string>> targets;
  for (const auto& id : ids) targets.emplace_back(id, id);
  if (filtered) {
    auto states = StatesOf(args, /*default_active=*/true);
    if (!states.ok()) return usage_failure(states.error().message);
    if (states->empty()) states = std::vector<std::string>(std::begin(kWaitingOrRunning), std::end(kWaitingOrRunning));
    for (const auto& s : *states) {
      if (s != "PENDING" && s != "HELD" && s != "RUNNING") {
        return usage_failure("--state " + s + ": only PENDING, HELD or RUNNING jobs can be cancelled");
      }
    }
    const bool running_too = std::find(states->begin(), states->end(), "RUNNING") != states->end();
    auto users = UsersOf(session, args, /*own_by_default=*/false);
    if (!users) return 1;
    auto jobs =
        Select(session, {{}, *states, *users, ListOf(args, "queue"), ListOf(args, "project"), ListOf(args, "name")});
    if (!jobs) return 1;
    std::set<std::string> chosen(ids.begin(), ids.end());
    targets.clear();
    for (const auto& job : *jobs) {
      const std::string id = job.value("id", "");
      const std::string shown =
          job.contains("array_job_id") && job["array_job_id"].is_string()
              ? job["array_job_id"].get<std::string>() + "_" + std::to_string(job.value("array_task_id", int64_t{0}))
              : id;
      // IDs and filters together: the IDs that match the filters (Slurm's rule).
      if (!chosen.empty() && !chosen.count(id) && !chosen.count(shown)) continue;
      // An array whose tasks partly run, when only waiting jobs are to go:
      // its waiting tasks, one by one, as Slurm's scancel -t PENDING.
      const json array = job.value("array", json());
      const bool some_started = array.is_object() && array.value("tasks", json::object()).value("active", 0) > 0;
      if (!running_too && some_started) {
        auto waiting = model::IndexSet::Parse(array.value("waiting", ""), "waiting");
        if (!waiting.ok()) continue;
        if (waiting->Count() > 10000) {
          return usage_failure("array " + id + " has " + std::to_string(waiting->Count()) +
                               " waiting tasks beside running ones; cancel them as " + id +
                               "_[RANGE] (at most 10000 "
                               "at once) or the whole array as " +
                               id);
        }
        for (int64_t index : waiting->First(waiting->Count())) {
          const std::string task = id + "_" + std::to_string(index);
          targets.emplace_back(task, task);
        }
        continue;
      }
      targets.emplace_back(id, shown);
    }
  }
  int status = 0;
  json results = json::array();
  for (const auto& [id, shown] : targets) {
    auto response = session.Exchange("DELETE", "/v1/jobs/" + UrlEncode(id));
    if (!response) {
      status = 1;
      continue;
    }
    // A job the filters chose that ended since it was listed (a dependant
    // cancelled with what it waited for) is not an error: it is gone.
    if (filtered && response->status == 409 && response->body.find("job_finished") != std::string::npos) {
      if (!args.Has("json")) std::cout << "Job " << shown << " had already ended\n";
      continue;
    }
    if (response->status < 200 || response->status >= 300) {
      Session::PrintRefusal(*response);
      status = 1;
      continue;
    }
    auto job = std::optional<json>(json::parse(response->body, nullptr, false));
    if (job->is_discarded()) {
      std::cerr << "error: DELETE /v1/jobs/" << id << " answered with a body that is not JSON\n";
      status = 1;
      continue;
    }
    if (args.Has("json")) {
      results.push_back(*job);
    } else {
      std::cout << (job->value("state", "") == "CANCELLED" ? "Cancelled job " + shown
                                                           : "Cancel requested for job " + shown)
                << "\n";
    }
  }
  if (args.Has("json")) std::cout << json{{"jobs", results}}.dump() << "\n";
  if (targets.empty() && !args.Has("json")) std::cout << "No job matched\n";
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
