// The sandbox and image endpoints (contract v1, section E; docs/sandboxes.md).
// Parsing and authorization here; the sandbox manager does the rest.

#include <nlohmann/json.hpp>

#include "api/body.h"
#include "api/call.h"
#include "api/responses.h"
#include "unisched/api/api.h"
#include "unisched/isolation/protocol.h"

namespace unisched::api {
namespace {

using nlohmann::json;

// Bounds of the numbers a sandbox request may hold (the queue's limits
// apply on top, in the manager).
constexpr int64_t kMaxSandboxCpus = 1 << 20;
constexpr int64_t kMaxMemoryMb = int64_t{1} << 40;
constexpr int64_t kMaxSeconds = int64_t{10} * 365 * 86400;

// An optional integer field of `obj` in [1, max] into `out`.
std::optional<Error> ReadPositive(const json& obj, const char* key, const std::string& field, int64_t max,
                                  std::optional<int64_t>& out) {
  if (!obj.contains(key) || obj[key].is_null()) return std::nullopt;
  int64_t value = 0;
  if (auto e = body::ReadInt(obj, key, field, 1, max, value)) return e;
  out = value;
  return std::nullopt;
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

// The daemon serves no API sandboxes when it runs as one of several
// replicas: a sandbox lives in the daemon's own machine, and a dead
// leader's cannot be adopted by another (docs/replicas.md).
HttpResponse NoSandboxes() {
  return ErrorResponse(501, "sandboxes_not_served",
                       "API sandboxes are not served by this daemon: it runs as one of several replicas "
                       "(server.replica), and sandboxes run in the daemon's own machine, which a replica taking over "
                       "could not adopt; run sandbox work as jobs of a sandbox pool on agent nodes, or use a single "
                       "daemon (docs/replicas.md#what-replicas-require)");
}

}  // namespace

std::optional<int64_t> Api::VisibleSandbox(Call& call) {
  if (!ctx_.sandboxes) {
    call.reply(NoSandboxes());
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
    call.reply(NoSandboxes());
    return;
  }
  auto parsed =
      body::ParseObject(call.request.body, R"({"image": "host", "limits": {"memory_mb": 512}})", /*empty_ok=*/true);
  if (!parsed.ok()) {
    call.reply(FromError(parsed.error()));
    return;
  }
  const json& body = *parsed;
  service::SandboxRequest request;
  std::optional<Error> invalid =
      body::CheckKeys(body, "", {"project", "image", "queue", "limits", "idle_timeout_seconds"});
  std::string project, queue;  // absent: the service's defaults
  if (!invalid) invalid = body::ReadString(body, "project", "project", 256, project, /*empty_ok=*/false);
  if (!invalid) invalid = body::ReadString(body, "queue", "queue", 256, queue, /*empty_ok=*/false);
  if (!invalid) invalid = body::ReadString(body, "image", "image", 256, request.image, /*empty_ok=*/false);
  if (!project.empty()) request.project = project;
  if (!queue.empty()) request.queue = queue;
  if (!invalid) {
    if (auto it = body.find("limits"); it != body.end() && !it->is_null()) {
      if (!it->is_object()) {
        invalid = body::WrongType("limits", "an object: {\"cpus\", \"memory_mb\", \"timeout_seconds\"}", *it);
      } else {
        invalid = body::CheckKeys(*it, "limits", {"cpus", "memory_mb", "timeout_seconds"});
        if (!invalid) invalid = ReadPositive(*it, "cpus", "limits.cpus", kMaxSandboxCpus, request.cpus);
        if (!invalid) invalid = ReadPositive(*it, "memory_mb", "limits.memory_mb", kMaxMemoryMb, request.memory_mb);
        if (!invalid) {
          invalid =
              ReadPositive(*it, "timeout_seconds", "limits.timeout_seconds", kMaxSeconds, request.timeout_seconds);
        }
      }
    }
  }
  if (!invalid) {
    invalid =
        ReadPositive(body, "idle_timeout_seconds", "idle_timeout_seconds", kMaxSeconds, request.idle_timeout_seconds);
  }
  if (invalid) {
    call.reply(FromError(*invalid));
    return;
  }
  auto reply = ReplyAuditedOnSuccess(call);
  ctx_.jobs->CreateSandbox(*call.principal, std::move(request), [reply](Result<json> created) {
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
    call.reply(NoSandboxes());
    return;
  }
  const bool all = call.Query("all") == std::optional<std::string>("true");
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
  auto parsed = body::ParseObject(call.request.body, R"j({"argv": ["python3", "-c", "print(1)"]})j");
  std::optional<Error> invalid =
      parsed.ok() ? body::CheckKeys(*parsed, "", {"argv", "stdin", "env", "timeout_seconds"}) : parsed.error();
  SandboxPlane::ExecRequest request;
  if (!invalid) {
    invalid = body::ReadStringList(*parsed, "argv", "argv", 1 << 20, request.argv, /*items_may_be_empty=*/true);
  }
  if (!invalid && (request.argv.empty() || request.argv[0].empty())) {
    invalid = Error::Unprocessable("invalid_value",
                                   "argv must be a non-empty list of strings whose first names the program, e.g. "
                                   "[\"ls\", \"-l\"]",
                                   "argv");
  }
  if (!invalid) invalid = body::ReadString(*parsed, "stdin", "stdin", 1 << 20, request.stdin_data);
  if (!invalid) {
    if (auto it = parsed->find("env"); it != parsed->end() && !it->is_null()) {
      if (!it->is_object()) invalid = body::WrongType("env", "an object of strings, e.g. {\"DEBUG\": \"1\"}", *it);
      for (auto e = it->begin(); !invalid && it->is_object() && e != it->end(); ++e) {
        const std::string field = "env." + e.key();
        if (!e->is_string()) {
          invalid = body::WrongType(field, "a string", *e);
        } else if (e.key().empty() || e.key().find('=') != std::string::npos) {
          invalid = Error::Unprocessable("invalid_value", "env names must be non-empty and hold no '='", field);
        } else if (!(invalid = body::CheckNoNul(e.key() + e->get<std::string>(), field))) {
          request.env[e.key()] = e->get<std::string>();
        }
      }
    }
  }
  if (!invalid)
    invalid = ReadPositive(*parsed, "timeout_seconds", "timeout_seconds", kMaxSeconds, request.timeout_seconds);
  if (invalid) {
    call.reply(FromError(*invalid));
    return;
  }
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
    call.reply(NoSandboxes());
    return;
  }
  call.reply(Json(200, {{"images", ctx_.sandboxes->ListImages()}}));
}

void Api::CreateImage(Call& call) {
  if (!ctx_.sandboxes) {
    call.reply(NoSandboxes());
    return;
  }
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may register images"));
    return;
  }
  auto parsed = body::ParseObject(call.request.body,
                                  R"({"name": "python", "version": "3.11-v3", "rootfs": "/srv/images/python-3.11"})");
  std::optional<Error> invalid =
      parsed.ok() ? body::CheckKeys(*parsed, "", {"name", "version", "rootfs", "binds", "warm"}) : parsed.error();
  config::ImageSpec image;
  for (const char* key : {"name", "version"}) {
    if (!invalid && (!parsed->contains(key) || (*parsed)[key].is_null())) {
      invalid = Error::Unprocessable("missing_field", std::string(key) + " is required", key);
    }
  }
  if (!invalid) invalid = body::ReadString(*parsed, "name", "name", 256, image.name);
  if (!invalid) invalid = body::ReadString(*parsed, "version", "version", 256, image.version);
  if (!invalid) invalid = body::ReadString(*parsed, "rootfs", "rootfs", 4096, image.rootfs);
  if (!invalid) invalid = body::ReadStringList(*parsed, "binds", "binds", 4096, image.binds);
  int64_t warm = 0;
  if (!invalid) invalid = body::ReadInt(*parsed, "warm", "warm", 0, 1024, warm);
  if (invalid) {
    call.reply(FromError(*invalid));
    return;
  }
  image.warm = static_cast<int>(warm);
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
    call.reply(NoSandboxes());
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
