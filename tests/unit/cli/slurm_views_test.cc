// squeue's and sacct's views of API job objects, with a fixed time.

#include "cli/slurm_views.h"

#include <gtest/gtest.h>

namespace unisched::cli {
namespace {

using nlohmann::json;

const Timestamp kNow = *ParseRfc3339("2026-12-06T12:00:00Z");

json Running() {
  return {{"id", "41"},
          {"name", "sim-with-a-long-name"},
          {"user", "alice"},
          {"project", "genomics"},
          {"queue", "batch"},
          {"pool", "cpu"},
          {"state", "RUNNING"},
          {"state_reason", ""},
          {"resources", {{"nodes", 2}, {"cpus", 4}, {"gpus", 0}, {"walltime_seconds", 7200}}},
          {"nodes", {"n1", "n2"}},
          {"pending_reasons", json::array()},
          {"priority", 3},
          {"exit_code", nullptr},
          {"submitted_at", "2026-12-06T10:00:00Z"},
          {"started_at", "2026-12-06T10:58:55Z"},
          {"ended_at", nullptr},
          {"attempts", json::array()}};
}

json Pending() {
  json j = Running();
  j["id"] = "42";
  j["name"] = "wait";
  j["state"] = "PENDING";
  j["nodes"] = json::array();
  j["started_at"] = nullptr;
  j["resources"]["walltime_seconds"] = 0;
  j["pending_reasons"] = {{{"code", "Dependency"}, {"message", "waits for job 41"}}};
  return j;
}

TEST(FormatSqueueTest, SlurmsDefaultColumns) {
  auto text = FormatSqueue({Running(), Pending()}, kSqueueDefaultFormat, kNow);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text,
            "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
            "                41     batch sim-with    alice  R    1:01:05      2 n1,n2\n"
            "                42     batch     wait    alice PD       0:00      2 (Dependency)\n");
}

TEST(FormatSqueueTest, FieldsWidthsAndLiterals) {
  auto text = FormatSqueue({Running(), Pending()}, "%i|%-6a|%T|%l|%C|%r|%%", kNow);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text,
            "JOBID|ACCOUN|STATE|TIME_LIMIT|CPUS|REASON|%\n"
            "41|genomi|RUNNING|2:00:00|8|None|%\n"
            "42|genomi|PENDING|UNLIMITED|8|Dependency|%\n");
}

TEST(FormatSqueueTest, AnUnknownLetterIsAUsageErrorNamingIt) {
  auto text = FormatSqueue({}, "%i %X", kNow);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message.find("%X is not a field"), std::string::npos) << text.error().message;
  EXPECT_FALSE(FormatSqueue({}, "%.5", kNow).ok());
}

TEST(FormatSacctTest, RowsWithLedgerUsage) {
  json done = Running();
  done["state"] = "FAILED";
  done["exit_code"] = 3;
  done["ended_at"] = "2026-12-06T11:00:00Z";
  done["attempts"] = {{{"usage", {{"max_rss_kb", 2048}}}}};
  const json usage = {{"41", {{"cpu_core_seconds", 520.0}, {"cpu_seconds_used", 61.4}}}};
  auto text = FormatSacct({done}, usage, "JobID,State,ExitCode,Elapsed,CPUTimeRAW,TotalCPU,MaxRSS,jobname%4", kNow);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text,
            "JobID        State      ExitCode   Elapsed    CPUTimeRAW TotalCPU   MaxRSS     JobN\n"
            "------------ ---------- ---------- ---------- ---------- ---------- ---------- ----\n"
            "41           FAILED     3:0        00:01:05          520 00:01:01   2048K      sim-\n");
}

json WaitingArray() {
  json j = Pending();
  j["id"] = "50";
  j["dependency"] = "afterok:41";
  j["started_at"] = "2026-12-06T11:00:00Z";  // a task of it started
  j["array"] = {{"indices", "1-9:2"}, {"waiting", "5-9:2"}, {"max_running", 2}, {"first_task_id", "51"}};
  return j;
}

