// The node cache of staged objects (executor/stager.h): at its first use by
// a process, the partial downloads of processes that are gone are removed
// (Trim never counts them, so nothing else would), others' left alone.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "executor/stager.h"
#include "unit/store/store_test_util.h"

namespace unisched::executor {
namespace {

namespace fs = std::filesystem;

TEST(StageCacheTest, PartialDownloadsOfProcessesThatAreGoneAreRemovedAtFirstUse) {
  store::testing::TempDir root;
  const std::string dir = root.path() + "/cache";
  fs::create_directory(dir);
  // A pid beyond any pid_max is no process; our parent (ctest or a shell) is one.
  const std::string dead = dir + "/" + std::string(64, 'a') + ".part-99999999-1";
  const std::string live = dir + "/" + std::string(64, 'b') + ".part-" + std::to_string(::getppid()) + "-1";
  const std::string object = dir + "/" + std::string(64, 'c');
  for (const auto& path : {dead, live, object}) std::ofstream(path) << "data";
  StageCache cache(dir, 1 << 20);
  EXPECT_TRUE(fs::exists(dead)) << "not before its first use";
  EXPECT_FALSE(cache.PathOf("http://s3", "b", "k", "etag").empty());
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(object));
}

}  // namespace
}  // namespace unisched::executor
