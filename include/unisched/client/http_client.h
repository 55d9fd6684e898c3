#pragma once
// A small synchronous HTTP/1.1 client for the CLI, the tests and the
// benchmark. Keeps one keep-alive connection; Beast stays in its .cc file.
//
// Not thread-safe: use one HttpClient per thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "unisched/common/status.h"

namespace unisched::client {

struct ClientResponse {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names lower-cased

  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// HTTPS: the server's certificate is verified against ca_file (or the
// system's CAs when empty) and must name the host; cert_file/key_file give
// a client certificate (agents' mTLS, docs/access.md).
struct TlsOptions {
  bool enabled = false;
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

class HttpClient {
 public:
  // Connects lazily on the first Request. A TLS error (a CA file that cannot
  // be read) surfaces at the first Request.
  HttpClient(std::string host, uint16_t port, TlsOptions tls = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;
  HttpClient(HttpClient&&) noexcept;
  HttpClient& operator=(HttpClient&&) noexcept;

  // Sends one request and reads the whole response. A non-empty body gets
  // Content-Type: application/json unless `headers` names another one; the
  // bearer token (if set) goes in Authorization unless `headers` has one.
  // A reused keep-alive connection that turns out to be closed is
  // reconnected once and the request resent. Any HTTP status is a value;
  // errors are transport failures: code "connection_failed", "timeout" or
  // "transport_error" (ErrorKind::kUnavailable).
  Result<ClientResponse> Request(const std::string& method, const std::string& target, const std::string& body = {},
                                 const std::map<std::string, std::string>& headers = {});

  // A GET whose body is followed as it arrives (a job's log with
  // ?follow=true): a 2xx response's body goes to on_body piece by piece and
  // is not kept; any other status comes back whole in the response. The
  // deadline covers the connection and the response's header only: the
  // server ends the body. on_body returning false stops reading (the
  // connection is closed). Transport errors as Request's.
  Result<ClientResponse> Follow(const std::string& target, const std::function<bool(std::string_view)>& on_body);

  void SetBearerToken(std::string token);
  // Per-request deadline for connect, write and read together (default 30 s).
  void SetTimeout(std::chrono::milliseconds timeout);

  const std::string& host() const;
  uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "http://127.0.0.1:8642" (optionally with a trailing "/", "http://" optional,
// "[::1]:8642" for IPv6, port 80 when absent) -> host and port. https and
// paths are rejected with a message.
Result<std::pair<std::string, uint16_t>> ParseBaseUrl(const std::string& url);

// The same, and "https://..." too (port 443 when absent).
struct BaseUrl {
  std::string host;
  uint16_t port = 80;
  bool tls = false;
};
Result<BaseUrl> ParseUrl(const std::string& url);

}  // namespace unisched::client
