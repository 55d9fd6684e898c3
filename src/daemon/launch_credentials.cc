// What a launch carries that is decrypted for it (job_lifecycle.h): the
// job's secrets and its data staging's store credentials, each use audited.
// Apart from job_lifecycle.cc because it is the one place the daemon hands
// out plaintext credentials.

#include <set>

#include "daemon/job_lifecycle.h"

namespace unisched::daemon {

Status JobLifecycle::AddSecrets(Batch& batch, const model::Job& job, std::vector<executor::LaunchSpec*> tasks) const {
  if (job.secrets.empty()) return Status::Ok();
  const int attempt = job.CurrentAttempt() ? job.CurrentAttempt()->number : 0;
  for (const model::SecretUse& use : job.secrets) {
    auto value = vault_ ? vault_->Reveal(job.project, use.name)
                        : Result<std::string>(Error::Unavailable(
                              vault_problem_.empty() ? "this daemon has no secrets key" : vault_problem_));
    if (!value.ok()) {
      const std::string why = "not launched: secret '" + use.name + "' of project " + job.project +
                              " cannot be read: " + value.error().message;
      if (value.error().kind == ErrorKind::kUnavailable) return executor::TransientLaunchError(why);
      return Error::Unprocessable("secret_unavailable", why);
    }
    for (executor::LaunchSpec* task : tasks) task->secrets.push_back({use.name, *value, use.env});
    // Every use audited: who, which secret, which attempt; never the value.
    store::AuditRecord audit{clock_.Now(), job.user, "secret.use", "secret/" + job.project + "/" + use.name,
                             "job " + std::to_string(job.id) + " attempt " + std::to_string(attempt) +
                                 (use.env.empty() ? " as a file" : " as $" + use.env)};
    batch.writes.push_back([audit = std::move(audit)](store::Transaction& t) { return t.AppendAudit(audit); });
  }
  return Status::Ok();
}

Status JobLifecycle::AddStaging(Batch* batch, const model::Job& job, std::vector<executor::LaunchSpec*> tasks) const {
  if (job.data.empty() || tasks.empty()) return Status::Ok();
  const int attempt = job.CurrentAttempt() ? job.CurrentAttempt()->number : 0;
  model::DataStaging data = job.data;
  std::set<std::string> names;
  for (const auto& stage : data.stage_in) {
    if (auto url = model::ParseStoreUrl(stage.from, "from"); url.ok()) names.insert(url->store);
  }
  for (auto& stage : data.stage_out) {
    stage.to = model::ExpandStagePattern(stage.to, job.id, attempt);
    if (auto url = model::ParseStoreUrl(stage.to, "to"); url.ok()) names.insert(url->store);
  }
  std::vector<executor::StoreEndpoint> stores;
  for (const std::string& name : names) {
    const config::ObjectStore* store = current_config().storage.FindObjectStore(name);
    if (store == nullptr) {
      return Error::Unprocessable("unknown_object_store", "not launched: object store '" + name +
                                                              "' is no longer in the config (storage.object_stores)");
    }
    auto keys = vault_ ? vault_->RevealStoreKeys(*store)
                       : Result<service::SecretVault::StoreKeys>(Error::Unavailable(
                             vault_problem_.empty() ? "this daemon has no secrets key" : vault_problem_));
    if (!keys.ok()) {
      const std::string why = "not launched: " + keys.error().message;
      if (keys.error().kind == ErrorKind::kUnavailable) return executor::TransientLaunchError(why);
      return Error::Unprocessable("secret_unavailable", why);
    }
    executor::StoreEndpoint endpoint{store->name,       store->endpoint,  store->region,
                                     store->path_style, keys->access_key, keys->secret_key};
    for (const std::string& secret : service::SecretVault::StoreKeySecrets(*store)) {
      store::AuditRecord audit{clock_.Now(), job.user, "secret.use", secret,
                               "job " + std::to_string(job.id) + " attempt " + std::to_string(attempt) +
                                   " stages with object store " + name};
      if (batch) {
        batch->writes.push_back([audit = std::move(audit)](store::Transaction& t) { return t.AppendAudit(audit); });
      }
    }
    stores.push_back(std::move(endpoint));
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    tasks[i]->data = data;
    // Every node stages its own input; the results leave once, from the
    // first task's node.
    if (i > 0) tasks[i]->data.stage_out.clear();
    tasks[i]->stores = stores;
  }
  return Status::Ok();
}

}  // namespace unisched::daemon
