#pragma once
// Who is calling and what they may do. Tokens are random, shown once, and
// stored only as their SHA-256. Authorization is pure: a function of the
// principal and the object, following the contract's role table.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unisched/model/job.h"

namespace unisched::auth {

enum class Role { kUser, kQueueAdmin, kPlatformAdmin };
std::string_view ToString(Role role);  // "user", "queue-admin", "platform-admin"
std::optional<Role> ParseRole(std::string_view text);

struct Principal {
  std::string user;
  Role role = Role::kUser;
  std::vector<std::string> projects;  // projects it belongs to
  std::vector<std::string> queues;    // queues it administers (queue-admin)
  std::string unix_user;
  std::string node_pool{};  // a node agent's token: the pool it may register nodes of (docs/agents.md)
  // A job's own token (UNISCHED_JOB_TOKEN in its environment): it may start
  // and follow steps of this job's attempt and nothing else (docs/execution.md).
  model::JobId job_id = 0;
  int job_attempt = 0;
};

// A job attempt's token: "usj_<job>.<attempt>.<mac>", the mac an
// HMAC-SHA256 of the job and attempt under the cluster's job-token secret.
// Nothing is stored per attempt: the daemon recomputes the mac to check it,
// and an attempt that is no longer running is refused where it is used.
std::string MintJobToken(const std::string& secret, model::JobId job, int attempt);
// The (job, attempt) a job token names, when its mac is right.
std::optional<std::pair<model::JobId, int>> CheckJobToken(const std::string& secret, std::string_view token);
inline bool LooksLikeJobToken(std::string_view token) {
  return token.rfind("usj_", 0) == 0;
}

// Lower-case hex of bytes.
std::string HexEncode(std::string_view bytes);
// Hex SHA-256 of a token: what the store keeps.
std::string HashToken(std::string_view token);
// A new random token ("usk_" + 43 base64url characters, 256 bits from getrandom).
std::string GenerateToken();
// Base64url without padding (RFC 4648 section 5), as tokens and JWS use it.
std::string Base64UrlEncode(std::string_view bytes);

bool IsPlatformAdmin(const Principal& p);
bool BelongsTo(const Principal& p, std::string_view project);
bool AdministersQueue(const Principal& p, std::string_view queue);
// Submit to `project`: members; platform-admins to any project.
bool CanSubmitTo(const Principal& p, std::string_view project);
// Read a job: its project's members, admins of its queue, platform-admins.
bool CanReadJob(const Principal& p, const model::Job& job);
// Cancel, hold, release: its owner, admins of its queue, platform-admins.
bool CanControlJob(const Principal& p, const model::Job& job);
// A priority above 0 (on submit or as an adjustment) in `queue`.
bool CanRaisePriority(const Principal& p, std::string_view queue);

}  // namespace unisched::auth
