// /v1/config: live config versions (docs/config-versions.md). Platform
// admins only, like `scontrol reconfigure`; the work is the config keeper's
// (service::ConfigPlane), these parse and render.

#include <nlohmann/json.hpp>

#include "api/body.h"
#include "api/call.h"
#include "api/responses.h"
#include "unisched/api/api.h"

namespace unisched::api {

namespace {

using nlohmann::json;

HttpResponse NoConfigVersions() {
  return ErrorResponse(503, "unavailable", "config versions are not served by this daemon");
}

HttpResponse Answer(const Result<json>& result, int status = 200) {
  return result.ok() ? Json(status, *result) : FromError(result.error());
}

// Every config endpoint: a daemon with a keeper, and a platform-admin
// caller; otherwise answers and returns false.
template <class Call>
bool MayCall(service::ConfigPlane* configs, Call& call, const std::string& what) {
  if (!configs) {
    call.reply(NoConfigVersions());
    return false;
  }
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may " + what));
    return false;
  }
  return true;
}

}  // namespace

void Api::ShowConfig(Call& call) {
  if (!MayCall(ctx_.configs, call, "read the config")) return;
  std::optional<int64_t> number;
  if (call.Query("version")) number = call.QueryInt("version", 0);
  call.reply(Answer(ctx_.configs->Show(number)));
}

void Api::ListConfigVersions(Call& call) {
  if (!MayCall(ctx_.configs, call, "list config versions")) return;
  call.reply(Answer(ctx_.configs->Versions(static_cast<int>(call.QueryInt("limit", 100)))));
}

void Api::ApplyConfig(Call& call) {
  if (!MayCall(ctx_.configs, call, "change the config")) return;
  auto parsed =
      body::ParseObject(call.request.body, R"({"text": "<the whole YAML config>", "canary_queue": "ai-training"})");
  std::optional<Error> invalid =
      parsed.ok() ? body::CheckKeys(*parsed, "", {"text", "canary_queue", "comment"}) : parsed.error();
  service::ConfigPlane::ApplyRequest request;
  if (!invalid && (!parsed->contains("text") || (*parsed)["text"].is_null())) {
    invalid = Error::Unprocessable("missing_field", "text is required: the whole YAML config, as a string", "text");
  }
  if (!invalid) invalid = body::ReadString(*parsed, "text", "text", 1 << 20, request.text, false);
  if (!invalid) invalid = body::ReadString(*parsed, "canary_queue", "canary_queue", 256, request.canary_queue);
  if (!invalid) invalid = body::ReadString(*parsed, "comment", "comment", 1024, request.comment);
  if (invalid) {
    call.reply(FromError(*invalid));
    return;
  }
  request.dry_run = call.Query("dry_run").value_or("false") == "true";
  auto result = ctx_.configs->Apply(request, call.principal->user);
  call.reply(Answer(result, result.ok() && result->value("applied", false) ? 201 : 200));
}

void Api::RollbackConfig(Call& call) {
  if (!MayCall(ctx_.configs, call, "roll the config back")) return;
  auto parsed = body::ParseObject(call.request.body, R"({"version": 3})", /*empty_ok=*/true);
  std::optional<Error> invalid = parsed.ok() ? body::CheckKeys(*parsed, "", {"version"}) : parsed.error();
  int64_t number = 0;
  if (!invalid) invalid = body::ReadInt(*parsed, "version", "version", 1, INT64_MAX, number);
  if (invalid) {
    call.reply(FromError(*invalid));
    return;
  }
  call.reply(
      Answer(ctx_.configs->Rollback(number > 0 ? std::optional<int64_t>(number) : std::nullopt, call.principal->user)));
}

void Api::PromoteConfig(Call& call) {
  if (!MayCall(ctx_.configs, call, "promote a canary config")) return;
  call.reply(Answer(ctx_.configs->Promote(call.principal->user)));
}

}  // namespace unisched::api
