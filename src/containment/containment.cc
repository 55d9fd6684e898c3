// Containment: cgroup v1 limit groups plus a cgroup v2 kill group, with an
// rlimit fallback. See containment.h for the lifecycle.

#include "unisched/containment/containment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "unisched/containment/file_io.h"
#include "unisched/posix/posix.h"

namespace unisched::containment {
namespace {

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Writes `value` to an existing (cgroup) file. Returns 0 or the errno.
int WriteValue(const char* path, const char* value, size_t len) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = 0;
  if (::write(fd, value, len) != static_cast<ssize_t>(len)) err = errno ? errno : EIO;
  ::close(fd);
  return err;
}

int WriteValue(const std::string& path, const std::string& value) {
  return WriteValue(path.c_str(), value.data(), value.size());
}

bool ReadFile(const std::string& path, std::string& out) {
  auto text = ReadWholeFile(path);
  if (!text) return false;
  out = std::move(*text);
  return true;
}

// The value after `key ` on its own line of a "key value" file, or -1.
int64_t KeyedValue(const std::string& text, std::string_view key) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      return std::strtoll(std::string(line.substr(key.size() + 1)).c_str(), nullptr, 10);
    }
    pos = end + 1;
  }
  return -1;
}

int64_t ReadNumber(const std::string& path) {
  std::string text;
  if (!ReadFile(path, text)) return -1;
  return std::strtoll(text.c_str(), nullptr, 10);
}

// Removes the groups below `dir` (not `dir` itself), deepest first; a group
// that still has members stays. A group's directory holds only its control
// files and its child groups.
void RemoveChildGroups(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> children;
  while (const dirent* entry = ::readdir(d)) {
    const std::string_view name = entry->d_name;
    if (entry->d_type == DT_DIR && name != "." && name != "..") children.push_back(dir + "/" + entry->d_name);
  }
  ::closedir(d);
  for (const std::string& child : children) {
    RemoveChildGroups(child);
    ::rmdir(child.c_str());
  }
}

// The pool of emptied v1 groups (docs/execution.md#the-cgroup-pool): a
// group whose job is gone and left little behind is renamed to
// <parent>/pool-<k> instead of being removed, and a later Create renames it
// to its own name and writes its limits. Making and removing a v1 memory or
// cpu group allocates and frees per-cpu state (the frees run in kworkers):
// with the pids group ~0.5 ms of the host's CPU per attempt on the test
// host (docs/benchmarks.md), against a few renames and writes. v2 groups
// cannot be renamed; they are made and removed as before.
//
// The scheduler starts attempts in batches and they end in batches, so the
// pool must hold about a batch: with 8 slots three v1 groups in four were
// still made by mkdir. Each slot's state as this process last saw it (full,
// empty, or not yet looked at) is kept, so a take or put tries the slots
// that should work without a look at the others: the rename decides, and a
// rename that fails (another process took or filled the slot) corrects the
// belief. Only a slot not yet seen costs a stat (a path walk without
// locks), tried before a rename: a rename, even a failing one, takes the
// parent directory's lock, which every mkdir, rmdir and rename of a group of
// the host waits for.
constexpr int kPoolSlots = 256;
// A memory group still charged with more than this (page cache its job
// left) is removed instead: the next job would start charged with it.
constexpr int64_t kPoolMaxChargeBytes = 1 << 20;

std::string PoolSlot(const std::string& parent, int k) {
  return parent + "/pool-" + std::to_string(k);
}

enum class Slot : uint8_t { kUnseen, kFull, kEmpty };

// What this process believes of each parent's slots. The daemon's threads
// share it (sandboxes), hence the lock, held for no system call.
class PoolBeliefs {
 public:
  // The slots to try for a take (full: true) or a put, in order: believed so first, then unseen ones.
  std::vector<int> Candidates(const std::string& parent, bool full) {
    std::lock_guard lock(mu_);
    auto& slots = Slots(parent);
    std::vector<int> out;
    const Slot wanted = full ? Slot::kFull : Slot::kEmpty;
    for (int k = 0; k < kPoolSlots; ++k) {
      if (slots[k] == wanted) out.push_back(k);
    }
    for (int k = 0; k < kPoolSlots; ++k) {
      if (slots[k] == Slot::kUnseen) out.push_back(k);
    }
    return out;
  }
  Slot Get(const std::string& parent, int k) {
    std::lock_guard lock(mu_);
    return Slots(parent)[k];
  }
  void Set(const std::string& parent, int k, Slot state) {
    std::lock_guard lock(mu_);
    Slots(parent)[k] = state;
  }

