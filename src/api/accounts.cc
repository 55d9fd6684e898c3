// The callers' accounts: users, whoami, and the audit log of what they
// changed. Their tokens are in tokens.cc.

#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "api/body.h"
#include "api/call.h"
#include "api/responses.h"
#include "unisched/api/api.h"
#include "unisched/service/unix_accounts.h"

namespace unisched::api {

using nlohmann::json;

namespace {

// `uid`: the Unix uid allocated to the user (docs/accounts.md), or null.
json UserJson(const store::UserRecord& u, const store::Store& store) {
  auto uid = store.FindUnixId("user", u.name);
  return {{"name", u.name},
          {"role", u.role},
          {"projects", u.projects},
          {"queues", u.queues},
          {"unix_user", u.unix_user},
          {"uid", uid ? json(*uid) : json(nullptr)},
          {"from_config", u.from_config}};
}

bool ValidUserName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  if (!(std::islower(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  for (char c : name) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_' ||
          c == '-' || c == '.')) {
      return false;
    }
  }
  return true;
}

}  // namespace

void Api::CreateUser(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may create users"));
    return;
  }
  auto body = body::ParseObject(call.request.body, R"({"name": "alice", "role": "user", "projects": ["default"]})");
  store::UserRecord user;
  user.role = "user";
  std::optional<Error> invalid =
      body.ok() ? body::CheckKeys(*body, "", {"name", "role", "projects", "queues", "unix_user"}) : body.error();
  if (!invalid) invalid = body::ReadString(*body, "name", "name", 64, user.name);
  if (!invalid) invalid = body::ReadString(*body, "role", "role", 64, user.role);
  if (!invalid) invalid = body::ReadString(*body, "unix_user", "unix_user", 64, user.unix_user);
  if (!invalid) invalid = body::ReadStringList(*body, "projects", "projects", 256, user.projects);
  if (!invalid) invalid = body::ReadStringList(*body, "queues", "queues", 256, user.queues);
  if (invalid) {
    call.reply(FromError(*invalid));
    return;
  }
  if (!ValidUserName(user.name)) {
    call.reply(ErrorResponse(422, "invalid_value",
                             "name must be 1-64 characters: lower-case letters, digits, '_', '-', '.'", "name"));
    return;
  }
  if (!auth::ParseRole(user.role)) {
    call.reply(ErrorResponse(422, "invalid_value", "role must be platform-admin, queue-admin or user", "role"));
    return;
  }
  for (const auto& p : user.projects) {
    if (!ctx_.config->Current().cluster.FindProject(p)) {
      call.reply(ErrorResponse(422, "unknown_project", "project '" + p + "' does not exist", "projects"));
      return;
    }
  }
  for (const auto& q : user.queues) {
    if (!ctx_.config->Current().cluster.FindQueue(q)) {
      call.reply(ErrorResponse(422, "unknown_queue", "queue '" + q + "' does not exist", "queues"));
      return;
    }
  }
  if (user.role == "queue-admin" && user.queues.empty()) {
    call.reply(ErrorResponse(422, "invalid_value", "a queue-admin needs the queues it administers", "queues"));
    return;
  }
  for (const auto& cu : ctx_.config->Current().users) {
    if (cu.name == user.name) {
      call.reply(ErrorResponse(409, "defined_in_config",
                               "user " + user.name + " is defined in the config file; change it there"));
      return;
    }
  }
  if (auto existing = ctx_.store->GetUser(user.name); existing && existing->from_config) {
    call.reply(ErrorResponse(409, "defined_in_config", "user " + user.name + " is managed by the daemon"));
    return;
  }
  auto reply = call.reply;
  // The user's Unix account and its projects' groups are allocated with it,
  // in the same transaction (docs/accounts.md).
  ctx_.store->Write(
      [user, accounts = ctx_.config->Current().executor.user_accounts](store::Transaction& t) -> Status {
        if (auto s = t.UpsertUser(user); !s.ok()) return s;
        return service::AllocateUnixIds(t, accounts, user);
      },
      [this, reply, user](Status s) {
        if (!s.ok()) {
          reply(FromError(s.error()));
          return;
        }
        InvalidateCredentials();
        reply(Json(201, UserJson(user, *ctx_.store)));
      });
}

void Api::ListUsers(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may list users"));
    return;
  }
  json users = json::array();
  for (const auto& u : ctx_.store->ListUsers()) users.push_back(UserJson(u, *ctx_.store));
  call.reply(Json(200, {{"users", std::move(users)}}));
}

void Api::ListUnixIds(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may list the Unix ids"));
    return;
  }
  json users = json::array(), projects = json::array();
  for (const auto& r : ctx_.store->ListUnixIds()) {
    (r.kind == "user" ? users : projects).push_back({{"name", r.name}, {r.kind == "user" ? "uid" : "gid", r.id}});
  }
  call.reply(Json(200, {{"users", std::move(users)}, {"projects", std::move(projects)}}));
}

void Api::ListAudit(Call& call) {
  if (!auth::IsPlatformAdmin(*call.principal)) {
    call.reply(ErrorResponse(403, "forbidden", "only platform-admins may read the audit log"));
    return;
  }
  const int limit = static_cast<int>(call.QueryInt("limit", 100));
  json records = json::array();
  for (const auto& a : ctx_.store->ListAudit(limit)) {
    records.push_back({{"time", FormatRfc3339(a.time)},
                       {"actor", a.actor},
                       {"action", a.action},
                       {"target", a.target},
                       {"result", a.result}});
  }
  call.reply(Json(200, {{"audit", std::move(records)}}));
}

void Api::WhoAmI(Call& call) {
  const auto& p = *call.principal;
  call.reply(Json(200, {{"user", p.user},
                        {"role", std::string(auth::ToString(p.role))},
                        {"projects", p.projects},
                        {"queues", p.queues}}));
}

}  // namespace unisched::api
