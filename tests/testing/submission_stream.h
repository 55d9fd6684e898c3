#pragma once
// A stream of submissions to a daemon from a thread of its own, for the tests
// that crash or fail over the daemon under load: every id that got its 201
// is remembered, so the test can check that none was lost.

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "unisched/client/http_client.h"

namespace unisched::testing {

class SubmissionStream {
 public:
  // Submits `body` to 127.0.0.1:`port` with `token` again and again, until
  // Stop() or until the daemon is gone (a failed connection).
  SubmissionStream(uint16_t port, std::string token, nlohmann::json body)
      : thread_([this, port, token = std::move(token), body = body.dump()] {
          client::HttpClient c("127.0.0.1", port);
          c.SetBearerToken(token);
          // Generous: a slow answer must not end the stream early (a kill
          // ends a request in flight at once: the kernel closes the socket).
          c.SetTimeout(std::chrono::seconds(30));
          while (!stop_) {
            auto r = c.Request("POST", "/v1/jobs", body);
            if (!r.ok()) break;
            if (r->status == 201) {
              std::lock_guard lock(mu_);
              acknowledged_.push_back(nlohmann::json::parse(r->body)["id"].get<std::string>());
            }
          }
          ended_ = true;
        }) {}
  ~SubmissionStream() { Stop(); }
  SubmissionStream(const SubmissionStream&) = delete;
  SubmissionStream& operator=(const SubmissionStream&) = delete;

  // Waits until at least `count` submissions were acknowledged, the stream
  // ended, or `limit` passed; returns how many were.
  size_t WaitForAcknowledged(size_t count, std::chrono::seconds limit = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!ended_ && std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(mu_);
        if (acknowledged_.size() >= count) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::lock_guard lock(mu_);
    return acknowledged_.size();
  }

  // Ends the stream (after the request in flight) and returns every id acknowledged.
  std::vector<std::string> Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    std::lock_guard lock(mu_);
    return acknowledged_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> acknowledged_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> ended_{false};
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace unisched::testing