 private:
  std::vector<Slot>& Slots(const std::string& parent) {  // REQUIRES mu_
    auto& slots = beliefs_[parent];
    if (slots.empty()) slots.assign(kPoolSlots, Slot::kUnseen);
    return slots;
  }
  std::mutex mu_;
  std::map<std::string, std::vector<Slot>> beliefs_;  // GUARDED_BY(mu_)
};

PoolBeliefs& Beliefs() {
  static PoolBeliefs beliefs;
  return beliefs;
}

// Renames a pooled group of `parent` to `dir`; false when none was taken.
bool TakePooled(const std::string& parent, const std::string& dir) {
  PoolBeliefs& beliefs = Beliefs();
  for (int k : beliefs.Candidates(parent, /*full=*/true)) {
    const std::string slot = PoolSlot(parent, k);
    if (beliefs.Get(parent, k) == Slot::kUnseen && !Exists(slot)) {
      beliefs.Set(parent, k, Slot::kEmpty);
      continue;
    }
    if (::rename(slot.c_str(), dir.c_str()) == 0) {
      beliefs.Set(parent, k, Slot::kEmpty);
      return true;
    }
    if (errno != ENOENT) return false;  // EEXIST: `dir` is there (left behind), and is used as it is
    beliefs.Set(parent, k, Slot::kEmpty);
  }
  return false;
}

// Moves the emptied group `dir` into a free slot; false when no slot is
// free (or renaming fails), and the caller removes it.
bool PutPooled(const std::string& dir) {
  const std::string parent = dir.substr(0, dir.find_last_of('/'));
  PoolBeliefs& beliefs = Beliefs();
  for (int k : beliefs.Candidates(parent, /*full=*/false)) {
    const std::string slot = PoolSlot(parent, k);
    if (beliefs.Get(parent, k) == Slot::kUnseen && Exists(slot)) {
      beliefs.Set(parent, k, Slot::kFull);
      continue;
    }
    if (::rename(dir.c_str(), slot.c_str()) == 0) {
      beliefs.Set(parent, k, Slot::kFull);
      return true;
    }
    if (errno != EEXIST && errno != ENOTEMPTY) return false;
    beliefs.Set(parent, k, Slot::kFull);
  }
  return false;
}

// No task at all in the v1 group: `tasks` lists every thread, also of a
// process whose other threads are elsewhere, and a process already exiting,
// which `cgroup.procs` leaves out.
bool NoTasks(const std::string& dir) {
  std::string tasks;
  return ReadFile(dir + "/tasks", tasks) && tasks.find_first_not_of(" \n") == std::string::npos;
}

// What the machine offers under a cgroup root, for our parent: probed by the
// first Create of a process and kept (about a dozen stats and a read that
// every attempt paid before). Hierarchies are mounted at boot; a parent
// removed while we run is made again by the group mkdir that finds it gone.
struct Layout {
  bool memory = false;  // v1 memory, and with swap accounting (memsw)
  bool memsw = false;
  bool cpu = false;
  bool pids = false;                    // v1 pids (its root has no pids.max; children do)
  std::string unified;                  // the v2 hierarchy: <root>/unified (hybrid), <root> (pure v2), or none
  bool unified_kill = false;            // cgroup.kill in v2 groups (Linux 5.14+)
  std::vector<std::string> v2_enabled;  // controllers enabled down to <unified>/<parent>
};

