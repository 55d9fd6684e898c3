// Array index sets (model/job_array.h).

#include "unisched/model/job_array.h"

#include <algorithm>
#include <charconv>

#include "unisched/model/job.h"

namespace unisched::model {

namespace {

std::optional<int64_t> WholeNumber(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < 0) return std::nullopt;
  return value;
}

constexpr std::string_view kArrayExample =
    "; write indices as N, N-M or N-M:STEP separated by ',', e.g. \"1-1000:2\" or \"0,4,10-20\"";

}  // namespace

Result<IndexSet> IndexSet::Parse(std::string_view text, const std::string& field) {
  auto bad = [&](const std::string& what) {
    return Error::Unprocessable(
        "invalid_value", "'" + std::string(text) + "' is not an array: " + what + std::string(kArrayExample), field);
  };
  if (text.empty()) return bad("an array needs at least one index");
  std::vector<IndexRange> items;
  int64_t total = 0;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string_view item = text.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) return bad("an empty item");
    IndexRange range;
    std::string_view span = item;
    if (const size_t colon = item.find(':'); colon != std::string_view::npos) {
      auto step = WholeNumber(item.substr(colon + 1));
      if (!step || *step < 1) return bad("the step after ':' in '" + std::string(item) + "' must be 1 or more");
      range.step = *step;
      span = item.substr(0, colon);
      if (span.find('-') == std::string_view::npos) return bad("a step needs a range, as in 1-9:2");
    }
    const size_t dash = span.find('-');
    auto low = WholeNumber(span.substr(0, dash));
    auto high = dash == std::string_view::npos ? low : WholeNumber(span.substr(dash + 1));
    if (!low || !high) return bad("'" + std::string(item) + "' is not N, N-M or N-M:STEP with whole numbers");
    if (*high < *low) return bad("the range '" + std::string(item) + "' runs backwards");
    if (*high > kMaxArrayIndex) return bad("indices go up to " + std::to_string(kMaxArrayIndex));
    range.first = *low;
    range.last = *low + (*high - *low) / range.step * range.step;
    total += range.Count();
    if (total > kMaxArrayTasks) return bad("an array has at most " + std::to_string(kMaxArrayTasks) + " tasks");
    items.push_back(range);
    if (comma == text.size()) break;
  }
  IndexSet set;
  // One range written in order (the usual case) is the set itself; any
  // other list is expanded (at most kMaxArrayTasks indices), sorted, and
  // made into ranges again, runs of one step each.
  if (items.size() == 1) {
    set.ranges_ = std::move(items);
    return set;
  }
  std::vector<int64_t> all;
  all.reserve(static_cast<size_t>(total));
  for (const IndexRange& r : items) {
    for (int64_t i = r.first; i <= r.last; i += r.step) all.push_back(i);
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  for (size_t i = 0; i < all.size();) {
    IndexRange r{all[i], all[i], 1};
    size_t next = i + 1;
    if (next < all.size()) {
      r.step = all[next] - all[i];
      while (next < all.size() && all[next] - r.last == r.step) r.last = all[next++];
    }
    if (r.first == r.last) r.step = 1;
    set.ranges_.push_back(r);
    i = next;
  }
  return set;
}

Result<ArraySpec> ParseArraySpec(std::string_view text, const std::string& field) {
  ArraySpec spec;
  const size_t percent = text.find('%');
  if (percent != std::string_view::npos) {
    const std::string_view cap = text.substr(percent + 1);
    auto n = WholeNumber(cap);
    if (!n || *n < 1 || *n > kMaxArrayTasks) {
      return Error::Unprocessable("invalid_value",
                                  "'" + std::string(text) + "': the cap after '%' must be a whole number from 1 to " +
                                      std::to_string(kMaxArrayTasks) + " (tasks at once), e.g. 1-1000:2%50",
                                  field);
    }
    spec.max_running = *n;
  }
  auto indices = IndexSet::Parse(text.substr(0, percent), field);
  if (!indices.ok()) return indices.error();
  spec.indices = std::move(indices).value();
  return spec;
}

int64_t IndexSet::Count() const {
  int64_t n = 0;
  for (const IndexRange& r : ranges_) n += r.Count();
  return n;
}

bool IndexSet::Contains(int64_t index) const {
  return OrdinalOf(index).has_value();
}

