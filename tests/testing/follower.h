#pragma once
// Following a job's output in a test: a thread that reads GET
// /v1/jobs/{id}/log?follow=true as it arrives (HttpClient::Follow), and a
// job script whose last line waits for the test's go.

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "testing/daemon.h"
#include "unisched/client/http_client.h"

namespace unisched::testing {

// Follows one target in a thread of its own, keeping what arrived.
class Follower {
 public:
  Follower(const TestDaemon& daemon, std::string target) {
    thread_ = std::thread([this, port = daemon.port(), token = daemon.admin_token(), target = std::move(target)] {
      client::HttpClient client("127.0.0.1", port);
      client.SetBearerToken(token);
      auto response = client.Follow(target, [this](std::string_view piece) {
        std::lock_guard lock(mu_);
        received_.append(piece);
        return true;
      });
      std::lock_guard lock(mu_);
      status_ = response.ok() ? response->status : -1;
      attempt_ = response.ok() ? response->Header("x-unisched-attempt") : response.error().message;
      ended_ = true;
    });
  }
  ~Follower() { Join(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  // Waits (a generous bound, not a timing check) until `what` has arrived.
  bool WaitFor(const std::string& what) {
    for (int i = 0; i < 600; ++i) {
      {
        std::lock_guard lock(mu_);
        if (received_.find(what) != std::string::npos) return true;
        if (ended_) return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  std::string received() {
    std::lock_guard lock(mu_);
    return received_;
  }
  bool ended() {
    std::lock_guard lock(mu_);
    return ended_;
  }
  int status() {
    std::lock_guard lock(mu_);
    return status_;
  }
  std::string attempt() {
    std::lock_guard lock(mu_);
    return attempt_;
  }

 private:
  std::mutex mu_;
  std::string received_;
  bool ended_ = false;
  int status_ = 0;
  std::string attempt_;
  std::thread thread_;
};

// Prints a line, then waits for the test's go (a file) before its last line:
// what the follower has before the go was streamed, not read at the end.
inline std::string GatedScript(const std::string& gate) {
  return "echo first line from $UNISCHED_NODE rank $UNISCHED_RANK; while [ ! -e " + gate +
         " ]; do sleep 0.05; done; echo last line";
}

}  // namespace unisched::testing
