// The replay loop on hand-computed traces: start times per policy, the
// metric formulas, GPU pools, and the checks of RunSimulation.

#include "unisched/sim/simulator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "unisched/sim/simulate.h"

namespace unisched::sim {
namespace {

using model::BackfillMode;

TraceJob Job(model::JobId id, int64_t submit_s, int size, int64_t run_s, int64_t estimate_s) {
  TraceJob job;
  job.id = id;
  job.source_id = id;
  job.submit_ms = submit_s * 1000;
  job.size = size;
  job.run_ms = run_s * 1000;
  job.estimate_ms = estimate_s * 1000;
  return job;
}

std::vector<int64_t> StartSeconds(const SimulationResult& result) {
  std::vector<int64_t> out;
  for (int64_t ms : result.start_ms) out.push_back(ms < 0 ? -1 : ms / 1000);
  return out;
}

// 10 processors. J1 holds 6 until 100; J2 (6) must wait for it; J3 (4, 50 s)
// fits beside J1 and ends long before J2 could start.
const std::vector<TraceJob> kShortJobBehindBlockedHead = {
    Job(1, 0, 6, 100, 100),
    Job(2, 1, 6, 100, 100),
    Job(3, 2, 4, 50, 50),
};

TEST(SimulateTest, FcfsLetsNothingPassABlockedHead) {
  SimulationResult r = Simulate(kShortJobBehindBlockedHead, CpuCluster(10, BackfillMode::kFcfs));
  EXPECT_EQ(StartSeconds(r), (std::vector<int64_t>{0, 100, 100}));
  EXPECT_EQ(r.never_started, 0);
  // waits 0, 99, 98; bsld 1, 199/100, 148/50
  EXPECT_EQ(r.metrics.jobs, 3);
  EXPECT_DOUBLE_EQ(r.metrics.avg_wait_seconds, 197.0 / 3);
  EXPECT_DOUBLE_EQ(r.metrics.avg_bounded_slowdown, (1 + 1.99 + 2.96) / 3);
  EXPECT_DOUBLE_EQ(r.metrics.makespan_seconds, 200);
  EXPECT_DOUBLE_EQ(r.metrics.utilization, (600.0 + 600 + 200) / (10 * 200));
}

// 10 processors. u1's first job (J1) asks 1000 s and runs 20. J2 (6 procs,
// 500 s) runs from 30; the head J3 (all 10) is reserved from 530. u1's J4 (4
// procs, asking 1000 s, running 20) would run into that reservation by its
// request; predicted from u1's last run (20 s, planned 4 s), it fits before.
TEST(SimulateTest, APredictedPoolBackfillsByTheUsersLastRuns) {
  auto user = [](TraceJob job, std::string name) {
    job.user = std::move(name);
    return job;
  };
  const std::vector<TraceJob> jobs = {user(Job(1, 0, 10, 20, 1000), "u1"), user(Job(2, 30, 6, 500, 500), "u2"),
                                      user(Job(3, 31, 10, 100, 100), "u3"), user(Job(4, 32, 4, 20, 1000), "u1")};
  SimulationResult requests = Simulate(jobs, CpuCluster(10, BackfillMode::kEasy));
  EXPECT_EQ(StartSeconds(requests), (std::vector<int64_t>{0, 30, 530, 630}));
  EXPECT_EQ(requests.prediction.predicted, 0);

  SimulationResult predicted = Simulate(jobs, CpuCluster(10, model::BackfillChoice{BackfillMode::kEasy, true}));
  EXPECT_EQ(StartSeconds(predicted), (std::vector<int64_t>{0, 30, 530, 32}));
  EXPECT_EQ(predicted.prediction.predicted, 1);  // only u1 had run before
  EXPECT_EQ(predicted.prediction.under, 0);
  EXPECT_DOUBLE_EQ(predicted.prediction.MeanAbsoluteError(), 0);
}

// 10 processors, every job asks for all of them and 100 s. J1 runs 50 s; J2
// arrives at 1 to an empty queue, is promised 100 (J1's requested end) and
// starts at 50; J3 arrives at 2 behind it: conservative promises it 200 (J2's
// requested end after its promise), and it starts at 60; EASY promises it
// nothing (only the head has a reservation). FCFS promises nothing.
TEST(SimulateTest, EstimatesAtSubmitAreComparedWithTheRealStarts) {
  const std::vector<TraceJob> jobs = {Job(1, 0, 10, 50, 100), Job(2, 1, 10, 10, 100), Job(3, 2, 10, 10, 100)};
  SimulationResult conservative = Simulate(jobs, CpuCluster(10, BackfillMode::kConservative));
  EXPECT_EQ(StartSeconds(conservative), (std::vector<int64_t>{0, 50, 60}));
  EXPECT_EQ(conservative.estimates.estimated, 2);
  EXPECT_EQ(conservative.estimates.late, 0);
  EXPECT_DOUBLE_EQ(conservative.estimates.median_error_seconds, 50);  // |50 - 100|, |60 - 200|: nearest rank
  EXPECT_DOUBLE_EQ(conservative.estimates.p90_error_seconds, 140);
  EXPECT_DOUBLE_EQ(conservative.estimates.median_early_seconds, 50);

  SimulationResult easy = Simulate(jobs, CpuCluster(10, BackfillMode::kEasy));
  EXPECT_EQ(StartSeconds(easy), (std::vector<int64_t>{0, 50, 60}));
  EXPECT_EQ(easy.estimates.estimated, 1);
  EXPECT_DOUBLE_EQ(easy.estimates.median_error_seconds, 50);

  EXPECT_EQ(Simulate(jobs, CpuCluster(10, BackfillMode::kFcfs)).estimates.estimated, 0);

  // A late start: estimates made with a prediction too short.
  EstimateAccuracy late = ComputeEstimateAccuracy({100, 30, -1, 10}, {70, 40, 5, -1});
  EXPECT_EQ(late.estimated, 2);
  EXPECT_EQ(late.late, 1);
  EXPECT_DOUBLE_EQ(late.LateShare(), 0.5);
  EXPECT_DOUBLE_EQ(late.median_error_seconds, 0.010);
  EXPECT_DOUBLE_EQ(late.p90_error_seconds, 0.030);
  EXPECT_DOUBLE_EQ(late.median_early_seconds, -0.030);
}

// 12 processors, FCFS, a per-user limit of one running job: u1's second job (J2)
// waits over its limit without holding the queue, so u2's J3, arriving
// behind it, starts at once. (A replay that took "a job waits ahead" for
// "nothing can start" would skip J3's pass and start it at 100.)
TEST(SimulateTest, FcfsLetsAJobPassOneWaitingOverItsLimit) {
  auto user = [](TraceJob job, std::string name) {
    job.user = std::move(name);
    return job;
  };
  const std::vector<TraceJob> jobs = {user(Job(1, 0, 4, 100, 100), "u1"), user(Job(2, 1, 4, 100, 100), "u1"),
                                      user(Job(3, 2, 4, 100, 100), "u2")};
  SimCluster cluster = CpuCluster(12, BackfillMode::kFcfs);
  EXPECT_EQ(StartSeconds(Simulate(jobs, cluster)), (std::vector<int64_t>{0, 1, 2})) << "no limit: all fit";
  cluster.config.queues[0].policy.user_quota.running_jobs = 1;
  EXPECT_EQ(StartSeconds(Simulate(jobs, cluster)), (std::vector<int64_t>{0, 100, 2}));
}

TEST(SimulateTest, EasyBackfillsTheShortJob) {
  for (BackfillMode mode : {BackfillMode::kEasy, BackfillMode::kConservative}) {
    SCOPED_TRACE(std::string(model::ToString(mode)));
    SimulationResult r = Simulate(kShortJobBehindBlockedHead, CpuCluster(10, mode));
    EXPECT_EQ(StartSeconds(r), (std::vector<int64_t>{0, 100, 2}));
    EXPECT_DOUBLE_EQ(r.metrics.avg_wait_seconds, 99.0 / 3);
    EXPECT_DOUBLE_EQ(r.metrics.avg_bounded_slowdown, (1 + 1.99 + 1) / 3);
    EXPECT_DOUBLE_EQ(r.metrics.makespan_seconds, 200);
  }
}

// 10 processors. J1 (6) runs until 100; J2 (8) is the blocked head, reserved
// at 100, leaving 2 processors spare beside it; J3 (10) is blocked behind J2;
// J4 (2, 250 s) fits now and in J2's spare room, but would hold 2 processors
// past 200, when J3 could start. EASY protects only J2 and starts J4, which
// delays J3 to 253; conservative protects J3 too, so J4 waits until J3 ends;
// FCFS gets the same order as conservative here.
const std::vector<TraceJob> kBackfillThatDelaysTheSecondJob = {
    Job(1, 0, 6, 100, 100),
    Job(2, 1, 8, 100, 100),
    Job(3, 2, 10, 100, 100),
    Job(4, 3, 2, 250, 250),
};

TEST(SimulateTest, EasyProtectsOnlyTheFirstBlockedJob) {
  SimulationResult r = Simulate(kBackfillThatDelaysTheSecondJob, CpuCluster(10, BackfillMode::kEasy));
  EXPECT_EQ(StartSeconds(r), (std::vector<int64_t>{0, 100, 253, 3}));
  // waits 0, 99, 251, 0; bsld 1, 1.99, 3.51, 1
  EXPECT_DOUBLE_EQ(r.metrics.avg_wait_seconds, 350.0 / 4);
  EXPECT_DOUBLE_EQ(r.metrics.avg_bounded_slowdown, (1 + 1.99 + 3.51 + 1) / 4);
  EXPECT_DOUBLE_EQ(r.metrics.makespan_seconds, 353);
  EXPECT_DOUBLE_EQ(r.metrics.utilization, (600.0 + 800 + 1000 + 500) / (10 * 353));
}

TEST(SimulateTest, ConservativeProtectsEveryBlockedJob) {
  for (BackfillMode mode : {BackfillMode::kConservative, BackfillMode::kFcfs}) {
    SCOPED_TRACE(std::string(model::ToString(mode)));
    SimulationResult r = Simulate(kBackfillThatDelaysTheSecondJob, CpuCluster(10, mode));
    EXPECT_EQ(StartSeconds(r), (std::vector<int64_t>{0, 100, 200, 300}));
    // waits 0, 99, 198, 297; bsld 1, 1.99, 2.98, 547/250
    EXPECT_DOUBLE_EQ(r.metrics.avg_wait_seconds, 594.0 / 4);
    EXPECT_DOUBLE_EQ(r.metrics.avg_bounded_slowdown, (1 + 1.99 + 2.98 + 547.0 / 250) / 4);
    EXPECT_DOUBLE_EQ(r.metrics.makespan_seconds, 550);
  }
}

TEST(SimulateTest, AJobEndingEarlyHoldsItsEstimateUntilItsEnd) {
  // J1 asks for 1000 s but ends at 10; J2 (all 4 processors) starts then,
  // not at J1's estimated end.
  const std::vector<TraceJob> jobs = {Job(1, 0, 4, 10, 1000), Job(2, 5, 4, 20, 20)};
  for (BackfillMode mode : {BackfillMode::kFcfs, BackfillMode::kEasy, BackfillMode::kConservative}) {
    SCOPED_TRACE(std::string(model::ToString(mode)));
    SimulationResult r = Simulate(jobs, CpuCluster(4, mode));
    EXPECT_EQ(StartSeconds(r), (std::vector<int64_t>{0, 10}));
  }
}

// A random trace: arrivals in bursts (some at the same second), runs that
// end at their request or early, sizes up to a whole node.
std::vector<TraceJob> RandomTrace(uint64_t seed, int count, int largest) {
  std::mt19937_64 rng(seed);
  std::vector<TraceJob> jobs;
  int64_t submit = 0;
  for (int i = 0; i < count; ++i) {
    submit += static_cast<int64_t>(rng() % 4 == 0 ? 0 : rng() % 40);
    const int64_t estimate = 10 + static_cast<int64_t>(rng() % 400);
    const int64_t run = rng() % 3 == 0 ? estimate : 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(estimate));
    jobs.push_back(Job(i + 1, submit, 1 + static_cast<int>(rng() % static_cast<uint64_t>(largest)), run, estimate));
  }
  return jobs;
}

TEST(SimulateTest, PassesFromTheLastPassesProfileStartEveryJobAsAFreshProfile) {
  // Each EASY or conservative pass starts from the profile the pass before
  // it left (SimCluster::carry_profiles), with the room of jobs that ended
  // early since given back. One node, then four nodes with jobs spread over
  // several.
  for (BackfillMode mode : {BackfillMode::kEasy, BackfillMode::kConservative}) {
    SimCluster one_node = CpuCluster(10, mode);
    SimCluster four_nodes = CpuCluster(16, mode);
    four_nodes.nodes.resize(4, four_nodes.nodes[0]);
    for (size_t i = 0; i < four_nodes.nodes.size(); ++i) {
      four_nodes.nodes[i].spec.cpus = 4;
      four_nodes.nodes[i].spec.name = "sim-node-0" + std::to_string(i + 1);
    }
    four_nodes.largest_node = 4;
    for (const SimCluster* cluster : {&one_node, &four_nodes}) {
      for (uint64_t seed = 1; seed <= 2; ++seed) {
        SCOPED_TRACE(std::string(model::ToString(mode)) + ", nodes " + std::to_string(cluster->nodes.size()) +
                     ", seed " + std::to_string(seed));
        const std::vector<TraceJob> jobs = RandomTrace(seed, 250, static_cast<int>(cluster->capacity));
        SimCluster fresh = *cluster;
        fresh.carry_profiles = false;
        const SimulationResult carried = Simulate(jobs, *cluster);
        const SimulationResult rebuilt = Simulate(jobs, fresh);
        EXPECT_EQ(carried.start_ms, rebuilt.start_ms);
        EXPECT_EQ(carried.estimates.estimated, rebuilt.estimates.estimated);
        EXPECT_EQ(carried.estimates.median_error_seconds, rebuilt.estimates.median_error_seconds);
        EXPECT_EQ(carried.estimates.p90_error_seconds, rebuilt.estimates.p90_error_seconds);
        EXPECT_EQ(carried.never_started, 0);
      }
    }
  }
}

TEST(SimulateTest, ShortJobsUseTheBoundedSlowdownThreshold) {
  // A 2 s job waiting 8 s: (8 + 2) / max(2, 10) = 1; waiting 28 s: 3.
  const std::vector<TraceJob> jobs = {Job(1, 0, 1, 30, 30), Job(2, 2, 1, 2, 2), Job(3, 22, 1, 2, 2)};
  SimulationResult r = Simulate(jobs, CpuCluster(1, BackfillMode::kFcfs));
  EXPECT_EQ(StartSeconds(r), (std::vector<int64_t>{0, 30, 32}));
  // bsld: 1, (28 + 2) / 10 = 3, (10 + 2) / 10 = 1.2
  EXPECT_DOUBLE_EQ(r.metrics.avg_bounded_slowdown, (1 + 3 + 1.2) / 3);
}

TEST(SimulateTest, SameSubmitTimeGoesInTraceOrder) {
  // Both arrive at 0 on 1 processor: the first in the list is submitted
  // first, and its own pass starts it before the second arrives.
  std::vector<TraceJob> jobs = {Job(2, 0, 1, 10, 10), Job(1, 0, 1, 10, 10)};
  SimulationResult r = Simulate(jobs, CpuCluster(1, BackfillMode::kFcfs));
  EXPECT_EQ(StartSeconds(r), (std::vector<int64_t>{0, 10}));
  // The first submission and the first job's end: the second submission's
  // pass is skipped (it cannot start: the processor is taken), and the
  // second job's end finds nothing pending.
  EXPECT_EQ(r.passes, 2);
}

TEST(SimulateTest, GpuPoolAddsCompletionTime) {
  // 4 GPUs: J1 takes all 4 for 100 s, J2 (2 GPUs, 50 s) waits for it.
  const std::vector<TraceJob> jobs = {Job(1, 0, 4, 100, 100), Job(2, 10, 2, 50, 50)};
  SimulationResult r = Simulate(jobs, GpuCluster(4, BackfillMode::kEasy));
  EXPECT_EQ(StartSeconds(r), (std::vector<int64_t>{0, 100}));
  EXPECT_DOUBLE_EQ(r.metrics.avg_jct_seconds, (100.0 + 140) / 2);
  EXPECT_DOUBLE_EQ(r.metrics.makespan_seconds, 150);
  EXPECT_DOUBLE_EQ(r.metrics.utilization, (400.0 + 100) / (4 * 150));
}

TEST(ComputeMetricsTest, SkipsJobsThatNeverStarted) {
  const std::vector<TraceJob> jobs = {Job(1, 0, 2, 10, 10), Job(2, 0, 2, 10, 10)};
  Metrics m = ComputeMetrics(jobs, {5000, -1}, 2);
  EXPECT_EQ(m.jobs, 1);
  EXPECT_DOUBLE_EQ(m.avg_wait_seconds, 5);
  EXPECT_DOUBLE_EQ(m.makespan_seconds, 15);
  EXPECT_DOUBLE_EQ(m.utilization, 20.0 / (2 * 15));
  EXPECT_EQ(ComputeMetrics(jobs, {-1, -1}, 2).jobs, 0);
}

TEST(SimClusterTest, SplitsJobsLargerThanANode) {
  SimCluster cluster = CpuCluster(8, BackfillMode::kEasy);
  cluster.largest_node = 4;  // as if the pool had nodes of 4 cpus
  model::ResourceRequest r = cluster.RequestFor(6, 60);
  EXPECT_EQ(r.nodes, 2);
  EXPECT_EQ(r.cpus, 3);
  EXPECT_EQ(r.walltime_seconds, 60);
  r = cluster.RequestFor(3, 60);
  EXPECT_EQ(r.nodes, 1);
  EXPECT_EQ(r.cpus, 3);

  SimCluster gpus = GpuCluster(8, BackfillMode::kEasy);
  r = gpus.RequestFor(8, 60);
  EXPECT_EQ(r.nodes, 1);
  EXPECT_EQ(r.gpus, 8);
  EXPECT_EQ(r.cpus, 1);
  EXPECT_TRUE(gpus.CanEverFit(r));
  r.gpus = 9;
  EXPECT_FALSE(gpus.CanEverFit(r));
}

// ---- RunSimulation: options and files ----

class RunSimulationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("unisched-run-sim-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    swf_ = (dir_ / "t.swf").string();
    std::ofstream(swf_) << "; three jobs\n"
                           "1 0 -1 100 6 -1 -1 6 100 -1 1 1 1 -1 -1 -1 -1 -1\n"
                           "2 1 -1 100 6 -1 -1 6 100 -1 1 1 1 -1 -1 -1 -1 -1\n"
                           "3 2 -1 50 4 -1 -1 4 50 -1 1 1 1 -1 -1 -1 -1 -1\n";
    philly_ = (dir_ / "p.csv").string();
    std::ofstream(philly_) << "timestamp,duration,num_gpus,gpu_time,cluster\n"
                              "2017-10-09 06:00:00,100.0,4,400.0,a\n"
                              "2017-10-09 06:00:10,50.0,2,100.0,a\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::string swf_, philly_;
  std::ostringstream log_;
};

TEST_F(RunSimulationTest, ReplaysAnSwfFile) {
  SimulateOptions options;
  options.trace_path = swf_;
  options.processors = 10;
  options.policy = BackfillMode::kFcfs;
  auto report = RunSimulation(options, log_);
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(report->format, TraceFormat::kSwf);
  EXPECT_EQ(report->result.metrics.jobs, 3);
  EXPECT_DOUBLE_EQ(report->result.metrics.avg_wait_seconds, 197.0 / 3);
  EXPECT_EQ(report->policy, "fcfs");
  EXPECT_NE(log_.str().find("3 of 3 records kept"), std::string::npos) << log_.str();
  const std::string summary = FormatSummary(*report);
  EXPECT_NE(summary.find("average bounded slowdown"), std::string::npos) << summary;
}

TEST_F(RunSimulationTest, DefaultsToEasy) {
  SimulateOptions options;
  options.trace_path = swf_;
  options.processors = 10;
  auto report = RunSimulation(options, log_);
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(report->policy, "easy");
  EXPECT_DOUBLE_EQ(report->result.metrics.avg_wait_seconds, 99.0 / 3);
}

TEST_F(RunSimulationTest, ReplaysAPhillyFile) {
  SimulateOptions options;
  options.trace_path = philly_;
  options.gpus = 4;
  auto report = RunSimulation(options, log_);
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(report->format, TraceFormat::kPhilly);
  EXPECT_DOUBLE_EQ(report->result.metrics.avg_jct_seconds, (100.0 + 140) / 2);
}

TEST_F(RunSimulationTest, ClearErrors) {
  struct Case {
    std::string name;
    SimulateOptions options;
    std::string code;
    std::string message_part;
  };
  auto with = [](std::string trace, std::optional<int> processors, std::optional<int> gpus, std::string config = {}) {
    SimulateOptions o;
    o.trace_path = std::move(trace);
    o.processors = processors;
    o.gpus = gpus;
    o.config_path = std::move(config);
    return o;
  };
  const std::vector<Case> cases = {
      {"missing file", with((dir_ / "none.swf").string(), 10, std::nullopt), "unreadable_trace", "none.swf"},
      {"no cluster size", with(swf_, std::nullopt, std::nullopt), "usage", "--processors"},
      {"SWF with --gpus only", with(swf_, std::nullopt, 4), "usage", "--processors"},
      {"Philly with --processors only", with(philly_, 4, std::nullopt), "usage", "--gpus"},
      {"size and config", with(swf_, 4, std::nullopt, "x.yaml"), "usage", "--config"},
      {"bad config file", with(swf_, std::nullopt, std::nullopt, (dir_ / "none.yaml").string()), "bad_config",
       "none.yaml"},
      {"zero processors", with(swf_, 0, std::nullopt), "usage", "--processors"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto report = RunSimulation(c.options, log_);
    ASSERT_FALSE(report.ok());
    EXPECT_EQ(report.error().code, c.code);
    EXPECT_NE(report.error().message.find(c.message_part), std::string::npos) << report.error().message;
  }
}

TEST_F(RunSimulationTest, ReplaysOnTheDefaultConfigsHpcQueue) {
  const std::string config_path = (dir_ / "unisched.yaml").string();
  std::ofstream(config_path) << config::EmbeddedDefaultConfig();
  SimulateOptions options;
  options.trace_path = swf_;
  options.config_path = config_path;
  options.policy = BackfillMode::kConservative;
  auto report = RunSimulation(options, log_);
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(report->result.metrics.jobs, 3);
  EXPECT_EQ(report->result.never_started, 0);
  EXPECT_NE(report->cluster.find("cpu-hpc-pool"), std::string::npos) << report->cluster;
  // 4 nodes of 64 cpus: the three small jobs all start at once.
  EXPECT_DOUBLE_EQ(report->result.metrics.avg_wait_seconds, 0);
}

}  // namespace
}  // namespace unisched::sim
