// The impact of a config change on the work in the cluster
// (unisched/service/config_impact.h), on the default config.

#include "unisched/service/config_impact.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "testing/config_text.h"

namespace unisched::service {
namespace {

using testing::DefaultConfigText;
using testing::ReplaceOnce;

config::Config Load(const std::string& text) {
  auto loaded = config::LoadConfigText(text);
  if (auto* errors = std::get_if<std::vector<config::ConfigError>>(&loaded)) {
    ADD_FAILURE() << errors->front().ToString();
    return {};
  }
  return std::get<config::Config>(std::move(loaded));
}

model::Job Job(model::JobId id, model::JobState state, const std::string& queue, const std::string& reason) {
  model::Job job;
  job.id = id;
  job.state = state;
  job.user = "alice";
  job.project = "default";
  job.queue = queue;
  job.pool = "cpu-hpc-pool";
  job.workload.kind = model::WorkloadKind::kHpc;
  job.resources.cpus = 4;
  job.resources.memory_mb = 4096;
  job.resources.walltime_seconds = 7200;
  job.routing = {job.pool, queue, reason};
  return job;
}

TEST(ConfigImpactTest, PendingJobsRoutedElsewhereAndRunningWorkOverANewLimit) {
  const std::string text = DefaultConfigText();
  const config::Config before = Load(text);
  // hpc work now goes to ai-inference's queue by rule; hpc-precision keeps
  // its jobs to 1 hour and 2 running at once.
  std::string next_text = ReplaceOnce(text, "match: {kind: hpc}\n      queue: hpc-precision",
                                      "match: {kind: hpc}\n      queue: ai-inference");
  next_text = ReplaceOnce(next_text, "max_walltime_hours: 72", "max_walltime_hours: 1\n      max_concurrency: 2");
  next_text = ReplaceOnce(next_text, "workload_kinds: [ai-inference]", "workload_kinds: [ai-inference, hpc]");
  const config::Config after = Load(next_text);

  const std::vector<model::Job> active = {
      Job(1, model::JobState::kRunning, "hpc-precision", "rule hpc-default: kind=hpc -> hpc-precision (cpu-hpc-pool)"),
      Job(2, model::JobState::kRunning, "hpc-precision", "rule hpc-default: kind=hpc -> hpc-precision (cpu-hpc-pool)"),
      Job(3, model::JobState::kRunning, "hpc-precision", "queue hpc-precision named by the submitter"),
      Job(4, model::JobState::kPending, "hpc-precision", "rule hpc-default: kind=hpc -> hpc-precision (cpu-hpc-pool)"),
      Job(5, model::JobState::kPending, "hpc-precision", "queue hpc-precision named by the submitter"),
  };
  const auto differences = config::DiffConfigTexts(text, next_text);
  const ConfigImpact impact = AssessConfigChange(before, after, differences, active);

  // Job 4 was routed by rule and would go by the new rule; job 5 named its
  // queue, which still serves it (its wall time is the queue's business).
  ASSERT_EQ(impact.rerouted.size(), 2u);
  EXPECT_EQ(impact.rerouted[0].job, 4);
  EXPECT_EQ(impact.rerouted[0].to_queue, "ai-inference");
  EXPECT_EQ(impact.rerouted[1].job, 5);
  EXPECT_TRUE(impact.rerouted[1].to_queue.empty()) << "refused: over the new maximum wall time";
  EXPECT_NE(impact.rerouted[1].refusal.find("walltime"), std::string::npos) << impact.rerouted[1].refusal;

  // Three running jobs of 2 hours: each over the new maximum, and three
  // where two may run.
  int walltime = 0, concurrency = 0;
  for (const auto& o : impact.over_limit) {
    if (o.limit == "queues[hpc-precision].policy.max_walltime_hours") ++walltime;
    if (o.limit == "queues[hpc-precision].policy.max_concurrency") {
      ++concurrency;
      EXPECT_EQ(o.held, 3);
      EXPECT_EQ(o.new_limit, 2);
      EXPECT_EQ(o.jobs.size(), 3u);
    }
  }
  EXPECT_EQ(walltime, 3);
  EXPECT_EQ(concurrency, 1);

  bool walltime_listed = false;
  for (const auto& d : impact.limits) walltime_listed |= d.path == "queues[hpc-precision].policy.max_walltime_hours";
  EXPECT_TRUE(walltime_listed);
  const auto json = ToJson(impact);
  EXPECT_EQ(json["pending_rerouted"].size(), 2u);
  EXPECT_EQ(json["pending_rerouted"][1]["from_queue"], "hpc-precision");
}

TEST(ConfigImpactTest, ALimitAlreadyExceededBeforeIsNotReportedAgain) {
  const std::string text = ReplaceOnce(DefaultConfigText(), "max_walltime_hours: 72", "max_walltime_hours: 1");
  const config::Config before = Load(text);
  const std::string next_text = ReplaceOnce(text, "default_walltime_hours: 1 ", "default_walltime_hours: 0.5 ");
  const config::Config after = Load(next_text);
  const std::vector<model::Job> active = {Job(1, model::JobState::kRunning, "hpc-precision", "")};
  const auto impact = AssessConfigChange(before, after, config::DiffConfigTexts(text, next_text), active);
  EXPECT_TRUE(impact.over_limit.empty());
  EXPECT_TRUE(impact.rerouted.empty());
}

}  // namespace
}  // namespace unisched::service
