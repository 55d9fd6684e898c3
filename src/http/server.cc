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

#include "unisched/api/server.h"

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

namespace unisched::api {
namespace {

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

std::string FormatEndpoint(const tcp::endpoint& ep) {
  const auto address = ep.address();
  std::string host = address.to_string();
  if (address.is_v6()) host = "[" + host + "]";
  return host + ":" + std::to_string(ep.port());
}

bool IsHttpProtocolError(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category();
}

// Header values must not smuggle a second header line into the response.
bool SafeHeaderValue(const std::string& text) {
  return text.find_first_of("\r\n") == std::string::npos;
}

// RFC 9110 token characters.
bool IsHeaderName(const std::string& name) {
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
struct Core {
  Core(const ServerOptions& opts, Handler h) : options(opts), handler(std::move(h)) {}

  asio::io_context ioc;
  const ServerOptions options;
  const Handler handler;

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

// One connection. Stream is beast::tcp_stream today; a TLS listener would
// instantiate Session<beast::ssl_stream<beast::tcp_stream>> and add the
// handshake in Start() and the TLS shutdown in ShutdownSend()/CloseNow().
// Everything else only uses stream_ generically and the lowest layer for
// timeouts and the socket.
template <class Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(std::shared_ptr<Core> core, tcp::socket&& socket, std::string remote)
      : core_(std::move(core)),
        stream_(std::move(socket)),
        strand_(stream_.get_executor()),
        request_timer_(strand_),
        remote_(std::move(remote)) {
    beast::error_code ec;
    beast::get_lowest_layer(stream_).socket().set_option(tcp::no_delay(true), ec);  // best effort
  }

  ~Session() override {
    if (id_ != 0) core_->Unregister(id_);
    if (refusing_) core_->EndRefusal();
  }

  void Start(uint64_t id) {
    id_ = id;
    asio::dispatch(strand_, beast::bind_front_handler(&Session::ReadRequest, this->shared_from_this()));
  }

  void Close() override {
    asio::post(strand_, [self = this->shared_from_this()] { self->CloseNow(); });
  }

  // A connection over a cap: answered 503 at once, without reading its
  // request, and closed. It is not registered, so it holds no slot; its
  // descriptor lives at most the write plus the drain of LingeringClose.
  void Refuse(std::string why) {
    refusing_ = true;
    asio::dispatch(strand_, [self = this->shared_from_this(), why = std::move(why)]() mutable {
      HttpResponse response = ErrorResponse(503, "too_many_connections", why);
      response.headers.emplace_back("Retry-After", "1");
      self->drain_time_ = kRefusedDrainTime;
      self->SendErrorAndClose(std::move(response));
    });
  }

 private:
  auto& Lowest() { return beast::get_lowest_layer(stream_); }

  // ---- reading -----------------------------------------------------------

  void ReadRequest() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(kHeaderLimitBytes);
    parser_->body_limit(static_cast<uint64_t>(core_->options.max_body_bytes));
    have_header_ = false;
    if (requests_ > 0 && buffer_.size() == 0) {
      // Between keep-alive requests the idle timeout applies until the next
      // request's first bytes arrive; from then on the header timeout.
      Lowest().expires_after(std::chrono::seconds(core_->options.idle_timeout_seconds));
      stream_.async_read_some(buffer_.prepare(kIdleReadChunk),
                              beast::bind_front_handler(&Session::OnIdleRead, this->shared_from_this()));
      return;
    }
    ReadHeader();
  }

  void OnIdleRead(beast::error_code ec, std::size_t bytes) {
    if (ec) return CloseNow();  // idle timeout, or the client closed: both are normal
    buffer_.commit(bytes);
    ReadHeader();
  }

  // The header and body phases run on a timer of their own rather than the
  // stream's: the stream's expiry closes the socket, and a client whose
  // request stalls is owed a 408 before the close. A phase only moves the
  // deadline; the timer wakes at the deadline it was set to and, if a later
  // phase moved it on, waits again. So a keep-alive request costs no timer
  // wait and cancel of its own (which cost ~3% of the submission rate).
  void ArmRequestTimer(int seconds) {
    Lowest().expires_never();
    request_deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    // A wait already set to wake before the new deadline re-arms itself then.
    if (timer_waiting_ && request_timer_.expiry() <= request_deadline_) return;
    WaitForDeadline();
  }

  void WaitForDeadline() {
    timer_waiting_ = true;
    const uint64_t generation = ++timer_generation_;
    request_timer_.expires_at(request_deadline_);  // an earlier wait ends, and is stale by its generation
    request_timer_.async_wait([self = this->shared_from_this(), generation](beast::error_code ec) {
      if (generation != self->timer_generation_) return;
      self->timer_waiting_ = false;
      if (ec || self->closed_ || self->request_deadline_ == kNoDeadline) return;
      if (std::chrono::steady_clock::now() < self->request_deadline_) return self->WaitForDeadline();
      self->request_timed_out_ = true;
      beast::error_code ignored;
      self->Lowest().socket().cancel(ignored);  // the pending read ends with operation_aborted
    });
  }

  void DisarmRequestTimer() { request_deadline_ = kNoDeadline; }

  void ReadHeader() {
    ArmRequestTimer(core_->options.header_timeout_seconds);
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::OnHeader, this->shared_from_this()));
  }

