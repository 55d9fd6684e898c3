#include "unisched/auth/auth.h"

#include <gtest/gtest.h>

namespace unisched::auth {
namespace {

Principal Make(Role role, std::vector<std::string> projects, std::vector<std::string> queues = {},
               std::string user = "u") {
  return {std::move(user), role, std::move(projects), std::move(queues), ""};
}

model::Job JobOf(std::string user, std::string project, std::string queue) {
  model::Job j;
  j.user = std::move(user);
  j.project = std::move(project);
  j.queue = std::move(queue);
  return j;
}

TEST(AuthTest, TokenHashIsSha256Hex) {
  // SHA-256("abc"), FIPS 180-2 test vector.
  EXPECT_EQ(HashToken("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(AuthTest, GeneratedTokensAreLongAndDistinct) {
  const std::string a = GenerateToken(), b = GenerateToken();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("usk_", 0), 0u);
  EXPECT_EQ(a.size(), 4u + 43u);  // 256 bits in base64url
}

TEST(AuthTest, RoleTable) {
  const model::Job alices = JobOf("alice", "genomics", "ai-training");
  struct Case {
    const char* name;
    Principal who;
    bool submit_genomics, read, control, raise_priority;
  };
  const std::vector<Case> cases = {
      {"member", Make(Role::kUser, {"genomics"}, {}, "bob"), true, true, false, false},
      {"owner", Make(Role::kUser, {"genomics"}, {}, "alice"), true, true, true, false},
      {"outsider", Make(Role::kUser, {"physics"}, {}, "carol"), false, false, false, false},
      {"queue-admin of the queue", Make(Role::kQueueAdmin, {}, {"ai-training"}, "qa"), false, true, true, true},
      {"queue-admin of another queue", Make(Role::kQueueAdmin, {}, {"hpc-precision"}, "qb"), false, false, false,
       false},
      {"platform-admin", Make(Role::kPlatformAdmin, {}, {}, "root"), true, true, true, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(CanSubmitTo(c.who, "genomics"), c.submit_genomics);
    EXPECT_EQ(CanReadJob(c.who, alices), c.read);
    EXPECT_EQ(CanControlJob(c.who, alices), c.control);
    EXPECT_EQ(CanRaisePriority(c.who, "ai-training"), c.raise_priority);
  }
}

TEST(AuthTest, RoleNamesRoundTrip) {
  for (Role r : {Role::kUser, Role::kQueueAdmin, Role::kPlatformAdmin}) EXPECT_EQ(ParseRole(ToString(r)), r);
  EXPECT_FALSE(ParseRole("root"));
}

}  // namespace
}  // namespace unisched::auth
