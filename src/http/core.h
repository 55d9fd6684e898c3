#pragma once
// The HTTP listener's shared state (server.cc): the io_context and what
// every session and the listener share (open sessions, connection caps,
// refusals), and small helpers of the wire. Included by server.cc only:
// Beast stays in one translation unit.

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "unisched/api/http.h"
#include "unisched/api/server.h"

namespace unisched::api::http_server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// Beast's default is 8 KiB; bearer tokens and proxies' headers fit in 16 KiB.
constexpr uint32_t kHeaderLimitBytes = 16 * 1024;
// How long a connection we are closing may keep sending (see LingeringClose).
constexpr std::chrono::milliseconds kDrainTime{2000};
// The same for a connection refused over a cap: short, since a flood of them
// must not hold descriptors for long.
constexpr std::chrono::milliseconds kRefusedDrainTime{200};
constexpr size_t kIdleReadChunk = 4096;

inline std::string FormatEndpoint(const tcp::endpoint& ep) {
  const auto address = ep.address();
  std::string host = address.to_string();
  if (address.is_v6()) host = "[" + host + "]";
  return host + ":" + std::to_string(ep.port());
}

inline bool IsHttpProtocolError(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category();
}

// Header values must not smuggle a second header line into the response.
inline bool SafeHeaderValue(const std::string& text) {
  return text.find_first_of("\r\n") == std::string::npos;
}

// RFC 9110 token characters.
inline bool IsHeaderName(const std::string& name) {
  if (name.empty()) return false;
  for (unsigned char c : name) {
    if (std::isalnum(c)) continue;
    if (std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) == std::string_view::npos) return false;
  }
  return true;
}

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Closes the connection; callable from any thread.
  virtual void Close() = 0;
};

// State shared by the server, the listener and the sessions.
namespace ssl = asio::ssl;

// A server TLS context from the options' files: TLS 1.2 and later, and the
// client CA's certificates verified when one is given.
inline Result<std::shared_ptr<ssl::context>> MakeTlsContext(const ServerOptions::Tls& tls) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  beast::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                   ec);
  auto fail = [&](const std::string& what, const std::string& file) -> Result<std::shared_ptr<ssl::context>> {
    return Error{ErrorKind::kUnprocessable,
                 "tls_files",
                 "TLS: cannot use " + what + " " + file + ": " + ec.message() + " (server.tls, docs/access.md)",
                 {}};
  };
  if (ctx->use_certificate_chain_file(tls.cert_file, ec); ec) return fail("the certificate", tls.cert_file);
  if (ctx->use_private_key_file(tls.key_file, ssl::context::pem, ec); ec) return fail("the key", tls.key_file);
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return Error{ErrorKind::kUnprocessable,
                 "tls_files",
                 "TLS: the key " + tls.key_file + " does not match the certificate " + tls.cert_file,
                 {}};
  }
  if (!tls.client_ca_file.empty()) {
    if (ctx->load_verify_file(tls.client_ca_file, ec); ec) return fail("the client CA", tls.client_ca_file);
    // Verify a certificate the client sends; one without is let in (its
    // token decides), a bad one fails the handshake.
    ctx->set_verify_mode(ssl::verify_peer, ec);
  }
  return ctx;
}

// The subject (RFC 2253) of the certificate the client presented, if the
// handshake verified it against the client CA; "" otherwise.
inline std::string VerifiedClientSubject(SSL* ssl) {
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return {};
  std::string subject;
  if (SSL_get_verify_result(ssl) == X509_V_OK) {
    BIO* bio = BIO_new(BIO_s_mem());
    X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
    char* data = nullptr;
    const long len = BIO_get_mem_data(bio, &data);
    if (len > 0) subject.assign(data, static_cast<size_t>(len));
    BIO_free(bio);
  }
  X509_free(cert);
  return subject;
}

struct Core {
  Core(const ServerOptions& opts, Handler h) : options(opts), handler(std::move(h)) {}

  asio::io_context ioc;
  const ServerOptions options;
  const Handler handler;

