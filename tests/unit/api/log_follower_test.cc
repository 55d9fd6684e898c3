// LogFollower against a log in memory that grows between reads and a
// writer that ends when the test says.

#include "api/log_follower.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace unisched::api {
namespace {

struct FakeLog {
  std::string text;
  bool writer_live = true;
  int live_asked = 0;
  LogFollower Follower() {
    return LogFollower(
        [this](LogRange range) {
          return range.offset >= text.size() ? std::string() : text.substr(range.offset, range.max_bytes);
        },
        [this] {
          ++live_asked;
          return writer_live;
        });
  }
};

TEST(LogFollowerTest, SendsWhatIsNewAndWaitsWhileTheWriterLives) {
  FakeLog log;
  LogFollower follower = log.Follower();
  auto piece = follower.Next();
  EXPECT_EQ(piece.data, "");
  EXPECT_FALSE(piece.done);  // nothing yet, more may come
  log.text = "one\n";
  piece = follower.Next();
  EXPECT_EQ(piece.data, "one\n");
  EXPECT_FALSE(piece.done);
  log.text += "two\n";
  piece = follower.Next();
  EXPECT_EQ(piece.data, "two\n");  // only the new bytes
  EXPECT_EQ(log.live_asked, 1);    // asked only when there was nothing new
}

TEST(LogFollowerTest, WhatTheWriterWroteBeforeItEndedIsSentBeforeTheEnd) {
  FakeLog log;
  LogFollower follower = log.Follower();
  log.text = "a";
  EXPECT_EQ(follower.Next().data, "a");
  // The writer writes its last bytes and ends between two polls.
  log.text += "last";
  log.writer_live = false;
  auto piece = follower.Next();
  EXPECT_EQ(piece.data, "last");
  EXPECT_FALSE(piece.done);
  piece = follower.Next();
  EXPECT_EQ(piece.data, "");
  EXPECT_TRUE(piece.done);
}

TEST(LogFollowerTest, TheRaceBetweenTheLastReadAndTheEndLosesNothing) {
  // The read finds nothing, then the writer writes and ends before the
  // follower asks whether it lives: the read after the answer gets it.
  FakeLog log;
  bool wrote_at_the_end = false;
  LogFollower follower(
      [&log](LogRange range) {
        return range.offset >= log.text.size() ? std::string() : log.text.substr(range.offset);
      },
      [&] {
        log.text += "late";
        wrote_at_the_end = true;
        return false;
      });
  auto piece = follower.Next();
  EXPECT_TRUE(wrote_at_the_end);
  EXPECT_EQ(piece.data, "late");
  EXPECT_FALSE(piece.done);
  EXPECT_TRUE(follower.Next().done);
}

TEST(LogFollowerTest, ALargeLogComesInBoundedPieces) {
  FakeLog log;
  log.text.assign(LogFollower::kPieceBytes * 2 + 10, 'x');
  log.writer_live = false;
  LogFollower follower = log.Follower();
  std::vector<size_t> sizes;
  for (auto piece = follower.Next(); !piece.done; piece = follower.Next()) sizes.push_back(piece.data.size());
  EXPECT_EQ(sizes, (std::vector<size_t>{LogFollower::kPieceBytes, LogFollower::kPieceBytes, 10}));
  EXPECT_EQ(log.live_asked, 1);
}

TEST(LogFollowerTest, AnAttemptThatEndedWithoutOutputEndsAtOnce) {
  FakeLog log;
  log.writer_live = false;
  LogFollower follower = log.Follower();
  auto piece = follower.Next();
  EXPECT_EQ(piece.data, "");
  EXPECT_TRUE(piece.done);
}

}  // namespace
}  // namespace unisched::api
