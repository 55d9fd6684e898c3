// Storage lifecycle (lifecycle.h).

#include "daemon/lifecycle.h"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "executor/stager.h"
#include "unisched/model/data_staging.h"
#include "unisched/objectstore/s3.h"

namespace unisched::daemon {
namespace {

namespace fs = std::filesystem;

// Regular files below `root` (relative), with size and mtime: directories
// are entered, symbolic links and everything else skipped.
struct FileSeen {
  std::string relative;
  int64_t bytes = 0;
  Timestamp modified{};
};
std::vector<FileSeen> FilesBelow(const std::string& root) {
  std::vector<FileSeen> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const Timestamp modified = FromUnixMillis(st.st_mtim.tv_sec * 1000LL + st.st_mtim.tv_nsec / 1'000'000);
    files.push_back({fs::relative(it->path(), root).string(), st.st_size, modified});
  }
  return files;
}

// One client per object store for one pass, its credentials revealed once
// and each reveal audited as a use of the secrets (`why` says what for).
class StoreClients {
 public:
  StoreClients(const config::Config& config, const service::SecretVault* vault, store::Store& store, std::string actor,
               Timestamp now)
      : config_(config), vault_(vault), store_(store), actor_(std::move(actor)), now_(now) {}

  // Null when it cannot be had; ErrorOf(name) then says why.
  const objectstore::S3Client* For(const std::string& name, const std::string& why) {
    if (auto it = clients_.find(name); it != clients_.end()) return it->second ? &*it->second : nullptr;
    const config::ObjectStore* store = config_.storage.FindObjectStore(name);
    auto& slot = clients_[name];
    if (store == nullptr) {
      errors_[name] = "no object store " + name;
      return nullptr;
    }
    auto keys = vault_ ? vault_->RevealStoreKeys(*store)
                       : Result<service::SecretVault::StoreKeys>(Error::Unavailable("this daemon has no secrets key"));
    if (!keys.ok()) {
      errors_[name] = keys.error().message;
      return nullptr;
    }
    // A use like any other, a dry run's listing included.
    for (const std::string& secret : service::SecretVault::StoreKeySecrets(*store)) {
      store::AuditRecord audit{now_, actor_, "secret.use", secret, why};
      (void)store_.WriteSync([&audit](store::Transaction& t) { return t.AppendAudit(audit); });
    }
    objectstore::S3Endpoint endpoint{store->endpoint,  store->region,    store->path_style,
                                     keys->access_key, keys->secret_key, ""};
    slot.emplace(std::move(endpoint));
    return &*slot;
  }
  const std::string& ErrorOf(const std::string& name) { return errors_[name]; }

 private:
  const config::Config& config_;
  const service::SecretVault* vault_;
  store::Store& store_;
  const std::string actor_;
  const Timestamp now_;
  std::map<std::string, std::optional<objectstore::S3Client>> clients_;
  std::map<std::string, std::string> errors_;
};

// The projects whose directories an archive rule covers: those it lists,
// or every project; "" alone (the whole tree) on a file system without
// project directories.
std::vector<std::string> ProjectsOfRule(const config::Config& config, const config::LifecycleRule& rule,
                                        const config::SharedFileSystem& shared) {
  if (!shared.project_dirs) return {""};
  std::vector<std::string> projects = rule.projects;
  if (projects.empty()) {
    for (const auto& p : config.projects) projects.push_back(p.name);
  }
  return projects;
}

}  // namespace

Lifecycle::Lifecycle(const config::LiveConfig& live, store::Store& store, const service::SecretVault* vault,
                     const Clock& clock)
    : live_(live), store_(store), vault_(vault), clock_(clock) {}

Lifecycle::~Lifecycle() {
  Stop();
}

void Lifecycle::Start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "us-lifecycle");
    Loop();
  });
}

void Lifecycle::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Lifecycle::Loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const int minutes = live_.Current().storage.lifecycle_interval_minutes;
    // 0: only when asked; the config may change, so look again in a minute.
    cv_.wait_for(lock, std::chrono::minutes(minutes > 0 ? minutes : 1), [this] { return stopping_; });
    if (stopping_ || minutes <= 0 || live_.Current().storage.lifecycle.empty()) continue;
    lock.unlock();
    auto done = Run(/*dry_run=*/false, "system");
    if (!done.ok()) spdlog::warn("storage lifecycle: {}", done.error().message);
    lock.lock();
  }
}

