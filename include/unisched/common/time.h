#pragma once
// Time as the core sees it: millisecond timestamps, passed in as arguments.
// The Clock seam lets tests and the trace simulator drive time by hand.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace unisched {

using Timestamp = std::chrono::time_point<std::chrono::system_clock, std::chrono::milliseconds>;

inline Timestamp FromUnixMillis(int64_t ms) {
  return Timestamp(std::chrono::milliseconds(ms));
}
inline int64_t ToUnixMillis(Timestamp t) {
  return t.time_since_epoch().count();
}

// "2026-12-02T13:23:25.123Z" (always UTC, always milliseconds).
std::string FormatRfc3339(Timestamp t);
// Accepts "YYYY-MM-DDTHH:MM:SS[.fff...](Z|+HH:MM|-HH:MM)"; nullopt if malformed.
std::optional<Timestamp> ParseRfc3339(std::string_view text);

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Timestamp Now() const = 0;
};

class SystemClock final : public Clock {
 public:
  Timestamp Now() const override {
    return std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
  }
};

// A clock that moves only when told to; for tests and simulation.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(Timestamp start = FromUnixMillis(1'700'000'000'000)) : now_(start) {}
  Timestamp Now() const override { return now_.load(); }
  void Advance(std::chrono::milliseconds d) { now_ = now_.load() + d; }
  void Set(Timestamp t) { now_ = t; }

 private:
  // Atomic: a test moves the time while a thread under test (the
  // controller's loop) reads it.
  std::atomic<Timestamp> now_;
};

}  // namespace unisched
