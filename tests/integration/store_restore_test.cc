// `unisched store restore` through the binary (docs/store.md): refused
// under a live daemon, a second daemon refused on a state directory in use,
// and a restore that the next daemon starts on. The migrate-and-restore
// path itself is tested on the store (tests/unit/store/backup_test.cc).

#include <gtest/gtest.h>

#include <filesystem>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

TEST(StoreRestoreTest, OneDaemonPerStateDirectoryAndNoRestoreUnderIt) {
  TestDaemon d;
  d.Start();
  auto restore = d.RunCli({"store", "restore", "--state-dir", d.state_dir()});
  EXPECT_EQ(restore.exit_code, 1) << restore.out << restore.err;
  EXPECT_NE(restore.err.find("another unisched daemon"), std::string::npos) << restore.err;
  // A second daemon on the same state directory stops at once.
  auto second = d.RunCli({"server", "--state-dir", d.state_dir(), "--listen", "127.0.0.1:0"});
  EXPECT_EQ(second.exit_code, 1) << second.out << second.err;
  EXPECT_NE((second.out + second.err).find("uses the state directory"), std::string::npos) << second.err;
  EXPECT_EQ(d.Call("GET", "/readyz").status, 200);  // the first one is untouched

  d.Stop();
  restore = d.RunCli({"store", "restore", "--state-dir", d.state_dir()});
  EXPECT_EQ(restore.exit_code, 1) << restore.out;
  EXPECT_NE(restore.err.find("no backup of a schema older than"), std::string::npos) << restore.err;
}

TEST(StoreRestoreTest, TheDaemonStartsOnWhatWasRestored) {
  TestDaemon d;
  d.Start();
  const std::string kept = d.Submit({{"workload", {{"kind", "hpc"}}}, {"command", {"true"}}});
  d.WaitTerminal(kept);
  d.Stop();
  const std::string db = d.state_dir() + "/unisched.db";
  const std::string copy = d.state_dir() + "/copy.backup";
  std::filesystem::copy_file(db, copy);
  d.Start();
  const std::string later = d.Submit({{"workload", {{"kind", "hpc"}}}, {"command", {"true"}}});
  d.Stop();

  auto restore = d.RunCli({"store", "restore", "--state-dir", d.state_dir(), "--from", copy});
  ASSERT_EQ(restore.exit_code, 0) << restore.err;
  EXPECT_NE(restore.out.find("restored schema version"), std::string::npos) << restore.out;
  d.Start();
  EXPECT_EQ(d.Call("GET", "/v1/jobs/" + kept).json["state"], "COMPLETED");
  EXPECT_EQ(d.Call("GET", "/v1/jobs/" + later).status, 404);
}

}  // namespace
}  // namespace unisched::testing
