// The seed's launch check 2 through the real daemon: an over-quota
// submission waits or is refused as its queue says, a higher-priority job
// preempts a preemptible one which is requeued and runs again, and backfill
// starts a short job ahead of a blocked big one without delaying it.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Small pools so that limits are reached with a handful of jobs.
constexpr const char* kPolicyConfig = R"yaml(
server:
  scheduler_tick_seconds: 0.2
pools:
  - name: gpu-train-pool
    kind: gpu
    backfill: conservative
    nodes: [x86-c16m64g8-train-01]
  - name: bf-pool
    kind: cpu
    backfill: easy
    nodes: [x86-c4m8-batch-01]
  - name: pre-pool
    kind: cpu
    backfill: easy
    nodes: [x86-c2m4-shared-01]
nodes:
  - name: x86-c16m64g8-train-01
    cpus: 16
    memory_mb: 65536
    gpus: {count: 8, model: h100, memory_gb: 80}
  - name: x86-c4m8-batch-01
    cpus: 4
    memory_mb: 8192
  - name: x86-c2m4-shared-01
    cpus: 2
    memory_mb: 4096
queues:
  - name: ai-training
    pool: gpu-train-pool
    workload_kinds: [ai-training]
    policy:
      type: priority-with-quota
      gpu_quota_per_project: 4
      preemptible: false
      quota_action: wait
  - name: ai-strict
    pool: gpu-train-pool
    policy:
      type: priority-with-quota
      project_quota: {gpus: 4}
      quota_action: reject
      preemptible: false
  - name: batch
    pool: bf-pool
    workload_kinds: [hpc]
    policy:
      type: fifo
      default_memory_mb_per_cpu: 256
  - name: low
    pool: pre-pool
    priority_tier: 0
    policy:
      type: fifo
      preemptible: true
      preempt_grace_seconds: 2
      preempt_action: requeue
      default_memory_mb_per_cpu: 256
  - name: high
    pool: pre-pool
    priority_tier: 1
    policy:
      type: fifo
      can_preempt: true
      preemptible: false
      default_memory_mb_per_cpu: 256
projects:
  - name: default
)yaml";

class PolicyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new TestDaemon();
    daemon_->UseConfigText(kPolicyConfig);
    daemon_->Start();
  }
  static void TearDownTestSuite() { delete daemon_; }
  static TestDaemon& d() { return *daemon_; }

  json Get(const std::string& id) { return d().Call("GET", "/v1/jobs/" + id).json; }

  // Polls until pred(job) holds; returns the last job seen.
  template <class Pred>
  json WaitFor(const std::string& id, Pred pred, std::chrono::seconds deadline = 30s) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    json job;
    while (std::chrono::steady_clock::now() < until) {
      job = Get(id);
      if (pred(job)) return job;
      std::this_thread::sleep_for(50ms);
    }
    return job;
  }
  static bool HasReason(const json& job, const std::string& code) {
    for (const auto& r : job["pending_reasons"]) {
      if (r["code"] == code) return true;
    }
    return false;
  }

 private:
  static inline TestDaemon* daemon_ = nullptr;
};

json GpuJob(const std::string& queue, int gpus, const std::string& script) {
  return {{"workload", {{"kind", "ai-training"}}},
          {"queue", queue},
          {"resources", {{"cpus", 1}, {"gpus", gpus}, {"memory_mb", 1024}, {"walltime_seconds", 600}}},
          {"command", {"/bin/sh", "-c", script}}};
}

