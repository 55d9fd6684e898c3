// The image catalog (daemon/sandbox_images.h) over the in-memory store:
// configured versions registered once, references resolved, registration
// and rollback checked, and a rollback that survives a restart.

#include "daemon/sandbox_images.h"

#include <gtest/gtest.h>

#include "testing/memory_store.h"

namespace unisched::daemon {
namespace {

const Timestamp kNow = FromUnixMillis(1'800'000'000'000);

config::ImageSpec Image(const std::string& name, const std::string& version, const std::string& rootfs = "") {
  config::ImageSpec image;
  image.name = name;
  image.version = version;
  image.rootfs = rootfs;
  return image;
}

class ImageCatalogTest : public ::testing::Test {
 protected:
  ImageCatalog Loaded() {
    ImageCatalog catalog;
    catalog.Load(store_);
    return catalog;
  }
  testing::MemoryStore store_;
};

TEST_F(ImageCatalogTest, ConfiguredVersionsAreRegisteredAndReferencesResolve) {
  ASSERT_TRUE(ImageCatalog::RegisterConfigured(store_, {Image("python", "1"), Image("python", "2")}, kNow).ok());
  const ImageCatalog catalog = Loaded();
  EXPECT_EQ(catalog.Current("python"), "2");  // the last configured becomes current
  EXPECT_EQ(catalog.Stack("python"), (std::vector<std::string>{"1", "2"}));
  auto current = catalog.Resolve("python");
  ASSERT_TRUE(current.ok()) << current.error().message;
  EXPECT_EQ(current->version, "2");
  auto pinned = catalog.Resolve("python:1");
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(pinned->version, "1");
  for (const char* missing : {"ruby", "python:3"}) {
    auto refused = catalog.Resolve(missing);
    ASSERT_FALSE(refused.ok()) << missing;
    EXPECT_EQ(refused.error().code, "invalid_value");
    EXPECT_EQ(refused.error().field, "image");
  }
  EXPECT_TRUE(catalog.Versions("ruby").empty());
  EXPECT_EQ(catalog.Current("ruby"), std::nullopt);
}

TEST_F(ImageCatalogTest, RegistrationAndRollbackAreCheckedAndAPushedVersionBecomesCurrent) {
  ASSERT_TRUE(ImageCatalog::RegisterConfigured(store_, {Image("python", "1")}, kNow).ok());
  ImageCatalog catalog = Loaded();
  const Status exists = catalog.CheckNew("python", "1");
  ASSERT_FALSE(exists.ok());
  EXPECT_EQ(exists.error().code, "image_exists");
  EXPECT_TRUE(catalog.CheckNew("python", "2").ok());
  const Status last = catalog.CheckRollback("python");
  ASSERT_FALSE(last.ok());
  EXPECT_EQ(last.error().code, "no_previous_version");
  EXPECT_EQ(catalog.CheckRollback("ruby").error().kind, ErrorKind::kNotFound);

  catalog.Push(ImageCatalog::VersionOf(Image("python", "2"), "admin", kNow));
  EXPECT_EQ(catalog.Current("python"), "2");
  EXPECT_EQ(catalog.Resolve("python:2")->created_by, "admin");
  ASSERT_TRUE(catalog.CheckRollback("python").ok());
  catalog.Pop("python");
  EXPECT_EQ(catalog.Current("python"), "1");
}

TEST_F(ImageCatalogTest, ARestartKeepsStoredDefinitionsAndARollback) {
  ASSERT_TRUE(
      ImageCatalog::RegisterConfigured(store_, {Image("python", "1", "/srv/a"), Image("python", "2")}, kNow).ok());
  // An admin rolled back to version 1 (the manager commits this).
  ASSERT_TRUE(store_.WriteSync([](store::Transaction& t) { return t.PopImageCurrent("python"); }).ok());
  // The daemon restarts with the same config, version 1 now pointing elsewhere.
  ASSERT_TRUE(ImageCatalog::RegisterConfigured(store_, {Image("python", "1", "/srv/b"), Image("python", "2")},
                                               kNow + std::chrono::hours(1))
                  .ok());
  const ImageCatalog catalog = Loaded();
  EXPECT_EQ(catalog.Current("python"), "1") << "the rollback survives the restart";
  EXPECT_EQ(catalog.Resolve("python:1")->rootfs, "/srv/a") << "a stored version is never redefined";
}

}  // namespace
}  // namespace unisched::daemon
