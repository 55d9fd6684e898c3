// kill -9 of the daemon: no acknowledged job is lost, and a job running across
// the crash runs exactly once and is collected after the restart.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;

int CountLines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  std::string line;
  while (std::getline(in, line)) ++n;
  return n;
}

TEST(CrashTest, Kill9UnderSubmissionsLosesNothingAndRunsOnce) {
  TestDaemon d;
  d.Start();

  // A job that runs across the crash and leaves one line per run.
  char tmpl[] = "/tmp/unisched-crash-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  ::chmod(dir.c_str(), 0777);
  const std::string marker = dir + "/runs";
  const std::string long_id = d.Submit(
      {{"workload", {{"kind", "hpc"}}}, {"command", {"/bin/sh", "-c", "echo run >> " + marker + "; sleep 3"}}});
  const auto started_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (CountLines(marker) == 0 && std::chrono::steady_clock::now() < started_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(CountLines(marker), 1);

  // A stream of submissions; remember every id that got its 201.
  std::mutex mu;
  std::vector<std::string> acknowledged;
  std::atomic<bool> stop{false};
  std::atomic<bool> submitter_ended{false};
  std::thread submitter([&] {
    client::HttpClient c("127.0.0.1", d.port());
    c.SetBearerToken(d.admin_token());
    // Generous: a slow answer must not end the stream early (the kill
    // ends a request in flight at once: the kernel closes the socket).
    c.SetTimeout(std::chrono::seconds(30));
    const std::string body = json{{"workload", {{"kind", "agent"}}}, {"command", {"true"}}}.dump();
    while (!stop) {
      auto r = c.Request("POST", "/v1/jobs", body);
      if (!r.ok()) break;  // the daemon is gone
      if (r->status == 201) {
        std::lock_guard lock(mu);
        acknowledged.push_back(json::parse(r->body)["id"].get<std::string>());
      }
    }
    submitter_ended = true;
  });
  // At least 300 ms of the stream, and until some submissions are
  // acknowledged (a slow host may need longer for its first 201s).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto acked_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!submitter_ended && std::chrono::steady_clock::now() < acked_by) {
    {
      std::lock_guard lock(mu);
      if (acknowledged.size() >= 5) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  d.Kill9();
  stop = true;
  submitter.join();
  ASSERT_FALSE(acknowledged.empty());

  d.Start();
  for (const auto& id : acknowledged) {
    Reply r = d.Call("GET", "/v1/jobs/" + id);
    ASSERT_EQ(r.status, 200) << "acknowledged job " << id << " lost";
  }
  for (const auto& id : acknowledged) {
    json job = d.WaitTerminal(id);
    EXPECT_EQ(job["state"], "COMPLETED") << job.dump();
  }
  json long_job = d.WaitTerminal(long_id);
  EXPECT_EQ(long_job["state"], "COMPLETED") << long_job.dump();
  EXPECT_EQ(long_job["attempts"].size(), 1u);
  EXPECT_EQ(CountLines(marker), 1) << "the job ran more than once";
  std::filesystem::remove_all(dir);
}

TEST(CrashTest, CleanRestartKeepsJobsAndTokens) {
  TestDaemon d;
  d.Start();
  const std::string id = d.Submit({{"workload", {{"kind", "agent"}}}, {"command", {"true"}}});
  d.WaitTerminal(id);
  d.Stop();
  d.Start();
  Reply r = d.Call("GET", "/v1/jobs/" + id);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json["state"], "COMPLETED");
}

}  // namespace
}  // namespace unisched::testing
