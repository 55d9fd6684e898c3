#pragma once
// The HTTP/1.1 listener (Boost.Beast). Keep-alive, a body limit (413 with the
// error shape), separate timeouts for headers, body (408 when a request
// stalls) and idle keep-alive, caps on open connections (503 beyond). The
// listener is written against a stream type so TLS can be added without
// touching handlers (docs/adr).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "unisched/api/http.h"
#include "unisched/common/status.h"

namespace unisched::api {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8642;  // 0 picks a free port; see HttpServer::port()
  int threads = 2;
  int64_t max_body_bytes = 1 << 20;
  int header_timeout_seconds = 10;
  int body_timeout_seconds = 30;
  int idle_timeout_seconds = 60;
  // Connections open at once, in total and per client address (0: no
  // per-client cap). A connection beyond either is answered 503
  // `too_many_connections` with Retry-After and closed, so a flood of idle
  // connections cannot starve the daemon of descriptors.
  int max_connections = 4096;
  int max_connections_per_client = 256;
  // Told of each refused connection: "total" or "per_client" (any thread).
  std::function<void(const std::string& limit)> on_connection_refused;
  // HTTPS (TLS 1.2 and later) when cert_file is set (docs/access.md, "TLS").
  // client_ca_file: client certificates signed by it are verified and their
  // subject handed to the handler (HttpRequest::client_subject); a client
  // without one still connects (tokens decide), one with a bad one does not.
  struct Tls {
    std::string cert_file;  // PEM chain, the server's certificate first
    std::string key_file;   // PEM private key
    std::string client_ca_file;
    bool enabled() const { return !cert_file.empty(); }
  } tls;
};

class HttpServer {
 public:
  virtual ~HttpServer() = default;
  // The bound port (useful with port 0).
  virtual uint16_t port() const = 0;
  // Stops accepting, closes connections, joins the I/O threads.
  virtual void Stop() = 0;
  // Reads the TLS files again (SIGHUP): new connections use them, open ones
  // keep theirs. An error (a file missing or not matching) keeps the old.
  virtual Status ReloadTls() = 0;
};

// Binds, listens and starts the I/O threads. Errors: address in use, bad host.
Result<std::unique_ptr<HttpServer>> StartHttpServer(const ServerOptions& options, Handler handler);

}  // namespace unisched::api
