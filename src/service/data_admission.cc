// Data staging at submission (service/admission.h, StagingRefusal).

#include "unisched/service/admission.h"

namespace unisched::service {
namespace {

bool Covers(const config::ObjectStoreAccess& rule, const std::string& project, const model::StoreUrl& url,
            bool writing) {
  if (writing && rule.read_only) return false;
  bool member = false;
  for (const auto& p : rule.projects) member = member || p == "*" || p == project;
  return member && rule.bucket == url.bucket && url.key.compare(0, rule.prefix.size(), rule.prefix) == 0;
}

// The store `text` names, if `project` may use its bucket and key.
std::optional<Error> UrlRefusal(const config::StorageSettings& storage, const std::string& project,
                                const std::string& text, const std::string& field, bool writing) {
  auto url = model::ParseStoreUrl(text, field);
  if (!url.ok()) return url.error();
  const config::ObjectStore* store = storage.FindObjectStore(url->store);
  if (store == nullptr) {
    std::string known;
    for (const auto& s : storage.object_stores) known += (known.empty() ? "" : ", ") + s.name;
    return Error::Unprocessable("unknown_object_store",
                                field + " names object store '" + url->store + "', which the config does not have (" +
                                    (known.empty() ? "it has none: storage.object_stores" : "it has " + known) + ")",
                                field);
  }
  for (const auto& rule : store->access) {
    if (Covers(rule, project, *url, writing)) return std::nullopt;
  }
  std::string allowed;
  for (const auto& rule : store->access) {
    config::ObjectStoreAccess readable = rule;
    readable.read_only = false;
    if (!Covers(readable, project, {url->store, rule.bucket, rule.prefix}, false)) continue;
    allowed += std::string(allowed.empty() ? "" : ", ") + "s3://" + store->name + "/" + rule.bucket + "/" +
               rule.prefix + (rule.read_only ? " (read-only)" : "");
  }
  return Error::Unprocessable(
      "object_store_forbidden",
      "project " + project + " may not " + (writing ? "write to" : "read from") + " " + text +
          (allowed.empty() ? "; it may use no part of store '" + store->name + "' (storage.object_stores[].access)"
                           : "; it may use " + allowed),
      field);
}

}  // namespace

std::optional<Error> StagingRefusal(const config::StorageSettings& storage, const std::string& project,
                                    const model::DataStaging& data) {
  if (data.stage_in.size() + data.stage_out.size() > model::kMaxStagesPerJob) {
    return Error::Unprocessable("invalid_value",
                                "data may list at most " + std::to_string(model::kMaxStagesPerJob) + " stages", "data");
  }
  auto bad_path = [](const std::string& path, const std::string& field) -> std::optional<Error> {
    const std::string why = model::CheckWorkPath(path);
    if (why.empty()) return std::nullopt;
    return Error::Unprocessable("invalid_value", field + " '" + path + "' " + why, field);
  };
  for (size_t i = 0; i < data.stage_in.size(); ++i) {
    const std::string field = "data.stage_in[" + std::to_string(i) + "]";
    if (auto refused = UrlRefusal(storage, project, data.stage_in[i].from, field + ".from", false)) return refused;
    if (auto refused = bad_path(data.stage_in[i].to, field + ".to")) return refused;
  }
  for (size_t i = 0; i < data.stage_out.size(); ++i) {
    const std::string field = "data.stage_out[" + std::to_string(i) + "]";
    if (auto refused = bad_path(data.stage_out[i].from, field + ".from")) return refused;
    if (auto refused = UrlRefusal(storage, project, data.stage_out[i].to, field + ".to", true)) return refused;
  }
  return std::nullopt;
}

}  // namespace unisched::service
