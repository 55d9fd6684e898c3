// Slurm's output file patterns, as a table of cases.

#include "unisched/model/output_pattern.h"

#include <gtest/gtest.h>

#include <string>

namespace unisched::model {
namespace {

TEST(OutputPatternTest, ExpandsSlurmsLetters) {
  const OutputPlace place{42, 3, "x86-c4m4-hpc-02", "alice", "sim"};
  struct Case {
    const char* pattern;
    const char* expanded;
  };
  for (const Case& c :
       {Case{"slurm-%j.out", "slurm-42.out"}, Case{"/shared/%u/%x-%j.%t.log", "/shared/alice/sim-42.3.log"},
        Case{"%N.err", "x86-c4m4-hpc-02.err"}, Case{"%A_%a.out", "42_4294967294.out"},
        Case{"run-%5j-%3t", "run-00042-003"}, Case{"100%%", "100%"}, Case{"%2j", "42"}, Case{"plain", "plain"}}) {
    EXPECT_EQ(CheckOutputPattern(c.pattern), "") << c.pattern;
    EXPECT_EQ(ExpandOutputPattern(c.pattern, place), c.expanded) << c.pattern;
  }
}

TEST(OutputPatternTest, RefusesWhatItCannotExpandSayingWhatItCan) {
  for (const char* pattern : {"slurm-%q.out", "trailing-%", "%5", "%s"}) {
    const std::string why = CheckOutputPattern(pattern);
    EXPECT_NE(why.find("unknown pattern"), std::string::npos) << pattern << ": " << why;
    EXPECT_NE(why.find("%j (job id)"), std::string::npos) << why;
  }
  EXPECT_NE(CheckOutputPattern(""), "");
  EXPECT_NE(CheckOutputPattern(std::string("a\0b", 3)), "");
  EXPECT_NE(CheckOutputPattern(std::string(5000, 'a')), "");
}

}  // namespace
}  // namespace unisched::model