Result<std::vector<LifecycleAction>> Lifecycle::Run(bool dry_run, const std::string& actor) {
  std::lock_guard run(run_mu_);
  const config::Config* config = &live_.Current();  // valid as long as live_
  const Timestamp now = clock_.Now();
  std::vector<LifecycleAction> actions;
  StoreClients clients(*config, vault_, store_, actor, now);
  auto client_for = [&](const std::string& name, const std::string& rule) {
    return clients.For(name, "storage lifecycle rule " + rule + " uses object store " + name);
  };
  auto event = [&](const LifecycleAction& a) {
    if (dry_run) return;
    store::ClusterEvent e;
    e.time = clock_.Now();
    e.kind = a.action == "archive" ? "storage_archived" : "storage_expired";
    e.object = "lifecycle/" + a.rule;
    e.severity = a.error.empty() ? "info" : "warning";
    e.message = (a.action == "archive" ? "archived " + a.source + " to " + a.target : "expired " + a.source) + " (" +
                std::to_string(a.bytes) + " bytes, " + std::to_string(static_cast<int64_t>(a.age_days)) + " days old)" +
                (a.error.empty() ? "" : ": failed: " + a.error);
    (void)store_.WriteSync([&e](store::Transaction& t) { return t.AppendClusterEvent(e); });
  };

  for (const config::LifecycleRule& rule : config->storage.lifecycle) {
    if (!rule.shared.empty()) {
      const config::SharedFileSystem* shared = nullptr;
      for (const auto& s : config->storage.shared) shared = s.name == rule.shared ? &s : shared;
      auto target = model::ParseStoreUrl(rule.archive_to, "archive_to");
      if (shared == nullptr || !target.ok()) continue;  // the config's validation rules these out
      for (const std::string& project : ProjectsOfRule(*config, rule, *shared)) {
        const std::string root = project.empty() ? shared->path : shared->path + "/" + project;
        for (const FileSeen& file : FilesBelow(root)) {
          const double age = AgeDays(file.modified, now);
          if (age < rule.older_than_days) continue;
          const std::string key = target->key + (project.empty() ? "" : project + "/") + file.relative;
          LifecycleAction a{rule.name,
                            "archive",
                            root + "/" + file.relative,
                            "s3://" + target->store + "/" + target->bucket + "/" + key,
                            file.bytes,
                            age,
                            ""};
          if (!dry_run) {
            const objectstore::S3Client* client = client_for(target->store, rule.name);
            auto opened = client ? executor::OpenFileBeneath(root, file.relative)
                                 : Result<executor::OpenedBeneath>(Error::Unavailable(clients.ErrorOf(target->store)));
            if (!opened.ok()) {
              a.error = opened.error().message;
            } else {
              // Stored (its Content-MD5 checked by the server) before the file goes.
              auto put = client->Upload(target->bucket, key, "/proc/self/fd/" + std::to_string(opened->file_fd));
              if (!put.ok()) {
                a.error = put.error().message;
              } else if (::unlinkat(opened->dir_fd, opened->name.c_str(), 0) != 0) {
                a.error = std::string("archived, but not removed: ") + std::strerror(errno);
              }
              opened->Close();
            }
            event(a);
          }
          actions.push_back(std::move(a));
        }
      }
      continue;
    }
    auto where = model::ParseStoreUrl(rule.objects, "objects");
    if (!where.ok()) continue;
    const objectstore::S3Client* client = client_for(where->store, rule.name);
    if (client == nullptr) {
      actions.push_back({rule.name, "expire", rule.objects, "", 0, 0, clients.ErrorOf(where->store)});
      continue;
    }
    auto listed = client->List(where->bucket, where->key);
    if (!listed.ok()) {
      actions.push_back({rule.name, "expire", rule.objects, "", 0, 0, listed.error().message});
      continue;
    }
    for (const auto& object : *listed) {
      auto modified = ParseRfc3339(object.last_modified);
      if (!modified) continue;
      const double age = AgeDays(*modified, now);
      if (age < rule.older_than_days) continue;
      LifecycleAction a{rule.name, "expire",    "s3://" + where->store + "/" + where->bucket + "/" + object.key,
                        "",        object.size, age,
                        ""};
      if (!dry_run) {
        if (Status s = client->Delete(where->bucket, object.key); !s.ok()) a.error = s.error().message;
        event(a);
      }
      actions.push_back(std::move(a));
    }
  }
  if (!dry_run && !actions.empty()) spdlog::info("storage lifecycle: {} actions", actions.size());
  return actions;
}

std::vector<ArchivedBytes> Lifecycle::MeasureArchives(Timestamp now) {
  const config::Config* config = &live_.Current();  // valid as long as live_
  StoreClients clients(*config, vault_, store_, "system", now);
  std::vector<ArchivedBytes> measured;
  std::set<std::string> seen;  // rules sharing an archive prefix: measured once
  for (const config::LifecycleRule& rule : config->storage.lifecycle) {
    if (rule.shared.empty()) continue;
    const config::SharedFileSystem* shared = nullptr;
    for (const auto& s : config->storage.shared) shared = s.name == rule.shared ? &s : shared;
    auto target = model::ParseStoreUrl(rule.archive_to, "archive_to");
    const config::ObjectStore* store = target.ok() ? config->storage.FindObjectStore(target->store) : nullptr;
    if (shared == nullptr || store == nullptr) continue;  // the config's validation rules these out
    for (const std::string& project : ProjectsOfRule(*config, rule, *shared)) {
      // Run archives a project's files under <prefix><project>/.
      const std::string prefix = target->key + (project.empty() ? "" : project + "/");
      const std::string where = "s3://" + target->store + "/" + target->bucket + "/" + prefix;
      if (!seen.insert(where).second) continue;
      const objectstore::S3Client* client =
          clients.For(target->store, "storage sampling measures the archives in object store " + target->store);
      if (client == nullptr) {
        spdlog::warn("storage sampling: cannot measure {}: {}; not charged (absent, not zero)", where,
                     clients.ErrorOf(target->store));
        continue;
      }
      auto listed = client->List(target->bucket, prefix);
      if (!listed.ok()) {
        spdlog::warn("storage sampling: cannot list {}: {}; not charged (absent, not zero)", where,
                     listed.error().message);
        continue;
      }
      uint64_t bytes = 0;
      for (const auto& object : *listed) bytes += static_cast<uint64_t>(std::max<int64_t>(object.size, 0));
      measured.push_back({project, where, store->tier, bytes});
    }
  }
  return measured;
}

}  // namespace unisched::daemon
