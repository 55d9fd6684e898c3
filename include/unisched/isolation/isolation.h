#pragma once
// The isolation of an agent sandbox (docs/sandboxes.md), shared by the
// sandbox instances of the API (unisched-sandbox) and the jobs of sandboxed
// pools (unisched-supervisor), so both get exactly the same walls.
//
// The caller is root and already in fresh network, mount, UTS, IPC and pid
// namespaces (clone flags). EnterIsolation then builds the instance's view:
//   - loopback only, brought up; hostname "sandbox";
//   - the root read-only: the host's root, or an image's rootfs directory
//     (pivot_root into it); every mount below it read-only as well, so no
//     host tmpfs such as /run/lock stays writable;
//   - a fresh /proc of the instance's own pid namespace; /tmp and /dev/shm
//     private tmpfs; /home a tmpfs holding only /home/sandbox, the private
//     work directory (a host directory bound there, owned by the instance's
//     uid, mode 0700);
//   - the image's read-only binds.
// The caller then sets no_new_privs, drops every capability and switches to
// the instance's own uid (DropPrivileges).

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace unisched::isolation {

// Where the work directory appears inside: also the instance's HOME and the
// working directory of everything it runs.
inline constexpr char kSandboxHome[] = "/home/sandbox";

struct IsolationSpec {
  std::string work_dir;  // host directory bound at kSandboxHome
  std::string rootfs;    // empty: the host's root, read-only
  // (host path, path inside) pairs, bound read-only; the inside path must
  // exist in the root.
  std::vector<std::pair<std::string, std::string>> binds{};
  std::string tmp_size = "64m";  // each of /tmp and /dev/shm
};

// Every path and string is prepared before the fork; only system calls run
// after it. Returns 0, or the errno of the failing step with *step naming it.
int EnterIsolation(const IsolationSpec& spec, const char** step);

// no_new_privs, an empty capability bounding set, no supplementary groups,
// then gid and uid. Returns 0 or the errno of the failing step.
int DropPrivileges(uid_t uid, gid_t gid, const char** step);

// A uid of its own for one instance, from [first, first + count): held by an
// exclusive lock on lock_dir/<uid> for as long as the lease lives, so
// concurrent instances of every daemon and supervisor on the host never share
// one (a shared uid would let one tenant read another's files).
class UidLease {
 public:
  UidLease() = default;
  UidLease(UidLease&& other) noexcept;
  UidLease& operator=(UidLease&& other) noexcept;
  UidLease(const UidLease&) = delete;
  UidLease& operator=(const UidLease&) = delete;
  ~UidLease();

  // Empty lease (uid() == 0) and errno set when none is free or the lock
  // directory cannot be made. `hint` spreads the search start.
  static UidLease Acquire(const std::string& lock_dir, uid_t first, uid_t count, uint64_t hint);
  uid_t uid() const { return uid_; }
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
  uid_t uid_ = 0;
};

}  // namespace unisched::isolation
