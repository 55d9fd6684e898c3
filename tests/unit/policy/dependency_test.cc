// CheckDependency as a table: each type against each state a named job can
// be in, then how terms combine.

#include "unisched/policy/dependency.h"

#include <gtest/gtest.h>

#include <map>

namespace unisched::policy {
namespace {

using model::JobState;
using S = DependencyStatus;

DependencyCheck Check(const std::string& text, const std::map<model::JobId, JobState>& states,
                      model::JobId blocker = 0) {
  return CheckDependency(
      model::ParseDependency(text).value(),
      [&](model::JobId id) -> std::optional<JobState> {
        auto it = states.find(id);
        return it == states.end() ? std::nullopt : std::optional<JobState>(it->second);
      },
      blocker);
}

TEST(CheckDependencyTest, EachTypeAgainstEachState) {
  struct Case {
    const char* type;
    JobState state;
    S want;
  };
  using J = JobState;
  const std::vector<Case> cases = {
      {"after", J::kPending, S::kWaiting},      {"after", J::kHeld, S::kWaiting},
      {"after", J::kRunning, S::kMet},          {"after", J::kCompleted, S::kMet},
      {"after", J::kCancelled, S::kMet},        {"afterany", J::kPending, S::kWaiting},
      {"afterany", J::kRunning, S::kWaiting},   {"afterany", J::kCompleted, S::kMet},
      {"afterany", J::kFailed, S::kMet},        {"afterany", J::kTimeout, S::kMet},
      {"afterany", J::kNodeFail, S::kMet},      {"afterok", J::kRunning, S::kWaiting},
      {"afterok", J::kCompleted, S::kMet},      {"afterok", J::kFailed, S::kNever},
      {"afterok", J::kCancelled, S::kNever},    {"afterok", J::kTimeout, S::kNever},
      {"afternotok", J::kRunning, S::kWaiting}, {"afternotok", J::kCompleted, S::kNever},
      {"afternotok", J::kFailed, S::kMet},      {"afternotok", J::kCancelled, S::kMet},
  };
  for (const auto& c : cases) {
    const std::string text = std::string(c.type) + ":4";
    SCOPED_TRACE(text + " against " + std::string(model::ToString(c.state)));
    const DependencyCheck got = Check(text, {{4, c.state}});
    EXPECT_EQ(got.status, c.want);
    EXPECT_EQ(got.why.empty(), c.want == S::kMet) << got.why;
    if (c.want != S::kMet) {
      EXPECT_NE(got.why.find("job 4"), std::string::npos) << got.why;
    }
  }
}

TEST(CheckDependencyTest, TermsCombineAsSlurmsCommaAndQuestionMark) {
  const std::map<model::JobId, JobState> states = {
      {1, JobState::kCompleted}, {2, JobState::kFailed}, {3, JobState::kRunning}};
  struct Case {
    const char* text;
    S want;
    const char* why;
  };
  const std::vector<Case> cases = {
      {"afterok:1:3", S::kWaiting, "job 3 to end COMPLETED (afterok; it is RUNNING)"},
      {"afterok:1,afterany:2", S::kMet, ""},
      {"afterok:1:2", S::kNever, "job 2 ended FAILED; afterok needs COMPLETED"},
      {"afterok:3,afterok:2", S::kNever, "job 2 ended FAILED"},  // never wins over waiting
      {"afterok:2?afterok:1", S::kMet, ""},
      {"afterok:2?afterok:3", S::kWaiting, "one of: job 3 to end COMPLETED"},
      {"afterok:2?afternotok:1", S::kNever, "job 2 ended FAILED; afterok needs COMPLETED; job 1 ended COMPLETED"},
      {"afterok:99", S::kNever, "job 99 does not exist (afterok)"},
      {"afterany:99?afterok:1", S::kMet, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    const DependencyCheck got = Check(c.text, states);
    EXPECT_EQ(got.status, c.want);
    EXPECT_NE(got.why.find(c.why), std::string::npos) << got.why;
  }
}

TEST(CheckDependencyTest, ASingletonWaitsForItsBlocker) {
  EXPECT_EQ(Check("singleton", {}).status, S::kMet);
  const DependencyCheck blocked = Check("singleton", {}, 41);
  EXPECT_EQ(blocked.status, S::kWaiting);
  EXPECT_EQ(blocked.why, "job 41 of the same user and name to end (singleton)");
  EXPECT_EQ(Check("singleton,afterok:1", {{1, JobState::kCompleted}}, 41).status, S::kWaiting);
  EXPECT_EQ(Check("singleton?afterok:1", {{1, JobState::kCompleted}}, 41).status, S::kMet);
}

TEST(CheckDependencyTest, NoDependencyIsMet) {
  EXPECT_EQ(CheckDependency({}, nullptr).status, S::kMet);
}

}  // namespace
}  // namespace unisched::policy
