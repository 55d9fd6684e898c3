// The synchronous HTTP/1.1 client. Each operation is started asynchronously
// on a private io_context and that context is run until the operation is
// done: that is how Beast's tcp_stream gives a synchronous caller a deadline.

#include "unisched/client/http_client.h"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace unisched::client {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// Job logs come back in one response; bound them well above anything sane.
constexpr uint64_t kMaxResponseBodyBytes = uint64_t{1} << 30;

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

Error TransportError(const std::string& code, const std::string& message) {
  return Error{ErrorKind::kUnavailable, code, message, {}};
}

// Errors after which a reused keep-alive connection is worth one retry: the
// server closed it while it sat idle, before reading our request.
bool LooksLikeStaleConnection(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::eof || ec == asio::error::connection_aborted || ec == asio::error::bad_descriptor;
}

// A response's status and headers (names lower-cased, repeats joined with
// ", " as RFC 9110 combines them); its body is the caller's.
template <class Body>
ClientResponse StatusAndHeaders(const http::response<Body>& res) {
  ClientResponse out;
  out.status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    auto [it, inserted] = out.headers.emplace(Lower(std::string(field.name_string())), std::string(field.value()));
    if (!inserted) it->second += ", " + std::string(field.value());
  }
  return out;
}

}  // namespace

struct HttpClient::Impl {
  Impl(std::string h, uint16_t p, TlsOptions t) : host(std::move(h)), port(p), tls(std::move(t)) {}

  std::string host;
  uint16_t port;
  TlsOptions tls;
  std::string bearer;
  std::chrono::milliseconds timeout{30000};

  asio::io_context ioc;
  std::shared_ptr<ssl::context> tls_context;                   // made at the first connection
  std::optional<beast::tcp_stream> plain;                      // engaged while connected (plain HTTP)
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;  // engaged while connected (HTTPS)
  beast::flat_buffer buffer;

  std::string Where() const { return host + ":" + std::to_string(port); }
  bool Connected() const { return plain.has_value() || secure.has_value(); }
  beast::tcp_stream& Lowest() { return secure ? beast::get_lowest_layer(*secure) : *plain; }
  // Calls f with the connection's stream, whichever it is.
  template <class F>
  auto WithStream(F&& f) {
    return secure ? f(*secure) : f(*plain);
  }

  // Runs the io_context until every started operation has completed.
  void Run() {
    ioc.restart();
    ioc.run();
  }

  void Disconnect() {
    if (Connected()) {
      beast::error_code ignored;
      Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
      Lowest().close();
    }
    plain.reset();
    secure.reset();
    buffer.clear();
  }

