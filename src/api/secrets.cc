// /v1/secrets: a project's secrets (docs/secrets.md). Platform-admins and
// the project's members may make, rotate, list and delete them; no answer
// ever holds a value: only names and metadata. Jobs name them in `secrets`
// and get the values at launch (service::SecretVault::Reveal).

#include <nlohmann/json.hpp>
#include <string>

#include "api/body.h"
#include "api/call.h"
#include "api/responses.h"
#include "unisched/api/api.h"
#include "unisched/model/job.h"

namespace unisched::api {

namespace {

using nlohmann::json;

constexpr const char* kExample =
    R"({"project": "default", "name": "results-db-password", "value": "...", "description": "what it is for"})";
constexpr size_t kMaxDescriptionBytes = 1024;

json View(const store::SecretRecord& secret) {
  return {{"project", secret.project},       {"name", secret.name},
          {"version", secret.version},       {"description", secret.description},
          {"created_by", secret.created_by}, {"created_at", FormatRfc3339(secret.created_at)},
          {"updated_by", secret.updated_by}, {"updated_at", FormatRfc3339(secret.updated_at)}};
}

bool MayManage(const auth::Principal& who, const std::string& project) {
  return auth::IsPlatformAdmin(who) || auth::BelongsTo(who, project);
}

// The value: a string of 1 byte to SecretVault::kMaxValueBytes. Neither an
// error nor anything else here repeats it.
std::optional<Error> ReadValue(const json& body, std::string& value) {
  auto it = body.find("value");
  if (it == body.end() || it->is_null()) {
    return Error::Unprocessable("missing_field", "value is required: the secret itself, as a string", "value");
  }
  return body::ReadString(body, "value", "value", service::SecretVault::kMaxValueBytes, value, /*empty_ok=*/false);
}

// A project the caller is not in: 403 whether or not the secret exists, so
// the answer says nothing about another project's secrets.
HttpResponse NotMember(const auth::Principal& who, const std::string& project) {
  return ErrorResponse(403, "forbidden", "user " + who.user + " is not a member of project " + project);
}

HttpResponse NoSuchSecret(const std::string& project, const std::string& name) {
  return ErrorResponse(
      404, "not_found",
      "project " + project + " has no secret named '" + name + "'; GET /v1/secrets?project=" + project + " lists them");
}

}  // namespace

void Api::CreateSecret(Call& call) {
  if (ctx_.secrets == nullptr) {
    call.reply(ErrorResponse(503, "unavailable",
                             ctx_.secrets_problem.empty() ? "this daemon keeps no secrets" : ctx_.secrets_problem));
    return;
  }
  auto body = body::ParseObject(call.request.body, kExample);
  if (!body.ok()) {
    call.reply(FromError(body.error()));
    return;
  }
  if (auto e = body::CheckKeys(*body, "", {"project", "name", "value", "description"})) {
    call.reply(FromError(*e));
    return;
  }
  const auth::Principal& who = *call.principal;
  // Every field's type and size first (400), then what the values mean (422, 403).
  std::string project, name, value, description;
  if (!body->contains("name") || (*body)["name"].is_null()) {
    call.reply(ErrorResponse(422, "missing_field", "name is required, e.g. " + std::string(kExample), "name"));
    return;
  }
  for (auto e :
       {body::ReadString(*body, "project", "project", 256, project), body::ReadString(*body, "name", "name", 256, name),
        body::ReadString(*body, "description", "description", kMaxDescriptionBytes, description),
        ReadValue(*body, value)}) {
    if (e) {
      call.reply(FromError(*e));
      return;
    }
  }
  if (std::string why = model::CheckSecretName(name); !why.empty()) {
    call.reply(ErrorResponse(422, "invalid_value", "name '" + name + "' " + why, "name"));
    return;
  }
  if (project.empty()) project = who.projects.size() == 1 ? who.projects.front() : "default";
  if (!ctx_.config->Current().cluster.FindProject(project)) {
    call.reply(ErrorResponse(422, "unknown_project", "project '" + project + "' does not exist", "project"));
    return;
  }
  if (!MayManage(who, project)) {
    call.reply(
        ErrorResponse(403, "forbidden", "user " + who.user + " is not a member of project " + project, "project"));
    return;
  }
  auto made = ctx_.secrets->Create(project, name, value, description, who.user);
  if (!made.ok()) {
    call.reply(FromError(made.error()));
    return;
  }
  call.reply(Json(201, View(*made)));
}

void Api::RotateSecret(Call& call) {
  if (ctx_.secrets == nullptr) {
    call.reply(ErrorResponse(503, "unavailable",
                             ctx_.secrets_problem.empty() ? "this daemon keeps no secrets" : ctx_.secrets_problem));
    return;
  }
  const std::string& project = call.Param("project");
  const std::string& name = call.Param("name");
  if (!MayManage(*call.principal, project)) {
    call.reply(NotMember(*call.principal, project));
    return;
  }
  auto body = body::ParseObject(call.request.body, R"({"value": "...", "description": "what it is for"})");
  if (!body.ok()) {
    call.reply(FromError(body.error()));
    return;
  }
  if (auto e = body::CheckKeys(*body, "", {"value", "description"})) {
    call.reply(FromError(*e));
    return;
  }
  std::string value, description;
  if (auto e = body::ReadString(*body, "description", "description", kMaxDescriptionBytes, description)) {
    call.reply(FromError(*e));
    return;
  }
  if (auto e = ReadValue(*body, value)) {
    call.reply(FromError(*e));
    return;
  }
  auto rotated = ctx_.secrets->Rotate(project, name, value, description, call.principal->user);
  if (!rotated.ok()) {
    call.reply(FromError(rotated.error()));
    return;
  }
  call.reply(Json(200, View(*rotated)));
}

void Api::ListSecrets(Call& call) {
  const auth::Principal& who = *call.principal;
  const std::string project = call.Query("project").value_or("");
  if (!project.empty() && !MayManage(who, project)) {
    call.reply(
        ErrorResponse(403, "forbidden", "user " + who.user + " is not a member of project " + project, "project"));
    return;
  }
  auto rows = ctx_.store->ListSecrets(project);
  if (!rows.ok()) {
    call.reply(FromError(rows.error()));
    return;
  }
  json list = json::array();
  for (const auto& secret : *rows) {
    if (MayManage(who, secret.project)) list.push_back(View(secret));
  }
  call.reply(Json(200, {{"secrets", std::move(list)}}));
}

// The secret of the call's path, or nullopt after answering why not (403,
// 404 or the store's error).
std::optional<store::SecretRecord> Api::SecretOfPath(Call& call) {
  const std::string& project = call.Param("project");
  const std::string& name = call.Param("name");
  if (!MayManage(*call.principal, project)) {
    call.reply(NotMember(*call.principal, project));
    return std::nullopt;
  }
  auto found = ctx_.store->GetSecret(project, name);
  if (!found.ok()) {
    call.reply(FromError(found.error()));
    return std::nullopt;
  }
  if (!found->has_value()) call.reply(NoSuchSecret(project, name));
  return std::move(*found);
}

void Api::GetSecret(Call& call) {
  if (auto found = SecretOfPath(call)) call.reply(Json(200, View(*found)));
}

void Api::DeleteSecret(Call& call) {
  const auto found = SecretOfPath(call);
  if (!found) return;
  auto deleted = ctx_.store->DeleteSecret(found->project, found->name);
  if (!deleted.ok()) {
    call.reply(FromError(deleted.error()));
    return;
  }
  json view = View(*found);
  view["deleted"] = *deleted;
  call.reply(Json(200, view));
}

}  // namespace unisched::api
