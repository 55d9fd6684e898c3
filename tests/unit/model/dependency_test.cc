// Slurm's dependency syntax: what parses, to what, and what is refused with
// which hint.

#include "unisched/model/dependency.h"

#include <gtest/gtest.h>

namespace unisched::model {
namespace {

using T = DependencyType;

TEST(ParseDependencyTest, SlurmsFormsParseAndPrintBackCanonically) {
  struct Case {
    const char* text;
    Dependency want;
    const char* canonical;
  };
  const std::vector<Case> cases = {
      {"", {}, ""},
      {"afterok:12", {{{T::kAfterOk, {12}}}, false}, "afterok:12"},
      {"afterok:12:13,afterany:14",
       {{{T::kAfterOk, {12, 13}}, {T::kAfterAny, {14}}}, false},
       "afterok:12:13,afterany:14"},
      {"afterok:12?afternotok:13", {{{T::kAfterOk, {12}}, {T::kAfterNotOk, {13}}}, true}, "afterok:12?afternotok:13"},
      {"after:7", {{{T::kAfter, {7}}}, false}, "after:7"},
      {"singleton", {{{T::kSingleton, {}}}, false}, "singleton"},
      {"singleton,afterok:3", {{{T::kSingleton, {}}, {T::kAfterOk, {3}}}, false}, "singleton,afterok:3"},
      {"aftercorr:12,afterok:3", {{{T::kAfterCorr, {12}}, {T::kAfterOk, {3}}}, false}, "aftercorr:12,afterok:3"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto got = ParseDependency(c.text);
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ(*got, c.want);
    EXPECT_EQ(ToString(*got), c.canonical);
    EXPECT_EQ(ParseDependency(ToString(*got)).value(), *got);
  }
}

TEST(ParseDependencyTest, BadTextIsRefusedNamingWhatIsWrong) {
  struct Case {
    const char* text;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"afterok", "afterok needs at least one job id"},
      {"afterok:", "'' is not a job id"},
      {"afterok:x", "'x' is not a job id"},
      {"afterok:0", "'0' is not a job id"},
      {"afterok:-3", "'-3' is not a job id"},
      {"afterok:12,", "a term is empty"},
      {"afterok:1,afterany:2?afterok:3", "',' and '?' cannot be mixed"},
      {"afterfoo:1", "'afterfoo' is not a dependency type"},
      {"aftercorr:1?afterok:2", "cannot be one of '?' alternatives"},
      {"after:1+5", "a delay after a job"},
      {"singleton:4", "singleton names no jobs"},
      {"AfterOK:1", "'AfterOK' is not a dependency type"},
      {"afterok:12_", "'12_' is not a job id"},
      {"afterok:12_x", "'12_x' is not a job id"},
      {"afterok:12_-1", "'12_-1' is not a job id"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto got = ParseDependency(c.text);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.error().field, "dependency");
    EXPECT_EQ(got.error().kind, ErrorKind::kUnprocessable);
    EXPECT_NE(got.error().message.find(c.says), std::string::npos) << got.error().message;
    EXPECT_NE(got.error().message.find("afterok:12:13,afterany:14"), std::string::npos)  // the form to write
        << got.error().message;
  }
}

TEST(ParseDependencyTest, ArrayTasksByIdAndIndexWaitForAdmissionToNameTheirIds) {
  auto got = ParseDependency("afterok:12_7:13,afterany:12_0");
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->terms.size(), 2u);
  EXPECT_EQ(got->terms[0].jobs, (std::vector<JobId>{13}));
  EXPECT_EQ(got->terms[0].tasks, (std::vector<std::pair<JobId, int64_t>>{{12, 7}}));
  EXPECT_EQ(got->terms[1].tasks, (std::vector<std::pair<JobId, int64_t>>{{12, 0}}));
  EXPECT_EQ(ToString(*got), "afterok:13:12_7,afterany:12_0");
}

TEST(ParseDependencyTest, ItNamesAtMostAThousandJobs) {
  std::string text = "afterany";
  for (int i = 1; i <= 1000; ++i) text += ":" + std::to_string(i);
  auto most = ParseDependency(text);
  ASSERT_TRUE(most.ok());
  EXPECT_EQ(most->NamedJobs().size(), 1000u);
  auto over = ParseDependency(text + ":1001");
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.error().message.find("more than 1000 jobs"), std::string::npos);
}

TEST(ParseDependencyTest, NamedJobsListsEachOnceInOrder) {
  EXPECT_EQ(ParseDependency("afterok:5:3,afterany:3:9").value().NamedJobs(), (std::vector<JobId>{5, 3, 9}));
}

}  // namespace
}  // namespace unisched::model
