#pragma once
// Job arrays (Slurm's --array; docs/arrays.md, ADR 0010): one submission,
// many tasks that differ only in their index. An array's tasks are not
// stored one row each while they wait: the array is one job (the parent),
// whose `JobArray` keeps the indices not yet started as a few ranges; a
// task becomes a job of its own (an id reserved at submit, its row written)
// when it starts.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unisched/common/status.h"

namespace unisched::model {

using JobId = int64_t;

// first, first + step, ..., last (last - first is a multiple of step).
struct IndexRange {
  int64_t first = 0;
  int64_t last = 0;
  int64_t step = 1;
  int64_t Count() const { return (last - first) / step + 1; }
  bool operator==(const IndexRange&) const = default;
};

// A set of array indices as increasing, disjoint ranges: Slurm's
// "1-1000:2,5,7-9" normalised ("1-999:2" for "1-1000:2").
class IndexSet {
 public:
  IndexSet() = default;
  // Slurm's syntax: items N, N-M or N-M:STEP joined by ','; indices 0 to
  // kMaxArrayIndex, any order, repeats merged; at most kMaxArrayTasks in
  // all. A bad text is a 422 naming `field`, with an example.
  static Result<IndexSet> Parse(std::string_view text, const std::string& field);

  int64_t Count() const;
  bool empty() const { return ranges_.empty(); }
  int64_t Min() const { return ranges_.front().first; }  // REQUIRES: !empty()
  int64_t Max() const { return ranges_.back().last; }    // REQUIRES: !empty()
  bool Contains(int64_t index) const;
  // The position of `index` in the set (0 for Min()); nullopt: not in it.
  std::optional<int64_t> OrdinalOf(int64_t index) const;
  // The index at `ordinal` (0 <= ordinal < Count()).
  int64_t At(int64_t ordinal) const;
  // Removes one index (splitting its range); false: it was not in the set.
  bool Remove(int64_t index);
  // The first `limit` indices, in order.
  std::vector<int64_t> First(int64_t limit) const;
  const std::vector<IndexRange>& ranges() const { return ranges_; }
  // "1-999:2,1000": Parse(ToString()) is the same set.
  std::string ToString() const;
  bool operator==(const IndexSet&) const = default;

 private:
  std::vector<IndexRange> ranges_;
};

inline constexpr int64_t kMaxArrayIndex = 4'000'000;
inline constexpr int64_t kMaxArrayTasks = 1'000'000;

// Slurm's --array text: the indices (IndexSet::Parse) and an optional
// trailing %MAX, the cap on tasks running at once ("1-1000:2%50"). The one
// reader of that text: `unisched sbatch`, #SBATCH lines and the API's
// array.indices. A bad text is a 422 naming `field`.
struct ArraySpec {
  IndexSet indices;
  int64_t max_running = 0;  // 0: no %MAX
};
Result<ArraySpec> ParseArraySpec(std::string_view text, const std::string& field);

// What the parent of an array keeps.
struct JobArray {
  IndexSet indices;             // every task's, as submitted
  IndexSet waiting;             // not yet started: stored, shrinking as tasks start
  int64_t max_running = 0;      // tasks active (started, not ended) at once; 0: no cap (Slurm's %N)
  JobId first_task_id = 0;      // the task at ordinal k has id first_task_id + k
  int64_t tasks_completed = 0;  // tasks that ended COMPLETED
  int64_t tasks_failed = 0;     // tasks that ended otherwise (FAILED, TIMEOUT, CANCELLED, never started)
  // Tasks started and not ended.
  int64_t ActiveTasks() const { return indices.Count() - waiting.Count() - tasks_completed - tasks_failed; }
  bool operator==(const JobArray&) const = default;
};

// What a task of an array knows of it.
struct ArrayTask {
  JobId array_job_id = 0;  // the parent's id
  int64_t index = 0;       // its index (SLURM_ARRAY_TASK_ID)
  bool operator==(const ArrayTask&) const = default;
};

// A task's name as Slurm writes it: "123_7".
std::string ArrayTaskName(JobId array_job_id, int64_t index);
// The id of the task at `index`; nullopt: the array has no such index.
std::optional<JobId> ArrayTaskId(const JobArray& array, int64_t index);

struct Job;
// The task at `index` of the array `parent` (REQUIRES: parent.array), as it
// is before it starts: the parent's template as a job of its own, PENDING,
// its place in the array in its environment (UNISCHED_ARRAY_* and Slurm's
// SLURM_ARRAY_*: job id, task id, count, min, max; the step for one range).
Job ArrayTaskOf(const Job& parent, int64_t index);

}  // namespace unisched::model
