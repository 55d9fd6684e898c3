// GET /v1/reports/pending (docs/policy/pending-reasons.md, "Why jobs
// wait"): the seed's troubleshooting table for "job pending for a long
// time" turned into an answer: waiting jobs grouped by the first reason the
// last cycle gave them, each group's longest wait, and the longest waits.

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/call.h"
#include "api/responses.h"
#include "unisched/api/api.h"

namespace unisched::api {

using nlohmann::json;

void Api::PendingReport(Call& call) {
  store::JobFilter visibility;
  const auth::Principal& who = *call.principal;
  if (!auth::IsPlatformAdmin(who)) {
    visibility.visible_projects = who.projects;
    if (who.role == auth::Role::kQueueAdmin) visibility.visible_queues = who.queues;
  }
  const auto limit = static_cast<size_t>(call.QueryInt("limit", 20));
  const std::vector<store::WaitingJob> waiting = ctx_.store->ListWaitingJobs(visibility);
  const auto view = ctx_.control->View();
  const Timestamp now = ctx_.clock->Now();

  struct Group {
    int count = 0;
    std::map<std::string, int> by_pool;
    const store::WaitingJob* oldest = nullptr;  // the list is longest waiting first
    std::string example;                        // the oldest one's message
  };
  std::map<std::string, Group> groups;
  json longest = json::array();
  for (const store::WaitingJob& job : waiting) {
    std::string code = "None", message = "not yet seen by a scheduling cycle";
    if (job.state == model::JobState::kHeld) {
      code = "Held";
      message = "held; release it to let it be scheduled";
    } else if (auto it = view->pending->find(job.id); it != view->pending->end()) {
      const auto reasons = it->second.Reasons();
      if (!reasons.empty()) {
        code = reasons.front().code;
        message = reasons.front().message;
      } else if (it->second.jobs_ahead > 0) {
        code = "Priority";
        message = std::to_string(it->second.jobs_ahead) + " jobs ahead in " + job.pool;
      }
    }
    Group& g = groups[code];
    ++g.count;
    ++g.by_pool[job.pool];
    if (!g.oldest) {
      g.oldest = &job;
      g.example = message;
    }
    const int64_t waited = std::chrono::duration_cast<std::chrono::seconds>(now - job.submitted_at).count();
    if (longest.size() < limit) {
      longest.push_back({{"id", std::to_string(job.id)},
                         {"name", job.name},
                         {"user", job.user},
                         {"project", job.project},
                         {"queue", job.queue},
                         {"pool", job.pool},
                         {"state", std::string(model::ToString(job.state))},
                         {"submitted_at", FormatRfc3339(job.submitted_at)},
                         {"waiting_seconds", std::max<int64_t>(waited, 0)},
                         {"reason", {{"code", code}, {"message", message}}}});
    }
  }
  json by_reason = json::array();
  for (const auto& [code, g] : groups) {
    const int64_t waited = std::chrono::duration_cast<std::chrono::seconds>(now - g.oldest->submitted_at).count();
    by_reason.push_back({{"code", code},
                         {"count", g.count},
                         {"pools", g.by_pool},
                         {"longest_wait_seconds", std::max<int64_t>(waited, 0)},
                         {"longest_waiting_job", std::to_string(g.oldest->id)},
                         {"example", g.example}});
  }
  // The largest groups first: what holds most work back.
  std::stable_sort(by_reason.begin(), by_reason.end(),
                   [](const json& a, const json& b) { return a["count"].get<int>() > b["count"].get<int>(); });
  call.reply(Json(200, {{"generated_at", FormatRfc3339(now)},
                        {"total", waiting.size()},
                        {"by_reason", std::move(by_reason)},
                        {"longest", std::move(longest)}}));
}

}  // namespace unisched::api
