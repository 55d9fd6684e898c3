#pragma once
// Which bytes of a job's output to read: from `offset`, at most `max_bytes`.
// A follower (GET /v1/jobs/{id}/log?follow=true) reads a growing log piece
// by piece; everyone else reads it whole.

#include <cstddef>
#include <cstdint>

namespace unisched {

struct LogRange {
  uint64_t offset = 0;
  size_t max_bytes = SIZE_MAX;
};

}  // namespace unisched