Result<Layout> ProbeLayout(const Options& options) {
  const std::string& root = options.cgroup_root;
  Layout layout;
  layout.memory = Exists(root + "/memory/memory.limit_in_bytes");
  layout.memsw = layout.memory && Exists(root + "/memory/memory.memsw.limit_in_bytes");
  layout.cpu = Exists(root + "/cpu/cpu.cfs_quota_us");
  layout.pids = Exists(root + "/pids/cgroup.procs") && !Exists(root + "/pids/cgroup.controllers");
  if (Exists(root + "/unified/cgroup.controllers")) {
    layout.unified = root + "/unified";
  } else if (Exists(root + "/cgroup.controllers")) {
    layout.unified = root;
  }
  if (layout.unified.empty()) return layout;
  // On a v2 host the controllers v1 does not hold are enabled down to our
  // groups (root, then the parent: a group may only enable what its parent
  // passes on); a controller that cannot be enabled is left out.
  std::string available;
  (void)ReadFile(layout.unified + "/cgroup.controllers", available);  // "cpuset cpu io memory pids"
  std::istringstream words(available);
  std::set<std::string> offered{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
  std::vector<std::string> wanted;
  if (!layout.memory && offered.count("memory")) wanted.push_back("memory");
  if (!layout.cpu && offered.count("cpu")) wanted.push_back("cpu");
  if (!layout.pids && offered.count("pids")) wanted.push_back("pids");
  const std::string parent = layout.unified + "/" + options.parent;
  if (int err = posix::MakeDir(parent, 0755))
    return Error::Internal("cannot create cgroup " + parent + ": " + posix::ErrnoText(err));
  for (const std::string& controller : wanted) {
    if (WriteValue(layout.unified + "/cgroup.subtree_control", "+" + controller) == 0 &&
        WriteValue(parent + "/cgroup.subtree_control", "+" + controller) == 0) {
      layout.v2_enabled.push_back(controller);
    }
  }
  layout.unified_kill = Exists(parent + "/cgroup.kill");
  return layout;
}

Result<Layout> LayoutFor(const Options& options) {
  static std::mutex mu;
  static std::map<std::pair<std::string, std::string>, Layout> known;  // GUARDED_BY(mu)
  const auto key = std::make_pair(options.cgroup_root, options.parent);
  {
    std::lock_guard lock(mu);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  auto layout = ProbeLayout(options);  // a failure is probed again next time
  if (!layout.ok()) return layout;
  std::lock_guard lock(mu);
  known.emplace(key, *layout);
  return layout;
}

}  // namespace

Result<Containment> Containment::Create(const std::string& name, const Limits& limits, const Options& options) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return Error::BadRequest("bad_containment_name", "containment name must be one path component: '" + name + "'");
  }
  Containment c;
  c.limits_ = limits;
  const std::string& root = options.cgroup_root;
  auto probed = LayoutFor(options);
  if (!probed.ok()) return probed.error();
  const Layout& layout = *probed;

  // Creates <hierarchy>/<parent>/<name>, from the pool when `reused` is
  // given and the pool has a group (*reused: its old limits must be
  // overwritten); returns the group dir or an error. The parent is made
  // only when the group's mkdir finds it missing.
  auto make_group = [&](const std::string& hierarchy, bool* reused = nullptr) -> Result<std::string> {
    const std::string parent = hierarchy + "/" + options.parent;
    const std::string dir = parent + "/" + name;
    if (reused != nullptr && options.pool && TakePooled(parent, dir)) {
      *reused = true;
      return dir;
    }
    int err = posix::MakeDir(dir, 0755);
    if (err == ENOENT) {
      if ((err = posix::MakeDir(parent, 0755)) != 0) {
        return Error::Internal("cannot create cgroup " + parent + ": " + posix::ErrnoText(err));
      }
      err = posix::MakeDir(dir, 0755);
    }
    if (err != 0) return Error::Internal("cannot create cgroup " + dir + ": " + posix::ErrnoText(err));
    return dir;
  };
  c.pool_ = options.pool;
  // On any failure the groups made so far are removed again.
  auto fail = [&c](Error e) -> Result<Containment> {
    (void)c.Destroy();  // best effort: the error below is what matters
    return e;
  };
  auto write = [](const std::string& dir, const char* file, const std::string& value) -> Status {
    const std::string path = dir + "/" + file;
    if (int err = WriteValue(path, value)) {
      return Error::Internal("cannot write '" + value + "' to " + path + ": " + posix::ErrnoText(err));
    }
    return Status::Ok();
  };

  // A pooled group keeps the limits of its last job: with no limit asked
  // for, "no limit" is written to it.
  if (layout.memory) {
    bool reused = false;
    auto dir = make_group(root + "/memory", &reused);
    if (!dir.ok()) return fail(dir.error());
    c.memory_dir_ = *dir;
    if (limits.memory_bytes > 0 || reused) {
      const std::string v = limits.memory_bytes > 0 ? std::to_string(limits.memory_bytes) : "-1";
      const bool memsw = layout.memsw;
      // memsw may never be below the plain limit; a reused group may hold a
      // smaller memsw from before, so lower memsw first if the plain write is refused.
      Status s = write(c.memory_dir_, "memory.limit_in_bytes", v);
      if (!s.ok() && memsw) {
        if (Status s2 = write(c.memory_dir_, "memory.memsw.limit_in_bytes", v); !s2.ok()) return fail(s2.error());
        s = write(c.memory_dir_, "memory.limit_in_bytes", v);
      }
      if (!s.ok()) return fail(s.error());
      if (memsw) {
        if (Status s2 = write(c.memory_dir_, "memory.memsw.limit_in_bytes", v); !s2.ok()) return fail(s2.error());
      }
    }
  }
  if (layout.cpu) {
    bool reused = false;
    auto dir = make_group(root + "/cpu", &reused);
    if (!dir.ok()) return fail(dir.error());
    c.cpu_dir_ = *dir;
    if (limits.cpu_millis > 0) {
      // quota/period = cpus = millis/1000, with a period of 100 ms.
      if (Status s = write(c.cpu_dir_, "cpu.cfs_period_us", "100000"); !s.ok()) return fail(s.error());
      const int64_t quota = static_cast<int64_t>(limits.cpu_millis) * 100;
      if (Status s = write(c.cpu_dir_, "cpu.cfs_quota_us", std::to_string(quota)); !s.ok()) return fail(s.error());
    } else if (reused) {
      if (Status s = write(c.cpu_dir_, "cpu.cfs_quota_us", "-1"); !s.ok()) return fail(s.error());
    }
  }
  if (layout.pids) {
    bool reused = false;
    auto dir = make_group(root + "/pids", &reused);
    if (!dir.ok()) return fail(dir.error());
    c.pids_dir_ = *dir;
    if (limits.pids > 0 || reused) {
      const std::string v = limits.pids > 0 ? std::to_string(limits.pids) : "max";
      if (Status s = write(c.pids_dir_, "pids.max", v); !s.ok()) return fail(s.error());
    }
  }
  if (!layout.unified.empty()) {
    auto dir = make_group(layout.unified);
    if (!dir.ok()) return fail(dir.error());
    c.unified_dir_ = *dir;
    c.unified_has_kill_ = layout.unified_kill;
    for (const std::string& controller : layout.v2_enabled) {
      if (controller == "memory") {
        c.v2_memory_ = true;
        if (limits.memory_bytes > 0) {
          const std::string v = std::to_string(limits.memory_bytes);
          if (Status st = write(c.unified_dir_, "memory.max", v); !st.ok()) return fail(st.error());
          // Swap would let a job exceed its memory without being stopped.
          if (Exists(c.unified_dir_ + "/memory.swap.max")) (void)write(c.unified_dir_, "memory.swap.max", "0");
        }
      } else if (controller == "cpu") {
        c.v2_cpu_ = true;
        if (limits.cpu_millis > 0) {
          // "quota period": cpus = millis/1000 of a 100 ms period.
          const std::string v = std::to_string(static_cast<int64_t>(limits.cpu_millis) * 100) + " 100000";
          if (Status st = write(c.unified_dir_, "cpu.max", v); !st.ok()) return fail(st.error());
        }
      } else if (controller == "pids") {
        c.v2_pids_ = true;
        if (limits.pids > 0) {
          if (Status st = write(c.unified_dir_, "pids.max", std::to_string(limits.pids)); !st.ok()) {
            return fail(st.error());
          }
        }
      }
    }
  }

  for (const std::string& dir : c.GroupDirs()) c.procs_files_.push_back(dir + "/cgroup.procs");
  return c;
}

