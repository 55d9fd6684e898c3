#include "unisched/common/time.h"

#include <cctype>
#include <cstdio>
#include <ctime>

namespace unisched {

std::string FormatRfc3339(Timestamp t) {
  const int64_t ms = ToUnixMillis(t);
  int64_t secs = ms / 1000;
  int64_t frac = ms % 1000;
  if (frac < 0) {
    frac += 1000;
    secs -= 1;
  }
  const std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[80];  // room for any int the compiler thinks tm fields may hold
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(frac));
  return buf;
}

namespace {
bool ReadDigits(std::string_view s, size_t& pos, size_t n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (size_t i = 0; i < n; ++i) {
    const char c = s[pos + i];
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    out = out * 10 + (c - '0');
  }
  pos += n;
  return true;
}
bool Expect(std::string_view s, size_t& pos, char c) {
  if (pos >= s.size() || (s[pos] != c && !(c == 'T' && (s[pos] == 't' || s[pos] == ' ')))) return false;
  ++pos;
  return true;
}
}  // namespace

std::optional<Timestamp> ParseRfc3339(std::string_view s) {
  size_t pos = 0;
  int year, mon, day, hour, min, sec;
  if (!ReadDigits(s, pos, 4, year) || !Expect(s, pos, '-') || !ReadDigits(s, pos, 2, mon) || !Expect(s, pos, '-') ||
      !ReadDigits(s, pos, 2, day) || !Expect(s, pos, 'T') || !ReadDigits(s, pos, 2, hour) || !Expect(s, pos, ':') ||
      !ReadDigits(s, pos, 2, min) || !Expect(s, pos, ':') || !ReadDigits(s, pos, 2, sec)) {
    return std::nullopt;
  }
  if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60) return std::nullopt;
  int millis = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      if (digits < 3) millis = millis * 10 + (s[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return std::nullopt;
    for (int i = digits; i < 3; ++i) millis *= 10;
  }
  int offset_minutes = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    const int sign = s[pos] == '-' ? -1 : 1;
    ++pos;
    int oh, om;
    if (!ReadDigits(s, pos, 2, oh) || !Expect(s, pos, ':') || !ReadDigits(s, pos, 2, om)) return std::nullopt;
    offset_minutes = sign * (oh * 60 + om);
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  const int64_t secs = static_cast<int64_t>(timegm(&tm)) - offset_minutes * 60;
  const int64_t ms = secs * 1000 + millis;
  // Only instants FormatRfc3339 prints back in this form, with a four-digit
  // year: an offset can carry 0000-01-01 or 9999-12-31 over into year -1 or
  // 10000, and a job document holding that could not be read again (found
  // by tests/fuzz/job_json_fuzz.cc).
  constexpr int64_t kFirstMs = -62'167'219'200'000;  // 0000-01-01T00:00:00.000Z
  constexpr int64_t kLastMs = 253'402'300'799'999;   // 9999-12-31T23:59:59.999Z
  if (ms < kFirstMs || ms > kLastMs) return std::nullopt;
  return FromUnixMillis(ms);
}

}  // namespace unisched
