// The warm pool's bookkeeping (daemon/sandbox_warm_pool.h): targets, what a
// refill starts and lets go, and taking an instance for a queue. No
// instance runs here: the pool never looks inside one.

#include "daemon/sandbox_warm_pool.h"

#include <gtest/gtest.h>

#include "testing/memory_store.h"

namespace unisched::daemon {
namespace {

const Timestamp kNow = FromUnixMillis(1'800'000'000'000);

class WarmPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config::ImageSpec python;
    python.name = "python";
    python.version = "2";
    ASSERT_TRUE(ImageCatalog::RegisterConfigured(store_, {python}, kNow).ok());
    images_.Load(store_);
  }
  ImageVersion Version(const std::string& version) { return *images_.Resolve("python:" + version); }
  StartedInstance Idle(const std::string& queue) { return StartedInstance{nullptr, queue, {}}; }
  // Runs a refill's starts as if each succeeded for `queue`.
  void Started(const WarmPool::Refill& refill, const std::string& queue = "agent-sandbox") {
    for (const auto& image : refill.to_start) {
      pool_.StartEnded(image);
      pool_.Add(image, Idle(queue));
    }
  }

  testing::MemoryStore store_;
  ImageCatalog images_;
  WarmPool pool_;
};

TEST_F(WarmPoolTest, TargetsRiseFromTheConfigAndAreSetByTheApi) {
  EXPECT_EQ(pool_.Target("python"), 0);
  pool_.RaiseTarget("python", 3);
  pool_.RaiseTarget("python", 1);  // the largest of the config's entries
  EXPECT_EQ(pool_.Target("python"), 3);
  pool_.SetTarget("python", 1);  // POST /v1/images sets it
  EXPECT_EQ(pool_.Target("python"), 1);
}

TEST_F(WarmPoolTest, ARefillStartsWhatIsMissingOnceAndNothingMoreWhileStartsAreUnderWay) {
  pool_.SetTarget("python", 2);
  const WarmPool::Refill first = pool_.PlanRefill(images_);
  ASSERT_EQ(first.to_start.size(), 2u);
  EXPECT_EQ(first.to_start[0].version, "2");
  EXPECT_TRUE(first.stale.empty());
  EXPECT_TRUE(pool_.PlanRefill(images_).to_start.empty()) << "two starts are under way";
  Started(first);
  EXPECT_EQ(pool_.Ready("python"), 2);
  EXPECT_TRUE(pool_.PlanRefill(images_).to_start.empty());
}

TEST_F(WarmPoolTest, ALargeTargetFillsSixteenAPass) {
  pool_.SetTarget("python", 40);
  const WarmPool::Refill first = pool_.PlanRefill(images_);
  EXPECT_EQ(first.to_start.size(), 16u);
  Started(first);
  EXPECT_EQ(pool_.PlanRefill(images_).to_start.size(), 16u);
}

TEST_F(WarmPoolTest, AnInstanceIsTakenOnlyForItsQueue) {
  pool_.Add(Version("2"), Idle("agent-sandbox"));
  EXPECT_FALSE(pool_.Take(Version("2"), "other-queue").has_value());
  auto taken = pool_.Take(Version("2"), "agent-sandbox");
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->queue, "agent-sandbox");
  EXPECT_EQ(pool_.Ready("python"), 0);
}

TEST_F(WarmPoolTest, ANewCurrentVersionLetsTheOldOnesGoAndALowerTargetTheSurplus) {
  pool_.SetTarget("python", 2);
  Started(pool_.PlanRefill(images_));
  config::ImageSpec three;
  three.name = "python";
  three.version = "3";
  images_.Push(ImageCatalog::VersionOf(three, "admin", kNow));
  const WarmPool::Refill rolled = pool_.PlanRefill(images_);
  EXPECT_EQ(rolled.stale.size(), 2u) << "version 2 is no longer current";
  ASSERT_EQ(rolled.to_start.size(), 2u);
  EXPECT_EQ(rolled.to_start[0].version, "3");
  Started(rolled);

  pool_.SetTarget("python", 1);
  const WarmPool::Refill lower = pool_.PlanRefill(images_);
  EXPECT_EQ(lower.stale.size(), 1u);
  EXPECT_TRUE(lower.to_start.empty());
  EXPECT_EQ(pool_.Ready("python"), 1);
  EXPECT_EQ(pool_.TakeAll().size(), 1u);
  EXPECT_EQ(pool_.Ready("python"), 0);
}

}  // namespace
}  // namespace unisched::daemon
