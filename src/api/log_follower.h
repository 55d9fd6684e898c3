#pragma once
// The body of GET /v1/jobs/{id}/log?follow=true: one task's output read from
// where the last piece ended, for as long as the attempt (or step) it
// belongs to may still write; pure, so tested with a fake log.

#include <cstdint>
#include <functional>
#include <string>

#include "unisched/api/http.h"
#include "unisched/common/log_range.h"

namespace unisched::api {

class LogFollower final : public BodySource {
 public:
  // The bytes of the log in a range ("" past its end or before it exists).
  using Read = std::function<std::string(LogRange)>;
  // Whether more may still be written: the attempt (or step) has not ended,
  // or has not started yet.
  using Live = std::function<bool()>;

  // A piece is at most this: a follower of a large log catches up in steps
  // that neither hold the connection's thread nor its memory for long.
  static constexpr size_t kPieceBytes = 64 * 1024;

  LogFollower(Read read, Live live) : read_(std::move(read)), live_(std::move(live)) {}

  // New bytes; when there are none, asks whether the writer has ended, and
  // if it has, reads once more: what it wrote before it ended is sent
  // before the end of the body, never lost to the race between the two.
  Piece Next() override;

 private:
  Read read_;
  Live live_;
  uint64_t offset_ = 0;
  bool writer_ended_ = false;
};

}  // namespace unisched::api
