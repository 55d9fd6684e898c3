// The sandbox and image endpoints (contract v1, section E; docs/sandboxes.md).
// Parsing and authorization here; the sandbox manager does the rest.

#include <nlohmann/json.hpp>

#include "api/call.h"
#include "api/responses.h"
#include "unisched/api/api.h"
#include "unisched/isolation/protocol.h"

namespace unisched::api {
namespace {

using nlohmann::json;

// Reads an optional positive integer field of `body`; false (answered) when
// it is there but not one.
template <class Reply>
bool ReadPositive(const json& body, const std::string& key, const std::string& field, std::optional<int64_t>& out,
                  const Reply& reply) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_number_integer() || it->get<int64_t>() <= 0) {
    reply(ErrorResponse(422, "invalid_value", field + " must be a positive integer", field));
    return false;
  }
  out = it->get<int64_t>();
  return true;
}

template <class Reply>
bool CheckKeys(const json& body, std::initializer_list<const char*> allowed, const std::string& prefix,
               const Reply& reply) {
  for (const auto& [key, value] : body.items()) {
    bool known = false;
    for (const char* a : allowed) known = known || key == a;
    if (!known) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      reply(
          ErrorResponse(400, "unknown_field", "unknown field '" + prefix + key + "'; allowed: " + list, prefix + key));
      return false;
    }
  }
  return true;
}

std::optional<int64_t> ParseSandboxId(const std::string& text) {
  // "sb-12" as the API names them; a bare number is accepted too.
  std::string digits = text.rfind("sb-", 0) == 0 ? text.substr(3) : text;
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  return std::stoll(digits);
}

// The manager commits the audit record of a call that succeeds in the same
// transaction as its change; a refused call (422, 429, 503...) is audited
// by the API as any other.
template <class Call>
std::function<void(HttpResponse)> ReplyAuditedOnSuccess(Call& call) {
  return [state = call.state, reply = call.reply](HttpResponse response) {
    if (response.status < 300) state->audited = true;
    reply(std::move(response));
  };
}

// The {path} of a file call, relative and inside the work directory; else
// answers 422 and returns nullopt.
template <class Call>
std::optional<std::string> FilePath(Call& call) {
  std::string path = call.Param("path");
  if (std::string why = isolation::CheckRelativePath(path); !why.empty()) {
    call.reply(ErrorResponse(422, "invalid_value", why, "path"));
    return std::nullopt;
  }
  return path;
}

}  // namespace

std::optional<int64_t> Api::VisibleSandbox(Call& call) {
  if (!ctx_.sandboxes) {
    call.reply(ErrorResponse(503, "unavailable", "sandboxes are not served by this daemon"));
    return std::nullopt;
  }
  const auto id = ParseSandboxId(call.Param("id"));
  auto sandbox = id ? ctx_.sandboxes->Get(*id) : Result<json>(Error::NotFound("no such sandbox"));
  if (!sandbox.ok()) {
    call.reply(ErrorResponse(404, "not_found", "no sandbox " + call.Param("id")));
    return std::nullopt;
  }
  const auth::Principal& p = *call.principal;
  if (!auth::IsPlatformAdmin(p) && sandbox->value("user", "") != p.user &&
      !auth::AdministersQueue(p, sandbox->value("queue", ""))) {
    call.reply(ErrorResponse(404, "not_found", "no sandbox " + call.Param("id")));
    return std::nullopt;
  }
  return id;
}

