// Trace readers: SWF cleaning rule by rule, .gz and plain files, the Philly
// CSV and format detection.

#include "unisched/sim/trace.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace unisched::sim {
namespace {

// One SWF line: fields 1, 2, 4, 5, 8, 9, 12, 13 given, the rest -1.
std::string SwfLine(int id, int submit, int run, int allocated, int requested, int requested_time, int user = 7,
                    int group = 3) {
  return std::to_string(id) + " " + std::to_string(submit) + " -1 " + std::to_string(run) + " " +
         std::to_string(allocated) + " -1 -1 " + std::to_string(requested) + " " + std::to_string(requested_time) +
         " -1 1 " + std::to_string(user) + " " + std::to_string(group) + " -1 -1 -1 -1 -1\n";
}

TEST(ParseSwfTest, ReadsTheFieldsAReplayNeeds) {
  const std::string text = "; Version: 2.2\n; MaxProcs: 100\n" + SwfLine(1, 5, 60, 4, 4, 120, 12, 2);
  Trace trace = ParseSwf(text, 100);
  ASSERT_EQ(trace.jobs.size(), 1u);
  const TraceJob& job = trace.jobs[0];
  EXPECT_EQ(job.id, 1);
  EXPECT_EQ(job.source_id, 1);
  EXPECT_EQ(job.submit_ms, 5000);
  EXPECT_EQ(job.run_ms, 60000);
  EXPECT_EQ(job.estimate_ms, 120000);
  EXPECT_EQ(job.size, 4);
  EXPECT_EQ(job.user, "u12");
  EXPECT_EQ(job.group, "g2");
  EXPECT_EQ(trace.cleaning.records, 1);
  EXPECT_EQ(trace.cleaning.Dropped(), 0);
}

TEST(ParseSwfTest, CleansAsTheReferenceFiguresDo) {
  struct Case {
    std::string name;
    std::string line;
    bool kept;
    int size = 0;        // when kept
    int64_t run_ms = 0;  // when kept
    int64_t CleaningReport::*counter = nullptr;
  };
  const std::vector<Case> cases = {
      {"plain job", SwfLine(1, 0, 10, 8, 8, 20), true, 8, 10000, nullptr},
      {"requested procs win over allocated", SwfLine(1, 0, 10, 6, 8, 20), true, 8, 10000, nullptr},
      {"missing requested procs: allocated", SwfLine(1, 0, 10, 6, -1, 20), true, 6, 10000,
       &CleaningReport::filled_size},
      {"missing allocated procs: requested", SwfLine(1, 0, 10, -1, 5, 20), true, 5, 10000, nullptr},
      {"both procs missing", SwfLine(1, 0, 10, -1, -1, 20), false, 0, 0, &CleaningReport::dropped_no_size},
      {"too large", SwfLine(1, 0, 10, 101, 101, 20), false, 0, 0, &CleaningReport::dropped_too_large},
      {"exactly the machine", SwfLine(1, 0, 10, 100, 100, 20), true, 100, 10000, nullptr},
      {"run time 0", SwfLine(1, 0, 0, 4, 4, 20), false, 0, 0, &CleaningReport::dropped_run_time},
      {"run time missing", SwfLine(1, 0, -1, 4, 4, 20), false, 0, 0, &CleaningReport::dropped_run_time},
      {"requested time 0", SwfLine(1, 0, 10, 4, 4, 0), false, 0, 0, &CleaningReport::dropped_requested_time},
      {"requested time missing", SwfLine(1, 0, 10, 4, 4, -1), false, 0, 0, &CleaningReport::dropped_requested_time},
      {"negative submit", SwfLine(1, -5, 10, 4, 4, 20), false, 0, 0, &CleaningReport::dropped_submit},
      {"run time capped at requested time", SwfLine(1, 0, 50, 4, 4, 20), true, 4, 20000,
       &CleaningReport::capped_run_time},
      {"too few fields", "1 0 -1 10 4\n", false, 0, 0, &CleaningReport::malformed},
      {"not a number", "1 0 -1 ten 4 -1 -1 4 20 -1 1 1 1 -1 -1 -1 -1 -1\n", false, 0, 0, &CleaningReport::malformed},
      // Number forms: the digit-by-digit path and the from_chars fallback.
      {"a sign alone", "1 0 -1 10 4 -1 -1 - 20 -1 1 1 1 -1 -1 -1 -1 -1\n", false, 0, 0, &CleaningReport::malformed},
      {"a plus sign", "1 0 -1 10 4 -1 -1 +4 20 -1 1 1 1 -1 -1 -1 -1 -1\n", false, 0, 0, &CleaningReport::malformed},
      {"digits then a letter", "1 0 -1 10 4 -1 -1 4x 20 -1 1 1 1 -1 -1 -1 -1 -1\n", false, 0, 0,
       &CleaningReport::malformed},
      {"decimal run time", "1 0 -1 10.5 4 -1 -1 4 20 -1 1 1 1 -1 -1 -1 -1 -1\n", true, 4, 10500, nullptr},
      {"leading zeros", "1 0 -1 010 4 -1 -1 004 20 -1 1 1 1 -1 -1 -1 -1 -1\n", true, 4, 10000, nullptr},
      {"a number then a sign", "1 0 -1 10 4 -1 -1 4- 20 -1 1 1 1 -1 -1 -1 -1 -1\n", false, 0, 0,
       &CleaningReport::malformed},
      {"a sign then a letter", "1 0 -1 10 4 -1 -1 -x 20 -1 1 1 1 -1 -1 -1 -1 -1\n", false, 0, 0,
       &CleaningReport::malformed},
      {"two signs", "1 0 -1 10 4 -1 -1 --4 20 -1 1 1 1 -1 -1 -1 -1 -1\n", false, 0, 0, &CleaningReport::malformed},
      {"15 digits (the fast path's last)", "1 0 -1 10 4 -1 -1 4 100000000000000 -1 1 1 1 -1 -1 -1 -1 -1\n", true, 4,
       10000, nullptr},
      {"16 digits (past the fast path)", "1 0 -1 10 4 -1 -1 4 1000000000000000 -1 1 1 1 -1 -1 -1 -1 -1\n", true, 4,
       10000, nullptr},
      {"beyond 2^53", "1 0 -1 10 4 -1 -1 4 9007199254740996 -1 1 1 1 -1 -1 -1 -1 -1\n", false, 0, 0,
       &CleaningReport::malformed},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Trace trace = ParseSwf(c.line, 100);
    EXPECT_EQ(trace.cleaning.records, 1);
    ASSERT_EQ(trace.jobs.size(), c.kept ? 1u : 0u);
    if (c.kept) {
      EXPECT_EQ(trace.jobs[0].size, c.size);
      EXPECT_EQ(trace.jobs[0].run_ms, c.run_ms);
    }
    if (c.counter) {
      EXPECT_EQ(trace.cleaning.*c.counter, 1);
    }
  }
}

TEST(ParseSwfTest, NumbersKeptJobsInFileOrderAndSortsBySubmitTime) {
  const std::string text = SwfLine(10, 30, 5, 1, 1, 5) + SwfLine(11, 0, 0, 1, 1, 5)  // dropped
                           + SwfLine(12, 10, 5, 1, 1, 5) + SwfLine(13, 10, 5, 2, 2, 5) + "\n  \n";
  Trace trace = ParseSwf(text, 4);
  ASSERT_EQ(trace.jobs.size(), 3u);
  // ids: position after cleaning in file order (10 -> 1, 12 -> 2, 13 -> 3);
  // order: by submit time, file order among equal times.
  EXPECT_EQ(trace.jobs[0].source_id, 12);
  EXPECT_EQ(trace.jobs[0].id, 2);
  EXPECT_EQ(trace.jobs[1].source_id, 13);
  EXPECT_EQ(trace.jobs[1].id, 3);
  EXPECT_EQ(trace.jobs[2].source_id, 10);
  EXPECT_EQ(trace.jobs[2].id, 1);
  EXPECT_EQ(trace.cleaning.records, 4);
  EXPECT_EQ(trace.cleaning.dropped_run_time, 1);
  EXPECT_EQ(trace.cleaning.Summary(), "3 of 4 records kept; dropped: 1 with run time <= 0");
}

TEST(ParseSwfTest, AcceptsCrLfAndTabs) {
  Trace trace = ParseSwf("; header\r\n1\t0\t-1\t10\t2\t-1\t-1\t2\t10\t-1\t1\t1\t1\t-1\t-1\t-1\t-1\t-1\r\n", 4);
  ASSERT_EQ(trace.jobs.size(), 1u);
  EXPECT_EQ(trace.jobs[0].size, 2);
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("unisched-sim-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

using ReadTraceFileTest = TempDir;

TEST_F(ReadTraceFileTest, ReadsGzipAndPlainFilesAlike) {
  const std::string text = "; tiny\n" + SwfLine(1, 0, 10, 2, 2, 20) + SwfLine(2, 1, 10, 2, 2, 20);
  const std::string gz_path = (dir_ / "tiny.swf.gz").string();
  gzFile gz = gzopen(gz_path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
  const std::string plain_path = (dir_ / "tiny.swf").string();
  std::ofstream(plain_path) << text;

  auto from_gz = ReadTraceFile(gz_path);
  ASSERT_TRUE(from_gz.ok()) << from_gz.error().message;
  EXPECT_EQ(*from_gz, text);
  auto from_plain = ReadTraceFile(plain_path);
  ASSERT_TRUE(from_plain.ok()) << from_plain.error().message;
  EXPECT_EQ(*from_plain, text);
  EXPECT_EQ(ParseSwf(*from_gz, 4).jobs.size(), 2u);
}

TEST_F(ReadTraceFileTest, MissingFileIsAnErrorNamingIt) {
  auto text = ReadTraceFile((dir_ / "nope.swf").string());
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message.find("nope.swf"), std::string::npos);
}

TEST(ParsePhillyTest, ReadsSortsAndCleans) {
  const std::string text =
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
      "2017-10-09 06:13:03,2951.0,2,5902.0,6214e9\n"
      "2017-10-09 06:13:03,10.5,4,42.0,6214e9\n"      // same time as the row above: after it
      "2017-10-09 06:00:00,100.0,16,1600.0,aaaaaa\n"  // more GPUs than the cluster
      "2017-10-09 06:00:00,0.0,1,0.0,aaaaaa\n"        // no duration
      "2017-13-09 06:00:00,5.0,1,5.0,aaaaaa\n"        // no such month
      "\n";
  auto trace = ParsePhilly(text, 8);
  ASSERT_TRUE(trace.ok()) << trace.error().message;
  EXPECT_EQ(trace->format, TraceFormat::kPhilly);
  ASSERT_EQ(trace->jobs.size(), 3u);
  // 2017-10-09 06:13:03 UTC = 1507529583 s.
  EXPECT_EQ(trace->jobs[0].submit_ms, 1507529583000);
  EXPECT_EQ(trace->jobs[0].source_id, 2);
  EXPECT_EQ(trace->jobs[0].id, 1);
  EXPECT_EQ(trace->jobs[0].size, 2);
  EXPECT_EQ(trace->jobs[0].run_ms, 2951000);
  EXPECT_EQ(trace->jobs[0].estimate_ms, 2951000);  // no estimate in the trace: the run time
  EXPECT_EQ(trace->jobs[0].group, "6214e9");
  EXPECT_EQ(trace->jobs[1].source_id, 3);
  EXPECT_EQ(trace->jobs[1].run_ms, 10500);
  EXPECT_EQ(trace->jobs[2].source_id, 1);
  EXPECT_EQ(trace->jobs[2].id, 3);
  EXPECT_EQ(trace->cleaning.records, 6);
  EXPECT_EQ(trace->cleaning.dropped_too_large, 1);
  EXPECT_EQ(trace->cleaning.dropped_run_time, 1);
  EXPECT_EQ(trace->cleaning.malformed, 1);
}

TEST(ParsePhillyTest, RejectsAnotherHeader) {
  EXPECT_FALSE(ParsePhilly("a,b,c\n1,2,3\n", 8).ok());
  EXPECT_FALSE(ParsePhilly("", 8).ok());
}

TEST(DetectFormatTest, PhillyByItsHeaderElseSwf) {
  EXPECT_EQ(DetectFormat("timestamp,duration,num_gpus,gpu_time,cluster\n"), TraceFormat::kPhilly);
  EXPECT_EQ(DetectFormat("timestamp,duration,num_gpus,gpu_time,cluster\r\nx"), TraceFormat::kPhilly);
  EXPECT_EQ(DetectFormat("; Version: 2.2\n1 0 -1 10"), TraceFormat::kSwf);
  EXPECT_EQ(DetectFormat(""), TraceFormat::kSwf);
}

}  // namespace
}  // namespace unisched::sim
