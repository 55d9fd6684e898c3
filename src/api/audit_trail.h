#pragma once
// The API's audit trail (S12): who changed what, when, with what result.
//
// An authenticated mutating call is one record, committed before the call is
// answered. A request that fails authentication writes no record of its own
// (anyone can send those, as fast as the network allows, so one record each
// let anyone grow the store): it is counted in
// unisched_http_unauthenticated_requests_total{reason}, and tallied per
// client address and minute; each ended minute becomes one record per
// address (actor "anonymous", action "auth_failed", target the address,
// result "401 x<count>"), so an attack still shows in the trail.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "unisched/api/http.h"
#include "unisched/common/time.h"
#include "unisched/metrics/metrics.h"
#include "unisched/store/store.h"

namespace unisched::api {

class AuditTrail {
 public:
  // Longest target kept in a record; a longer one (a path) is cut, marked.
  static constexpr size_t kMaxTargetBytes = 512;
  // Client addresses tallied in one minute; the rest share one record.
  static constexpr size_t kMaxTalliedAddresses = 4096;

  AuditTrail(store::Store& store, metrics::Metrics& metrics, const Clock& clock)
      : store_(store), metrics_(metrics), clock_(clock) {}

  // Commits a record of an authenticated call, then sends `response`.
  void RecordThenRespond(const std::string& actor, const std::string& action, const std::string& target,
                         HttpResponse response, const Respond& respond);
  // A request from `remote` ("host:port") refused for its credentials;
  // reason "missing" or "invalid".
  void CountUnauthenticated(const std::string& remote, const std::string& reason);
  // Writes the tallies of minutes that ended before `now` (every minute, by
  // the housekeeper); `all`: also the current one (at shutdown).
  void Flush(Timestamp now, bool all = false);

  // `target` cut to kMaxTargetBytes.
  static std::string BoundedTarget(std::string_view target);

 private:
  store::Store& store_;
  metrics::Metrics& metrics_;
  const Clock& clock_;

  std::mutex mu_;
  int64_t minute_ = 0;                      // GUARDED_BY(mu_): Unix minute of tallies_
  std::map<std::string, int64_t> tallies_;  // GUARDED_BY(mu_): refused requests by client address
};

}  // namespace unisched::api