std::optional<int64_t> IndexSet::OrdinalOf(int64_t index) const {
  int64_t before = 0;
  for (const IndexRange& r : ranges_) {
    if (index < r.first) return std::nullopt;
    if (index <= r.last) {
      if ((index - r.first) % r.step != 0) return std::nullopt;
      return before + (index - r.first) / r.step;
    }
    before += r.Count();
  }
  return std::nullopt;
}

int64_t IndexSet::At(int64_t ordinal) const {
  for (const IndexRange& r : ranges_) {
    if (ordinal < r.Count()) return r.first + ordinal * r.step;
    ordinal -= r.Count();
  }
  return -1;
}

bool IndexSet::Remove(int64_t index) {
  for (size_t i = 0; i < ranges_.size(); ++i) {
    IndexRange& r = ranges_[i];
    if (index < r.first) return false;
    if (index > r.last) continue;
    if ((index - r.first) % r.step != 0) return false;
    if (r.first == r.last) {
      ranges_.erase(ranges_.begin() + static_cast<ptrdiff_t>(i));
    } else if (index == r.first) {
      r.first += r.step;
    } else if (index == r.last) {
      r.last -= r.step;
    } else {
      const IndexRange after{index + r.step, r.last, r.step};
      r.last = index - r.step;
      ranges_.insert(ranges_.begin() + static_cast<ptrdiff_t>(i) + 1, after);
      if (after.first == after.last) ranges_[i + 1].step = 1;
    }
    // A range of one index has step 1, as Parse makes it.
    if (i < ranges_.size() && ranges_[i].first == ranges_[i].last) ranges_[i].step = 1;
    return true;
  }
  return false;
}

std::vector<int64_t> IndexSet::First(int64_t limit) const {
  std::vector<int64_t> out;
  for (const IndexRange& r : ranges_) {
    for (int64_t i = r.first; i <= r.last && static_cast<int64_t>(out.size()) < limit; i += r.step) out.push_back(i);
    if (static_cast<int64_t>(out.size()) >= limit) break;
  }
  return out;
}

std::string IndexSet::ToString() const {
  std::string out;
  for (const IndexRange& r : ranges_) {
    if (!out.empty()) out += ',';
    out += std::to_string(r.first);
    if (r.last != r.first) {
      out += '-' + std::to_string(r.last);
      if (r.step != 1) out += ':' + std::to_string(r.step);
    }
  }
  return out;
}

std::string ArrayTaskName(JobId array_job_id, int64_t index) {
  return std::to_string(array_job_id) + "_" + std::to_string(index);
}

std::optional<JobId> ArrayTaskId(const JobArray& array, int64_t index) {
  auto ordinal = array.indices.OrdinalOf(index);
  if (!ordinal) return std::nullopt;
  return array.first_task_id + *ordinal;
}

Job ArrayTaskOf(const Job& parent, int64_t index) {
  const JobArray& array = *parent.array;
  Job task = parent;
  task.id = ArrayTaskId(array, index).value_or(0);
  task.array.reset();
  task.array_task = ArrayTask{parent.id, index};
  task.state = JobState::kPending;
  task.state_reason.clear();
  task.attempts.clear();
  task.started_at.reset();
  task.ended_at.reset();
  task.exit_code.reset();
  task.cancel_requested = false;
  task.stop_requested_at.reset();
  task.dependency = {};  // the parent's was met before any task was offered
  const std::string values[][2] = {
      {"ARRAY_JOB_ID", std::to_string(parent.id)},
      {"ARRAY_TASK_ID", std::to_string(index)},
      {"ARRAY_TASK_COUNT", std::to_string(array.indices.Count())},
      {"ARRAY_TASK_MIN", std::to_string(array.indices.Min())},
      {"ARRAY_TASK_MAX", std::to_string(array.indices.Max())},
  };
  for (const auto& [name, value] : values) {
    task.env["UNISCHED_" + name] = value;
    task.env["SLURM_" + name] = value;
  }
  // Slurm sets the step only for an array of one range.
  if (array.indices.ranges().size() == 1) {
    task.env["SLURM_ARRAY_TASK_STEP"] = std::to_string(array.indices.ranges().front().step);
    task.env["UNISCHED_ARRAY_TASK_STEP"] = task.env["SLURM_ARRAY_TASK_STEP"];
  }
  return task;
}

}  // namespace unisched::model
