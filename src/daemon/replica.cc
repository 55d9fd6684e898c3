#include "daemon/replica.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "unisched/auth/auth.h"
#include "unisched/client/http_client.h"

namespace unisched::daemon {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// A standby tries the lease this often at most: with the holder-session
// check of the store (sql_store.cc) a killed leader's lease is free at once,
// so the time to take over is about half of this plus the leader's start.
constexpr milliseconds kStandbyTry{500};

}  // namespace

LeaseKeeper::LeaseKeeper(store::LeaderLease& lease, std::string replica, milliseconds ttl, metrics::Metrics& metrics,
                         Callbacks callbacks)
    : lease_(lease), replica_(std::move(replica)), ttl_(ttl), metrics_(metrics), callbacks_(std::move(callbacks)) {}

LeaseKeeper::~LeaseKeeper() {
  Stop();
}

void LeaseKeeper::Start() {
  metrics_.SetLeadership(false, 0);
  const milliseconds wait = Tick();
  started_ = true;
  thread_ = std::thread([this, wait] { Loop(wait); });
}

void LeaseKeeper::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread* t : {&thread_, &leader_thread_}) {
    if (t->joinable() && t->get_id() != std::this_thread::get_id()) t->join();
  }
}

void LeaseKeeper::ReleaseIfLeading() {
  if (leading_.exchange(false)) {
    if (Status s = lease_.ReleaseLease(replica_); s.ok()) {
      spdlog::info("replica {}: lease given up for a standby to take", replica_);
    } else {
      spdlog::warn("replica {}: cannot give the lease up ({}); it lapses by itself", replica_, s.error().message);
    }
  }
}

LeaseKeeper::Leader LeaseKeeper::leader() const {
  std::lock_guard lock(mu_);
  return leader_;
}

void LeaseKeeper::Loop(milliseconds wait) {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait_for(lock, wait, [this] { return stopping_; });
    if (stopping_) return;
    lock.unlock();
    wait = Tick();
    lock.lock();
  }
}

milliseconds LeaseKeeper::Tick() {
  const milliseconds renew_every = ttl_ / 3;
  if (stepped_down_) return renew_every;
  const auto sent = steady_clock::now();
  auto state = lease_.AcquireOrRenewLease(replica_, ttl_);
  if (!state.ok()) {
    if (leading_ && steady_clock::now() - renewed_at_ >= ttl_) {
      stepped_down_ = true;
      leading_ = false;
      metrics_.SetLeadership(false, epoch_);
      callbacks_.step_down("the lease could not be renewed for " + std::to_string(ttl_.count() / 1000) + " s (" +
                           state.error().message + ")");
      return renew_every;
    }
    if (steady_clock::now() - last_warning_ > std::chrono::seconds(30)) {
      last_warning_ = steady_clock::now();
      spdlog::warn("replica {}: cannot read the lease: {}", replica_, state.error().message);
    }
    return std::min(renew_every, kStandbyTry);
  }
  // The holder's URL is read again when the holder or epoch changes.
  std::string url;
  {
    std::lock_guard lock(mu_);
    if (state->holder == leader_.name && state->epoch == leader_.epoch) url = leader_.url;
  }
  if (url.empty() && !state->holder.empty() && state->expires_in_ms > 0) {
    auto found = lease_.ReplicaUrl(state->holder);
    if (found.ok()) url = *found;
  }
  {
    std::lock_guard lock(mu_);
    const bool held = state->expires_in_ms > 0;
    leader_ = Leader{held ? state->holder : "", held ? url : "", state->epoch};
  }
  if (state->ours) {
    if (leading_ && state->epoch != epoch_) {
      // Lost and taken back in between: writes fenced at the old epoch fail.
      stepped_down_ = true;
      leading_ = false;
      callbacks_.step_down("the lease moved on from epoch " + std::to_string(epoch_));
      return renew_every;
    }
    renewed_at_ = sent;
    if (!leading_) {
      epoch_ = state->epoch;
      leading_ = true;
      spdlog::info("replica {}: took the lease at epoch {}; starting to lead", replica_, epoch_);
      metrics_.CountTakeover();
      // Starting reads the whole active state from the database, which can
      // outlast a renewal interval: it runs beside this thread, which keeps
      // renewing meanwhile.
      leader_thread_ = std::thread([this, epoch = epoch_] {
        if (Status s = callbacks_.lead(epoch); !s.ok()) {
          stepped_down_ = true;
          leading_ = false;
          callbacks_.step_down("cannot start leading: " + s.error().message);
        }
      });
    }
    metrics_.SetLeadership(true, epoch_);
    // The expiry is computed before the statement waits for the lease's
    // row: a lease taken from a holder paused in the middle of renewing it
    // (its transaction holds the row until PostgreSQL ends it) comes back
    // with less than its TTL left, once only ~0.6 s of 3 s, so that the
    // paused holder, resumed and executed again, took it back before the
    // first renewal. Renew within a third of what is left.
    const milliseconds left{std::max<int64_t>(state->expires_in_ms, 0)};
    return std::clamp(left / 3, milliseconds(10), renew_every);
  }
  metrics_.SetLeadership(false, state->epoch);
  if (leading_) {
    stepped_down_ = true;
    leading_ = false;
    callbacks_.step_down("replica " + state->holder + " holds the lease at epoch " + std::to_string(state->epoch));
    return renew_every;
  }
  return std::min(renew_every, kStandbyTry);
}

