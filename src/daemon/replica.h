#pragma once
// Daemon replicas over one database (docs/replicas.md): the lease keeper,
// which decides whether this replica leads, and the forwarder, through
// which a standby passes API calls to the leader.
//
// The keeper tries the store's lease (unisched/store/lease.h) on a thread
// of its own: a standby every second (or every third of the lease, if
// shorter), the leader every third of the lease. On taking it, `lead` runs
// (the daemon fences its writes with the epoch and starts its leader parts
// from the database); on losing it, or on failing to renew it for a whole
// lease, `step_down` runs and the replica must stop acting at once (the
// server re-executes itself and comes back as a standby).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "unisched/api/http.h"
#include "unisched/common/status.h"
#include "unisched/metrics/metrics.h"
#include "unisched/store/lease.h"

namespace unisched::daemon {

class LeaseKeeper {
 public:
  struct Callbacks {
    // Once, when this replica takes the lease, on a thread of its own (the
    // keeper goes on renewing meanwhile); an error steps down.
    std::function<Status(int64_t epoch)> lead;
    // When this replica led and must stop: the lease went to another, or
    // could not be renewed within its length. Called once.
    std::function<void(const std::string& why)> step_down;
  };

  LeaseKeeper(store::LeaderLease& lease, std::string replica, std::chrono::milliseconds ttl, metrics::Metrics& metrics,
              Callbacks callbacks);
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Tries the lease once, then goes on on a thread of its own.
  void Start();
  // Stops trying (joins the thread; no `lead` runs after it).
  void Stop();
  // After Stop, once the leader's last write is done: gives the lease up
  // so a standby takes it at once instead of waiting for it to lapse.
  void ReleaseIfLeading();

  bool leading() const { return leading_.load(); }
  // Whether the lease has been read (or tried) once since Start.
  bool started() const { return started_.load(); }
  // The replica that holds the lease and where it is reached, as last read
  // ("" while none holds an unexpired lease).
  struct Leader {
    std::string name;
    std::string url;
    int64_t epoch = 0;
  };
  Leader leader() const;

 private:
  void Loop(std::chrono::milliseconds first_wait);
  // One try of the lease; returns how long to wait before the next.
  std::chrono::milliseconds Tick();

  store::LeaderLease& lease_;
  const std::string replica_;
  const std::chrono::milliseconds ttl_;
  metrics::Metrics& metrics_;
  Callbacks callbacks_;

  std::atomic<bool> leading_{false};
  std::atomic<bool> started_{false};
  std::atomic<bool> stepped_down_{false};  // then nothing more is tried
  int64_t epoch_ = 0;                      // keeper thread: the epoch this replica leads at
  // When the last successful renewal was sent (keeper thread): the
  // database set the lease's end at least ttl after it, so the leader stops
  // acting before any other replica can take it by lapse.
  std::chrono::steady_clock::time_point renewed_at_{};
  std::chrono::steady_clock::time_point last_warning_{};

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  Leader leader_;  // under mu_
  std::thread thread_;
  std::thread leader_thread_;  // runs `lead`
};

// Passes requests to the leader's URL and its answers back, on a pool of
// threads of its own (a call may wait: an agent's heartbeat is a long
// poll). The leader learns the client's address from headers it trusts
// only with the cluster's forwarding secret (kForwardedSecret).
class Forwarder {
 public:
  // ca_file verifies an https:// leader (empty: the system's CAs); cert and
  // key, when set, are this replica's client certificate for a leader that
  // asks for one.
  Forwarder(std::string secret, std::string ca_file, std::string cert_file, std::string key_file, int threads);
  ~Forwarder();
  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;

  // Sends `request` to `leader_url` and answers with its response, or 503
  // when the leader cannot be reached.
  void Forward(api::HttpRequest request, const std::string& leader_url, api::Respond respond);
  void Stop();

 private:
  struct Job {
    api::HttpRequest request;
    std::string url;
    api::Respond respond;
  };
  void Work();
  api::HttpResponse Send(const Job& job);

  const std::string secret_;
  const std::string ca_file_, cert_file_, key_file_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// Headers a standby adds to a forwarded call: the secret proves it is a
// replica of this cluster; the others carry what the leader would have
// seen of the client. The leader strips all of them from any other call.
inline constexpr const char* kForwardedSecret = "x-unisched-replica-secret";
inline constexpr const char* kForwardedFor = "x-unisched-forwarded-for";
inline constexpr const char* kForwardedSubject = "x-unisched-forwarded-subject";

// On the leader: a call that carries the right secret takes the client's
// address and certificate subject from the forwarded headers; every call
// loses the three headers, so no client can set them.
void AcceptForwarded(api::HttpRequest& request, const std::string& secret);

}  // namespace unisched::daemon
