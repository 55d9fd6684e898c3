// Config versions in the store (unisched/store/config_versions.h): what every
// implementation of Store must do.

#include <gtest/gtest.h>

#include "store_test_util.h"
#include "unisched/store/store.h"

namespace unisched::store {
namespace {

class ConfigVersionsTest : public testing::StoreContract {
 protected:
  ConfigHead Head() {
    auto head = store_->ReadConfigHead();
    EXPECT_TRUE(head.ok()) << head.error().message;
    return head.ok() ? *head : ConfigHead{};
  }

  // Adds a version with `text` and makes it current, as an apply does.
  ConfigHead Apply(const std::string& text, const std::string& author) {
    const ConfigHead before = Head();
    ConfigChange change;
    change.expected_changes = before.changes;
    change.add = ConfigVersionRecord{0, "digest-of-" + text, text, author, "", {}};
    change.head = before;
    change.head.previous = before.current;
    change.head.current = kAddedVersion;
    change.head.changed_by = author;
    auto after = store_->ChangeConfig(change);
    EXPECT_TRUE(after.ok()) << after.error().message;
    return after.ok() ? *after : ConfigHead{};
  }
};

INSTANTIATE_TEST_SUITE_P(Implementations, ConfigVersionsTest, ::testing::ValuesIn(testing::StoreImplementations()),
                         [](const auto& info) { return info.param; });

TEST_P(ConfigVersionsTest, ANewStoreHasNoVersionAndAnEmptyHead) {
  const ConfigHead head = Head();
  EXPECT_EQ(head.current, 0);
  EXPECT_EQ(head.canary, 0);
  EXPECT_EQ(head.changes, 0);
  auto none = store_->ReadConfigVersion(1);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto list = store_->ListConfigVersions(10);
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
}

TEST_P(ConfigVersionsTest, VersionsAreNumberedInOrderAndOutliveARestart) {
  EXPECT_EQ(Apply("a: 1\n", "seed").current, 1);
  const ConfigHead second = Apply("a: 2\n", "alice");
  EXPECT_EQ(second.current, 2);
  EXPECT_EQ(second.previous, 1);
  EXPECT_EQ(second.changes, 2);
  EXPECT_EQ(second.changed_by, "alice");
  Reopen();
  EXPECT_EQ(Head().current, 2);
  auto v1 = store_->ReadConfigVersion(1);
  ASSERT_TRUE(v1.ok() && v1->has_value());
  EXPECT_EQ((*v1)->text, "a: 1\n");
  EXPECT_EQ((*v1)->digest, "digest-of-a: 1\n");
  EXPECT_EQ((*v1)->author, "seed");
  EXPECT_GT(ToUnixMillis((*v1)->created_at), 0);
  auto list = store_->ListConfigVersions(10);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].version, 2) << "newest first";
  EXPECT_EQ((*list)[0].author, "alice");
  EXPECT_TRUE((*list)[0].text.empty()) << "the list leaves the texts out";
  auto one = store_->ListConfigVersions(1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1u);
}

TEST_P(ConfigVersionsTest, AChangeBasedOnAStaleHeadChangesNothing) {
  Apply("a: 1\n", "seed");
  const ConfigHead head = Head();
  ConfigChange stale;
  stale.expected_changes = head.changes - 1;
  stale.add = ConfigVersionRecord{0, "d", "a: 9\n", "bob", "", {}};
  stale.head = head;
  stale.head.current = kAddedVersion;
  auto refused = store_->ChangeConfig(stale);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::kConflict);
  EXPECT_EQ(refused.error().code, "config_changed");
  EXPECT_EQ(Head().current, 1);
  auto missing = store_->ReadConfigVersion(2);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value()) << "the version of a refused change is not stored";
}

TEST_P(ConfigVersionsTest, ACanaryNamesItsQueueAndIsClearedWithIt) {
  Apply("a: 1\n", "seed");
  ConfigHead head = Head();
  ConfigChange canary;
  canary.expected_changes = head.changes;
  canary.add = ConfigVersionRecord{0, "d2", "a: 2\n", "alice", "try it", {}};
  canary.head = head;
  canary.head.canary = kAddedVersion;
  canary.head.canary_queue = "ai-training";
  auto tried = store_->ChangeConfig(canary);
  ASSERT_TRUE(tried.ok()) << tried.error().message;
  EXPECT_EQ(tried->current, 1);
  EXPECT_EQ(tried->canary, 2);
  EXPECT_EQ(tried->canary_queue, "ai-training");

  ConfigChange promote;
  promote.expected_changes = tried->changes;
  promote.head = *tried;
  promote.head.previous = tried->current;
  promote.head.current = tried->canary;
  promote.head.canary = 0;
  auto promoted = store_->ChangeConfig(promote);
  ASSERT_TRUE(promoted.ok());
  EXPECT_EQ(promoted->current, 2);
  EXPECT_EQ(promoted->previous, 1);
  EXPECT_EQ(promoted->canary, 0);
  EXPECT_EQ(promoted->canary_queue, "") << "no canary, no canary queue";
  auto listed = store_->ListConfigVersions(5);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ((*listed)[0].comment, "try it");
}

}  // namespace
}  // namespace unisched::store
