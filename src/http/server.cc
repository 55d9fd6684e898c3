// The HTTP/1.1 listener on Boost.Beast (1.74, callback style as in Beast's
// http_server_async example). The only Beast code of the daemon besides the
// client: sessions read a request, hand an HttpRequest to the Handler, and
// write whatever HttpResponse comes back (from any thread, possibly later).
//
// Threads: one io_context run by options.threads threads; each connection
// is a Session on its own strand, so a session's members need no lock.
// Lifetime: the io_context lives in a Core shared by the server object, the
// listener and every session, because a Respond callback (and the session it
// holds) may outlive Stop() and even the server object; the socket must never
// outlive its io_context.
//
// Files: core.h (shared state, caps), session.h (one connection), this file
// (the listener, the server object, StartHttpServer).

#include "unisched/api/server.h"

#include "http/core.h"
#include "http/session.h"

namespace unisched::api {
namespace http_server {

// Accepts connections on its own strand and starts a session for each.
class Listener : public std::enable_shared_from_this<Listener> {
 public:
  explicit Listener(std::shared_ptr<Core> core)
      : core_(std::move(core)), acceptor_(asio::make_strand(core_->ioc)), retry_timer_(acceptor_.get_executor()) {}

  Status Open(const tcp::endpoint& endpoint, const std::string& shown_address) {
    beast::error_code ec;
    auto fail = [&](const char* what) -> Status {
      const bool in_use = ec == asio::error::address_in_use;
      std::string message = "cannot listen on " + shown_address + ": " + what + ": " + ec.message();
      if (in_use) message += " (another unisched running? choose another port with --listen HOST:PORT)";
      return Error{ErrorKind::kUnavailable, in_use ? "address_in_use" : "listen_failed", message, {}};
    };
    acceptor_.open(endpoint.protocol(), ec);
    if (ec) return fail("open");
    acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (ec) return fail("set_option");
    acceptor_.bind(endpoint, ec);
    if (ec) return fail("bind");
    acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return fail("listen");
    return Status::Ok();
  }

  uint16_t port() const {
    beast::error_code ec;
    auto ep = acceptor_.local_endpoint(ec);
    return ec ? 0 : ep.port();
  }

  void Accept() {
    acceptor_.async_accept(asio::make_strand(core_->ioc),
                           beast::bind_front_handler(&Listener::OnAccept, shared_from_this()));
  }

  void Close() {
    asio::post(acceptor_.get_executor(), [self = shared_from_this()] {
      beast::error_code ec;
      self->acceptor_.close(ec);
      self->retry_timer_.cancel();
    });
  }

 private:
  void OnAccept(beast::error_code ec, tcp::socket socket) {
    if (!acceptor_.is_open() || ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of file descriptors and the like: back off instead of spinning.
      retry_timer_.expires_after(std::chrono::milliseconds(50));
      retry_timer_.async_wait([self = shared_from_this()](beast::error_code wec) {
        if (!wec && self->acceptor_.is_open()) self->Accept();
      });
      return;
    }
    beast::error_code ep_ec;
    const auto endpoint = socket.remote_endpoint(ep_ec);
    const std::string address = ep_ec ? std::string() : endpoint.address().to_string();
    std::string remote = ep_ec ? std::string() : FormatEndpoint(endpoint);
    if (auto tls = core_->TlsContext()) {
      StartSession(std::make_shared<Session<TlsStream>>(core_, std::move(socket), std::move(remote), std::move(tls)),
                   address);
    } else {
      StartSession(std::make_shared<Session<beast::tcp_stream>>(core_, std::move(socket), std::move(remote)), address);
    }
    Accept();
  }

  template <class S>
  void StartSession(std::shared_ptr<S> session, const std::string& address) {
    std::string refusal;
    if (uint64_t id = core_->Register(session, address, refusal)) {
      session->Start(id);
    } else if (!refusal.empty() && core_->StartRefusal()) {
      session->Refuse(std::move(refusal));
    }  // else the session, and with it the socket, goes now
  }

  std::shared_ptr<Core> core_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
};

class BeastHttpServer final : public HttpServer {
 public:
  BeastHttpServer(std::shared_ptr<Core> core, std::shared_ptr<Listener> listener)
      : core_(std::move(core)),
        listener_(std::move(listener)),
        port_(listener_->port()),
        work_(asio::make_work_guard(core_->ioc)) {}

  ~BeastHttpServer() override { Stop(); }

  void Run(int threads) {
    listener_->Accept();
    for (int i = 0; i < std::max(1, threads); ++i) {
      threads_.emplace_back([core = core_] {
        pthread_setname_np(pthread_self(), "us-http");
        core->ioc.run();
      });
    }
  }

  uint16_t port() const override { return port_; }

  Status ReloadTls() override {
    if (!core_->options.tls.enabled()) return Status::Ok();
    auto ctx = MakeTlsContext(core_->options.tls);
    if (!ctx.ok()) return ctx.error();
    core_->SetTlsContext(std::move(ctx).value());
    return Status::Ok();
  }

  // REQUIRES: not called from a handler running on the server's I/O threads
  // (it joins them). Idempotent.
  void Stop() override {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
    std::vector<std::shared_ptr<SessionBase>> live = core_->MarkStopped();
    listener_->Close();
    for (auto& session : live) session->Close();
    live.clear();
    // Without the guard run() returns once every cancelled operation has
    // completed, leaving no queued handler behind.
    work_.reset();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  std::shared_ptr<Core> core_;
  std::shared_ptr<Listener> listener_;
  const uint16_t port_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::mutex stop_mu_;
  bool stopped_ = false;  // GUARDED_BY(stop_mu_)
};

}  // namespace http_server

Result<std::unique_ptr<HttpServer>> StartHttpServer(const ServerOptions& options, Handler handler) {
  using namespace http_server;  // NOLINT(google-build-using-namespace): its aliases and types
  if (!handler) return Error::Internal("StartHttpServer: no handler given");
  if (options.max_body_bytes <= 0 || options.header_timeout_seconds <= 0 || options.body_timeout_seconds <= 0 ||
      options.idle_timeout_seconds <= 0) {
    return Error::BadRequest("invalid_server_options", "max_body_bytes and every timeout must be greater than 0");
  }
  auto core = std::make_shared<Core>(options, std::move(handler));
  const std::string shown = options.host + ":" + std::to_string(options.port);

  tcp::endpoint endpoint;
  beast::error_code ec;
  auto address = asio::ip::make_address(options.host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, options.port);
  } else {
    tcp::resolver resolver(core->ioc);
    auto results = resolver.resolve(options.host, std::to_string(options.port), ec);
    if (ec || results.empty()) {
      return Error{ErrorKind::kBadRequest,
                   "bad_listen_address",
                   "cannot listen on " + shown + ": unknown host \"" + options.host +
                       "\" (use an IP address such as 127.0.0.1 or 0.0.0.0)",
                   {}};
    }
    endpoint = results.begin()->endpoint();
  }

  if (options.tls.enabled()) {
    auto ctx = MakeTlsContext(options.tls);
    if (!ctx.ok()) return ctx.error();
    core->SetTlsContext(std::move(ctx).value());
  }
  auto listener = std::make_shared<Listener>(core);
  if (Status st = listener->Open(endpoint, shown); !st) return st.error();
  auto server = std::make_unique<BeastHttpServer>(core, std::move(listener));
  server->Run(options.threads);
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace unisched::api
