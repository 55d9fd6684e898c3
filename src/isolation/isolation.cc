// EnterIsolation and DropPrivileges: see isolation.h. Runs in a process that
// is single-threaded (the supervisor's child, the sandbox init), so plain
// allocation is safe here.

#include "unisched/isolation/isolation.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "unisched/posix/posix.h"

namespace unisched::isolation {
namespace {

int Fail(const char** step, const char* what) {
  *step = what;
  return errno != 0 ? errno : EINVAL;
}

int LoopbackUp() {
  const int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return errno;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  int rc = ::ioctl(sock, SIOCGIFFLAGS, &ifr);
  if (rc == 0) {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    rc = ::ioctl(sock, SIOCSIFFLAGS, &ifr);
  }
  const int err = rc == 0 ? 0 : errno;
  ::close(sock);
  return err;
}

// Mount points as /proc/self/mountinfo lists them (field 5), octal escapes
// (\040 for a space) decoded.
std::vector<std::string> MountPoints() {
  std::vector<std::string> points;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, point;
    if (!(fields >> id >> parent >> devno >> root >> point)) continue;
    std::string decoded;
    for (size_t i = 0; i < point.size(); ++i) {
      if (point[i] == '\\' && i + 3 < point.size()) {
        decoded += static_cast<char>(std::stoi(point.substr(i + 1, 3), nullptr, 8));
        i += 3;
      } else {
        decoded += point[i];
      }
    }
    points.push_back(decoded);
  }
  return points;
}

bool Under(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

// Makes every mount at or below `root` read-only, except the writable ones
// and what lies under them (hidden by them). /proc is left: it is the
// instance's own, and its writable files are root's.
int RemountReadOnly(const std::string& root, const std::vector<std::string>& writable, const char** step) {
  for (const std::string& point : MountPoints()) {
    if (!Under(point, root)) continue;
    bool keep = false;
    for (const std::string& w : writable) keep = keep || Under(point, w);
    if (keep) continue;
    // A bind remount sets the per-mount flags anew: keep nosuid, nodev,
    // noexec and the atime flags the mount has (nodev added to /dev would
    // make /dev/null unusable).
    struct statvfs vfs {};
    if (::statvfs(point.c_str(), &vfs) != 0) continue;  // hidden by a later mount: unreachable
    unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY;
    if (vfs.f_flag & ST_NOSUID) flags |= MS_NOSUID;
    if (vfs.f_flag & ST_NODEV) flags |= MS_NODEV;
    if (vfs.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
    if (vfs.f_flag & ST_NOATIME) flags |= MS_NOATIME;
    if (vfs.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
    if (vfs.f_flag & ST_RELATIME) flags |= MS_RELATIME;
    if (::mount(nullptr, point.c_str(), nullptr, flags, nullptr) != 0) {
      // A mount under another one's path that was replaced (e.g. below the
      // host /proc) is no longer reachable and cannot be remounted.
      if (errno == EINVAL || errno == ENOENT) continue;
      return Fail(step, "remount read-only");
    }
  }
  return 0;
}

// An empty file to bind a device node onto.
int MakeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

}  // namespace

int EnterIsolation(const IsolationSpec& spec, const char** step) {
  errno = 0;
  if (int e = LoopbackUp()) {
    errno = e;
    return Fail(step, "bring up loopback");
  }
  static const char kHostname[] = "sandbox";
  if (::sethostname(kHostname, sizeof kHostname - 1) != 0) return Fail(step, "set the hostname");
  // Nothing mounted here propagates back to the host.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return Fail(step, "make mounts private");
  // Opened before the tmpfs mounts, which may hide it (a state directory
  // under /tmp in tests).
  const int work_fd = ::open(spec.work_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (work_fd < 0) return Fail(step, "open the work directory");
  const std::string work_source = "/proc/self/fd/" + std::to_string(work_fd);
  // The image's bind sources too: /tmp may hide them as well.
  std::vector<std::string> bind_sources;
  for (const auto& bind : spec.binds) {
    const int fd = ::open(bind.first.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) return Fail(step, "open an image bind's source");
    bind_sources.push_back("/proc/self/fd/" + std::to_string(fd));
  }

  const bool own_root = !spec.rootfs.empty();
  const std::string root = own_root ? spec.rootfs : "/";
  const std::string prefix = own_root ? spec.rootfs : "";
  if (own_root && ::mount(root.c_str(), root.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return Fail(step, "bind the image's rootfs");
  }
  const std::string tmp_options = "mode=1777,size=" + spec.tmp_size;
  if (::mount("tmpfs", (prefix + "/tmp").c_str(), "tmpfs", MS_NOSUID | MS_NODEV, tmp_options.c_str()) != 0) {
    return Fail(step, "mount /tmp");
  }
  if (own_root) {
    // A /dev of the few harmless nodes, bound from the host's.
    if (::mount("tmpfs", (prefix + "/dev").c_str(), "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") != 0) {
      return Fail(step, "mount /dev");
    }
    for (const char* node : {"null", "zero", "full", "random", "urandom"}) {
      const std::string target = prefix + "/dev/" + node;
      if (int e = MakeFile(target)) {
        errno = e;
        return Fail(step, "make a /dev node");
      }
      const std::string source = std::string("/dev/") + node;
      if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) return Fail(step, "bind /dev node");
    }
    if (int e = posix::MakeDir(prefix + "/dev/shm", 01777)) {
      errno = e;
      return Fail(step, "make /dev/shm");
    }
  }
  if (::mount("tmpfs", (prefix + "/dev/shm").c_str(), "tmpfs", MS_NOSUID | MS_NODEV, tmp_options.c_str()) != 0) {
    return Fail(step, "mount /dev/shm");
  }
  if (::mount("proc", (prefix + "/proc").c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    return Fail(step, "mount /proc");
  }
  // A sysfs of the instance's own network namespace (the host's lists the
  // host's interfaces), read-only.
  if (::mount("sysfs", (prefix + "/sys").c_str(), "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, nullptr) !=
      0) {
    return Fail(step, "mount /sys");
  }
  // /home: only the instance's own home, the work directory.
  if (int e = posix::MakeDir(prefix + "/home", 0755)) {
    errno = e;
    return Fail(step, "make /home");
  }
  if (::mount("tmpfs", (prefix + "/home").c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") != 0) {
    return Fail(step, "mount /home");
  }
  const std::string home = prefix + kSandboxHome;
  if (int e = posix::MakeDir(home, 0700)) {
    errno = e;
    return Fail(step, "make the home directory");
  }
  if (::mount(work_source.c_str(), home.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return Fail(step, "bind the work directory");
  }
  ::close(work_fd);
  for (size_t i = 0; i < spec.binds.size(); ++i) {
    const std::string target = prefix + spec.binds[i].second;
    if (::mount(bind_sources[i].c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      return Fail(step, "bind an image path");
    }
    ::close(std::stoi(bind_sources[i].substr(std::string("/proc/self/fd/").size())));
  }
  const std::vector<std::string> writable = {prefix + "/tmp", prefix + "/dev/shm", prefix + "/proc", home};
  if (int e = RemountReadOnly(own_root ? root : "/", writable, step)) return e;
  // The /home tmpfs itself was made read-only above; the bind on it is not.
  if (own_root) {
    if (::chdir(root.c_str()) != 0) return Fail(step, "enter the rootfs");
    if (::syscall(SYS_pivot_root, ".", ".") != 0) return Fail(step, "pivot_root");
    // The old root now lies under the new one: detach it.
    if (::umount2(".", MNT_DETACH) != 0) return Fail(step, "detach the old root");
  }
  if (::chdir(kSandboxHome) != 0) return Fail(step, "enter the home directory");
  return 0;
}

int DropPrivileges(uid_t uid, gid_t gid, const char** step) {
  errno = 0;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return Fail(step, "set no_new_privs");
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return Fail(step, "drop capabilities");
  }
  if (::setgroups(0, nullptr) != 0) return Fail(step, "clear supplementary groups");
  if (::setresgid(gid, gid, gid) != 0) return Fail(step, "set the gid");
  // From root to another uid: the permitted and effective capability sets
  // are cleared by the kernel.
  if (::setresuid(uid, uid, uid) != 0) return Fail(step, "set the uid");
  return 0;
}

UidLease::UidLease(UidLease&& other) noexcept : fd_(other.fd_), uid_(other.uid_) {
  other.fd_ = -1;
  other.uid_ = 0;
}

UidLease& UidLease::operator=(UidLease&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    uid_ = other.uid_;
    other.fd_ = -1;
    other.uid_ = 0;
  }
  return *this;
}

UidLease::~UidLease() {
  if (fd_ >= 0) ::close(fd_);
}

UidLease UidLease::Acquire(const std::string& lock_dir, uid_t first, uid_t count, uint64_t hint) {
  UidLease lease;
  if (count == 0) {
    errno = EINVAL;
    return lease;
  }
  // mkdir -p of the lock directory (root-only: 0700).
  for (size_t i = 1; i <= lock_dir.size(); ++i) {
    if (i == lock_dir.size() || lock_dir[i] == '/') {
      if (::mkdir(lock_dir.substr(0, i).c_str(), 0700) != 0 && errno != EEXIST) return lease;
    }
  }
  for (uid_t step = 0; step < count; ++step) {
    const uid_t uid = first + static_cast<uid_t>((hint + step) % count);
    const std::string path = lock_dir + "/" + std::to_string(uid);
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return lease;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      lease.fd_ = fd;
      lease.uid_ = uid;
      return lease;
    }
    ::close(fd);
  }
  errno = EAGAIN;
  return lease;
}

}  // namespace unisched::isolation
