#pragma once
// One HTTP/1.1 connection of the listener (server.cc): reads a request
// within its timeouts, hands it to the handler, writes the response that
// comes back (from any thread, possibly later), keeps the connection alive
// or closes it with a lingering drain, and answers a connection over a cap
// with a 503. Included by server.cc only.

#include "http/core.h"

namespace unisched::api::http_server {

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// One connection, over beast::tcp_stream or, on an HTTPS listener, over
// TlsStream: then the handshake comes first (within the header timeout) and
// the verified client certificate's subject goes with each request.
// Everything else only uses stream_ generically and the lowest layer for
// timeouts and the socket. A TLS connection is closed without the TLS
// close_notify: every response carries its length, so a truncation shows.
template <class Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  Session(std::shared_ptr<Core> core, tcp::socket&& socket, std::string remote) requires(!kTls)
      : core_(std::move(core)),
        stream_(std::move(socket)),
        strand_(stream_.get_executor()),
        request_timer_(strand_),
        stream_timer_(strand_),
        remote_(std::move(remote)) {
    beast::error_code ec;
    beast::get_lowest_layer(stream_).socket().set_option(tcp::no_delay(true), ec);  // best effort
  }

  Session(std::shared_ptr<Core> core, tcp::socket&& socket, std::string remote,
          std::shared_ptr<ssl::context> tls) requires(kTls)
      : core_(std::move(core)),
        tls_(std::move(tls)),
        stream_(std::move(socket), *tls_),
        strand_(stream_.get_executor()),
        request_timer_(strand_),
        stream_timer_(strand_),
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
    if constexpr (kTls) {
      asio::dispatch(strand_, beast::bind_front_handler(&Session::Handshake, this->shared_from_this()));
    } else {
      asio::dispatch(strand_, beast::bind_front_handler(&Session::ReadRequest, this->shared_from_this()));
    }
  }

  void Close() override {
    asio::post(strand_, [self = this->shared_from_this()] { self->CloseNow(); });
  }

  // A connection over a cap: answered 503 at once, without reading its
  // request, and closed. It is not registered, so it holds no slot; its
  // descriptor lives at most the write plus the drain of LingeringClose.
  void Refuse(std::string why) {
    refusing_ = true;
    if constexpr (kTls) {
      // No 503 before a handshake; a refused TLS client is closed at once.
      asio::dispatch(strand_, [self = this->shared_from_this()] { self->CloseNow(); });
      return;
    }
    asio::dispatch(strand_, [self = this->shared_from_this(), why = std::move(why)]() mutable {
      HttpResponse response = ErrorResponse(503, "too_many_connections", why);
      response.headers.emplace_back("Retry-After", "1");
      self->drain_time_ = kRefusedDrainTime;
      self->SendErrorAndClose(std::move(response));
    });
  }

 private:
  auto& Lowest() { return beast::get_lowest_layer(stream_); }

  // ---- TLS -----------------------------------------------------------------

  void Handshake() {
    Lowest().expires_after(std::chrono::seconds(core_->options.header_timeout_seconds));
    stream_.async_handshake(ssl::stream_base::server,
                            beast::bind_front_handler(&Session::OnHandshake, this->shared_from_this()));
  }

  void OnHandshake(beast::error_code ec) {
    if (ec) return CloseNow();  // not TLS, a bad client certificate, or too slow
    Lowest().expires_never();
    client_subject_ = VerifiedClientSubject(stream_.native_handle());
    ReadRequest();
  }

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
    request.client_subject = client_subject_;
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
    if (response.source && response.status >= 200 && response.status < 300 && !force_close) {
      return WriteStreamed(std::move(response));
    }
    // Informational statuses are the server's business, not a handler's.
    if (response.status < 200 || response.status > 999) {
      response = ErrorResponse(500, "internal",
                               "the handler produced an invalid HTTP status " + std::to_string(response.status));
    }
    // HTTP forbids a body on these; Beast would throw on one.
    if (response.status == 204 || response.status == 304) response.body.clear();
    auto msg = std::make_shared<http::response<http::string_body>>();
    SetHead(*msg, response);
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

  // The status line and headers of a response: Server, its Content-Type
  // and its extra headers, any that could split the header dropped (never
  // sent broken).
  template <class Body>
  void SetHead(http::response<Body>& msg, const HttpResponse& response) const {
    msg.result(static_cast<unsigned>(response.status));
    msg.version(version_);
    msg.set(http::field::server, "unisched");
    if (!response.content_type.empty() && SafeHeaderValue(response.content_type)) {
      msg.set(http::field::content_type, response.content_type);
    }
    for (const auto& [name, value] : response.headers) {
      if (IsHeaderName(name) && SafeHeaderValue(value)) msg.insert(name, value);
    }
  }

  void OnWrite(bool close, beast::error_code ec) {
    if (ec) return CloseNow();
    if (close) return LingeringClose();
    ReadRequest();
  }

  // ---- a body that follows something live (HttpResponse::source) ---------

  // The header, then each piece the source gives as a chunk (HTTP/1.0: as
  // it is, the end of the body being the close), polling the source while
  // it has nothing new; then the last chunk and the close. No write may
  // take longer than the body timeout; the waits between pieces have none,
  // since the source decides when the body ends (a job's output ends with
  // its attempt), and a client that hangs up ends them (WatchForHangUp).
  void WriteStreamed(HttpResponse response) {
    source_ = std::move(response.source);
    streaming_ = true;
    chunked_ = version_ >= 11;
    auto head = std::make_shared<http::response<http::empty_body>>();
    SetHead(*head, response);
    head->keep_alive(false);
    if (chunked_) head->chunked(true);
    auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*head);
    Lowest().expires_after(std::chrono::seconds(core_->options.body_timeout_seconds));
    http::async_write_header(stream_, *serializer,
                             [self = this->shared_from_this(), head, serializer](beast::error_code ec, std::size_t) {
                               if (ec) return self->CloseNow();
                               if (self->head_) return self->EndStream(false);  // HEAD: the header alone
                               self->WatchForHangUp();
                               self->NextPiece();
                             });
  }

  void NextPiece() {
    if (closed_) return;
    BodySource::Piece piece;
    try {
      piece = source_->Next();
    } catch (const std::exception&) {
      return CloseNow();  // no last chunk: the client sees the body cut short
    }
    if (!piece.data.empty()) return WritePiece(std::move(piece));
    if (piece.done) return EndStream(chunked_);
    stream_timer_.expires_after(source_->poll_interval());
    stream_timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (ec || self->closed_) return;
      self->NextPiece();
    });
  }

  void WritePiece(BodySource::Piece piece) {
    auto data = std::make_shared<std::string>(std::move(piece.data));
    auto then = [self = this->shared_from_this(), data, done = piece.done](beast::error_code ec, std::size_t) {
      if (ec) return self->CloseNow();
      if (done) return self->EndStream(self->chunked_);
      self->NextPiece();
    };
    Lowest().expires_after(std::chrono::seconds(core_->options.body_timeout_seconds));
    if (chunked_) {
      asio::async_write(stream_, http::make_chunk(asio::buffer(*data)), std::move(then));
    } else {
      asio::async_write(stream_, asio::buffer(*data), std::move(then));
    }
  }

  void EndStream(bool last_chunk) {
    streaming_ = false;
    source_.reset();
    if (!last_chunk) return LingeringClose();
    Lowest().expires_after(std::chrono::seconds(core_->options.body_timeout_seconds));
    asio::async_write(stream_, http::make_chunk_last(),
                      [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                        if (ec) return self->CloseNow();
                        self->LingeringClose();
                      });
  }

  // A follower that hangs up must not hold its connection (and whatever the
  // source holds) until the followed thing ends: readable with nothing to
  // read is the client's close. Bytes it sends (a pipelined request, TLS
  // records) are left for the close that ends the stream.
  void WatchForHangUp() {
    Lowest().socket().async_wait(tcp::socket::wait_read, [self = this->shared_from_this()](beast::error_code ec) {
      if (ec || self->closed_ || !self->streaming_) return;
      char byte = 0;
      beast::error_code peek_error;
      const size_t n = self->Lowest().socket().receive(asio::buffer(&byte, 1), tcp::socket::message_peek, peek_error);
      if (peek_error == asio::error::would_block || peek_error == asio::error::try_again) return self->WatchForHangUp();
      if (peek_error || n == 0) self->CloseNow();
    });
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
    stream_timer_.cancel();   // so does a streamed body's poll
    source_.reset();
    beast::error_code ec;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    Lowest().close();  // also cancels the pending operation and its timer
  }

  std::shared_ptr<Core> core_;         // first: destroyed last, after the stream
  std::shared_ptr<ssl::context> tls_;  // what stream_ was made with (kTls)
  Stream stream_;
  const typename Stream::executor_type strand_;
  static constexpr std::chrono::steady_clock::time_point kNoDeadline = std::chrono::steady_clock::time_point::max();
  asio::steady_timer request_timer_;
  std::chrono::steady_clock::time_point request_deadline_ = kNoDeadline;
  asio::steady_timer stream_timer_;     // between polls of a streamed body's source
  std::shared_ptr<BodySource> source_;  // while a streamed body is written
  bool streaming_ = false;
  bool chunked_ = false;
  bool timer_waiting_ = false;
  uint64_t timer_generation_ = 0;
  bool request_timed_out_ = false;
  bool head_ = false;
  bool refusing_ = false;  // counted in Core::refusing until destroyed
  std::chrono::milliseconds drain_time_ = kDrainTime;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string remote_;
  std::string client_subject_;
  uint64_t id_ = 0;
  uint64_t requests_ = 0;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool have_header_ = false;
  bool closed_ = false;
  char drain_buffer_[4096];
};

}  // namespace unisched::api::http_server
