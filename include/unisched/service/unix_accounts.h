#pragma once
// One Unix account per unisched user (executor.user_accounts,
// docs/accounts.md): a uid per user without a configured unix_user and a
// group (gid) per project, allocated once in the store, in the transaction
// that creates the user, so the daemon, every agent and shared storage see
// the same numbers.

#include <string>

#include "unisched/common/status.h"
#include "unisched/config/config.h"
#include "unisched/store/store.h"

namespace unisched::service {

// The bootstrap platform-admin: its jobs run as executor.default_unix_user.
inline constexpr const char* kBootstrapAdmin = "admin";

// Whether `user`'s jobs run as an allocated uid: allocation is on, the user
// has no unix_user of its own, and it is not the bootstrap admin.
bool UsesAllocatedAccount(const config::UserAccountSettings& settings, const store::UserRecord& user);

// Allocates, in `t`, the uid `user` needs (UsesAllocatedAccount) and a
// group for each of its projects. Nothing when allocation is off.
Status AllocateUnixIds(store::Transaction& t, const config::UserAccountSettings& settings,
                       const store::UserRecord& user);
// A group for `project`.
Status AllocateProjectGroup(store::Transaction& t, const config::UserAccountSettings& settings,
                            const std::string& project);

}  // namespace unisched::service
