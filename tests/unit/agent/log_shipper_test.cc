// The agent's log shipper (src/agent/log_shipper.h) against a daemon's copy
// kept in memory with the daemon's rule: a chunk is written only at the end
// of the copy, and the answer is the copy's size.

#include "agent/log_shipper.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace unisched::agent {
namespace {

class LogShipperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("shipper-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& stream) const { return (dir_ / stream).string(); }
  void Write(const std::string& stream, const std::string& text) {
    std::ofstream(Path(stream), std::ios::app | std::ios::binary) << text;
  }
  // The daemon: writes at the end of its copy only.
  LogShipper::Send Daemon() {
    return [this](const executor::AttemptRef&, const std::string& stream, int64_t offset,
                  std::string_view bytes) -> std::optional<int64_t> {
      ++calls_;
      if (down_) return std::nullopt;
      if (refuse_) return LogShipper::kRefused;
      std::string& copy = copies_[stream];
      if (offset == static_cast<int64_t>(copy.size())) copy.append(bytes);
      return static_cast<int64_t>(copy.size());
    };
  }

  std::filesystem::path dir_;
  LogShipper shipper_{[this](const executor::AttemptRef&, const std::string& stream) { return Path(stream); }};
  const executor::AttemptRef task_{7, 1, 0};
  std::map<std::string, std::string> copies_;
  int calls_ = 0;
  bool down_ = false, refuse_ = false;
};

TEST_F(LogShipperTest, WhatTheFilesGainedIsShippedOnceInChunks) {
  const std::string big(LogShipper::kChunkBytes * 2 + 10, 'x');
  Write("stdout", big);
  Write("stderr", "oops\n");
  ASSERT_TRUE(shipper_.Ship(task_, Daemon()));
  EXPECT_EQ(copies_["stdout"], big);
  EXPECT_EQ(copies_["stderr"], "oops\n");
  EXPECT_EQ(calls_, 4);  // three chunks of stdout, one of stderr
  ASSERT_TRUE(shipper_.Ship(task_, Daemon()));
  EXPECT_EQ(calls_, 4);  // nothing new: nothing sent
  Write("stdout", "more\n");
  ASSERT_TRUE(shipper_.Ship(task_, Daemon()));
  EXPECT_EQ(copies_["stdout"], big + "more\n");
}

TEST_F(LogShipperTest, ADaemonAheadOrBehindIsFollowedAndAnUnreachableOneWaits) {
  Write("stdout", "one\ntwo\n");
  copies_["stdout"] = "one\n";  // the daemon has a part already (the agent restarted)
  ASSERT_TRUE(shipper_.Ship(task_, Daemon()));
  EXPECT_EQ(copies_["stdout"], "one\ntwo\n");  // nothing twice
  Write("stdout", "three\n");
  down_ = true;
  EXPECT_FALSE(shipper_.Ship(task_, Daemon()));  // later
  down_ = false;
  ASSERT_TRUE(shipper_.Ship(task_, Daemon()));
  EXPECT_EQ(copies_["stdout"], "one\ntwo\nthree\n");
}

TEST_F(LogShipperTest, ARefusedTaskIsNotShippedAgainAndAMissingFileIsNothing) {
  EXPECT_TRUE(shipper_.Ship(task_, Daemon()));  // no files yet
  EXPECT_EQ(calls_, 0);
  Write("stdout", "x\n");
  refuse_ = true;
  EXPECT_TRUE(shipper_.Ship(task_, Daemon()));  // done with: the daemon does not want it
  EXPECT_TRUE(copies_.empty());
}

}  // namespace
}  // namespace unisched::agent
