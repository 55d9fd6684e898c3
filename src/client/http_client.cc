// The synchronous HTTP/1.1 client. Each operation is started asynchronously
// on a private io_context and that context is run until the operation is
// done: that is how Beast's tcp_stream gives a synchronous caller a deadline.

#include "unisched/client/http_client.h"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
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

}  // namespace

struct HttpClient::Impl {
  Impl(std::string h, uint16_t p) : host(std::move(h)), port(p) {}

  std::string host;
  uint16_t port;
  std::string bearer;
  std::chrono::milliseconds timeout{30000};

  asio::io_context ioc;
  std::optional<beast::tcp_stream> stream;  // engaged while connected
  beast::flat_buffer buffer;

  std::string Where() const { return host + ":" + std::to_string(port); }

  // Runs the io_context until every started operation has completed.
  void Run() {
    ioc.restart();
    ioc.run();
  }

  void Disconnect() {
    if (stream) {
      beast::error_code ignored;
      stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream->close();
    }
    stream.reset();
    buffer.clear();
  }

  beast::error_code Connect(Clock::time_point deadline) {
    Disconnect();
    beast::error_code ec;
    tcp::resolver resolver(ioc);
    auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec) return ec;
    stream.emplace(ioc);
    stream->expires_at(deadline);
    stream->async_connect(results, [&ec](beast::error_code e, const tcp::endpoint&) { ec = e; });
    Run();
    if (ec) {
      stream.reset();
      return ec;
    }
    beast::error_code ignored;
    stream->socket().set_option(tcp::no_delay(true), ignored);
    return {};
  }

  // Writes req and reads the response. *got_some tells whether any byte of
  // a response arrived (then a resend would not be safe).
  beast::error_code Exchange(http::request<http::string_body>& req, Clock::time_point deadline,
                             http::response_parser<http::string_body>& parser, bool* got_some) {
    beast::error_code ec;
    *got_some = false;
    stream->expires_at(deadline);
    http::async_write(*stream, req, [&ec](beast::error_code e, std::size_t) { ec = e; });
    Run();
    if (ec) return ec;
    stream->expires_at(deadline);
    http::async_read(*stream, buffer, parser, [&ec](beast::error_code e, std::size_t) { ec = e; });
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
      return TransportError("connection_failed", "cannot connect to " + Where() + ": " + ec.message() +
                                                     " (is the daemon running? check UNISCHED_URL)");
    }
    return TransportError("transport_error", std::string(stage) + " " + Where() + ": " + ec.message());
  }
};

HttpClient::HttpClient(std::string host, uint16_t port) : impl_(std::make_unique<Impl>(std::move(host), port)) {}
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
    const bool reused = d.stream.has_value();
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
  ClientResponse out;
  out.status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    auto [it, inserted] = out.headers.emplace(Lower(std::string(field.name_string())), std::string(field.value()));
    if (!inserted) it->second += ", " + std::string(field.value());
  }
  out.body = std::move(res.body());
  if (!res.keep_alive()) d.Disconnect();
  return out;
}

Result<std::pair<std::string, uint16_t>> ParseBaseUrl(const std::string& url) {
  auto bad = [&url](const std::string& why) {
    return Error::BadRequest("bad_url",
                             "invalid server URL \"" + url + "\": " + why + " (expected e.g. http://127.0.0.1:8642)");
  };
  std::string rest = url;
  const std::string lower = Lower(url);
  const size_t scheme_end = lower.find("://");
  if (scheme_end != std::string::npos) {
    const std::string scheme = lower.substr(0, scheme_end);
    if (scheme == "https") return bad("https is not supported yet; use http://");
    if (scheme != "http") return bad("unsupported scheme \"" + scheme + "\"");
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
  uint16_t port = 80;
  if (!port_text.empty()) {
    if (port_text.size() > 5 ||
        !std::all_of(port_text.begin(), port_text.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
      return bad("port must be a number");
    }
    const int value = std::stoi(port_text);
    if (value < 1 || value > 65535) return bad("port must be between 1 and 65535");
    port = static_cast<uint16_t>(value);
  }
  return std::make_pair(host, port);
}

}  // namespace unisched::client
