#include "api/audit_trail.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

namespace unisched::api {
namespace {

constexpr int64_t kMillisPerMinute = 60'000;

// "host:port" or "[v6]:port" -> the host.
std::string AddressOf(const std::string& remote) {
  const size_t colon = remote.rfind(':');
  std::string host = colon == std::string::npos ? remote : remote.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host.empty() ? "unknown" : host;
}

}  // namespace

std::string AuditTrail::BoundedTarget(std::string_view target) {
  if (target.size() <= kMaxTargetBytes) return std::string(target);
  return std::string(target.substr(0, kMaxTargetBytes)) + "...(" + std::to_string(target.size()) + " bytes)";
}

void AuditTrail::RecordThenRespond(const std::string& actor, const std::string& action, const std::string& target,
                                   HttpResponse response, const Respond& respond) {
  store::AuditRecord record{clock_.Now(), actor, action, BoundedTarget(target), std::to_string(response.status)};
  auto shared = std::make_shared<HttpResponse>(std::move(response));
  store_.Write([record](store::Transaction& t) { return t.AppendAudit(record); },
               [shared, respond](Status s) {
                 if (!s.ok()) spdlog::warn("audit write failed: {}", s.error().message);
                 respond(std::move(*shared));
               });
}

void AuditTrail::CountUnauthenticated(const std::string& remote, const std::string& reason) {
  metrics_.CountUnauthenticated(reason);
  const Timestamp now = clock_.Now();
  // The tallies of a minute that has ended go to the store first (a lock and
  // a comparison when none has).
  Flush(now);
  std::string address = AddressOf(remote);
  std::lock_guard lock(mu_);
  minute_ = std::max(minute_, ToUnixMillis(now) / kMillisPerMinute);
  if (tallies_.size() >= kMaxTalliedAddresses && tallies_.count(address) == 0) address = "other addresses";
  ++tallies_[address];
}

void AuditTrail::Flush(Timestamp now, bool all) {
  const int64_t minute = ToUnixMillis(now) / kMillisPerMinute;
  std::map<std::string, int64_t> tallies;
  int64_t tallied_minute = 0;
  {
    std::lock_guard lock(mu_);
    if (tallies_.empty() || (!all && minute_ >= minute)) return;
    tallies.swap(tallies_);
    tallied_minute = minute_;
  }
  std::vector<store::AuditRecord> records;
  const Timestamp at = FromUnixMillis(tallied_minute * kMillisPerMinute);
  for (const auto& [address, count] : tallies) {
    records.push_back({at, "anonymous", "auth_failed", address, "401 x" + std::to_string(count)});
  }
  store_.Write(
      [records = std::move(records)](store::Transaction& t) -> Status {
        for (const auto& r : records) {
          if (Status s = t.AppendAudit(r); !s.ok()) return s;
        }
        return Status::Ok();
      },
      [](Status s) {
        if (!s.ok()) spdlog::warn("audit write of refused requests failed: {}", s.error().message);
      });
}

}  // namespace unisched::api
