#pragma once
// HTTP as the handlers see it: plain values, no Beast. The server (the only
// place with Beast) turns wire messages into HttpRequest and back, so every
// handler is a function from request to response, testable without a socket.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace unisched::api {

struct HttpRequest {
  std::string method;                          // "GET", "POST", ...
  std::string target;                          // as received: path and query
  std::string path;                            // decoded path, no query
  std::map<std::string, std::string> query;    // decoded query parameters
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string remote;  // peer address, for logs
  // The subject of the client's certificate, verified against the
  // listener's client CA ("" without TLS, without one, or without a CA).
  std::string client_subject;

  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// A body sent while it is produced (Transfer-Encoding: chunked; a close-
// delimited body to an HTTP/1.0 client), for a response that follows
// something live, such as a running job's output. The server asks for the
// next piece on the connection's own thread after each piece is written,
// and again every poll_interval while nothing is new, so Next must not
// block. The connection closes after the last piece.
class BodySource {
 public:
  struct Piece {
    std::string data;   // empty: nothing new yet (unless done)
    bool done = false;  // nothing comes after data
  };
  virtual ~BodySource() = default;
  virtual Piece Next() = 0;
  virtual std::chrono::milliseconds poll_interval() const { return std::chrono::milliseconds(250); }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  std::shared_ptr<BodySource> source;                        // set: the body comes from it, `body` is unused
};

// Must be called exactly once per request, from any thread.
using Respond = std::function<void(HttpResponse)>;
using Handler = std::function<void(HttpRequest, Respond)>;

// {"error": {"code", "message", "field"?}} with the given status.
HttpResponse ErrorResponse(int status, const std::string& code, const std::string& message,
                           const std::string& field = {});

// Splits "a=1&b=x%20y" into decoded pairs; "+" decodes to a space.
std::map<std::string, std::string> ParseQuery(const std::string& query);
std::string PercentDecode(const std::string& text);

}  // namespace unisched::api