TEST(FormatSqueueTest, ArraysCollapsedOrOneRowPerWaitingTask) {
  json started = WaitingArray();
  started["array"]["waiting"] = "";  // every task started: its tasks are the rows
  const std::vector<json> jobs = {WaitingArray(), started};
  auto collapsed = FormatSqueue(ExpandArrays(jobs, false), "%i %t %M %K %A %E", kNow, /*header=*/false);
  ASSERT_TRUE(collapsed.ok()) << collapsed.error().message;
  EXPECT_EQ(*collapsed, "50_[5-9:2%2] PD 0:00 [5-9:2%2] 50 afterok:41\n");
  auto expanded = FormatSqueue(ExpandArrays(jobs, true), "%i %K %A %F", kNow, /*header=*/false);
  ASSERT_TRUE(expanded.ok()) << expanded.error().message;
  EXPECT_EQ(*expanded, "50_5 5 50 50\n50_7 7 50 50\n50_9 9 50 50\n");
}

TEST(FormatSqueueTest, SlurmsOtherLetters) {
  json running = Running();
  running["command"] = {"/bin/sim", "-n", "4"};
  running["workdir"] = "/shared/alice";
  running["resources"]["memory_mb"] = 4096;
  auto text = FormatSqueue({running, Pending()}, "%i|%L|%p|%Z|%o|%c|%m|%E|%K|%S", kNow);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text,
            "JOBID|TIME_LEFT|PRIORITY|WORK_DIR|COMMAND|MIN_CPUS|MIN_MEMORY|DEPENDENCY|ARRAY_TASK_ID|START_TIME\n"
            "41|58:55|3|/shared/alice|/bin/sim -n 4|4|4096M|(null)|N/A|2026-12-06T10:58:55\n"
            "42|UNLIMITED|3|(null)||4|0M|(null)|N/A|N/A\n");
}

TEST(FormatSacctTest, SlurmsTimesDurationsSignalsAndParsableRows) {
  json killed = Running();
  killed["state"] = "FAILED";
  killed["exit_code"] = 137;
  killed["ended_at"] = "2026-12-06T11:00:00Z";
  killed["attempts"] = {{{"reason", "killed by signal 9"}}};
  json exited = killed;
  exited["id"] = "43";
  exited["attempts"] = {{{"reason", "exited with 137"}}};
  auto text = FormatSacct({killed, exited, Pending()}, json::object(), "JobID,ExitCode,Start,End,Timelimit", kNow);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text,
            "JobID        ExitCode   Start               End                 Timelimit\n"
            "------------ ---------- ------------------- ------------------- ----------\n"
            "41           0:9        2026-12-06T10:58:55 2026-12-06T11:00:00 02:00:00\n"
            "43           137:0      2026-12-06T10:58:55 2026-12-06T11:00:00 02:00:00\n"
            "42           0:0        Unknown             Unknown             UNLIMITED\n");
  json cancelled = killed;
  cancelled["state"] = "CANCELLED";
  cancelled["exit_code"] = 143;
  cancelled["attempts"] = {{{"reason", "cancelled by alice"}}};
  json timeout = cancelled;
  timeout["state"] = "TIMEOUT";
  auto stopped = FormatSacct({cancelled, timeout, Pending()}, json::object(), "ExitCode,Reason", kNow);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(*stopped,
            "ExitCode   Reason\n"
            "---------- ----------\n"
            "0:15       None\n"
            "0:0        None\n"
            "0:0        Dependency\n");
  auto parsable = FormatSacct({killed}, json::object(), "JobID,State", kNow, {true, true, true});
  ASSERT_TRUE(parsable.ok());
  EXPECT_EQ(*parsable, "JobID|State|\n41|FAILED|\n");
  auto bare = FormatSacct({killed}, json::object(), "JobID,State", kNow, {false, true, false});
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(*bare, "41|FAILED\n");
}

TEST(FormatSacctTest, UnknownFieldsAreUsageErrors) {
  auto text = FormatSacct({}, json::object(), "JobID,Bogus", kNow);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message.find("'Bogus' is not a field"), std::string::npos);
}

}  // namespace
}  // namespace unisched::cli
