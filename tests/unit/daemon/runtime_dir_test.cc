// ChooseRuntimeRunsDir: a private directory on a tmpfs per state directory,
// the configured one as given, the state directory without a tmpfs.

#include "daemon/runtime_dir.h"

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace unisched::daemon {
namespace {

namespace fs = std::filesystem;

bool IsTmpfs(const std::string& path) {
  struct statfs st {};
  return ::statfs(path.c_str(), &st) == 0 && st.f_type == TMPFS_MAGIC;
}

class RuntimeDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IsTmpfs("/dev/shm")) GTEST_SKIP() << "no tmpfs at /dev/shm";
    char tmpl[] = "/dev/shm/unisched-runtime-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }
  std::string Mine() const { return root_ + "/unisched-" + std::to_string(::geteuid()); }
  std::string root_;
};

TEST_F(RuntimeDirTest, EachStateDirGetsItsOwnPrivateDirOnTheTmpfs) {
  const RuntimeDirChoice a = ChooseRuntimeRunsDir("", "/var/lib/unisched-a", {root_});
  const RuntimeDirChoice b = ChooseRuntimeRunsDir("", "/var/lib/unisched-b", {root_});
  EXPECT_TRUE(a.chosen);
  EXPECT_EQ(a.runs_dir.rfind(Mine() + "/", 0), 0u) << a.runs_dir;
  EXPECT_EQ(fs::path(a.runs_dir).filename(), "runs");
  EXPECT_NE(a.runs_dir, b.runs_dir);
  EXPECT_EQ(ChooseRuntimeRunsDir("", "/var/lib/unisched-a", {root_}).runs_dir, a.runs_dir) << "not stable";
  const fs::path daemon_dir = fs::path(a.runs_dir).parent_path();
  for (const fs::path& dir : {fs::path(Mine()), daemon_dir}) {
    struct stat st {};
    ASSERT_EQ(::lstat(dir.c_str(), &st), 0) << dir;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << dir;
  }

  // Removed after a clean stop only when no attempt is left in it.
  fs::create_directories(a.runs_dir + "/7/1");
  RemoveRuntimeDirIfEmpty(a.runs_dir);
  EXPECT_TRUE(fs::exists(a.runs_dir));
  fs::remove_all(a.runs_dir + "/7");
  RemoveRuntimeDirIfEmpty(a.runs_dir);
  EXPECT_FALSE(fs::exists(daemon_dir));
  // A daemon that ran no attempt never made runs/: its directory goes too.
  const RuntimeDirChoice idle = ChooseRuntimeRunsDir("", "/var/lib/unisched-idle", {root_});
  ASSERT_TRUE(fs::exists(fs::path(idle.runs_dir).parent_path()));
  RemoveRuntimeDirIfEmpty(idle.runs_dir);
  EXPECT_FALSE(fs::exists(fs::path(idle.runs_dir).parent_path()));
}

TEST_F(RuntimeDirTest, ADirSomeoneElseCanReachIsNotUsed) {
  ASSERT_EQ(::mkdir(Mine().c_str(), 0777), 0);
  ASSERT_EQ(::chmod(Mine().c_str(), 0777), 0);
  const RuntimeDirChoice c = ChooseRuntimeRunsDir("", "/var/lib/unisched", {root_});
  EXPECT_FALSE(c.chosen);
  EXPECT_EQ(c.runs_dir, "/var/lib/unisched/runs");

  fs::remove(Mine());
  fs::create_directory_symlink(root_, Mine());  // a symlink planted in the name
  EXPECT_FALSE(ChooseRuntimeRunsDir("", "/var/lib/unisched", {root_}).chosen);
}

TEST_F(RuntimeDirTest, TheConfiguredDirWinsAndADiskRootIsSkipped) {
  const RuntimeDirChoice configured = ChooseRuntimeRunsDir("/srv/runs", "/var/lib/unisched", {root_});
  EXPECT_EQ(configured.runs_dir, "/srv/runs");
  EXPECT_FALSE(configured.chosen);
  if (IsTmpfs(UNISCHED_SOURCE_DIR)) GTEST_SKIP() << "the source tree is on a tmpfs";
  const RuntimeDirChoice disk = ChooseRuntimeRunsDir("", "/var/lib/unisched", {UNISCHED_SOURCE_DIR});
  EXPECT_FALSE(disk.chosen);
  EXPECT_EQ(disk.runs_dir, "/var/lib/unisched/runs");
}

}  // namespace
}  // namespace unisched::daemon
