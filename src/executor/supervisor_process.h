#pragma once
// Starting an unisched-supervisor process and handing it what to run. Both
// kinds of supervisor (one per attempt, and the hosts) start the same way,
// because whatever the daemon lets a supervisor inherit (descriptors,
// environment, signal dispositions, its session) would reach the jobs.

#include <sys/types.h>

#include <string>

#include "executor/attempt_files.h"
#include "unisched/common/status.h"

namespace unisched::executor {

// posix_spawn of the supervisor executable: no fork of the (large,
// threaded) daemon, nothing inherited but stdin (`stdin_fd`, or /dev/null)
// and, when given, `fd3` as fd 3; an empty environment, its own session.
// stdout and stderr are /dev/null: the supervisor opens supervisor.log
// itself, only when it has something to say.
Result<pid_t> SpawnSupervisorProcess(const std::string& supervisor_path, const std::string& arg, int stdin_fd,
                                     int fd3 = -1);

// The spec as a sealed memfd, read from its start: a file that is no inode
// of the disk, and gone with its last reader.
Result<int> SpecMemfd(const files::AttemptSpec& spec);

}  // namespace unisched::executor