void Api::CreateSandbox(Call& call) {
  if (!ctx_.sandboxes) {
    call.reply(ErrorResponse(503, "unavailable", "sandboxes are not served by this daemon"));
    return;
  }
  json body = call.request.body.empty() ? json::object() : json::parse(call.request.body, nullptr, false);
  if (!body.is_object()) {
    call.reply(
        ErrorResponse(400, "malformed_json",
                      "the body must be a JSON object, e.g. {\"image\": \"host\", \"limits\": {\"memory_mb\": 512}}"));
    return;
  }
  if (!CheckKeys(body, {"project", "image", "queue", "limits", "idle_timeout_seconds"}, "", call.reply)) return;
  SandboxPlane::CreateRequest request;
  request.user = call.principal->user;
  for (const char* key : {"project", "image", "queue"}) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    if (!it->is_string() || it->get<std::string>().empty()) {
      call.reply(ErrorResponse(422, "invalid_value", std::string(key) + " must be a non-empty string", key));
      return;
    }
    (std::string(key) == "project" ? request.project
     : std::string(key) == "image" ? request.image
                                   : request.queue) = it->get<std::string>();
  }
  if (request.project.empty()) request.project = "default";
  if (!auth::CanSubmitTo(*call.principal, request.project)) {
    call.reply(ErrorResponse(403, "forbidden", "you are not a member of project '" + request.project + "'", "project"));
    return;
  }
  if (auto it = body.find("limits"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) {
      call.reply(ErrorResponse(422, "invalid_value",
                               "limits must be an object: {\"cpus\", \"memory_mb\", \"timeout_seconds\"}", "limits"));
      return;
    }
    if (!CheckKeys(*it, {"cpus", "memory_mb", "timeout_seconds"}, "limits.", call.reply)) return;
    if (!ReadPositive(*it, "cpus", "limits.cpus", request.cpus, call.reply) ||
        !ReadPositive(*it, "memory_mb", "limits.memory_mb", request.memory_mb, call.reply) ||
        !ReadPositive(*it, "timeout_seconds", "limits.timeout_seconds", request.timeout_seconds, call.reply)) {
      return;
    }
  }
  if (!ReadPositive(body, "idle_timeout_seconds", "idle_timeout_seconds", request.idle_timeout_seconds, call.reply)) {
    return;
  }
  auto reply = ReplyAuditedOnSuccess(call);
  ctx_.sandboxes->Create(std::move(request), call.principal->user, [reply](Result<json> created) {
    if (!created.ok()) {
      HttpResponse r = FromError(created.error());
      if (created.error().kind == ErrorKind::kRateLimited) r.headers.emplace_back("Retry-After", "5");
      reply(std::move(r));
      return;
    }
    reply(Json(201, *created));
  });
}

void Api::ListSandboxes(Call& call) {
  if (!ctx_.sandboxes) {
    call.reply(ErrorResponse(503, "unavailable", "sandboxes are not served by this daemon"));
    return;
  }
  const bool all = call.request.query.count("all") && call.request.query.at("all") == "true";
  const json listed = ctx_.sandboxes->List(!all);
  const auth::Principal& p = *call.principal;
  json visible = json::array();
  for (const json& s : listed) {
    if (auth::IsPlatformAdmin(p) || s.value("user", "") == p.user || auth::AdministersQueue(p, s.value("queue", ""))) {
      visible.push_back(s);
    }
  }
  call.reply(Json(200, {{"sandboxes", visible}}));
}

void Api::GetSandbox(Call& call) {
  auto id = VisibleSandbox(call);
  if (!id) return;
  auto sandbox = ctx_.sandboxes->Get(*id);
  call.reply(sandbox.ok() ? Json(200, *sandbox) : FromError(sandbox.error()));
}

void Api::DeleteSandbox(Call& call) {
  auto id = VisibleSandbox(call);
  if (!id) return;
  auto reply = ReplyAuditedOnSuccess(call);
  ctx_.sandboxes->Delete(*id, call.principal->user, [reply](Result<json> deleted) {
    reply(deleted.ok() ? Json(200, *deleted) : FromError(deleted.error()));
  });
}

void Api::ExecSandbox(Call& call) {
  auto id = VisibleSandbox(call);
  if (!id) return;
  json body = json::parse(call.request.body, nullptr, false);
  if (!body.is_object()) {
    call.reply(ErrorResponse(400, "malformed_json",
                             "the body must be a JSON object, e.g. {\"argv\": [\"python3\", \"-c\", \"print(1)\"]}"));
    return;
  }
  if (!CheckKeys(body, {"argv", "stdin", "env", "timeout_seconds"}, "", call.reply)) return;
  SandboxPlane::ExecRequest request;
  const json argv = body.value("argv", json());
  if (!argv.is_array() || argv.empty()) {
    call.reply(ErrorResponse(422, "invalid_value", "argv must be a non-empty array of strings, e.g. [\"ls\", \"-l\"]",
                             "argv"));
    return;
  }
  for (const json& a : argv) {
    if (!a.is_string() || a.get<std::string>().find('\0') != std::string::npos) {
      call.reply(ErrorResponse(422, "invalid_value", "argv must hold strings without NUL bytes", "argv"));
      return;
    }
    request.argv.push_back(a.get<std::string>());
  }
  if (request.argv[0].empty()) {
    call.reply(ErrorResponse(422, "invalid_value", "argv[0] (the program) must not be empty", "argv"));
    return;
  }
  if (auto it = body.find("stdin"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) {
      call.reply(ErrorResponse(422, "invalid_value", "stdin must be a string", "stdin"));
      return;
    }
    request.stdin_data = it->get<std::string>();
  }
  if (auto it = body.find("env"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) {
      call.reply(
          ErrorResponse(422, "invalid_value", "env must be an object of strings, e.g. {\"DEBUG\": \"1\"}", "env"));
      return;
    }
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string() || k.empty() || k.find('=') != std::string::npos) {
        call.reply(
            ErrorResponse(422, "invalid_value", "env." + k + " must be a string, and names hold no '='", "env." + k));
        return;
      }
      request.env[k] = v.get<std::string>();
    }
  }
  if (!ReadPositive(body, "timeout_seconds", "timeout_seconds", request.timeout_seconds, call.reply)) return;
  auto reply = ReplyAuditedOnSuccess(call);
  ctx_.sandboxes->Exec(*id, std::move(request), call.principal->user, [reply](Result<json> result) {
    reply(result.ok() ? Json(200, *result) : FromError(result.error()));
  });
}