  // The TLS context new connections use (null: plain HTTP); replaced whole
  // by a reload, so a connection keeps the one it started with.
  std::shared_ptr<ssl::context> TlsContext() {
    std::lock_guard<std::mutex> lock(tls_mu);
    return tls;
  }
  void SetTlsContext(std::shared_ptr<ssl::context> ctx) {
    std::lock_guard<std::mutex> lock(tls_mu);
    tls = std::move(ctx);
  }
  std::mutex tls_mu;
  std::shared_ptr<ssl::context> tls;  // GUARDED_BY(tls_mu)

  struct Open {
    std::weak_ptr<SessionBase> session;
    std::string address;  // the client's, without the port
  };
  std::mutex mu;
  bool stopped = false;                                      // GUARDED_BY(mu)
  uint64_t next_session_id = 1;                              // GUARDED_BY(mu)
  std::unordered_map<uint64_t, Open> sessions;               // GUARDED_BY(mu)
  std::unordered_map<std::string, int> sessions_by_address;  // GUARDED_BY(mu)
  // Refused connections still being answered. Each holds a descriptor for
  // its 503 and a short drain; beyond kMaxRefusing a refused connection is
  // closed at once without an answer, so a connect flood cannot spend the
  // descriptors the caps keep free.
  static constexpr int kMaxRefusing = 64;
  int refusing = 0;  // GUARDED_BY(mu)

  bool StartRefusal() {
    std::lock_guard<std::mutex> lock(mu);
    if (refusing >= kMaxRefusing) return false;
    ++refusing;
    return true;
  }
  void EndRefusal() {
    std::lock_guard<std::mutex> lock(mu);
    --refusing;
  }

  // Why a connection may not be served: empty when it may.
  std::string CapReached(const std::string& address) const {
    if (static_cast<int64_t>(sessions.size()) >= options.max_connections) {
      if (options.on_connection_refused) options.on_connection_refused("total");
      return "the server has " + std::to_string(sessions.size()) +
             " connections open, its limit (server.max_connections); retry shortly";
    }
    if (options.max_connections_per_client > 0) {
      auto it = sessions_by_address.find(address);
      if (it != sessions_by_address.end() && it->second >= options.max_connections_per_client) {
        if (options.on_connection_refused) options.on_connection_refused("per_client");
        return "client " + address + " has " + std::to_string(it->second) +
               " connections open, the limit per client (server.max_connections_per_client); reuse a keep-alive "
               "connection or close idle ones";
      }
    }
    return {};
  }

  // Registers a session from `address`: its id, or 0 when the server is
  // stopping (the caller then drops the connection), or 0 with `refusal`
  // set when a connection cap is reached.
  uint64_t Register(const std::shared_ptr<SessionBase>& session, const std::string& address, std::string& refusal) {
    std::lock_guard<std::mutex> lock(mu);
    if (stopped) return 0;
    refusal = CapReached(address);
    if (!refusal.empty()) return 0;
    uint64_t id = next_session_id++;
    sessions.emplace(id, Open{session, address});
    ++sessions_by_address[address];
    return id;
  }

  void Unregister(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = sessions.find(id);
    if (it == sessions.end()) return;
    auto by = sessions_by_address.find(it->second.address);
    if (by != sessions_by_address.end() && --by->second <= 0) sessions_by_address.erase(by);
    sessions.erase(it);
  }

  // Marks the server stopped and returns the sessions still alive.
  std::vector<std::shared_ptr<SessionBase>> MarkStopped() {
    std::lock_guard<std::mutex> lock(mu);
    stopped = true;
    std::vector<std::shared_ptr<SessionBase>> live;
    for (auto& [id, open] : sessions) {
      if (auto s = open.session.lock()) live.push_back(std::move(s));
    }
    return live;
  }

  // Posts fn unless the server has stopped. The check and the post happen
  // under mu, and Stop() sets `stopped` under mu before it lets the I/O
  // threads run out of work, so nothing is ever queued on an io_context
  // that no thread will run again (that handler would keep its session,
  // and through it this Core, alive forever).
  template <class Executor, class Fn>
  void PostUnlessStopped(const Executor& executor, Fn&& fn) {
    std::lock_guard<std::mutex> lock(mu);
    if (stopped) return;
    asio::post(executor, std::forward<Fn>(fn));
  }
};

}  // namespace unisched::api::http_server
