#include "unisched/auth/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <stdexcept>

namespace unisched::auth {
namespace {
bool Contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}
}  // namespace

std::string_view ToString(Role role) {
  switch (role) {
    case Role::kPlatformAdmin:
      return "platform-admin";
    case Role::kQueueAdmin:
      return "queue-admin";
    case Role::kUser:
      break;
  }
  return "user";
}

std::optional<Role> ParseRole(std::string_view text) {
  if (text == "user") return Role::kUser;
  if (text == "queue-admin") return Role::kQueueAdmin;
  if (text == "platform-admin") return Role::kPlatformAdmin;
  return std::nullopt;
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

std::string HashToken(std::string_view token) {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest.data());
  return HexEncode(std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

std::string GenerateToken() {
  std::array<unsigned char, 32> bytes{};
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0) throw std::runtime_error("getrandom failed");
    got += static_cast<size_t>(n);
  }
  return "usk_" + Base64UrlEncode(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

namespace {
std::string JobTokenMac(const std::string& secret, model::JobId job, int attempt) {
  const std::string message = "unisched-job-token:" + std::to_string(job) + ":" + std::to_string(attempt);
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac.data(), &length);
  return Base64UrlEncode(std::string_view(reinterpret_cast<const char*>(mac.data()), length));
}
}  // namespace

std::string MintJobToken(const std::string& secret, model::JobId job, int attempt) {
  return "usj_" + std::to_string(job) + "." + std::to_string(attempt) + "." + JobTokenMac(secret, job, attempt);
}

std::optional<std::pair<model::JobId, int>> CheckJobToken(const std::string& secret, std::string_view token) {
  if (!LooksLikeJobToken(token) || secret.empty()) return std::nullopt;
  const std::string_view rest = token.substr(4);
  const size_t dot1 = rest.find('.');
  const size_t dot2 = dot1 == std::string_view::npos ? dot1 : rest.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos) return std::nullopt;
  const std::string job_text(rest.substr(0, dot1));
  const std::string attempt_text(rest.substr(dot1 + 1, dot2 - dot1 - 1));
  auto digits = [](const std::string& t, size_t max) {
    return !t.empty() && t.size() <= max && t.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!digits(job_text, 18) || !digits(attempt_text, 9)) return std::nullopt;
  const model::JobId job = std::stoll(job_text);
  const int attempt = std::stoi(attempt_text);
  const std::string expected = JobTokenMac(secret, job, attempt);
  const std::string_view given = rest.substr(dot2 + 1);
  if (given.size() != expected.size() || CRYPTO_memcmp(given.data(), expected.data(), expected.size()) != 0) {
    return std::nullopt;
  }
  return std::make_pair(job, attempt);
}

std::string Base64UrlEncode(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  // 6 bits per character.
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char b : bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(acc << (6 - bits)) & 0x3f]);
  return out;
}

bool IsPlatformAdmin(const Principal& p) {
  return p.role == Role::kPlatformAdmin;
}
bool BelongsTo(const Principal& p, std::string_view project) {
  return Contains(p.projects, project);
}
bool AdministersQueue(const Principal& p, std::string_view queue) {
  return p.role == Role::kQueueAdmin && Contains(p.queues, queue);
}
bool CanSubmitTo(const Principal& p, std::string_view project) {
  return IsPlatformAdmin(p) || BelongsTo(p, project);
}
bool CanReadJob(const Principal& p, const model::Job& job) {
  if (p.job_id != 0) return p.job_id == job.id;  // a job's token: its own job only
  return IsPlatformAdmin(p) || BelongsTo(p, job.project) || AdministersQueue(p, job.queue);
}
bool CanControlJob(const Principal& p, const model::Job& job) {
  if (p.job_id != 0) return false;  // a job's token starts steps; it never cancels, holds or releases
  return IsPlatformAdmin(p) || job.user == p.user || AdministersQueue(p, job.queue);
}
bool CanRaisePriority(const Principal& p, std::string_view queue) {
  return IsPlatformAdmin(p) || AdministersQueue(p, queue);
}

}  // namespace unisched::auth
