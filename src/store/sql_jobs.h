#pragma once
// The jobs concern in SQLite (unisched/store/jobs.h): the jobs table, where a
// job is its public JSON document next to the columns queries filter on,
// its events and the idempotency keys. Internal to src/store.

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "store/sql.h"
#include "unisched/store/jobs.h"

namespace unisched::store::sql {

// Inserts `job` as job `id` (the store chose it).
Result<model::JobId> InsertJob(Connection& c, const model::Job& job, model::JobId id,
                               const std::string& idempotency_key, const std::string& doc);
std::optional<model::JobId> FindIdempotentJob(Connection& c, const std::string& user, const std::string& key);
Status UpdateJob(Connection& c, const model::Job& job);
Result<model::Job> GetJob(Connection& c, model::JobId id);
Status AppendEvent(Connection& c, model::JobId id, const JobEvent& event);
Result<std::vector<model::JobId>> DeleteJobsEndedBefore(Connection& c, Timestamp cutoff);

Result<JobPage> ListJobs(Connection& c, const JobFilter& filter);
Result<std::vector<WaitingJob>> ListWaitingJobs(Connection& c, const JobFilter& visibility);
Result<std::vector<model::Job>> LoadActiveJobs(Connection& c);
Status PutStep(Connection& c, const StepRecord& step);
Result<StepRecord> GetStep(Connection& c, model::JobId job, int step);
Result<std::vector<StepRecord>> LoadActiveSteps(Connection& c);
Result<std::vector<model::Job>> LoadLatestEndedJobs(Connection& c, int per_key);
std::map<std::tuple<model::JobState, std::string, std::string>, int64_t> CountJobs(Connection& c);
std::vector<JobEvent> ListEvents(Connection& c, model::JobId id);

}  // namespace unisched::store::sql
