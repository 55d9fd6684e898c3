#include "unisched/service/unix_accounts.h"

namespace unisched::service {

bool UsesAllocatedAccount(const config::UserAccountSettings& settings, const store::UserRecord& user) {
  return settings.enabled() && user.unix_user.empty() && user.name != kBootstrapAdmin;
}

Status AllocateProjectGroup(store::Transaction& t, const config::UserAccountSettings& settings,
                            const std::string& project) {
  if (!settings.enabled()) return Status::Ok();
  return t.AllocateUnixId("project", project, settings.gid_min, settings.gid_max);
}

Status AllocateUnixIds(store::Transaction& t, const config::UserAccountSettings& settings,
                       const store::UserRecord& user) {
  if (!settings.enabled()) return Status::Ok();
  if (UsesAllocatedAccount(settings, user)) {
    if (auto s = t.AllocateUnixId("user", user.name, settings.uid_min, settings.uid_max); !s.ok()) return s;
  }
  for (const auto& project : user.projects) {
    if (auto s = AllocateProjectGroup(t, settings, project); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace unisched::service
