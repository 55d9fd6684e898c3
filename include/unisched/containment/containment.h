#pragma once
// Containment of one process tree: resource limits and a way to find and kill
// every process of the tree, whatever it did to its process group.
//
// On a cgroup v1 machine (hybrid mode) a Containment is a set of groups named
// unisched/<name> under the memory, cpu and pids hierarchies, plus a group of
// the same name under the cgroup v2 hierarchy (no controllers there; it gives
// cgroup.kill). On a cgroup v2 machine the v2 group holds the limits itself:
// the memory, cpu and pids controllers are enabled down to it
// (cgroup.subtree_control) and memory.max, cpu.max and pids.max written. Where cgroups are missing or not wanted, the
// limits fall back to rlimits of the contained process (RLIMIT_AS for memory, RLIMIT_NPROC for pids; cpu has no rlimit
// equivalent and is then not limited).
//
// Lifecycle, as the supervisor uses it:
//   parent:  Create() or Disabled()  -> fork
//   child:   JoinSelf(); ApplyRlimitsSelf(); setuid; exec
//   parent:  TrackProcessGroup(child); ... KillAll(); OomKilled(); Destroy()
// JoinSelf and ApplyRlimitsSelf allocate nothing and only make system calls,
// so they are safe between fork and exec. The object is not thread-safe.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "unisched/common/status.h"

namespace unisched::containment {

struct Limits {
  int64_t memory_bytes = 0;  // 0: no limit
  int cpu_millis = 0;        // 1000 per cpu; 0: no limit
  int pids = 0;              // 0: no limit
};

struct Options {
  std::string cgroup_root = "/sys/fs/cgroup";
  // Sub-directory of each hierarchy that holds all of our groups.
  std::string parent = "unisched";
  // Reuse emptied v1 groups (<parent>/pool-<k>) instead of making and
  // removing one per Create (containment.cc, docs/execution.md).
  bool pool = true;
};

class Containment {
 public:
  // Creates (or reuses, if left behind) the groups for `name` in each
  // hierarchy this machine has, and writes the limits. A missing hierarchy is
  // skipped (its limit then falls back to an rlimit); failing to create or
  // configure a group of a present hierarchy is an error, and nothing is left
  // behind. `name` must be a single path component.
  static Result<Containment> Create(const std::string& name, const Limits& limits, const Options& options = {});
  // No cgroups at all: the limits are applied as rlimits only.
  static Containment Disabled(const Limits& limits);
  // The groups already there for `name` (a dead owner's leftovers), none
  // made; nullopt when no hierarchy has one. For KillAllAndDestroy.
  static std::optional<Containment> Find(const std::string& name, const Options& options = {});

  Containment() = default;
  Containment(Containment&&) noexcept = default;
  Containment& operator=(Containment&&) noexcept = default;
  Containment(const Containment&) = delete;
  Containment& operator=(const Containment&) = delete;
  // Does not remove the groups: Destroy() does, once the processes are gone.
  ~Containment() = default;

  // In the child, before exec: moves the calling process into every group.
  // Returns the errno of the first failure (0: joined all).
  int JoinSelf() const;
  // In the child, before exec: the rlimit fallback for each limit that no
  // cgroup enforces (RLIMIT_AS for memory, RLIMIT_NPROC for pids). Returns
  // the errno of the first failure (0: ok, also when there is nothing to do).
  // RLIMIT_NPROC counts every process of the user, not just this tree.
  int ApplyRlimitsSelf() const;

  // The process group of the tree (the job's setpgid'ed leader); KillAll
  // signals it as well, which is all there is without cgroups.
  void TrackProcessGroup(pid_t pgid) { pgid_ = pgid; }

  // Sends `signal` to every process in the groups and in the tracked process
  // group. For SIGKILL, cgroup.kill is used where the v2 group has it.
  void KillAll(int signal) const;
  // Process ids currently in the groups (from cgroup.procs).
  std::vector<pid_t> Pids() const;
  // No process in the groups: one read of one group's cgroup.procs (a
  // contained process cannot leave the groups it joined; only root moves
  // it). False without groups.
  bool Empty() const;
  // Whether the kernel OOM-killed a process of the memory group (oom_kill in
  // memory.oom_control; on kernels without that field, any memory.failcnt).
  bool OomKilled() const;
  // Peak memory use of the group in bytes; 0 without a memory group.
  int64_t MaxMemoryBytes() const;

  // Changes the limits of existing groups (a warm sandbox handed to a create
  // with limits of its own). Only when every limit asked for is held by a
  // cgroup (an rlimit cannot be changed from outside here); an error leaves
  // the groups as they were or partly changed, and the caller discards them.
  Status SetLimits(const Limits& limits);
  // The group under which the contained tree may split itself into groups
  // of its own (a sandbox's init makes one per exec, docs/sandboxes.md):
  // the v2 group, else the v1 pids group; empty without either. Such
  // sub-groups hold processes of the tree that Pids() and Empty() of a v2
  // group do not list (cgroup.kill of the group reaches them).
  std::string SubtreeDir() const { return !unified_dir_.empty() ? unified_dir_ : pids_dir_; }
  // Removes the (emptied) groups made under SubtreeDir(), deepest first.
  // Destroy does it too when a group will not go for them.
  void RemoveSubgroups() const;
  // Removes the groups: an empty v1 group of a Create goes back to the pool
  // (renamed pool-<k>) when there is room and its job left little charged
  // to it, the rest is removed. Retries briefly while exiting processes
  // leave them; an error names the groups that could not be removed.
  // Idempotent.
  Status Destroy();
  // SIGKILL to everything in the groups, again until they are empty (a
  // process can fork between the read of cgroup.procs and the kill; at most
  // ~2 s), then Destroy(). For groups whose owner is gone.
  Status KillAllAndDestroy();

  const Limits& limits() const { return limits_; }
  bool has_memory_group() const { return !memory_dir_.empty(); }
  bool has_cpu_group() const { return !cpu_dir_.empty(); }
  bool has_pids_group() const { return !pids_dir_.empty(); }
  bool has_unified_group() const { return !unified_dir_.empty(); }
  bool has_groups() const { return !procs_files_.empty(); }
  // "cgroup v1 memory,cpu,pids + v2", "rlimits": for diagnostics.
  std::string Describe() const;

 private:
  std::vector<std::string> GroupDirs() const;
  bool ResetMemoryForPool() const;

  Limits limits_;
  std::string memory_dir_;
  std::string cpu_dir_;
  std::string pids_dir_;
  std::string unified_dir_;
  bool unified_has_kill_ = false;
  // Controllers of the v2 group (a v2-only host, or one whose v2 holds what
  // v1 does not): memory.max, cpu.max, pids.max there.
  bool v2_memory_ = false;
  bool v2_cpu_ = false;
  bool v2_pids_ = false;
  // Precomputed "<dir>/cgroup.procs" so that JoinSelf allocates nothing.
  std::vector<std::string> procs_files_;
  pid_t pgid_ = 0;
  bool pool_ = false;  // made by Create with Options::pool (not Find's leftovers)
};

}  // namespace unisched::containment
