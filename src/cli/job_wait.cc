// Waiting for a job to end, as submit --wait and sbatch --wait do (cli/job_wait.h).

#include "cli/job_wait.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace unisched::cli {
namespace {

using nlohmann::json;

constexpr const char* kTerminalStates[] = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"};

}  // namespace

std::string JobPath(const std::string& id) {
  return "/v1/jobs/" + UrlEncode(id);
}

std::optional<std::vector<json>> ListAllJobs(Session& session, std::vector<std::pair<std::string, std::string>> query,
                                             const std::function<bool(const json& page)>& enough) {
  std::vector<json> jobs;
  query.emplace_back("limit", "1000");
  query.emplace_back("cursor", "");  // empty: left out of the first page's query
  for (;;) {
    auto page = session.CallJson("GET", "/v1/jobs" + BuildQuery(query));
    if (!page) return std::nullopt;
    for (auto& job : (*page)["jobs"]) jobs.push_back(std::move(job));
    query.back().second = StringField(*page, "next_cursor");
    if (query.back().second.empty() || (enough && enough(*page))) return jobs;
  }
}

bool IsTerminal(const std::string& state) {
  return std::any_of(std::begin(kTerminalStates), std::end(kTerminalStates), [&](const char* s) { return state == s; });
}

// Polls the job until it ends (20 ms, doubling to 1 s between polls).
std::optional<json> WaitForJob(Session& session, const std::string& id, std::string* raw) {
  auto delay = std::chrono::milliseconds(20);
  for (;;) {
    auto job = session.CallJson("GET", JobPath(id), {}, {}, raw);
    if (!job) return std::nullopt;
    if (IsTerminal(StringField(*job, "state"))) return job;
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds(1000));
  }
}

std::string FinalStateLine(const json& job) {
  std::string line = "Job " + StringField(job, "id") + " " + StringField(job, "state");
  if (auto it = job.find("exit_code"); it != job.end() && it->is_number_integer()) {
    line += " (exit code " + std::to_string(it->get<int>()) + ")";
  }
  if (std::string reason = StringField(job, "state_reason"); !reason.empty()) line += ": " + reason;
  return line;
}

// The exit status of a command that waited for its job, as sbatch --wait:
// 0 when it COMPLETED, else the job's own exit code (1 for an end without one).
int WaitExitStatus(const json& job) {
  if (StringField(job, "state") == "COMPLETED") return 0;
  const auto code = job.find("exit_code");
  if (code != job.end() && code->is_number_integer()) {
    const int64_t exit_code = code->get<int64_t>();
    if (exit_code > 0) return static_cast<int>(std::min<int64_t>(exit_code, 255));
  }
  return 1;
}

// --wait: polls until the job ends, prints it (its JSON, or its final line
// unless `quiet`) and exits as sbatch --wait does.
int WaitAndReport(Session& session, const std::string& id, bool as_json, bool quiet) {
  std::cout.flush();
  std::string raw;
  auto final_job = WaitForJob(session, id, &raw);
  if (!final_job) return 1;
  if (as_json) {
    PrintBody(raw);
  } else if (!quiet) {
    std::cout << FinalStateLine(*final_job) << "\n";
  }
  // An array that did not complete exits with the highest exit code of
  // its tasks, as sbatch --wait does.
  if (final_job->contains("array") && (*final_job)["array"].is_object() &&
      StringField(*final_job, "state") != "COMPLETED") {
    int64_t highest = 0;
    for (const auto& task : ListAllJobs(session, {{"array", id}}).value_or(std::vector<json>{})) {
      if (task.contains("exit_code") && task["exit_code"].is_number_integer()) {
        highest = std::max(highest, task["exit_code"].get<int64_t>());
      }
    }
    return highest > 0 ? static_cast<int>(std::min<int64_t>(highest, 255)) : 1;
  }
  return WaitExitStatus(*final_job);
}

}  // namespace unisched::cli
