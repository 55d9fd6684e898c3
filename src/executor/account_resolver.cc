#include "executor/account_resolver.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <optional>
#include <vector>

#include "unisched/executor/executor.h"
#include "unisched/posix/posix.h"

namespace unisched::executor {

namespace {

// What an NSS lookup that reports no error leaves in errno when one of its
// modules could not open its file or socket.
bool OutOfDescriptors(int err) {
  return err == EMFILE || err == ENFILE;
}

}  // namespace

Result<files::ResolvedAccount> AccountResolver::Resolve(const std::string& user) {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    auto cached = accounts_.find(user);
    if (cached != accounts_.end() && now - cached->second.first < kCacheTtl) return cached->second.second;
  }
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  int rc = 0;
  errno = 0;
  while ((rc = ::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found)) == ERANGE) {
    buf.resize(buf.size() * 2);
  }
  // Out of descriptors (or memory) the lookup fails, or finds nothing
  // when its module could not open the file it reads: either way it says
  // nothing about the account, and the launch is tried again later.
  if (rc != 0 || (found == nullptr && OutOfDescriptors(errno))) {
    const int err = rc != 0 ? rc : errno;
    std::string message = "cannot look up user '" + user + "': " + posix::ErrnoText(err);
    if (IsTransientErrno(err)) return TransientLaunchError(std::move(message));
    return Error::Internal(std::move(message));
  }
  if (found == nullptr) {
    return Error::Unprocessable("unknown_user", "unknown user '" + user + "'", "unix_user");
  }
  std::vector<gid_t> groups(16);
  int count = static_cast<int>(groups.size());
  // getgrouplist reports no error: a group module that cannot open its
  // file leaves errno and the primary group only, and the job would run
  // without its supplementary groups.
  errno = 0;
  while (::getgrouplist(user.c_str(), pw.pw_gid, groups.data(), &count) < 0) {
    groups.resize(std::max(static_cast<size_t>(count), groups.size() * 2));
    count = static_cast<int>(groups.size());
    errno = 0;
  }
  if (OutOfDescriptors(errno)) {
    return TransientLaunchError("cannot look up the groups of user '" + user + "': " + posix::ErrnoText(errno));
  }
  groups.resize(static_cast<size_t>(count));
  files::ResolvedAccount account{pw.pw_uid, pw.pw_gid, std::vector<uint32_t>(groups.begin(), groups.end())};
  std::lock_guard lock(mu_);
  if (accounts_.size() >= kCacheSize) accounts_.clear();  // a bound, not an LRU: refilled in one pass
  accounts_[user] = {now, account};
  return account;
}

}  // namespace unisched::executor
