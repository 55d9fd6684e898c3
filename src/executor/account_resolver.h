#pragma once
// The job's unix account (uid, gid, supplementary groups) looked up in the
// daemon rather than in the supervisor: the supervisor is linked statically
// and makes no NSS lookup (attempt_files.h). The lookups read /etc/passwd
// and /etc/group and ask every NSS module (~60 us a launch here), so a
// found account is reused for a few seconds, as nscd would.

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "executor/attempt_files.h"
#include "unisched/common/status.h"

namespace unisched::executor {

class AccountResolver {
 public:
  // The account `user` names. An unknown user is kUnprocessable
  // (unknown_user); a lookup that failed for want of descriptors or memory
  // is a transient launch error (TransientLaunchError).
  Result<files::ResolvedAccount> Resolve(const std::string& user);

 private:
  // A change to an account (a new group) applies to launches from then on.
  // Failures are not kept: an account just created works at once.
  static constexpr auto kCacheTtl = std::chrono::seconds(5);
  static constexpr size_t kCacheSize = 4096;

  std::mutex mu_;
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, files::ResolvedAccount>>
      accounts_;  // GUARDED_BY(mu_): with when each was looked up
};

}  // namespace unisched::executor