  void OnHeader(beast::error_code ec, std::size_t /*bytes*/) {
    DisarmRequestTimer();
    if (ec) return OnReadError(ec);
    have_header_ = true;
    ++requests_;
    const auto& req = parser_->get();
    if (std::string problem = FramingProblem(req); !problem.empty()) {
      return SendErrorAndClose(ErrorResponse(400, "malformed_request", problem));
    }
    if (parser_->is_done()) return Dispatch();
    if (req.version() >= 11 && beast::iequals(req[http::field::expect], "100-continue")) {
      // The client waits for this before sending a body (curl does for
      // large bodies); a body over the limit was already refused above.
      auto interim = std::make_shared<http::response<http::empty_body>>(http::status::continue_, req.version());
      Lowest().expires_after(std::chrono::seconds(core_->options.body_timeout_seconds));
      http::async_write(stream_, *interim,
                        [self = this->shared_from_this(), interim](beast::error_code wec, std::size_t) {
                          if (wec) return self->CloseNow();
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    ArmRequestTimer(core_->options.body_timeout_seconds);
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::OnBody, this->shared_from_this()));
  }

  void OnBody(beast::error_code ec, std::size_t /*bytes*/) {
    DisarmRequestTimer();
    if (ec) return OnReadError(ec);
    Dispatch();
  }

  // Requests whose length cannot be known for sure are refused (RFC 9112
  // 6.1 and 6.3: a request with a transfer coding other than a final
  // chunked is answered 400 and the connection closed; one with both
  // Transfer-Encoding and Content-Length is how requests are smuggled past
  // proxies), and so are HTTP/1.1 requests without exactly one Host (RFC
  // 9112 3.2).
  static std::string FramingProblem(const http::request<http::string_body>& req) {
    if (req.version() >= 11 && req.count(http::field::host) != 1) {
      return "an HTTP/1.1 request must carry exactly one Host header; add 'Host: <server address>'";
    }
    if (req.count(http::field::transfer_encoding) > 0) {
      std::string coding(req[http::field::transfer_encoding]);
      coding.erase(std::remove_if(coding.begin(), coding.end(), [](unsigned char c) { return std::isspace(c); }),
                   coding.end());
      if (req.count(http::field::transfer_encoding) != 1 || !beast::iequals(coding, "chunked")) {
        return "Transfer-Encoding '" + std::string(req[http::field::transfer_encoding]) +
               "' is not accepted; send the body as it is with Content-Length, or with Transfer-Encoding: chunked "
               "alone";
      }
      if (req.count(http::field::content_length) > 0) {
        return "a request may not carry both Transfer-Encoding and Content-Length; send one of them";
      }
    }
    return {};
  }

  void OnReadError(const beast::error_code& ec) {
    if (request_timed_out_) {
      request_timed_out_ = false;
      // Nothing of a request arrived: an idle connection, closed quietly.
      if (!have_header_ && buffer_.size() == 0) return CloseNow();
      const int seconds = have_header_ ? core_->options.body_timeout_seconds : core_->options.header_timeout_seconds;
      return SendErrorAndClose(ErrorResponse(408, "request_timeout",
                                             std::string("the request's ") + (have_header_ ? "body" : "headers") +
                                                 " did not arrive within " + std::to_string(seconds) +
                                                 " s; send the whole request without pausing"));
    }
    if (ec == http::error::body_limit) {
      return SendErrorAndClose(
          ErrorResponse(413, "body_too_large",
                        "request body exceeds " + std::to_string(core_->options.max_body_bytes) +
                            " bytes; send a smaller body (large outputs belong in files, not in requests)"));
    }
    if (ec == http::error::header_limit) {
      return SendErrorAndClose(ErrorResponse(431, "header_too_large",
                                             "request header block exceeds " + std::to_string(kHeaderLimitBytes) +
                                                 " bytes; send fewer or shorter headers"));
    }
    // The client went away or stopped mid-message: nobody to answer.
    if (ec == http::error::end_of_stream || ec == http::error::partial_message) return CloseNow();
    if (IsHttpProtocolError(ec)) {
      return SendErrorAndClose(ErrorResponse(
          400, "malformed_request",
          "malformed HTTP request (" + ec.message() + "); send HTTP/1.1 with a valid request line and headers"));
    }
    // Timeouts (beast::error::timeout; the stream already closed the
    // socket), resets and cancellation after Stop().
    CloseNow();
  }

  // ---- handing the request over ------------------------------------------

  void Dispatch() {
    http::request<http::string_body> req = parser_->release();
    HttpRequest request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    const size_t question = request.target.find('?');
    request.path = PercentDecode(request.target.substr(0, question));
    if (question != std::string::npos) request.query = ParseQuery(request.target.substr(question + 1));
    for (const auto& field : req) {
      std::string name(field.name_string());
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      auto [it, inserted] = request.headers.emplace(std::move(name), std::string(field.value()));
      if (!inserted) it->second += ", " + std::string(field.value());  // RFC 9110 field combination
    }
    request.body = std::move(req.body());
    request.remote = remote_;
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    head_ = req.method() == http::verb::head;

    auto responded = std::make_shared<std::atomic<bool>>(false);
    Respond respond = [self = this->shared_from_this(), responded](HttpResponse response) {
      if (responded->exchange(true)) return;  // exactly once; later calls are ignored
      self->core_->PostUnlessStopped(
          self->strand_, [self, response = std::move(response)]() mutable { self->Write(std::move(response), false); });
    };
    try {
      core_->handler(std::move(request), respond);
    } catch (const std::exception& e) {
      respond(ErrorResponse(500, "internal", std::string("the request handler failed: ") + e.what()));
    } catch (...) {
      respond(ErrorResponse(500, "internal", "the request handler failed"));
    }
  }

  // ---- writing -------------------------------------------------------------

  void SendErrorAndClose(HttpResponse response) {
    if (!have_header_) version_ = 11;
    Write(std::move(response), true);
  }

  void Write(HttpResponse response, bool force_close) {
    if (closed_) return;
    // Informational statuses are the server's business, not a handler's.
    if (response.status < 200 || response.status > 999) {
      response = ErrorResponse(500, "internal",
                               "the handler produced an invalid HTTP status " + std::to_string(response.status));
    }
    // HTTP forbids a body on these; Beast would throw on one.
    if (response.status == 204 || response.status == 304) response.body.clear();
    auto msg = std::make_shared<http::response<http::string_body>>();
    msg->result(static_cast<unsigned>(response.status));
    msg->version(version_);
    msg->set(http::field::server, "unisched");
    if (!response.content_type.empty() && SafeHeaderValue(response.content_type)) {
      msg->set(http::field::content_type, response.content_type);
    }
    for (const auto& [name, value] : response.headers) {
      if (!IsHeaderName(name) || !SafeHeaderValue(value)) continue;  // dropped, never sent broken
      msg->insert(name, value);
    }
    msg->body() = std::move(response.body);
    // A handler may ask to close by setting "Connection: close" itself.
    const bool close = force_close || !keep_alive_ || !msg->keep_alive();
    msg->keep_alive(!close);
    if (head_) {
      // HEAD: the headers a GET would get, Content-Length included, no body.
      const size_t length = msg->body().size();
      msg->body().clear();
      msg->content_length(length);
    } else {
      msg->prepare_payload();
    }

    Lowest().expires_after(std::chrono::seconds(core_->options.body_timeout_seconds));
    http::async_write(stream_, *msg, [self = this->shared_from_this(), msg, close](beast::error_code ec, std::size_t) {
      self->OnWrite(close, ec);
    });
  }

  void OnWrite(bool close, beast::error_code ec) {
    if (ec) return CloseNow();
    if (close) return LingeringClose();
    ReadRequest();
  }

  // ---- closing -----------------------------------------------------------

  // Closing a socket with unread input makes the kernel send a reset, which
  // can destroy the response in flight (a 413 whose body the client is still
  // sending). So: send FIN, read and discard until the client closes or
  // kDrainTime passes, then close.
  void LingeringClose() {
    beast::error_code ec;
    Lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return CloseNow();
    Lowest().expires_after(drain_time_);
    Drain();
  }

  void Drain() {
    stream_.async_read_some(asio::buffer(drain_buffer_),
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec) return self->CloseNow();
                              self->Drain();
                            });
  }

  void CloseNow() {
    if (closed_) return;
    closed_ = true;
    request_timer_.cancel();  // its wait holds the session (and its connection slot)
    beast::error_code ec;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    Lowest().close();  // also cancels the pending operation and its timer
  }

  std::shared_ptr<Core> core_;  // first: destroyed last, after the stream
  Stream stream_;
  const typename Stream::executor_type strand_;
  static constexpr std::chrono::steady_clock::time_point kNoDeadline = std::chrono::steady_clock::time_point::max();
  asio::steady_timer request_timer_;
  std::chrono::steady_clock::time_point request_deadline_ = kNoDeadline;
  bool timer_waiting_ = false;
  uint64_t timer_generation_ = 0;
  bool request_timed_out_ = false;
  bool head_ = false;
  bool refusing_ = false;  // counted in Core::refusing until destroyed
  std::chrono::milliseconds drain_time_ = kDrainTime;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string remote_;
  uint64_t id_ = 0;
  uint64_t requests_ = 0;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool have_header_ = false;
  bool closed_ = false;
  char drain_buffer_[4096];
};

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
    auto session = std::make_shared<Session<beast::tcp_stream>>(core_, std::move(socket),
                                                                ep_ec ? std::string() : FormatEndpoint(endpoint));
    std::string refusal;
    if (uint64_t id = core_->Register(session, address, refusal)) {
      session->Start(id);
    } else if (!refusal.empty() && core_->StartRefusal()) {
      session->Refuse(std::move(refusal));
    }  // else the session, and with it the socket, goes now
    Accept();
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

}  // namespace

Result<std::unique_ptr<HttpServer>> StartHttpServer(const ServerOptions& options, Handler handler) {
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

  auto listener = std::make_shared<Listener>(core);
  if (Status st = listener->Open(endpoint, shown); !st) return st.error();
  auto server = std::make_unique<BeastHttpServer>(core, std::move(listener));
  server->Run(options.threads);
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace unisched::api
