// Black-hole detection (daemon/node_health.h), on a fake time.

#include "daemon/node_health.h"

#include <gtest/gtest.h>

namespace unisched::daemon {
namespace {

const Timestamp kStart = FromUnixMillis(1'800'000'000'000);

Timestamp At(int seconds) {
  return kStart + std::chrono::seconds(seconds);
}

TEST(BlackHoleDetectorTest, DrainsANodeWhereEnoughJobsFailWithinTheWindow) {
  BlackHoleDetector detector(3, std::chrono::seconds(60));
  EXPECT_FALSE(detector.RecordFailure("n1", At(0)));
  EXPECT_FALSE(detector.RecordFailure("n1", At(30)));
  EXPECT_FALSE(detector.RecordFailure("n2", At(31)));  // another node counts apart
  auto why = detector.RecordFailure("n1", At(59));
  ASSERT_TRUE(why);
  EXPECT_EQ(*why, "black hole: 3 jobs failed on it within 60 s");
}

TEST(BlackHoleDetectorTest, FailuresOlderThanTheWindowNoLongerCount) {
  BlackHoleDetector detector(3, std::chrono::seconds(60));
  detector.RecordFailure("n1", At(0));
  detector.RecordFailure("n1", At(50));
  EXPECT_FALSE(detector.RecordFailure("n1", At(61)));  // the first fell out: 2 within 60 s
  EXPECT_TRUE(detector.RecordFailure("n1", At(100)));  // 50, 61, 100
}

TEST(BlackHoleDetectorTest, ForgetStartsAfreshAndZeroIsOff) {
  BlackHoleDetector detector(2, std::chrono::seconds(60));
  detector.RecordFailure("n1", At(0));
  ASSERT_TRUE(detector.RecordFailure("n1", At(1)));
  detector.Forget("n1");  // drained
  EXPECT_FALSE(detector.RecordFailure("n1", At(2)));

  BlackHoleDetector off(0, std::chrono::seconds(60));
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(off.RecordFailure("n1", At(i)));
}

}  // namespace
}  // namespace unisched::daemon
