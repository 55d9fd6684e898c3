#pragma once
// A job's path, listing jobs page after page, and waiting for a job to
// end: what submit --wait, sbatch --wait, the Slurm commands and the log
// follower share.

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/session.h"

namespace unisched::cli {

// "/v1/jobs/<id>", the id percent-encoded.
std::string JobPath(const std::string& id);
// Every job GET /v1/jobs lists for `query`, page after page (1,000 a
// page), or nullopt when a call failed (reported). `enough`, when given,
// ends the listing after a page for which it holds.
std::optional<std::vector<nlohmann::json>> ListAllJobs(
    Session& session, std::vector<std::pair<std::string, std::string>> query,
    const std::function<bool(const nlohmann::json& page)>& enough = {});
// COMPLETED, FAILED, CANCELLED, TIMEOUT or NODE_FAIL.
bool IsTerminal(const std::string& state);
// Polls the job until it ends (20 ms, doubling to 1 s between polls); the
// job as last read (its body in *raw), or nullopt when a call failed.
std::optional<nlohmann::json> WaitForJob(Session& session, const std::string& id, std::string* raw);
// "Job 7 FAILED (exit code 3): reason".
std::string FinalStateLine(const nlohmann::json& job);
// The exit status of a command that waited for its job, as sbatch --wait:
// 0 when it COMPLETED, else the job's own exit code (1 for an end without one).
int WaitExitStatus(const nlohmann::json& job);
// --wait: polls until the job ends, prints it (its JSON, or its final line
// unless `quiet`) and returns WaitExitStatus.
int WaitAndReport(Session& session, const std::string& id, bool as_json, bool quiet);

}  // namespace unisched::cli
