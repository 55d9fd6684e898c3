#pragma once
// Slurm's file name patterns for a job's output files (sbatch -o/-e,
// docs/execution.md "Output files"): %j the job id, %t the task's rank, %N
// its node, %u the user, %x the job's name, %A and %a an array's job id and
// index (a job outside an array is its own array: its id, index 0), %%
// a '%'. A number between % and the letter pads with zeros (%5j).

#include <string>
#include <string_view>

#include "unisched/model/job.h"

namespace unisched::model {

// What a pattern names for one task.
struct OutputPlace {
  JobId job = 0;
  int task = 0;
  std::string node;
  std::string user;
  std::string name;
  // A task of an array: its array's id (%A) and its index (%a).
  JobId array_job = 0;
  int64_t array_index = 0;
};

// "" when `pattern` is one, else why not (the letters it may use): empty,
// a NUL, longer than 4096 bytes, an unknown letter, a trailing '%'.
std::string CheckOutputPattern(std::string_view pattern);

// `pattern` with its letters replaced for `place` (a pattern CheckOutputPattern
// accepted; anything it would refuse is copied as it is).
std::string ExpandOutputPattern(std::string_view pattern, const OutputPlace& place);

}  // namespace unisched::model