  beast::error_code MakeTlsContext() {
    beast::error_code ec;
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                         ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                     ec);
    ctx->set_verify_mode(ssl::verify_peer, ec);
    if (tls.ca_file.empty()) {
      ctx->set_default_verify_paths(ec);
    } else {
      ctx->load_verify_file(tls.ca_file, ec);
    }
    if (ec) return ec;
    if (!tls.cert_file.empty()) {
      ctx->use_certificate_chain_file(tls.cert_file, ec);
      if (!ec) ctx->use_private_key_file(tls.key_file, ssl::context::pem, ec);
      if (ec) return ec;
    }
    tls_context = std::move(ctx);
    return {};
  }

  beast::error_code Connect(Clock::time_point deadline) {
    Disconnect();
    beast::error_code ec;
    if (tls.enabled && !tls_context) {
      if ((ec = MakeTlsContext())) return ec;
    }
    tcp::resolver resolver(ioc);
    auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec) return ec;
    if (tls.enabled) {
      secure.emplace(ioc, *tls_context);
    } else {
      plain.emplace(ioc);
    }
    Lowest().expires_at(deadline);
    Lowest().async_connect(results, [&ec](beast::error_code e, const tcp::endpoint&) { ec = e; });
    Run();
    if (!ec && secure) {
      // The certificate must name the host we asked for (RFC 2818), and the
      // server learns that name (SNI) to pick its certificate.
      beast::error_code not_an_address;
      asio::ip::make_address(host, not_an_address);
      if (not_an_address) SSL_set_tlsext_host_name(secure->native_handle(), host.c_str());  // SNI takes names only
      secure->set_verify_callback(ssl::host_name_verification(host));
      secure->async_handshake(ssl::stream_base::client, [&ec](beast::error_code e) { ec = e; });
      Run();
    }
    if (ec) {
      plain.reset();
      secure.reset();
      return ec;
    }
    beast::error_code ignored;
    Lowest().socket().set_option(tcp::no_delay(true), ignored);
    return {};
  }

  // Writes req and reads the response. *got_some tells whether any byte of
  // a response arrived (then a resend would not be safe).
  beast::error_code Exchange(http::request<http::string_body>& req, Clock::time_point deadline,
                             http::response_parser<http::string_body>& parser, bool* got_some) {
    beast::error_code ec;
    *got_some = false;
    Lowest().expires_at(deadline);
    WithStream([&](auto& stream) {
      http::async_write(stream, req, [&ec](beast::error_code e, std::size_t) { ec = e; });
      return 0;
    });
    Run();
    if (ec) return ec;
    Lowest().expires_at(deadline);
    WithStream([&](auto& stream) {
      http::async_read(stream, buffer, parser, [&ec](beast::error_code e, std::size_t) { ec = e; });
      return 0;
    });
    Run();
    *got_some = parser.got_some();
    return ec;
  }

  Error ErrorFor(const beast::error_code& ec, const char* stage) const {
    if (ec == beast::error::timeout) {
      return TransportError("timeout", "no answer from " + Where() + " within " + std::to_string(timeout.count()) +
                                           " ms (" + stage + ")");
    }
    if (std::string(stage) == "connect") {
      if (ec.category() == asio::error::get_ssl_category()) {
        return TransportError("tls_failed", "TLS with " + Where() + " failed: " + ec.message() +
                                                " (is the server's certificate signed by the CA file given, "
                                                "UNISCHED_CA_FILE or --ca-file, and does it name this host?)");
      }
      return TransportError("connection_failed", "cannot connect to " + Where() + ": " + ec.message() +
                                                     " (is the daemon running? check UNISCHED_URL)");
    }
    return TransportError("transport_error", std::string(stage) + " " + Where() + ": " + ec.message());
  }
};

HttpClient::HttpClient(std::string host, uint16_t port, TlsOptions tls)
    : impl_(std::make_unique<Impl>(std::move(host), port, std::move(tls))) {}
HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;

void HttpClient::SetBearerToken(std::string token) {
  impl_->bearer = std::move(token);
}
void HttpClient::SetTimeout(std::chrono::milliseconds timeout) {
  impl_->timeout = timeout;
}
const std::string& HttpClient::host() const {
  return impl_->host;
}
uint16_t HttpClient::port() const {
  return impl_->port;
}

Result<ClientResponse> HttpClient::Request(const std::string& method, const std::string& target,
                                           const std::string& body, const std::map<std::string, std::string>& headers) {
  Impl& d = *impl_;
  const Clock::time_point deadline = Clock::now() + d.timeout;

  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(http::field::host, d.Where());
  req.set(http::field::user_agent, "unisched-client");
  bool have_content_type = false;
  bool have_authorization = false;
  for (const auto& [name, value] : headers) {
    const std::string lower = Lower(name);
    have_content_type = have_content_type || lower == "content-type";
    have_authorization = have_authorization || lower == "authorization";
    req.set(name, value);
  }
  if (!body.empty() && !have_content_type) req.set(http::field::content_type, "application/json");
  if (!d.bearer.empty() && !have_authorization) req.set(http::field::authorization, "Bearer " + d.bearer);
  req.body() = body;
  req.prepare_payload();

  std::optional<http::response_parser<http::string_body>> parser;
  beast::error_code ec;
  for (int attempt = 0;; ++attempt) {
    const bool reused = d.Connected();
    if (!reused) {
      ec = d.Connect(deadline);
      if (ec) return d.ErrorFor(ec, "connect");
    }
    parser.emplace();
    parser->body_limit(kMaxResponseBodyBytes);
    bool got_some = false;
    ec = d.Exchange(req, deadline, *parser, &got_some);
    if (!ec) break;
    d.Disconnect();
    if (reused && attempt == 0 && !got_some && LooksLikeStaleConnection(ec)) continue;
    return d.ErrorFor(ec, "request to");
  }

  http::response<http::string_body> res = parser->release();
  ClientResponse out = StatusAndHeaders(res);
  out.body = std::move(res.body());
  if (!res.keep_alive()) d.Disconnect();
  return out;
}

