#pragma once
// Sandboxes and image versions in SQLite (unisched/store/sandboxes.h).
// Internal to src/store.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "store/sql.h"
#include "unisched/store/sandboxes.h"

namespace unisched::store::sql {

Status PutSandbox(Connection& c, const SandboxRow& sandbox);
Status PutImageVersion(Connection& c, const ImageVersionRow& image);
Status PushImageCurrent(Connection& c, const std::string& name, const std::string& version, Timestamp at);
Status PopImageCurrent(Connection& c, const std::string& name);

std::optional<SandboxRow> GetSandbox(Connection& c, int64_t id);
std::vector<SandboxRow> ListSandboxes(Connection& c, bool active_only, int limit);
int64_t MaxSandboxId(Connection& c);
std::vector<ImageVersionRow> ListImageVersions(Connection& c);
std::map<std::string, std::vector<std::string>> ImageCurrentStacks(Connection& c);

}  // namespace unisched::store::sql