std::optional<Containment> Containment::Find(const std::string& name, const Options& options) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) return std::nullopt;
  const std::string& root = options.cgroup_root;
  auto existing = [&](const std::string& hierarchy) {
    const std::string dir = hierarchy + "/" + options.parent + "/" + name;
    return Exists(dir + "/cgroup.procs") ? dir : std::string();
  };
  Containment c;
  c.memory_dir_ = existing(root + "/memory");
  c.cpu_dir_ = existing(root + "/cpu");
  c.pids_dir_ = existing(root + "/pids");
  // cgroup v2: /sys/fs/cgroup/unified in hybrid mode, /sys/fs/cgroup itself on a pure v2 machine.
  c.unified_dir_ = existing(root + "/unified");
  if (c.unified_dir_.empty() && Exists(root + "/cgroup.controllers")) c.unified_dir_ = existing(root);
  c.unified_has_kill_ = !c.unified_dir_.empty() && Exists(c.unified_dir_ + "/cgroup.kill");
  if (c.GroupDirs().empty()) return std::nullopt;
  for (const std::string& dir : c.GroupDirs()) c.procs_files_.push_back(dir + "/cgroup.procs");
  return c;
}

Containment Containment::Disabled(const Limits& limits) {
  Containment c;
  c.limits_ = limits;
  return c;
}