void Api::PutSandboxFile(Call& call) {
  auto id = VisibleSandbox(call);
  if (!id) return;
  auto path = FilePath(call);
  if (!path) return;
  auto reply = ReplyAuditedOnSuccess(call);
  ctx_.sandboxes->PutFile(*id, *path, call.request.body, call.principal->user, [reply](Result<json> result) {
    reply(result.ok() ? Json(200, *result) : FromError(result.error()));
  });
}

void Api::GetSandboxFile(Call& call) {
  auto id = VisibleSandbox(call);
  if (!id) return;
  auto path = FilePath(call);
  if (!path) return;
  auto reply = call.reply;
  ctx_.sandboxes->GetFile(*id, *path, [reply](Result<std::string> data) {
    if (!data.ok()) {
      reply(FromError(data.error()));
      return;
    }
    HttpResponse r;
    r.status = 200;
    r.content_type = "application/octet-stream";
    r.body = std::move(data).value();
    reply(std::move(r));
  });
}

void Api::ListImages(Call& call) {
  if (!ctx_.sandboxes) {
    call.reply(ErrorResponse(503, "unavailable", "sandboxes are not served by this daemon"));
    return;
  }
  call.reply(Json(200, {{"images", ctx_.sandboxes->ListImages()}}));
}

void Api::CreateImage(Call& call) {
  if (!ctx_.sandboxes) {
    call.reply(ErrorResponse(503, "unavailable", "sandboxes are not served by this daemon"));
    return;
  }
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may register images"));
    return;
  }
  json body = json::parse(call.request.body, nullptr, false);
  if (!body.is_object()) {
    call.reply(ErrorResponse(400, "malformed_json",
                             "the body must be a JSON object, e.g. {\"name\": \"python\", \"version\": \"3.11-v3\", "
                             "\"rootfs\": \"/srv/images/python-3.11\"}"));
    return;
  }
  if (!CheckKeys(body, {"name", "version", "rootfs", "binds", "warm"}, "", call.reply)) return;
  config::ImageSpec image;
  try {
    image.name = body.at("name").get<std::string>();
    image.version = body.at("version").get<std::string>();
    image.rootfs = body.value("rootfs", "");
    image.binds = body.value("binds", std::vector<std::string>{});
    image.warm = body.value("warm", 0);
  } catch (const json::exception&) {
    call.reply(ErrorResponse(422, "invalid_value",
                             "name and version are required strings; rootfs a string, binds an array of "
                             "\"HOST:INSIDE\" strings, warm an integer"));
    return;
  }
  if (auto errors = config::ValidateImage(image); !errors.empty()) {
    call.reply(ErrorResponse(422, "invalid_value", errors.front().ToString(), errors.front().path));
    return;
  }
  auto reply = ReplyAuditedOnSuccess(call);
  ctx_.sandboxes->AddImage(std::move(image), call.principal->user, [reply](Result<json> added) {
    reply(added.ok() ? Json(201, *added) : FromError(added.error()));
  });
}

void Api::RollbackImage(Call& call) {
  if (!ctx_.sandboxes) {
    call.reply(ErrorResponse(503, "unavailable", "sandboxes are not served by this daemon"));
    return;
  }
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may roll images back"));
    return;
  }
  auto reply = ReplyAuditedOnSuccess(call);
  ctx_.sandboxes->RollbackImage(call.Param("name"), call.principal->user, [reply](Result<json> image) {
    reply(image.ok() ? Json(200, *image) : FromError(image.error()));
  });
}

}  // namespace unisched::api
