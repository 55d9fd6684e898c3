#pragma once
// JSON of sandboxes and images: the API's views, the stored sandbox record, and that record read back.
// Apart from the manager: pure functions, one place for the shape of the answers.

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "daemon/sandbox_images.h"
#include "daemon/sandbox_registry.h"
#include "daemon/sandbox_warm_pool.h"
#include "unisched/common/status.h"
#include "unisched/store/store.h"

namespace unisched::daemon {

// The view of a sandbox (docs/sandboxes.md, the create's answer).
nlohmann::json SandboxView(const Sandbox& s);
// Its stored row: the view, and its work directory while it has an instance.
store::SandboxRow SandboxRecord(const Sandbox& s);
// The view of a sandbox from its stored row (without the host path).
Result<nlohmann::json> StoredSandboxView(const store::SandboxRow& row);

// A sandbox read back from its stored row, as a previous run left it
// running (not charged_until: the ledger has that); nullopt when the record
// is unreadable.
struct StoredSandbox {
  std::shared_ptr<Sandbox> sandbox;
  std::string work_dir;
};
std::optional<StoredSandbox> SandboxOfRecord(const store::SandboxRow& row);

// The view of an image (GET /v1/images): its versions, the current one and
// those a rollback goes back to, and its warm pool.
nlohmann::json ImageView(const std::string& name, const ImageCatalog& images, const WarmPool& warm);

}  // namespace unisched::daemon
