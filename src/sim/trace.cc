// Trace readers: SWF with the cleaning of the published reference figures,
// and the Philly GPU CSV.

#include "unisched/sim/trace.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>

namespace unisched::sim {
namespace {

// Calls fn(line) for every line, without its "\n" or "\r\n".
template <class Fn>
void ForEachLine(std::string_view text, Fn&& fn) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    fn(line);
    pos = end + 1;
  }
}

// A user's or group's name from its SWF number: "u12", "g3".
std::string Named(char prefix, int64_t number) {
  char text[24];
  text[0] = prefix;
  const auto end = std::to_chars(text + 1, text + sizeof text, number).ptr;
  return std::string(text, end);
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The whole of `text` as a number (SWF fields are integers in practice, but
// the format allows decimals).
std::optional<double> ParseNumber(std::string_view text) {
  // Nearly every field is a short integer ("-1" marks a missing one): read
  // digit by digit, a few instructions each, where from_chars first works
  // out its base and overflow bounds. Up to 15 digits cannot overflow (nor
  // pass 2^53); anything else (a decimal, a longer number, a sign alone)
  // takes from_chars, as before.
  const bool negative = !text.empty() && text.front() == '-';
  const std::string_view digits = negative ? text.substr(1) : text;
  if (!digits.empty() && digits.size() <= 15) {
    int64_t whole = 0;
    bool all_digits = true;
    for (const char c : digits) {
      if (c < '0' || c > '9') {
        all_digits = false;
        break;
      }
      whole = whole * 10 + (c - '0');
    }
    if (all_digits) return static_cast<double>(negative ? -whole : whole);
  }
  int64_t whole = 0;
  if (auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), whole);
      ec == std::errc() && end == text.data() + text.size()) {
    return static_cast<double>(whole);
  }
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

// Reads the field that starts at line[pos] (not a blank) and moves pos past
// it: the field's number, or nullopt if it is none. A short integer, as
// nearly every field is, is read in the one scan that finds its end (an SWF
// line is some 18 of them); any other field is found whole and given to
// ParseNumber, so both ways accept the same fields.
std::optional<double> ReadField(std::string_view line, size_t& pos) {
  const size_t start = pos;
  const bool negative = line[pos] == '-';
  if (negative) ++pos;
  const size_t first_digit = pos;
  int64_t whole = 0;
  while (pos < line.size() && pos - first_digit < 15 && line[pos] >= '0' && line[pos] <= '9') {
    whole = whole * 10 + (line[pos] - '0');
    ++pos;
  }
  if (pos > first_digit && (pos == line.size() || line[pos] == ' ' || line[pos] == '\t')) {
    return static_cast<double>(negative ? -whole : whole);
  }
  while (pos < line.size() && line[pos] != ' ' && line[pos] != '\t') ++pos;
  return ParseNumber(line.substr(start, pos - start));
}

// The largest magnitude of an SWF field: 2^53 (see ParseSwf).
constexpr double kMaxSwfField = 9007199254740992.0;

int64_t SecondsToMs(double seconds) {
  return std::llround(seconds * 1000.0);
}

std::string Plural(int64_t n, std::string_view what) {
  return std::to_string(n) + " " + std::string(what);
}

// "YYYY-MM-DD HH:MM:SS" as UTC milliseconds since the epoch.
std::optional<int64_t> ParseDateTime(std::string_view text) {
  text = Trim(text);
  if (text.size() != 19 || text[4] != '-' || text[7] != '-' || (text[10] != ' ' && text[10] != 'T') ||
      text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  auto field = [&](size_t at, size_t len) -> std::optional<int> {
    int value = 0;
    auto [end, ec] = std::from_chars(text.data() + at, text.data() + at + len, value);
    if (ec != std::errc() || end != text.data() + at + len) return std::nullopt;
    return value;
  };
  auto year = field(0, 4), month = field(5, 2), day = field(8, 2);
  auto hour = field(11, 2), minute = field(14, 2), second = field(17, 2);
  if (!year || !month || !day || !hour || !minute || !second || *hour > 23 || *minute > 59 || *second > 60) {
    return std::nullopt;
  }
  const std::chrono::year_month_day date{std::chrono::year(*year), std::chrono::month(static_cast<unsigned>(*month)),
                                         std::chrono::day(static_cast<unsigned>(*day))};
  if (!date.ok()) return std::nullopt;
  const auto midnight = std::chrono::sys_days(date);
  const int64_t seconds = std::chrono::duration_cast<std::chrono::seconds>(midnight.time_since_epoch()).count() +
                          *hour * 3600 + *minute * 60 + *second;
  return seconds * 1000;
}

// Ids follow file order; replay goes by submit time, file order among equals.
void SortBySubmit(std::vector<TraceJob>& jobs) {
  // Logs are written in submit order: checking costs a comparison per job,
  // sorting moves every job's strings.
  auto by_submit = [](const TraceJob& a, const TraceJob& b) { return a.submit_ms < b.submit_ms; };
  if (std::is_sorted(jobs.begin(), jobs.end(), by_submit)) return;
  std::stable_sort(jobs.begin(), jobs.end(), by_submit);
}

}  // namespace

std::string_view ToString(TraceFormat format) {
  return format == TraceFormat::kSwf ? "SWF" : "Philly CSV";
}

std::string CleaningReport::Summary() const {
  std::string text = std::to_string(records - Dropped()) + " of " + std::to_string(records) + " records kept";
  std::vector<std::string> dropped;
  if (malformed) dropped.push_back(Plural(malformed, "malformed"));
  if (dropped_no_size) dropped.push_back(Plural(dropped_no_size, "without a size"));
  if (dropped_too_large) dropped.push_back(Plural(dropped_too_large, "larger than the cluster"));
  if (dropped_run_time) dropped.push_back(Plural(dropped_run_time, "with run time <= 0"));
  if (dropped_requested_time) dropped.push_back(Plural(dropped_requested_time, "with requested time <= 0"));
  if (dropped_submit) dropped.push_back(Plural(dropped_submit, "with submit time < 0"));
  for (size_t i = 0; i < dropped.size(); ++i) text += (i == 0 ? "; dropped: " : ", ") + dropped[i];
  if (filled_size) text += "; " + Plural(filled_size, "sizes taken from the other processor field");
  if (capped_run_time) text += "; " + Plural(capped_run_time, "run times capped at the requested time");
  return text;
}

Result<std::string> ReadTraceFile(const std::string& path) {
  // gzopen reads plain files as they are, so one path serves .swf and .swf.gz.
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file) {
    return Error::BadRequest("unreadable_trace", "cannot open trace file " + path + ": " + std::strerror(errno));
  }
  gzbuffer(file, 1 << 17);
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const int n = gzread(file, buffer, sizeof buffer);
    if (n < 0) {
      int code = 0;
      std::string message = gzerror(file, &code);
      gzclose(file);
      return Error::BadRequest("unreadable_trace", "cannot read trace file " + path + ": " + message);
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  gzclose(file);
  return text;
}

TraceFormat DetectFormat(std::string_view text) {
  const size_t end = text.find('\n');
  std::string_view first = Trim(text.substr(0, end == std::string_view::npos ? text.size() : end));
  if (!first.empty() && first.back() == '\r') first.remove_suffix(1);
  return first.rfind("timestamp,duration,num_gpus", 0) == 0 ? TraceFormat::kPhilly : TraceFormat::kSwf;
}

Trace ParseSwf(std::string_view text, int max_processors) {
  Trace trace;
  trace.format = TraceFormat::kSwf;
  CleaningReport& report = trace.cleaning;
  // Room for a job per 64 bytes (SWF lines are longer): grown as it filled,
  // the vector moved every job's strings at each doubling.
  trace.jobs.reserve(text.size() / 64 + 1);
  ForEachLine(text, [&](std::string_view line) {
    line = Trim(line);
    if (line.empty() || line.front() == ';') return;
    ++report.records;
    // The fields used: 1 id, 2 submit, 4 run, 5 allocated procs, 8 requested
    // procs, 9 requested time, 12 user, 13 group.
    double field[18];
    int count = 0;
    size_t pos = 0;
    while (pos < line.size() && count < 18) {
      while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
      if (pos >= line.size()) break;
      auto value = ReadField(line, pos);
      // Beyond 2^53 a double holds no exact integer and seconds no longer
      // fit int64 milliseconds: no trace has such a field, and converting
      // one below would be undefined behaviour.
      if (!value || std::fabs(*value) > kMaxSwfField) {
        count = -1;
        break;
      }
      field[count++] = *value;
    }
    if (count < 9) {
      ++report.malformed;
      return;
    }
    const double allocated = field[4], requested = field[7];
    double processors = 0;
    if (requested > 0) {
      processors = requested;
    } else if (allocated > 0) {
      processors = allocated;
      ++report.filled_size;
    } else {
      ++report.dropped_no_size;
      return;
    }
    // A fraction of a processor still takes a whole one. Compared before the
    // conversion, which is undefined for a value beyond int.
    processors = std::ceil(processors);
    if (processors > max_processors) {
      ++report.dropped_too_large;
      return;
    }
    const int size = static_cast<int>(processors);
    // The times are judged in whole milliseconds, as they are replayed: a
    // run time that rounds to 0 ms is no run time.
    const int64_t run_ms = SecondsToMs(field[3]);
    const int64_t requested_ms = SecondsToMs(field[8]);
    if (run_ms <= 0) {
      ++report.dropped_run_time;
      return;
    }
    if (requested_ms <= 0) {
      ++report.dropped_requested_time;
      return;
    }
    if (field[1] < 0) {
      ++report.dropped_submit;
      return;
    }
    TraceJob job;
    job.source_id = static_cast<int64_t>(field[0]);
    job.submit_ms = SecondsToMs(field[1]);
    job.estimate_ms = requested_ms;
    job.run_ms = run_ms;
    if (job.run_ms > job.estimate_ms) {
      job.run_ms = job.estimate_ms;
      ++report.capped_run_time;
    }
    job.size = size;
    if (count >= 12 && field[11] >= 0) job.user = Named('u', static_cast<int64_t>(field[11]));
    if (count >= 13 && field[12] >= 0) job.group = Named('g', static_cast<int64_t>(field[12]));
    job.id = static_cast<model::JobId>(trace.jobs.size()) + 1;
    trace.jobs.push_back(std::move(job));
  });
  SortBySubmit(trace.jobs);
  return trace;
}

Result<Trace> ParsePhilly(std::string_view text, int max_gpus) {
  Trace trace;
  trace.format = TraceFormat::kPhilly;
  CleaningReport& report = trace.cleaning;
  bool header = true;
  bool bad_header = false;
  int64_t row = 0;
  ForEachLine(text, [&](std::string_view line) {
    if (header) {
      header = false;
      if (Trim(line).rfind("timestamp,duration,num_gpus", 0) != 0) bad_header = true;
      return;
    }
    if (bad_header || Trim(line).empty()) return;
    ++row;
    ++report.records;
    std::string_view columns[5];
    int count = 0;
    size_t pos = 0;
    while (count < 5) {
      const size_t comma = line.find(',', pos);
      columns[count++] = Trim(line.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
      if (comma == std::string_view::npos) break;
      pos = comma + 1;
    }
    std::optional<int64_t> submit = count >= 3 ? ParseDateTime(columns[0]) : std::nullopt;
    std::optional<double> duration = count >= 3 ? ParseNumber(columns[1]) : std::nullopt;
    std::optional<double> gpus = count >= 3 ? ParseNumber(columns[2]) : std::nullopt;
    if (!submit || !duration || !gpus || *gpus != std::floor(*gpus)) {
      ++report.malformed;
      return;
    }
    if (*gpus <= 0) {
      ++report.dropped_no_size;
      return;
    }
    if (*gpus > max_gpus) {
      ++report.dropped_too_large;
      return;
    }
    TraceJob job;
    job.run_ms = SecondsToMs(*duration);
    if (job.run_ms <= 0) {
      ++report.dropped_run_time;
      return;
    }
    job.source_id = row;
    job.submit_ms = *submit;
    job.estimate_ms = job.run_ms;  // no estimate in the trace: a perfect one
    job.size = static_cast<int>(*gpus);
    if (count >= 5) job.group = std::string(columns[4]);
    trace.jobs.push_back(std::move(job));
  });
  if (header || bad_header) {
    return Error::BadRequest("bad_trace",
                             "not a Philly CSV: the first line must be timestamp,duration,num_gpus,gpu_time,cluster");
  }
  SortBySubmit(trace.jobs);
  for (size_t i = 0; i < trace.jobs.size(); ++i) trace.jobs[i].id = static_cast<model::JobId>(i) + 1;
  return trace;
}

}  // namespace unisched::sim
