// ChooseRuntimeRunsDir: see runtime_dir.h.

#include "daemon/runtime_dir.h"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "unisched/common/hash.h"

namespace unisched::daemon {
namespace {

bool IsTmpfs(const std::string& path) {
  struct statfs fs {};
  return ::statfs(path.c_str(), &fs) == 0 && static_cast<uint64_t>(fs.f_type) == TMPFS_MAGIC;
}

// A directory that is ours alone: made 0700, or found as a real directory
// (not a symlink) owned by us with no access for anyone else. /dev/shm is
// writable by every user: one of them may have made the name first.
bool OwnPrivateDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return false;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return false;
  return S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & 077) == 0;
}

}  // namespace

RuntimeDirChoice ChooseRuntimeRunsDir(const std::string& configured, const std::string& state_dir,
                                      const std::vector<std::string>& roots) {
  if (!configured.empty()) return {configured, "executor.runtime_dir", false};
  for (const std::string& root : roots) {
    if (!IsTmpfs(root)) continue;
    const std::string mine = root + "/unisched-" + std::to_string(::geteuid());
    // A stable name per state directory, so that daemons with different state
    // directories (tests run many) never share attempts.
    const std::string daemon_dir = mine + "/" + Fnv1a64Hex(state_dir);
    if (!OwnPrivateDir(mine) || !OwnPrivateDir(daemon_dir)) continue;
    return {daemon_dir + "/runs", "a tmpfs (" + root + "), named after the state directory " + state_dir, true};
  }
  return {state_dir + "/runs", "no tmpfs with a private directory for us (tried /run, /dev/shm)", false};
}

void RemoveRuntimeDirIfEmpty(const std::string& runs_dir) {
  // Attempts left: it stays. Absent: no attempt ran, the parent may go.
  if (::rmdir(runs_dir.c_str()) != 0 && errno != ENOENT) return;
  const size_t slash = runs_dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) (void)::rmdir(runs_dir.substr(0, slash).c_str());
}

}  // namespace unisched::daemon