std::vector<std::string> Containment::GroupDirs() const {
  std::vector<std::string> dirs;
  for (const std::string* d : {&memory_dir_, &cpu_dir_, &pids_dir_, &unified_dir_}) {
    if (!d->empty()) dirs.push_back(*d);
  }
  return dirs;
}

int Containment::JoinSelf() const {
  // Formats the pid by hand: no allocation between fork and exec.
  char buf[24];
  char* p = buf + sizeof buf;
  for (pid_t pid = ::getpid(); pid > 0; pid /= 10) *--p = static_cast<char>('0' + pid % 10);
  const size_t len = static_cast<size_t>(buf + sizeof buf - p);
  for (const std::string& file : procs_files_) {
    if (int err = WriteValue(file.c_str(), p, len)) return err;
  }
  return 0;
}

int Containment::ApplyRlimitsSelf() const {
  if (limits_.memory_bytes > 0 && memory_dir_.empty() && !v2_memory_) {
    const rlimit rl{static_cast<rlim_t>(limits_.memory_bytes), static_cast<rlim_t>(limits_.memory_bytes)};
    if (::setrlimit(RLIMIT_AS, &rl) != 0) return errno;
  }
  if (limits_.pids > 0 && pids_dir_.empty() && !v2_pids_) {
    const rlimit rl{static_cast<rlim_t>(limits_.pids), static_cast<rlim_t>(limits_.pids)};
    if (::setrlimit(RLIMIT_NPROC, &rl) != 0) return errno;
  }
  return 0;
}

std::vector<pid_t> Containment::Pids() const {
  std::vector<pid_t> pids;
  std::string text;
  for (const std::string& file : procs_files_) {
    if (!ReadFile(file, text)) continue;
    const char* s = text.c_str();
    while (*s) {
      char* end = nullptr;
      const long v = std::strtol(s, &end, 10);
      if (end == s) break;
      if (v > 0) pids.push_back(static_cast<pid_t>(v));
      s = end;
      while (*s == '\n' || *s == ' ') ++s;
    }
  }
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return pids;
}

bool Containment::Empty() const {
  if (procs_files_.empty()) return false;
  std::string text;
  return ReadFile(procs_files_.front(), text) && text.find_first_not_of(" \n") == std::string::npos;
}

