#include "closed_loop.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace unisched::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct Address {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

bool Resolve(const std::string& host, uint16_t port, Address& out) {
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out.storage);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    out.length = sizeof(sockaddr_in);
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    out.length = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

struct Connection {
  int fd = -1;
  size_t sent = 0;               // bytes of the request written so far
  bool waiting_to_send = false;  // registered for EPOLLOUT
  std::string received;          // bytes of the response read so far
  SteadyClock::time_point started;
  SteadyClock::time_point retry_at;  // when closed: when to reconnect
};

class Loop {
 public:
  Loop(const Address& address, const std::string& request, int expected_status, SteadyClock::time_point deadline)
      : address_(address), request_(request), expected_status_(expected_status), deadline_(deadline) {}

  ClosedLoopResult Run(int connections) {
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_ < 0) {
      Fail("epoll_failed", std::strerror(errno));
      return std::move(result_);
    }
    connections_.resize(static_cast<size_t>(connections));
    for (size_t i = 0; i < connections_.size(); ++i) Open(i);
    std::vector<epoll_event> events(connections_.size());
    while (SteadyClock::now() < deadline_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - SteadyClock::now());
      const int timeout_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, 10));
      const int n = epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), timeout_ms);
      for (int e = 0; e < n; ++e) {
        const size_t i = events[static_cast<size_t>(e)].data.u64;
        if (events[static_cast<size_t>(e)].events & EPOLLOUT) Send(i);
        if (connections_[i].fd >= 0 && (events[static_cast<size_t>(e)].events & (EPOLLIN | EPOLLERR | EPOLLHUP))) {
          Receive(i);
        }
      }
      const auto now = SteadyClock::now();
      for (size_t i = 0; i < connections_.size(); ++i) {
        if (connections_[i].fd < 0 && now >= connections_[i].retry_at) Open(i);
      }
    }
    for (auto& c : connections_) {
      if (c.fd >= 0) ::close(c.fd);
    }
    ::close(epoll_);
    return std::move(result_);
  }

 private:
  void Fail(const std::string& key, const std::string& detail) {
    ++result_.errors[key];
    if (result_.first_error.empty()) result_.first_error = detail;
  }

  void Close(size_t i, const std::string& key, const std::string& detail) {
    Connection& c = connections_[i];
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
    // A refused or reset connection fails at once; a pause keeps the error
    // count meaningful instead of spinning.
    c.retry_at = SteadyClock::now() + std::chrono::milliseconds(10);
    if (!key.empty()) Fail(key, detail);
  }

  void Open(size_t i) {
    Connection& c = connections_[i];
    c.fd = ::socket(address_.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c.fd < 0 || ::connect(c.fd, reinterpret_cast<const sockaddr*>(&address_.storage), address_.length) != 0) {
      Close(i, "connect_failed", std::string("connect: ") + std::strerror(errno));
      return;
    }
    const int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, c.fd, &ev);
    c.waiting_to_send = false;
    StartRequest(i);
  }

  void StartRequest(size_t i) {
    Connection& c = connections_[i];
    c.sent = 0;
    c.received.clear();
    c.started = SteadyClock::now();
    Send(i);
  }

  void Send(size_t i) {
    Connection& c = connections_[i];
    if (c.fd < 0 || c.sent == request_.size()) return;
    const ssize_t n = ::send(c.fd, request_.data() + c.sent, request_.size() - c.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN) {
      Close(i, "send_failed", std::string("send: ") + std::strerror(errno));
      return;
    }
    if (n > 0) c.sent += static_cast<size_t>(n);
    // Only a request that did not fit in the socket buffer waits for EPOLLOUT.
    const bool want_out = c.sent < request_.size();
    if (want_out != c.waiting_to_send) {
      epoll_event ev{};
      ev.events = want_out ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
      ev.data.u64 = i;
      ::epoll_ctl(epoll_, EPOLL_CTL_MOD, c.fd, &ev);
      c.waiting_to_send = want_out;
    }
  }

  void Receive(size_t i) {
    Connection& c = connections_[i];
    char buffer[16384];
    const ssize_t n = ::recv(c.fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
      Close(i, "closed", n == 0 ? "the server closed a connection" : std::string("recv: ") + std::strerror(errno));
      return;
    }
    if (n < 0) return;
    c.received.append(buffer, static_cast<size_t>(n));
    const size_t header_end = c.received.find("\r\n\r\n");
    if (header_end == std::string::npos) return;
    // "HTTP/1.1 201 Created": the status is the second word.
    int status = 0;
    if (c.received.size() > 12) status = std::atoi(c.received.c_str() + 9);
    const std::string_view headers(c.received.data(), header_end);
    size_t content_length = 0;
    bool has_length = false;
    bool close_after = false;
    for (size_t line = headers.find("\r\n"); line != std::string_view::npos;) {
      const size_t next = headers.find("\r\n", line + 2);
      const std::string_view field = headers.substr(line + 2, next == std::string_view::npos ? next : next - line - 2);
      if (field.size() > 15 && strncasecmp(field.data(), "content-length:", 15) == 0) {
        content_length = std::strtoull(field.data() + 15, nullptr, 10);
        has_length = true;
      } else if (field.size() >= 17 && strncasecmp(field.data(), "connection: close", 17) == 0) {
        close_after = true;
      }
      line = next;
    }
    if (!has_length) {
      Close(i, "no_content_length", "a response without Content-Length: " + c.received.substr(0, 200));
      return;
    }
    if (c.received.size() < header_end + 4 + content_length) return;
    if (status == expected_status_) {
      result_.latencies_ms.push_back(std::chrono::duration<double, std::milli>(SteadyClock::now() - c.started).count());
    } else {
      Fail("http_" + std::to_string(status),
           "HTTP " + std::to_string(status) + ": " + c.received.substr(header_end + 4, 300));
    }
    if (close_after) {
      Close(i, "", "");
      c.retry_at = SteadyClock::now();
      return;
    }
    if (SteadyClock::now() < deadline_) StartRequest(i);
  }

  const Address address_;
  const std::string& request_;
  const int expected_status_;
  const SteadyClock::time_point deadline_;
  int epoll_ = -1;
  std::vector<Connection> connections_;
  ClosedLoopResult result_;
};

}  // namespace

ClosedLoopResult RunClosedLoop(const std::string& host, uint16_t port, const std::string& request, int connections,
                               int expected_status, SteadyClock::time_point deadline) {
  Address address;
  if (!Resolve(host, port, address)) {
    ClosedLoopResult r;
    r.errors["bad_address"] = 1;
    r.first_error = "the load generator needs a numeric address, not '" + host + "'";
    return r;
  }
  return Loop(address, request, expected_status, deadline).Run(connections);
}

std::string JsonPost(const std::string& host, uint16_t port, const std::string& target, const std::string& token,
                     const std::string& body) {
  const bool v6 = host.find(':') != std::string::npos;
  return "POST " + target + " HTTP/1.1\r\nHost: " + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port) +
         "\r\nAuthorization: Bearer " + token +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace unisched::bench