TEST_F(PolicyTest, OverQuotaSubmissionWaitsWithTheQuotaNamedThenRuns) {
  const std::string holder = d().Submit(GpuJob("ai-training", 4, "sleep 30"));
  ASSERT_EQ(WaitFor(holder, [](const json& j) { return j["state"] == "RUNNING"; })["state"], "RUNNING");

  const std::string waiter = d().Submit(GpuJob("ai-training", 2, "true"));
  json job = WaitFor(waiter, [](const json& j) { return HasReason(j, "QuotaExceeded"); });
  ASSERT_EQ(job["state"], "PENDING") << job.dump();
  ASSERT_TRUE(HasReason(job, "QuotaExceeded")) << job.dump();
  const std::string message = job["pending_reasons"][0]["message"];
  EXPECT_NE(message.find("project default uses 4/4 GPUs in ai-training"), std::string::npos) << message;
  // Free GPUs exist (8 on the node, 4 used): only the quota holds it back.
  EXPECT_EQ(d().Call("GET", "/v1/jobs?state=PENDING").json["total"], 1);

  ASSERT_EQ(d().Call("DELETE", "/v1/jobs/" + holder).status, 200);
  EXPECT_EQ(d().WaitTerminal(waiter)["state"], "COMPLETED");
  d().WaitTerminal(holder);
}

TEST_F(PolicyTest, OverQuotaSubmissionIsRefusedWhereTheQueueRejects) {
  const std::string holder = d().Submit(GpuJob("ai-strict", 3, "sleep 30"));
  ASSERT_EQ(WaitFor(holder, [](const json& j) { return j["state"] == "RUNNING"; })["state"], "RUNNING");
  const int64_t before = d().Call("GET", "/v1/jobs?limit=0").json["total"];

  Reply refused = d().Call("POST", "/v1/jobs", GpuJob("ai-strict", 2, "true"));
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_EQ(refused.json["error"]["code"], "quota_exceeded");
  const std::string message = refused.json["error"]["message"];
  EXPECT_NE(message.find("project default uses 3/4 GPUs in ai-strict"), std::string::npos) << message;
  EXPECT_EQ(d().Call("GET", "/v1/jobs?limit=0").json["total"], before);  // nothing created

  // Within the quota it is accepted.
  Reply accepted = d().Call("POST", "/v1/jobs", GpuJob("ai-strict", 1, "true"));
  EXPECT_EQ(accepted.status, 201) << accepted.body;

  // A job that alone exceeds a quota could never run: refused in a waiting
  // queue too, instead of pending forever.
  Reply never = d().Call("POST", "/v1/jobs", GpuJob("ai-training", 6, "true"));
  EXPECT_EQ(never.status, 403) << never.body;
  EXPECT_EQ(never.json["error"]["code"], "quota_exceeded");

  ASSERT_EQ(d().Call("DELETE", "/v1/jobs/" + holder).status, 200);
  d().WaitTerminal(holder);
}