Result<ClientResponse> HttpClient::Follow(const std::string& target,
                                          const std::function<bool(std::string_view)>& on_body) {
  Impl& d = *impl_;
  const Clock::time_point deadline = Clock::now() + d.timeout;
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, d.Where());
  req.set(http::field::user_agent, "unisched-client");
  if (!d.bearer.empty()) req.set(http::field::authorization, "Bearer " + d.bearer);
  // A connection of its own: the stream ends with the body.
  d.Disconnect();
  beast::error_code ec = d.Connect(deadline);
  if (ec) return d.ErrorFor(ec, "connect");
  d.Lowest().expires_at(deadline);
  d.WithStream([&](auto& stream) {
    http::async_write(stream, req, [&ec](beast::error_code e, std::size_t) { ec = e; });
    return 0;
  });
  d.Run();
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);  // a followed log has no length
  if (!ec) {
    d.WithStream([&](auto& stream) {
      http::async_read_header(stream, d.buffer, parser, [&ec](beast::error_code e, std::size_t) { ec = e; });
      return 0;
    });
    d.Run();
  }
  if (ec) {
    d.Disconnect();
    return d.ErrorFor(ec, "request to");
  }
  ClientResponse out = StatusAndHeaders(parser.get());
  const bool success = out.status >= 200 && out.status < 300;
  d.Lowest().expires_never();
  char piece[16 * 1024];
  while (!parser.is_done()) {
    parser.get().body().data = piece;
    parser.get().body().size = sizeof piece;
    d.WithStream([&](auto& stream) {
      http::async_read_some(stream, d.buffer, parser, [&ec](beast::error_code e, std::size_t) { ec = e; });
      return 0;
    });
    d.Run();
    if (ec == http::error::need_buffer) ec = {};  // the piece is full: hand it over
    if (ec) break;
    const size_t got = sizeof piece - parser.get().body().size;
    if (got == 0) continue;
    if (!success) {
      out.body.append(piece, got);
    } else if (!on_body(std::string_view(piece, got))) {
      break;
    }
  }
  d.Disconnect();
  if (ec) return d.ErrorFor(ec, "reading the body from");
  return out;
}

Result<std::pair<std::string, uint16_t>> ParseBaseUrl(const std::string& url) {
  auto parsed = ParseUrl(url);
  if (!parsed.ok()) return parsed.error();
  if (parsed->tls) {
    return Error::BadRequest("bad_url", "invalid server URL \"" + url +
                                            "\": https is not supported here; use http:// (expected e.g. "
                                            "http://127.0.0.1:8642)");
  }
  return std::make_pair(parsed->host, parsed->port);
}

Result<BaseUrl> ParseUrl(const std::string& url) {
  auto bad = [&url](const std::string& why) {
    return Error::BadRequest("bad_url",
                             "invalid server URL \"" + url + "\": " + why + " (expected e.g. http://127.0.0.1:8642)");
  };
  std::string rest = url;
  bool tls = false;
  const std::string lower = Lower(url);
  const size_t scheme_end = lower.find("://");
  if (scheme_end != std::string::npos) {
    const std::string scheme = lower.substr(0, scheme_end);
    if (scheme != "http" && scheme != "https") return bad("unsupported scheme \"" + scheme + "\"");
    tls = scheme == "https";
    rest = url.substr(scheme_end + 3);
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos) return bad("a base URL has no path");
  if (rest.empty()) return bad("no host");

  std::string host;
  std::string port_text;
  if (rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string::npos) return bad("unterminated IPv6 address");
    host = rest.substr(1, close - 1);
    std::string after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("unexpected text after the IPv6 address");
      port_text = after.substr(1);
      if (port_text.empty()) return bad("empty port");
    }
  } else {
    const size_t colon = rest.rfind(':');
    host = rest.substr(0, colon);
    if (colon != std::string::npos) {
      port_text = rest.substr(colon + 1);
      if (port_text.empty()) return bad("empty port");
    }
    if (host.find(':') != std::string::npos) return bad("put IPv6 addresses in brackets, e.g. http://[::1]:8642");
  }
  if (host.empty()) return bad("no host");
  uint16_t port = tls ? 443 : 80;
  if (!port_text.empty()) {
    if (port_text.size() > 5 ||
        !std::all_of(port_text.begin(), port_text.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
      return bad("port must be a number");
    }
    const int value = std::stoi(port_text);
    if (value < 1 || value > 65535) return bad("port must be between 1 and 65535");
    port = static_cast<uint16_t>(value);
  }
  return BaseUrl{host, port, tls};
}

}  // namespace unisched::client
