#pragma once
// Starting the job process: fork and, in the child, process group,
// containment, stdio, user switch, working directory and exec with exactly
// the given environment. A close-on-exec pipe carries a failure of any of
// those steps back to the supervisor.

#include <sched.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/containment/containment.h"

namespace unisched::supervisor {

// Who the job runs as: resolved by the executor (or a leased sandbox uid),
// never looked up here, so the supervisor links statically without NSS.
// switch_user false: the supervisor's own account (only when it is not root).
struct Account {
  bool switch_user = false;
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

struct JobSpec {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::string work_dir;
  // A batch script (executor::LaunchSpec::script): written by the child,
  // as the job's account, to `script_file` in the work directory (its
  // cwd then), and executed in argv[0]'s place as `script_path` (the same
  // file as the job sees it: under kSandboxHome for an isolated job).
  std::string script;
  std::string script_file;
  std::string script_path;
  // Where the job starts instead of work_dir (Slurm's -D); "": work_dir.
  std::string chdir;
  // The job's TMPDIR on this node (executor::TmpDirPath): made by the
  // child, as the job's account, 0700 (one already there is kept), so that
  // tasks of one job on different nodes of one machine never share
  // temporary files. "": none (an isolated job has a private /tmp).
  std::string tmp_dir;
  // The job's secret files (docs/secrets.md): the child, still root, makes
  // `secrets_dir` (the path it sees: under kSandboxHome when isolated),
  // mounts a tmpfs on it with `secrets_mount_options` in a mount namespace
  // of the job's own (an isolated job's is its sandbox's), writes each
  // (file name, content) there, owned by the job's uid, mode 0400, and
  // makes it read-only. Nobody outside the job sees the files, and they go
  // when its last process ends. Empty: none.
  // The shared file systems to bind (docs/data.md): `source` (the node's
  // path) at `target` (the job's), read-only or not, in the job's own
  // mount namespace (the same one as the secrets'; an isolated job's
  // sandbox). A file system the job sees at its node's path, read-write,
  // needs none unless the job is isolated (whose root is read-only).
  struct Bind {
    std::string source;
    std::string target;
    bool read_only = false;
  };
  std::vector<Bind> binds;
  std::string secrets_dir;
  std::string secrets_mount_options;
  std::vector<std::pair<std::string, std::string>> secret_files;
  Account account;
  // The sandbox of docs/sandboxes.md (isolation::EnterIsolation) in fresh
  // pid, network, mount, UTS and IPC namespaces, as account.uid with every
  // capability dropped; the job runs under a small PID 1 that ends the
  // namespace when the job ends (LaunchSpec::isolate).
  bool isolate = false;
  // The job's soft limit of open files, when it is not ours (the host
  // raises its own to hold thousands of attempts' pipes); 0: ours.
  rlim_t open_files_limit = 0;
  // The CPUs the job is pinned to (sched_setaffinity in the child); none:
  // it runs on whatever the supervisor may.
  std::optional<cpu_set_t> affinity;
};

// The running job: its pid (also its process group) and the read ends of
// its stdout, stderr and launch-error pipes (all non-blocking, close-on-exec).
struct JobProcess {
  pid_t pid = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int error_fd = -1;
};

// Forks the job. An error means no process was started. A failure in the
// child arrives later on error_fd (see DecodeLaunchError).
Result<JobProcess> StartJob(const JobSpec& spec, const containment::Containment& containment);

// The message the child writes to the error pipe: a step and its errno.
struct LaunchError {
  int step = 0;
  int err = 0;
};
// "cannot execute 'x': No such file or directory" and the like.
std::string DescribeLaunchError(const LaunchError& error, const JobSpec& spec);

}  // namespace unisched::supervisor
