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
  auto text = FormatSqueue({}, "%i %Z", kNow);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message.find("%Z is not a field"), std::string::npos) << text.error().message;
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

TEST(FormatSacctTest, UnknownFieldsAreUsageErrors) {
  auto text = FormatSacct({}, json::object(), "JobID,Bogus", kNow);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message.find("'Bogus' is not a field"), std::string::npos);
}

}  // namespace
}  // namespace unisched::cli
