// RunCli: the client commands. Parsing and formatting live in args.cc,
// submit_args.cc and format.cc; this file only talks HTTP and prints.

#include "unisched/cli/cli.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/args.h"
#include "cli/baseline_command.h"
#include "cli/config_command.h"
#include "cli/format.h"
#include "cli/job_wait.h"
#include "cli/sandbox_command.h"
#include "cli/sbatch_args.h"
#include "cli/secret_command.h"
#include "cli/session.h"
#include "cli/simulate.h"
#include "cli/slurm_commands.h"
#include "cli/step_command.h"
#include "cli/submit_args.h"
#include "cli/workflow_command.h"
#include "unisched/client/http_client.h"

namespace unisched::cli {
namespace {

using client::ClientResponse;
using client::HttpClient;
using nlohmann::json;

struct CommandInfo {
  const char* name;
  const char* usage;    // the arguments after the command name
  const char* summary;  // one line for `unisched help`
};

constexpr CommandInfo kCommands[] = {
    {"submit",
     "[--name N] [--project P] [--queue Q] [--kind hpc|ai-training|ai-inference|agent] [--feature K=V]... "
     "[--nodes N] [--cpus N] [--memory-mb N] [--gpus N] [--gpu-model M] [--walltime SECONDS|--time TIME] "
     "[--constraint K=V]... [--env K=V]... [--secret NAME[=ENV]]... [--priority N] [--idempotency-key K] [--wait] "
     "[--json] "
     "[--launch batch|per_node] [--tasks-per-node K] [-o|--output PATTERN] [-e|--error PATTERN] "
     "[-d|--dependency afterok:ID[:ID...],...] [-a|--array 1-100:2%10] [-H|--hold] [-b|--begin TIME] -- COMMAND "
     "[ARGS...]\n"
     "  -o/-e copy each task's stdout/stderr to files named by Slurm's patterns: %j job id, %t rank, %N node,\n"
     "  %u user, %x job name, %A/%a array id/index, %% a '%' (e.g. -o slurm-%j.out; relative under\n"
     "  executor.output_dir, else this directory). Without -e, stderr goes to the -o file. TIME in Slurm's formats: "
     "minutes,\n"
     "  m:s, h:m:s, d-h, d-h:m, d-h:m:s (90 is 90 minutes). A Slurm batch script: `unisched sbatch`.\n"
     "  -d waits for other jobs as Slurm's --dependency: after, afterany, afterok, afternotok, singleton;\n"
     "  terms joined by ',' all hold, by '?' one holds (docs/dependencies.md).",
     "submit a job"},
    {"sbatch",
     "[OPTIONS] [SCRIPT [ARGS...]]\n"
     "  Submits a Slurm batch script: its #SBATCH directives, then these options (the same; they win):\n"
     "  -J NAME, -p QUEUE, -A PROJECT, -N NODES, -n TASKS, --ntasks-per-node N, -c CPUS_PER_TASK,\n"
     "  --mem SIZE|--mem-per-cpu SIZE (K, M, G, T; M by default), --gres gpu[:MODEL]:N|--gpus [MODEL:]N|\n"
     "  --gpus-per-node [MODEL:]N|--gpus-per-task [MODEL:]N, -t TIME (minutes, m:s, h:m:s, d-h, d-h:m, d-h:m:s),\n"
     "  -o/-e PATTERN (%j %x %u %N %t %A %a), -D DIR, --export ALL|NONE|NAME[=VALUE],..., -C LABEL[=VALUE]&...,\n"
     "  --array INDICES[%MAX], -d DEPENDENCY, --requeue|--no-requeue, --parsable, -W|--wait, --wrap COMMAND;\n"
     "  and unisched's --kind hpc|ai-training|ai-inference|agent (default: what the queue serves),\n"
     "  --feature K=V, --idempotency-key K, --json. Without SCRIPT or --wrap the script is read from standard\n"
     "  input. Unsupported directives are warnings; docs/slurm-users.md maps every Slurm option.",
     "submit a Slurm batch script (#SBATCH directives)"},
    {"jobs", "[--state S] [--queue Q] [--pool P] [--project P] [--user U] [--limit N] [--cursor C] [--json]",
     "list jobs"},
    {"job", "ID [--json]", "show one job, with its routing and pending reasons"},
    {"cancel", "ID [ID...] [--json]", "cancel jobs"},
    {"requeue", "ID [ID...] [--json]", "stop running jobs and queue them again (scontrol requeue)"},
    {"update", kUpdateUsage, "change a waiting job's time limit, priority or queue (scontrol update)"},
    {"squeue", kSqueueUsage, "list waiting and running jobs as squeue does"},
    {"sacct", kSacctUsage, "per-job accounting rows as sacct prints them"},
    {"scancel", kScancelUsage, "cancel jobs by ID or by user, name, state or queue"},
    {"hold", "ID [ID...] [--json]", "hold pending jobs"},
    {"release", "ID [ID...] [--json]", "release held jobs"},
    {"log",
     "ID [--stderr] [-f|--follow] [--attempt N] [--rank R | --node NAME] [--step S]\n"
     "  -f follows the output while the job runs (a requeued job into its next attempt) and ends with it.",
     "print a job's output"},
    {"logs", "ID [--stderr] [-f|--follow] [--attempt N] [--rank R | --node NAME] [--step S]", "the same as log"},
    {"events", "ID [--json]", "show a job's events"},
    {"nodes", "[--json]", "list nodes"},
    {"drain", "NODE [NODE...] [--reason TEXT] [--json]",
     "stop starting jobs on nodes; running ones finish (scontrol update State=DRAIN, platform-admin)"},
    {"resume", "NODE [NODE...] [--json]", "let drained nodes take jobs again (State=RESUME, platform-admin)"},
    {"queues", "[--json]", "list queues"},
    {"pools", "[--json]", "list pools"},
    {"whoami", "[--json]", "show the token's user, role and projects"},
    {"usage",
     "[--from RFC3339] [--to RFC3339] [--group-by KEY[,KEY...]] [--csv|--json]\n"
     "  KEY: user, project, queue, pool, workload_kind, tier, job, hour. Times like 2026-01-01T00:00:00Z; no "
     "--from/--to: all "
     "time.\n"
     "  Metrics are resource-seconds (3600 = 1 hour); a metric not measured is shown as \"-\", never 0.",
     "show ledger usage totals (CPU, memory, GPU, instance seconds)"},
    {"reconcile",
     "[--json]\n"
     "  Recomputes every finished attempt's usage and compares it with the ledger (platform-admin).\n"
     "  Exit status: 0 the ledger reconciles, 1 discrepancies found (or the request failed), 2 usage error.",
     "check the accounting ledger for missing, duplicated or mismatched entries"},
    {"sandbox",
     "create [--image I] [--project P] [--queue Q] [--cpus N] [--memory-mb N] [--timeout SECONDS] "
     "[--idle-timeout SECONDS] [--json]\n"
     "       unisched sandbox exec ID [--timeout SECONDS] [--env K=V]... [--stdin-file FILE] [--json] -- COMMAND "
     "[ARGS...]\n"
     "       unisched sandbox rm ID [ID...]\n"
     "       unisched sandbox ls [--all] [--json]\n"
     "  create prints the new sandbox's ID; exec prints the command's output and exits with its exit code\n"
     "  (docs/sandboxes.md).",
     "create, use and remove agent sandboxes"},
    {"workflow",
     "submit FILE [--project P] [--json]   (FILE: a POST /v1/workflows body; - for standard input)\n"
     "       unisched workflow ls [--state S] [--project P] [--limit N] [--json]\n"
     "       unisched workflow show ID [--json]\n"
     "       unisched workflow graph ID [--format mermaid|dot]\n"
     "       unisched workflow cancel ID [--json]\n"
     "       unisched workflow resume ID [--json]\n"
     "  Workflows of tasks with edges, retries, alternative tools and scatter (docs/workflows.md); submit prints\n"
     "  the new workflow's ID.",
     "submit, follow, cancel and resume workflows"},
    {"secret",
     "create NAME [--project P] [--description TEXT] [--json]   (the value from standard input)\n"
     "       unisched secret rotate NAME [--project P] [--description TEXT] [--json]   (the new value from standard "
     "input)\n"
     "       unisched secret ls [--project P] [--json]\n"
     "       unisched secret rm NAME [--project P] [--json]\n"
     "  A project's secrets (docs/secrets.md): jobs name them with `submit --secret NAME[=ENV]`. A value is never\n"
     "  taken from the command line (ps would show it) and never shown again.",
     "make, rotate, list and delete a project's secrets"},
    {"config", kConfigUsage, "show, apply, canary and roll back config versions (platform-admin)"},
    {"baseline", kBaselineUsage, "measure and record the performance baseline, compare with the last (launch check 6)"},
    {"help", "[COMMAND]", "show this help, or one command's usage"},
};

const CommandInfo* FindCommand(const std::string& name) {
  for (const auto& c : kCommands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

std::string UsageLine(const CommandInfo& c) {
  return std::string("usage: unisched ") + c.name + " " + c.usage;
}

void PrintHelp(std::ostream& out) {
  out << "usage: unisched COMMAND [ARGS...]\n\n"
         "Daemon:\n"
         "  server --config FILE [--listen HOST:PORT] [--state-dir DIR]   run the daemon (--apply-config: make\n"
         "                                                                FILE the cluster's config version)\n"
         "  validate-config FILE                                          check a config file\n"
         "  agent --server URL --token-file FILE --node NAME --pool POOL  run a node agent (docs/agents.md)\n"
         "  store restore [--state-dir DIR] [--from BACKUP]               put back the database of before the\n"
         "                                                                last schema migration (docs/store.md)\n\n"
         "Offline (no daemon):\n"
         "  simulate --trace FILE [OPTIONS]                               replay a trace on a virtual clock\n"
         "                                                                (`unisched help simulate`)\n\n"
         "Inside a job:\n"
         "  step [--nodes N] [--tasks-per-node K] -- COMMAND             run COMMAND on the job's nodes, like srun\n"
         "                                                                (`unisched help step`)\n\n"
         "Client commands:\n";
  size_t width = 0;
  for (const auto& c : kCommands) width = std::max(width, std::string(c.name).size());
  for (const auto& c : kCommands) {
    out << "  " << c.name << std::string(width - std::string(c.name).size() + 3, ' ') << c.summary << "\n";
  }
  out << "\nEvery client command takes --url URL (default $UNISCHED_URL, else " << kDefaultUrl
      << "),\n--token-file FILE (default $UNISCHED_TOKEN) and --json (the API's JSON, for scripts).\n"
         "`unisched help COMMAND` shows a command's options.\n";
}

int UsageFailure(const CommandInfo& c, const std::string& message) {
  std::cerr << "error: " << message << "\n" << UsageLine(c) << "\n";
  return 2;
}

int RunSubmit(Session& session, const ParsedArgs& args, const CommandInfo& info) {
  auto request = BuildSubmitRequest(args, CurrentDirectory());
  if (!request.ok()) return UsageFailure(info, request.error().message);
  std::map<std::string, std::string> headers;
  if (!request->idempotency_key.empty()) headers["Idempotency-Key"] = request->idempotency_key;
  auto response = session.Call("POST", "/v1/jobs", request->body.dump(), headers);
  if (!response) return 1;
  std::string raw = response->body;
  json job = json::parse(raw, nullptr, false);
  const std::string id = StringField(job, "id");
  if (id.empty()) {
    std::cerr << "error: the daemon's answer to the submission has no job id\n";
    return 1;
  }
  const bool as_json = args.Has("json");
  if (!as_json) {
    // A replayed Idempotency-Key returns the first job instead of a new one.
    const bool replayed = response->Header("idempotent-replayed") == "true";
    std::cout << (replayed ? "Job " + id + " was already submitted with this Idempotency-Key" : "Submitted job " + id)
              << " (queue " << StringField(job, "queue") << ", pool " << StringField(job, "pool") << ")\n";
    if (std::string reason = StringField(job.value("routing", json::object()), "reason"); !reason.empty()) {
      std::cout << "  routing: " << reason << "\n";
    }
  }
  if (!request->wait) {
    if (as_json) PrintBody(raw);
    return 0;
  }
  return WaitAndReport(session, id, as_json, /*quiet=*/false);
}

// sbatch's exit status is the job's with --wait, as Slurm's.
int RunSbatch(Session& session, const SbatchRequest& req) {
  std::set<std::string> printed;
  for (const std::string& line : SbatchWarningLines(req.script_name, req.warnings)) {
    std::cerr << line << "\n";
    printed.insert(line);
  }
  std::map<std::string, std::string> headers;
  if (!req.idempotency_key.empty()) headers["Idempotency-Key"] = req.idempotency_key;
  // The body is UTF-8 (the parser checked the script; --export=ALL skips
  // values that are not text): the replacement never changes a byte.
  auto response =
      session.Exchange("POST", "/v1/jobs", req.body.dump(-1, ' ', false, json::error_handler_t::replace), headers);
  if (!response) return 1;
  if (response->status < 200 || response->status >= 300) {
    // A server without arrays or dependencies yet refuses the field: say
    // which option that is.
    const json refusal = json::parse(response->body, nullptr, false);
    const json error = refusal.is_object() ? refusal.value("error", json::object()) : json::object();
    const std::string field = StringField(error, "field");
    if (StringField(error, "code") == "unknown_field" && (field == "array" || field == "dependency")) {
      std::cerr << "unisched sbatch: error: this unisched server does not support "
                << (field == "array" ? "job arrays (--array)" : "job dependencies (--dependency)")
                << " yet; submit without it\n";
      return 1;
    }
    Session::PrintRefusal(*response);
    return 1;
  }
  std::string raw = response->body;
  const json job = json::parse(raw, nullptr, false);
  const std::string id = StringField(job, "id");
  if (id.empty()) {
    std::cerr << "error: the daemon's answer to the submission has no job id\n";
    return 1;
  }
  // The server's warnings repeat the directives' we printed; the rest are new.
  if (job.contains("warnings") && job["warnings"].is_array()) {
    for (const json& w : job["warnings"]) {
      if (!w.is_object()) continue;
      const model::BatchWarning warning{{w.value("line", 0), w.value("option", "")}, w.value("message", "")};
      for (const std::string& line : SbatchWarningLines(req.script_name, {warning})) {
        if (printed.insert(line).second) std::cerr << line << "\n";
      }
    }
  }
  const bool as_json = req.args.Has("json");
  if (req.parsable) {
    std::cout << id << "\n";
  } else if (!as_json) {
    std::cout << "Submitted batch job " << id << "\n";  // Slurm's words: scripts read the id from them
  }
  if (!req.wait) {
    if (as_json && !req.parsable) PrintBody(raw);
    return 0;
  }
  return WaitAndReport(session, id, as_json, /*quiet=*/req.parsable);
}

int RunJobs(Session& session, const ParsedArgs& args, const CommandInfo& info) {
  if (!args.positionals.empty()) return UsageFailure(info, "unexpected argument '" + args.positionals[0] + "'");
  std::string state = args.Get("state").value_or("");
  state = Upper(state);
  if (auto limit = args.Get("limit")) {
    if (auto n = ParseInteger(*limit, "limit"); !n.ok()) return UsageFailure(info, n.error().message);
  }
  const std::string target = "/v1/jobs" + BuildQuery({{"state", state},
                                                      {"queue", args.Get("queue").value_or("")},
                                                      {"pool", args.Get("pool").value_or("")},
                                                      {"project", args.Get("project").value_or("")},
                                                      {"user", args.Get("user").value_or("")},
                                                      {"limit", args.Get("limit").value_or("")},
                                                      {"cursor", args.Get("cursor").value_or("")}});
  std::string raw;
  auto list = session.CallJson("GET", target, {}, {}, &raw);
  if (!list) return 1;
  if (args.Has("json")) {
    PrintBody(raw);
    return 0;
  }
  std::cout << FormatJobsTable(*list);
  const size_t shown = list->contains("jobs") && (*list)["jobs"].is_array() ? (*list)["jobs"].size() : 0;
  if (auto total = list->find("total");
      total != list->end() && total->is_number_integer() && total->get<int64_t>() > static_cast<int64_t>(shown)) {
    std::cout << "(" << shown << " of " << total->get<int64_t>() << " jobs shown";
    if (std::string next = StringField(*list, "next_cursor"); !next.empty()) {
      std::cout << "; next page: --cursor " << next;
    }
    std::cout << ")\n";
  }
  return 0;
}

int RunJob(Session& session, const ParsedArgs& args, const CommandInfo& info) {
  if (args.positionals.size() != 1) return UsageFailure(info, "job needs exactly one job ID");
  std::string raw;
  auto job = session.CallJson("GET", JobPath(args.positionals[0]), {}, {}, &raw);
  if (!job) return 1;
  if (args.Has("json")) {
    PrintBody(raw);
  } else {
    std::cout << FormatJobDetail(*job);
  }
  return 0;
}

// cancel, hold, release and requeue: one call per ID; every ID is tried even when
// one fails.
int RunJobAction(Session& session, const ParsedArgs& args, const CommandInfo& info) {
  if (args.positionals.empty()) return UsageFailure(info, std::string(info.name) + " needs at least one job ID");
  const std::string command = info.name;
  const bool as_json = args.Has("json");
  json results = json::array();
  int status = 0;
  for (const auto& id : args.positionals) {
    auto job = command == "cancel" ? session.CallJson("DELETE", JobPath(id))
                                   : session.CallJson("POST", JobPath(id) + "/" + command);
    if (!job) {
      status = 1;
      continue;
    }
    if (as_json) {
      results.push_back(*job);
      continue;
    }
    const std::string state = StringField(*job, "state");
    if (command == "cancel") {
      std::cout << (state == "CANCELLED" ? "Cancelled job " + id
                                         : "Cancel requested for job " + id + " (now " + state + ")")
                << "\n";
    } else if (command == "requeue") {
      std::cout << (state == "RUNNING" ? "Requeue requested for job " + id + " (its attempt is being stopped)"
                                       : "Job " + id + " waits already (" + state + ")")
                << "\n";
    } else {
      std::cout << (command == "hold" ? "Held job " : "Released job ") << id << " (now " << state << ")\n";
    }
  }
  if (as_json && !results.empty()) std::cout << (results.size() == 1 ? results[0] : results).dump() << "\n";
  return status;
}

// drain and resume: one call per node; every node is tried even when one fails.
int RunNodeAction(Session& session, const ParsedArgs& args, const CommandInfo& info) {
  if (args.positionals.empty()) return UsageFailure(info, std::string(info.name) + " needs at least one node name");
  const bool drain = std::string(info.name) == "drain";
  json results = json::array();
  int status = 0;
  for (const auto& name : args.positionals) {
    json body = json::object();
    if (drain) body["reason"] = args.Get("reason").value_or("drained with unisched drain");
    auto node = session.CallJson("POST", "/v1/nodes/" + UrlEncode(name) + (drain ? "/drain" : "/resume"), body.dump(),
                                 {{"Content-Type", "application/json"}});
    if (!node) {
      status = 1;
      continue;
    }
    if (args.Has("json")) {
      results.push_back(*node);
    } else {
      std::cout << (drain ? "Draining node " : "Resumed node ") << name << " (now " << node->value("state", "?")
                << ")\n";
    }
  }
  if (args.Has("json") && !results.empty()) std::cout << (results.size() == 1 ? results[0] : results).dump() << "\n";
  return status;
}

int RunLog(Session& session, const ParsedArgs& args, const CommandInfo& info) {
  if (args.positionals.size() != 1) return UsageFailure(info, info.name + std::string(" needs exactly one job ID"));
  std::vector<std::pair<std::string, std::string>> query{{"stream", args.Has("stderr") ? "stderr" : "stdout"}};
  for (const char* name : {"attempt", "rank", "node", "step"}) query.emplace_back(name, args.Get(name).value_or(""));
  const std::string target = JobPath(args.positionals[0]) + "/log" + BuildQuery(query);
  if (!args.Has("follow")) {
    auto response = session.Call("GET", target);
    if (!response) return 1;
    std::cout << response->body;
    return 0;
  }
  auto print = [](std::string_view piece) {
    std::cout.write(piece.data(), static_cast<std::streamsize>(piece.size()));
    std::cout.flush();
    return static_cast<bool>(std::cout);  // a closed pipe (| head) stops following
  };
  // Like tail -f on Slurm's output file, but it ends with the job: each
  // attempt's stream ends with the attempt; a job retried or requeued for
  // another attempt is followed on into it, unless one attempt or step was
  // asked for.
  std::string follow = target + "&follow=true";
  for (;;) {
    auto response = session.Follow(follow, print);
    if (!response) return 1;
    if (!std::cout || args.Has("attempt") || args.Has("step")) return 0;
    auto job = session.CallJson("GET", JobPath(args.positionals[0]));
    if (!job) return 1;
    const std::string state = job->value("state", "");
    const int followed = std::atoi(response->Header("x-unisched-attempt").c_str());
    const json attempts = job->value("attempts", json::array());
    const int latest = attempts.empty() ? 0 : attempts.back().value("attempt", 0);
    if (latest > followed) {
      follow = target + "&follow=true&attempt=" + std::to_string(followed + 1);  // it started already
    } else if (state == "PENDING" || state == "HELD") {
      follow = target + "&follow=true";  // the daemon waits for the attempt it starts next
    } else {
      return 0;
    }
    std::cerr << "unisched: attempt " << followed << " of job " << args.positionals[0] << " ended; the job is " << state
              << ", following its next attempt\n";
  }
}

int RunUsage(Session& session, const ParsedArgs& args, const CommandInfo& info) {
  if (!args.positionals.empty()) return UsageFailure(info, "unexpected argument '" + args.positionals[0] + "'");
  const bool as_csv = args.Has("csv");
  if (as_csv && args.Has("json")) return UsageFailure(info, "choose one of --csv and --json");
  std::vector<std::string> group_by;
  if (auto text = args.Get("group-by")) {
    auto keys = ParseGroupBy(*text);
    if (!keys.ok()) return UsageFailure(info, keys.error().message);
    group_by = std::move(*keys);
  }
  std::string joined;
  for (const auto& key : group_by) joined += (joined.empty() ? "" : ",") + key;
  const std::string target = "/v1/usage" + BuildQuery({{"from", args.Get("from").value_or("")},
                                                       {"to", args.Get("to").value_or("")},
                                                       {"group_by", joined},
                                                       {"format", as_csv ? "csv" : ""}});
  if (as_csv) {
    auto response = session.Call("GET", target);
    if (!response) return 1;
    std::cout << response->body;
    return 0;
  }
  return Show(session, args, target, [&](const json& body) { return FormatUsageTable(body, group_by); }) ? 0 : 1;
}

// Exit status 1 when the ledger does not reconcile, so scripts and cron can
// alert on it.
int RunReconcile(Session& session, const ParsedArgs& args, const CommandInfo& info) {
  if (!args.positionals.empty()) return UsageFailure(info, "unexpected argument '" + args.positionals[0] + "'");
  auto body = Show(session, args, "/v1/usage/reconcile", FormatReconcile);
  if (!body) return 1;
  return DiscrepancyCount(*body) == 0 ? 0 : 1;
}

std::vector<FlagSpec> FlagsFor(const std::string& command) {
  if (command == "submit") return SubmitFlags();
  if (command == "jobs") {
    return {{"state", true, false}, {"queue", true, false}, {"pool", true, false},  {"project", true, false},
            {"user", true, false},  {"limit", true, false}, {"cursor", true, false}};
  }
  if (command == "log" || command == "logs") {
    return {{"stderr", false, false}, {"follow", false, false, 'f'}, {"attempt", true, false},
            {"rank", true, false},    {"node", true, false},         {"step", true, false}};
  }
  if (command == "sandbox") {
    return {{"image", true, false}, {"project", true, false},      {"queue", true, false},
            {"cpus", true, false},  {"memory-mb", true, false},    {"timeout", true, false},
            {"env", true, true},    {"idle-timeout", true, false}, {"stdin-file", true, false},
            {"all", false, false}};
  }
  if (command == "config") return ConfigFlags();
  if (command == "secret") return {{"project", true, false}, {"description", true, false}};
  if (command == "workflow") {
    return {{"project", true, false}, {"state", true, false}, {"limit", true, false}, {"format", true, false}};
  }
  if (command == "drain") return {{"reason", true, false}};
  if (command == "squeue") return SqueueFlags();
  if (command == "sacct") return SacctFlags();
  if (command == "scancel") return ScancelFlags();
  if (command == "update") return UpdateFlags();
  if (command == "baseline") return BaselineFlags();
  if (command == "usage") {
    return {{"from", true, false}, {"to", true, false}, {"group-by", true, false}, {"csv", false, false}};
  }
  return {};
}

int Dispatch(const CommandInfo& info, const std::vector<std::string>& words) {
  const std::string command = info.name;
  // `sandbox exec ID -- COMMAND`: like submit, the command's own words are
  // not taken for flags; the subcommand comes first.
  const bool sandbox_exec = command == "sandbox" && !words.empty() && words[0] == "exec";
  // With "--", flags may come anywhere before it; without, before the ID.
  const bool has_dashes = std::find(words.begin(), words.end(), "--") != words.end();
  // sbatch reads its words with the batch script parser (sbatch_args.h),
  // the script and the environment with them.
  std::optional<SbatchRequest> sbatch;
  if (command == "sbatch") {
    auto built = BuildSbatchRequest(words, LocalSbatchSurroundings());
    if (!built.ok()) {
      if (IsUsageError(built.error())) return UsageFailure(info, built.error().message);
      std::cerr << "unisched sbatch: error: " << built.error().message << "\n";
      return 1;
    }
    sbatch = std::move(built).value();
  }
  Result<ParsedArgs> parsed =
      sbatch         ? Result<ParsedArgs>(sbatch->args)
      : sandbox_exec ? ParseArgs(std::vector<std::string>(words.begin() + 1, words.end()), FlagsFor(command),
                                 /*stop_at_positional=*/!has_dashes)
                     : ParseArgs(words, FlagsFor(command), /*stop_at_positional=*/command == "submit");
  if (parsed.ok() && sandbox_exec) parsed->positionals.insert(parsed->positionals.begin(), "exec");
  if (!parsed.ok()) return UsageFailure(info, parsed.error().message);
  const ParsedArgs& args = *parsed;
  if (args.Has("help")) {
    std::cout << UsageLine(info) << "\n";
    return 0;
  }
  if (command != "submit" && !sandbox_exec && !args.rest.empty()) {
    return UsageFailure(info, "unexpected argument '" + args.rest.front() + "'");
  }
  if ((command == "nodes" || command == "queues" || command == "pools" || command == "whoami") &&
      !args.positionals.empty()) {
    return UsageFailure(info, "unexpected argument '" + args.positionals.front() + "'");
  }

  auto env = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  auto settings = ResolveConnection(args, env, ReadWholeFile);
  if (!settings.ok()) {
    std::cerr << "error: " << settings.error().message << "\n";
    return 2;
  }
  auto endpoint = client::ParseUrl(settings->url);
  if (!endpoint.ok()) {
    std::cerr << "error: daemon URL '" << settings->url << "': " << endpoint.error().message
              << "\n  set UNISCHED_URL or --url to e.g. " << kDefaultUrl << "\n";
    return 2;
  }
  if (settings->token.empty()) {
    std::cerr << "error: no API token: set UNISCHED_TOKEN or pass --token-file FILE\n"
                 "  (a daemon without UNISCHED_ADMIN_TOKEN writes its admin token to <state-dir>/admin.token)\n";
    return 2;
  }
  // An https:// daemon's certificate is checked against UNISCHED_CA_FILE, or
  // the system's CAs without it (docs/access.md, "TLS").
  client::TlsOptions tls;
  tls.enabled = endpoint->tls;
  if (const char* ca = std::getenv("UNISCHED_CA_FILE"); ca != nullptr) tls.ca_file = ca;
  Session session(*settings, endpoint->host, endpoint->port, std::move(tls));

  if (command == "submit") return RunSubmit(session, args, info);
  if (command == "sbatch") return RunSbatch(session, *sbatch);
  if (command == "jobs") return RunJobs(session, args, info);
  if (command == "job") return RunJob(session, args, info);
  if (command == "cancel" || command == "hold" || command == "release" || command == "requeue") {
    return RunJobAction(session, args, info);
  }
  const auto usage_failure = [&info](const std::string& message) { return UsageFailure(info, message); };
  if (command == "squeue") return RunSqueue(session, args, usage_failure);
  if (command == "sacct") return RunSacct(session, args, usage_failure);
  if (command == "scancel") return RunScancel(session, args, usage_failure);
  if (command == "update") return RunUpdate(session, args, usage_failure);
  if (command == "log" || command == "logs") return RunLog(session, args, info);
  if (command == "events") {
    if (args.positionals.size() != 1) return UsageFailure(info, "events needs exactly one job ID");
    return RunShow(session, args, JobPath(args.positionals[0]) + "/events", FormatEventsTable);
  }
  if (command == "nodes") return RunShow(session, args, "/v1/nodes", FormatNodesTable);
  if (command == "drain" || command == "resume") return RunNodeAction(session, args, info);
  if (command == "queues") return RunShow(session, args, "/v1/queues", FormatQueuesTable);
  if (command == "pools") return RunShow(session, args, "/v1/pools", FormatPoolsTable);
  if (command == "whoami") return RunShow(session, args, "/v1/whoami", FormatWhoAmI);
  if (command == "usage") return RunUsage(session, args, info);
  if (command == "reconcile") return RunReconcile(session, args, info);
  if (command == "sandbox") {
    return RunSandbox(session, args, [&info](const std::string& message) { return UsageFailure(info, message); });
  }
  if (command == "workflow") {
    return RunWorkflow(session, args, [&info](const std::string& message) { return UsageFailure(info, message); });
  }
  if (command == "secret") {
    return RunSecret(session, args, [&info](const std::string& message) { return UsageFailure(info, message); });
  }
  if (command == "config") {
    return RunConfig(session, args, [&info](const std::string& message) { return UsageFailure(info, message); });
  }
  if (command == "baseline") {
    return RunBaseline(session, args, [&info](const std::string& message) { return UsageFailure(info, message); });
  }
  return UsageFailure(info, "unknown command");  // every kCommands entry is handled above
}

}  // namespace

int RunCli(int argc, char** argv) {
  if (argc < 2) {
    PrintHelp(std::cerr);
    return 2;
  }
  const std::string command = argv[1];
  std::vector<std::string> words(argv + 2, argv + argc);
  if (command == "help" || command == "--help" || command == "-h") {
    if (!words.empty()) {
      if (const CommandInfo* info = FindCommand(words[0])) {
        std::cout << UsageLine(*info) << "\n";
        return 0;
      }
      if (words[0] == "step") {
        std::cout << kStepUsage << "\n";
        return 0;
      }
      if (words[0] == "simulate") {
        std::cout << kSimulateUsage << "\n";
        return 0;
      }
      if (words[0] == "server" || words[0] == "validate-config" || words[0] == "store") {
        PrintHelp(std::cout);
        return 0;
      }
      std::cerr << "error: unknown command '" << words[0] << "'\n";
      PrintHelp(std::cerr);
      return 2;
    }
    PrintHelp(std::cout);
    return 0;
  }
  if (command == "simulate") return RunSimulate(words);  // offline: no daemon, no token
  if (command == "step") return RunStep(words);          // inside a job: its own token
  if (command == "baseline") {
    if (auto status = RunBaselineKernel(words)) return *status;  // inside a job: no daemon
  }
  const CommandInfo* info = FindCommand(command);
  if (!info) {
    std::cerr << "error: unknown command '" << command << "'\n";
    PrintHelp(std::cerr);
    return 2;
  }
  return Dispatch(*info, words);
}

}  // namespace unisched::cli