Forwarder::Forwarder(std::string secret, std::string ca_file, std::string cert_file, std::string key_file, int threads)
    : secret_(std::move(secret)),
      ca_file_(std::move(ca_file)),
      cert_file_(std::move(cert_file)),
      key_file_(std::move(key_file)) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

Forwarder::~Forwarder() {
  Stop();
}

void Forwarder::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  // Calls still queued get an answer, as every request must.
  for (auto& job : jobs_) {
    job.respond(api::ErrorResponse(503, "not_leader", "this replica is stopping; send the call to another replica"));
  }
  jobs_.clear();
}

void Forwarder::Forward(api::HttpRequest request, const std::string& leader_url, api::Respond respond) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      jobs_.push_back({std::move(request), leader_url, std::move(respond)});
      wake_.notify_one();
      return;
    }
  }
  respond(api::ErrorResponse(503, "not_leader", "this replica is stopping; send the call to another replica"));
}

void Forwarder::Work() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job.respond(Send(job));
  }
}

api::HttpResponse Forwarder::Send(const Job& job) {
  // One connection per thread and leader, kept alive between calls.
  thread_local std::map<std::string, std::unique_ptr<client::HttpClient>> clients;
  auto unreachable = [&job](const std::string& why) {
    api::HttpResponse r = api::ErrorResponse(
        503, "leader_unreachable",
        "this replica stands by and cannot reach the leader at " + job.url + " (" + why +
            "); retry in a few seconds (a submission with the same Idempotency-Key is safe to retry)");
    r.headers.emplace_back("Retry-After", "1");
    return r;
  };
  auto& http = clients[job.url];
  if (!http) {
    auto base = client::ParseUrl(job.url);
    if (!base.ok()) return unreachable(base.error().message);
    client::TlsOptions tls;
    tls.enabled = base->tls;
    tls.ca_file = ca_file_;
    tls.cert_file = cert_file_;
    tls.key_file = key_file_;
    http = std::make_unique<client::HttpClient>(base->host, base->port, tls);
  }
  std::map<std::string, std::string> headers;
  for (const auto& [name, value] : job.request.headers) {
    // Hop-by-hop headers and what the client computes per connection stay here.
    if (name == "host" || name == "connection" || name == "content-length" || name == "transfer-encoding" ||
        name == "keep-alive" || name == "expect") {
      continue;
    }
    headers[name] = value;
  }
  // Authorization passes as the client sent it, or not at all: an empty
  // one would make the client add its own (none is set here).
  headers[kForwardedSecret] = secret_;
  headers[kForwardedFor] = job.request.remote;
  if (!job.request.client_subject.empty()) headers[kForwardedSubject] = job.request.client_subject;
  // A heartbeat waits up to its wait_ms (a few seconds) before answering.
  http->SetTimeout(std::chrono::seconds(90));
  auto response = http->Request(job.request.method, job.request.target, job.request.body, headers);
  if (!response.ok()) {
    clients.erase(job.url);
    return unreachable(response.error().message);
  }
  api::HttpResponse out;
  out.status = response->status;
  out.body = std::move(response->body);
  for (const auto& [name, value] : response->headers) {
    if (name == "content-type") {
      out.content_type = value;
    } else if (name != "content-length" && name != "connection" && name != "transfer-encoding" && name != "server" &&
               name != "date" && name != "keep-alive") {
      out.headers.emplace_back(name, value);
    }
  }
  return out;
}

void AcceptForwarded(api::HttpRequest& request, const std::string& secret) {
  auto secret_it = request.headers.find(kForwardedSecret);
  const bool trusted = secret_it != request.headers.end() && !secret.empty() &&
                       auth::HashToken(secret_it->second) == auth::HashToken(secret);
  if (trusted) {
    if (auto it = request.headers.find(kForwardedFor); it != request.headers.end()) request.remote = it->second;
    auto subject = request.headers.find(kForwardedSubject);
    request.client_subject = subject == request.headers.end() ? std::string() : subject->second;
  }
  request.headers.erase(kForwardedSecret);
  request.headers.erase(kForwardedFor);
  request.headers.erase(kForwardedSubject);
}

}  // namespace unisched::daemon