Status Containment::SetLimits(const Limits& limits) {
  const bool memory = !memory_dir_.empty() || v2_memory_;
  const bool cpu = !cpu_dir_.empty() || v2_cpu_;
  const bool pids = !pids_dir_.empty() || v2_pids_;
  if ((limits.memory_bytes > 0 && !memory) || (limits.cpu_millis > 0 && !cpu) || (limits.pids > 0 && !pids)) {
    return Error::Unavailable("limits held by rlimits cannot be changed from outside");
  }
  auto write = [](const std::string& path, const std::string& value) -> Status {
    if (int err = WriteValue(path, value)) {
      return Error::Internal("cannot write '" + value + "' to " + path + ": " + posix::ErrnoText(err));
    }
    return Status::Ok();
  };
  // "max"/-1: no limit, as a group without one.
  const std::string memory_v1 = limits.memory_bytes > 0 ? std::to_string(limits.memory_bytes) : "-1";
  if (!memory_dir_.empty()) {
    const std::string limit = memory_dir_ + "/memory.limit_in_bytes";
    const std::string memsw = memory_dir_ + "/memory.memsw.limit_in_bytes";
    // memsw may never be below the plain limit: lower the plain limit first
    // when shrinking, raise memsw first when growing.
    if (Exists(memsw)) {
      if (!write(limit, memory_v1).ok()) {
        if (Status st = write(memsw, memory_v1); !st.ok()) return st;
        if (Status st = write(limit, memory_v1); !st.ok()) return st;
      } else if (Status st = write(memsw, memory_v1); !st.ok()) {
        return st;
      }
    } else if (Status st = write(limit, memory_v1); !st.ok()) {
      return st;
    }
  } else if (v2_memory_) {
    const std::string v = limits.memory_bytes > 0 ? std::to_string(limits.memory_bytes) : "max";
    if (Status st = write(unified_dir_ + "/memory.max", v); !st.ok()) return st;
  }
  const std::string quota = limits.cpu_millis > 0 ? std::to_string(static_cast<int64_t>(limits.cpu_millis) * 100) : "";
  if (!cpu_dir_.empty()) {
    if (!quota.empty()) {
      if (Status st = write(cpu_dir_ + "/cpu.cfs_period_us", "100000"); !st.ok()) return st;
    }
    if (Status st = write(cpu_dir_ + "/cpu.cfs_quota_us", quota.empty() ? "-1" : quota); !st.ok()) return st;
  } else if (v2_cpu_) {
    if (Status st = write(unified_dir_ + "/cpu.max", (quota.empty() ? "max" : quota) + " 100000"); !st.ok()) return st;
  }
  const std::string pids_value = limits.pids > 0 ? std::to_string(limits.pids) : "max";
  if (!pids_dir_.empty()) {
    if (Status st = write(pids_dir_ + "/pids.max", pids_value); !st.ok()) return st;
  } else if (v2_pids_) {
    if (Status st = write(unified_dir_ + "/pids.max", pids_value); !st.ok()) return st;
  }
  limits_ = limits;
  return Status::Ok();
}

void Containment::KillAll(int signal) const {
  if (signal == SIGKILL && unified_has_kill_) {
    (void)WriteValue(unified_dir_ + "/cgroup.kill", "1");  // the per-pid pass below covers a failure
  }
  // A process can fork between reading cgroup.procs and the kill; the
  // supervisor calls this repeatedly until the groups are empty.
  for (pid_t pid : Pids()) ::kill(pid, signal);
  if (pgid_ > 0) ::kill(-pgid_, signal);
}

bool Containment::OomKilled() const {
  if (v2_memory_) {
    std::string text;
    return ReadFile(unified_dir_ + "/memory.events", text) && KeyedValue(text, "oom_kill") > 0;
  }
  if (memory_dir_.empty()) return false;
  std::string text;
  if (!ReadFile(memory_dir_ + "/memory.oom_control", text)) return false;
  const int64_t kills = KeyedValue(text, "oom_kill");
  if (kills >= 0) return kills > 0;
  return ReadNumber(memory_dir_ + "/memory.failcnt") > 0;
}

int64_t Containment::MaxMemoryBytes() const {
  if (v2_memory_) {
    // memory.peak since Linux 5.19; memory.current (now) before it.
    const int64_t peak = ReadNumber(unified_dir_ + "/memory.peak");
    return std::max<int64_t>(0, peak >= 0 ? peak : ReadNumber(unified_dir_ + "/memory.current"));
  }
  if (memory_dir_.empty()) return 0;
  return std::max<int64_t>(0, ReadNumber(memory_dir_ + "/memory.max_usage_in_bytes"));
}

