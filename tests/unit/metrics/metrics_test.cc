// Metrics: every contract series appears in the exposition with its labels,
// and the exposition passes `promtool check metrics` when promtool exists.

#include "unisched/metrics/metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace unisched::metrics {
namespace {

void Populate(Metrics& m) {
  m.SetJobs("PENDING", "hpc-precision", "cpu-hpc-pool", 3);
  m.SetJobs("RUNNING", "ai-training", "gpu-train-pool", 1);
  m.CountSubmission("hpc-precision");
  m.CountSubmission("hpc-precision");
  m.ObserveCycle(0.0012);
  m.ObserveHttp("/v1/jobs/{id}", "GET", 200, 0.0004);
  m.ObserveHttp("/v1/jobs", "POST", 201, 0.003);
  m.SetNodes("up", "cpu-hpc-pool", 4);
  m.CountStart("cpu-hpc-pool");
  m.CountFinish("COMPLETED", "cpu-hpc-pool");
  m.ObserveCommit(0.002, 17);
}

TEST(MetricsTest, SerializeHasEveryContractSeriesWithLabels) {
  Metrics m;
  Populate(m);
  const std::string text = m.Serialize();
  const std::vector<std::string> wanted = {
      R"(unisched_jobs{pool="cpu-hpc-pool",queue="hpc-precision",state="PENDING"} 3)",
      R"(unisched_jobs{pool="gpu-train-pool",queue="ai-training",state="RUNNING"} 1)",
      R"(unisched_job_submissions_total{queue="hpc-precision"} 2)",
      R"(unisched_scheduler_cycle_seconds_bucket{le=")",
      R"(unisched_scheduler_cycle_seconds_count 1)",
      R"(unisched_http_request_duration_seconds_bucket{code="200",method="GET",route="/v1/jobs/{id}",le=")",
      R"(unisched_http_request_duration_seconds_count{code="201",method="POST",route="/v1/jobs"} 1)",
      R"(unisched_nodes{pool="cpu-hpc-pool",state="up"} 4)",
      R"(unisched_jobs_started_total{pool="cpu-hpc-pool"} 1)",
      R"(unisched_jobs_finished_total{pool="cpu-hpc-pool",state="COMPLETED"} 1)",
      R"(unisched_store_commit_seconds_count 1)",
      R"(unisched_store_batch_size_bucket{le="32"} 1)",
      "# TYPE unisched_scheduler_cycle_seconds histogram",
      "# TYPE unisched_job_submissions_total counter",
      "# TYPE unisched_jobs gauge",
  };
  for (const auto& w : wanted) {
    EXPECT_NE(text.find(w), std::string::npos) << "missing: " << w << "\n" << text;
  }
}

TEST(MetricsTest, GaugesOverwriteAndCountersAccumulate) {
  Metrics m;
  m.SetNodes("up", "p", 4);
  m.SetNodes("up", "p", 2);
  m.CountSubmission("q");
  m.CountSubmission("q");
  m.CountSubmission("q");
  const std::string text = m.Serialize();
  EXPECT_NE(text.find(R"(unisched_nodes{pool="p",state="up"} 2)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(unisched_job_submissions_total{queue="q"} 3)"), std::string::npos) << text;
}

TEST(MetricsTest, HistogramBucketsSpanTheDocumentedRanges) {
  Metrics m;
  m.ObserveHttp("/healthz", "GET", 200, 0.00005);
  const std::string text = m.Serialize();
  // Cycle: 50us first bucket, 6.5536s last finite bucket.
  EXPECT_NE(text.find(R"(unisched_scheduler_cycle_seconds_bucket{le="5e-05"})"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(unisched_scheduler_cycle_seconds_bucket{le="6.5536"})"), std::string::npos) << text;
  // HTTP: 100us .. 13.1072s.
  EXPECT_NE(text.find(R"(route="/healthz",le="0.0001"} 1)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(route="/healthz",le="13.1072"} 1)"), std::string::npos) << text;
  // Batch size: 1 .. 4096.
  EXPECT_NE(text.find(R"(unisched_store_batch_size_bucket{le="1"})"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(unisched_store_batch_size_bucket{le="4096"})"), std::string::npos) << text;
}

TEST(MetricsTest, ConcurrentUpdatesAreAllCounted) {
  Metrics m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&m, t] {
      // Built piecewise: "p" + std::to_string(t) trips GCC 12's -Wrestrict (PR 105329).
      std::string pool = "p";
      pool += std::to_string(t);
      for (int i = 0; i < 1000; ++i) {
        m.CountSubmission("q");
        m.ObserveHttp("/v1/jobs", "GET", 200 + (i % 2), 0.001);
        m.SetJobs("PENDING", "q", pool, i);
        if (i % 100 == 0) m.Serialize();
      }
    });
  }
  for (auto& th : threads) th.join();
  const std::string text = m.Serialize();
  EXPECT_NE(text.find(R"(unisched_job_submissions_total{queue="q"} 8000)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(unisched_http_request_duration_seconds_count{code="200",method="GET",route="/v1/jobs"} 4000)"),
            std::string::npos)
      << text;
}

bool HavePromtool() {
  return std::system("command -v promtool >/dev/null 2>&1") == 0;
}

TEST(MetricsTest, PromtoolAcceptsTheExposition) {
  if (!HavePromtool()) GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  Metrics m;
  Populate(m);
  char path[] = "/tmp/unisched-metrics-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream out(path);
    out << m.Serialize();
  }
  const std::string cmd = std::string("promtool check metrics < ") + path + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) output.append(buf, n);
  int status = pclose(pipe);
  std::remove(path);
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output, "") << output;
}

}  // namespace
}  // namespace unisched::metrics
