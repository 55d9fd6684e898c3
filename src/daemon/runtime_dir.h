#pragma once
// Where the executor keeps attempts' control files (claim, state, result):
// a tmpfs when the host has one. Creating those inodes on disk was the
// largest cost of a short job (docs/execution.md#where-the-files-are), and
// they matter only until the daemon has committed the attempt's result.

#include <string>
#include <vector>

namespace unisched::daemon {

struct RuntimeDirChoice {
  std::string runs_dir;  // the executor's runs_dir
  std::string why;       // for the start-up log line
  bool chosen = false;   // made here on a tmpfs (so ours to remove when empty)
};

// configured: executor.runtime_dir; empty chooses: the first of `roots`
// that is a tmpfs we can own a 0700 directory in, then
// <root>/unisched-<euid>/<name made from state_dir>/runs; else
// <state_dir>/runs (disk, as without a tmpfs). Creates what it returns.
RuntimeDirChoice ChooseRuntimeRunsDir(const std::string& configured, const std::string& state_dir,
                                      const std::vector<std::string>& roots = {"/run", "/dev/shm"});

// After a clean stop: removes the directories ChooseRuntimeRunsDir made
// above runs_dir's attempts when nothing is left in them (best effort).
void RemoveRuntimeDirIfEmpty(const std::string& runs_dir);

}  // namespace unisched::daemon