// Whether the emptied memory group may go back to the pool, reset as a new
// group would be: no OOM kill in it (its counter cannot be reset) and
// little still charged to it.
bool Containment::ResetMemoryForPool() const {
  std::string oom;
  if (!ReadFile(memory_dir_ + "/memory.oom_control", oom) || KeyedValue(oom, "oom_kill") != 0) return false;
  const int64_t charged = ReadNumber(memory_dir_ + "/memory.usage_in_bytes");
  if (charged < 0 || charged > kPoolMaxChargeBytes) return false;
  for (const char* file : {"memory.max_usage_in_bytes", "memory.failcnt"}) {
    if (WriteValue(memory_dir_ + "/" + file, "0") != 0) return false;
  }
  for (const char* file : {"memory.memsw.max_usage_in_bytes", "memory.memsw.failcnt"}) {
    const int err = WriteValue(memory_dir_ + "/" + file, "0");
    if (err != 0 && err != ENOENT) return false;  // ENOENT: no swap accounting on this host
  }
  return true;
}

void Containment::RemoveSubgroups() const {
  if (const std::string dir = SubtreeDir(); !dir.empty()) RemoveChildGroups(dir);
}

Status Containment::Destroy() {
  std::string failed;
  // Emptied v1 groups go back to the pool where they can (see PutPooled).
  if (pool_) {
    for (std::string* dir : {&memory_dir_, &cpu_dir_, &pids_dir_}) {
      if (dir->empty() || !NoTasks(*dir)) continue;
      if (dir == &memory_dir_ && !ResetMemoryForPool()) continue;
      // Still counting a task on its way out: the next job would start one
      // process short.
      if (dir == &pids_dir_ && ReadNumber(pids_dir_ + "/pids.current") != 0) continue;
      if (PutPooled(*dir)) dir->clear();
    }
  }
  for (std::string* dir : {&memory_dir_, &cpu_dir_, &pids_dir_, &unified_dir_}) {
    if (dir->empty()) continue;
    int err = 0;
    // A group cannot be removed while it has members; just-killed processes
    // take a moment to leave.
    for (int i = 0; i < 100; ++i) {
      if (::rmdir(dir->c_str()) == 0 || errno == ENOENT) {
        err = 0;
        break;
      }
      err = errno;
      if (err != EBUSY) break;
      // Groups made below this one (a sandbox's per-exec groups) keep it
      // busy as members do: they go first (each once its members left).
      RemoveChildGroups(*dir);
      if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (err != 0) {
      failed += (failed.empty() ? "" : "; ") + *dir + ": " + posix::ErrnoText(err);
    } else {
      dir->clear();
    }
  }
  procs_files_.clear();
  for (const std::string& dir : GroupDirs()) procs_files_.push_back(dir + "/cgroup.procs");
  if (!failed.empty()) return Error::Internal("cannot remove cgroups: " + failed);
  return Status::Ok();
}

Status Containment::KillAllAndDestroy() {
  for (int i = 0; i < 200 && !Pids().empty(); ++i) {
    KillAll(SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Destroy();
}

std::string Containment::Describe() const {
  std::string v1;
  if (!memory_dir_.empty()) v1 += "memory";
  if (!cpu_dir_.empty()) v1 += std::string(v1.empty() ? "" : ",") + "cpu";
  if (!pids_dir_.empty()) v1 += std::string(v1.empty() ? "" : ",") + "pids";
  std::string v2;
  if (v2_memory_) v2 += "memory";
  if (v2_cpu_) v2 += std::string(v2.empty() ? "" : ",") + "cpu";
  if (v2_pids_) v2 += std::string(v2.empty() ? "" : ",") + "pids";
  std::string out;
  if (!v1.empty()) out = "cgroup v1 " + v1;
  if (!unified_dir_.empty()) out += std::string(out.empty() ? "" : " + ") + "cgroup v2" + (v2.empty() ? "" : " " + v2);
  const bool rl = (limits_.memory_bytes > 0 && memory_dir_.empty() && !v2_memory_) ||
                  (limits_.pids > 0 && pids_dir_.empty() && !v2_pids_);
  if (rl || out.empty()) out += std::string(out.empty() ? "" : " + ") + "rlimits";
  return out;
}

}  // namespace unisched::containment