TEST_F(PolicyTest, HigherPriorityJobPreemptsAndTheVictimIsRequeued) {
  // The victim's first attempt runs until stopped; its second finishes.
  const json low = {{"workload", {{"kind", "hpc"}}},
                    {"queue", "low"},
                    {"resources", {{"cpus", 2}, {"walltime_seconds", 600}}},
                    {"command",
                     {"/bin/sh", "-c",
                      "if [ \"$UNISCHED_ATTEMPT\" = 1 ]; then trap 'exit 143' TERM; sleep 300 & wait; fi; echo done"}}};
  const std::string victim = d().Submit(low);
  ASSERT_EQ(WaitFor(victim, [](const json& j) { return j["state"] == "RUNNING"; })["state"], "RUNNING");

  const json high = {{"workload", {{"kind", "hpc"}}},
                     {"queue", "high"},
                     {"resources", {{"cpus", 2}, {"walltime_seconds", 600}}},
                     {"command", {"/bin/sh", "-c", "sleep 1"}}};
  const std::string preemptor = d().Submit(high);

  // Its first attempt ends CANCELLED, and it is PENDING again (reason
  // Preempted) until its second attempt starts.
  json preempted = WaitFor(victim, [](const json& j) { return j["attempts"][0]["state"] != "RUNNING"; });
  if (preempted["state"] == "PENDING") {
    EXPECT_EQ(preempted["state_reason"], "Preempted") << preempted.dump();
  }
  EXPECT_EQ(preempted["attempts"][0]["state"], "CANCELLED");
  EXPECT_NE(preempted["attempts"][0]["reason"].get<std::string>().find("preempted by job " + preemptor),
            std::string::npos)
      << preempted.dump();

  EXPECT_EQ(d().WaitTerminal(preemptor)["state"], "COMPLETED");
  json finished = d().WaitTerminal(victim);
  EXPECT_EQ(finished["state"], "COMPLETED") << finished.dump();
  EXPECT_EQ(finished["attempts"].size(), 2u);

  // Events say who preempted whom, and that the victim was requeued.
  bool victim_event = false;
  bool requeued = false;
  const json victim_events = d().Call("GET", "/v1/jobs/" + victim + "/events").json;
  SCOPED_TRACE("victim events: " + victim_events.dump());
  for (const auto& e : victim_events["events"]) {
    const std::string message = e["message"];
    if (e["kind"] == "preempted" && message.find("preempted by job " + preemptor) != std::string::npos) {
      victim_event = true;
    }
    if (e["kind"] == "requeued" && message.find("back to PENDING") != std::string::npos) requeued = true;
  }
  EXPECT_TRUE(victim_event);
  EXPECT_TRUE(requeued);
  bool preemptor_event = false;
  // Kept in a variable: a range-for over a member of a temporary dangles.
  const json preemptor_events = d().Call("GET", "/v1/jobs/" + preemptor + "/events").json;
  for (const auto& e : preemptor_events["events"]) {
    if (e["kind"] == "preempting" &&
        e["message"].get<std::string>().find("preempting job " + victim) != std::string::npos) {
      preemptor_event = true;
    }
  }
  EXPECT_TRUE(preemptor_event);
}

TEST_F(PolicyTest, BackfillStartsAShortJobAheadOfABlockedBigOne) {
  auto hpc = [](int cpus, int walltime, const std::string& script) {
    return json{{"workload", {{"kind", "hpc"}}},
                {"queue", "batch"},
                {"resources", {{"cpus", cpus}, {"walltime_seconds", walltime}}},
                {"command", {"/bin/sh", "-c", script}}};
  };
  // 2 of 4 cpus busy for up to 120 s; the big job needs all 4.
  const std::string running = d().Submit(hpc(2, 120, "sleep 60"));
  ASSERT_EQ(WaitFor(running, [](const json& j) { return j["state"] == "RUNNING"; })["state"], "RUNNING");
  const std::string big = d().Submit(hpc(4, 600, "true"));
  // Ends (by its wall time) before the big job's reservation: backfilled.
  const std::string short_job = d().Submit(hpc(2, 30, "echo short"));
  // Would run past the reservation: held back.
  const std::string long_job = d().Submit(hpc(2, 3600, "true"));

  EXPECT_EQ(d().WaitTerminal(short_job)["state"], "COMPLETED");
  json big_job = WaitFor(big, [](const json& j) { return !j["estimated_start"].is_null(); });
  EXPECT_EQ(big_job["state"], "PENDING") << big_job.dump();
  EXPECT_FALSE(big_job["estimated_start"].is_null()) << big_job.dump();
  json held = WaitFor(long_job, [](const json& j) { return HasReason(j, "ReservedForJob"); });
  EXPECT_EQ(held["state"], "PENDING") << held.dump();
  EXPECT_TRUE(HasReason(held, "ReservedForJob")) << held.dump();
  // The priority breakdown is shown and sums to the priority.
  const json& f = held["priority_factors"];
  EXPECT_EQ(held["priority"].get<int64_t>(), f["fairshare"].get<int64_t>() + f["age"].get<int64_t>() +
                                                 f["tier"].get<int64_t>() + f["size"].get<int64_t>() +
                                                 f["adjustment"].get<int64_t>());

  for (const auto& id : {running, big, long_job}) d().Call("DELETE", "/v1/jobs/" + id);
  for (const auto& id : {running, big, long_job}) d().WaitTerminal(id);
}

}  // namespace
}  // namespace unisched::testing
