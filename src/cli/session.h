#pragma once
// One connection to the daemon for a client command (cli.cc and the
// commands in files of their own), and the body printer they share.

#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "cli/args.h"
#include "cli/format.h"
#include "unisched/client/http_client.h"

namespace unisched::cli {

inline void PrintBody(const std::string& body) {
  std::cout << body;
  if (body.empty() || body.back() != '\n') std::cout << "\n";
}

// A string field of a JSON object ("" when absent or not a string).
inline std::string StringField(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return {};
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

inline Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::BadRequest("unreadable_file", "cannot read token file " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// One connection to the daemon. Each call prints its own failure (to
// stderr) and returns nullopt, so commands only handle the good path.
class Session {
 public:
  Session(ConnectionSettings settings, std::string host, uint16_t port, client::TlsOptions tls)
      : settings_(std::move(settings)), client_(std::move(host), port, std::move(tls)) {
    if (!settings_.token.empty()) client_.SetBearerToken(settings_.token);
  }

  std::optional<client::ClientResponse> Call(const std::string& method, const std::string& target,
                                             const std::string& body = {},
                                             const std::map<std::string, std::string>& headers = {}) {
    return Succeeded(Exchange(method, target, body, headers));
  }

  // The answer whatever its status, for a command that handles a refusal
  // itself; nullopt (reported) only when the daemon could not be reached.
  std::optional<client::ClientResponse> Exchange(const std::string& method, const std::string& target,
                                                 const std::string& body = {},
                                                 const std::map<std::string, std::string>& headers = {}) {
    return Reached(client_.Request(method, target, body, headers));
  }

  // Prints a refusal (a response outside 2xx) and a hint for its status.
  static void PrintRefusal(const client::ClientResponse& response) {
    std::cerr << FormatApiError(response.status, response.body) << "\n";
    if (std::string hint = HintForStatus(response.status); !hint.empty()) std::cerr << hint << "\n";
  }

  // A GET whose body is handed to on_body as it arrives (HttpClient::Follow);
  // the response's status and headers, or nullopt after printing why not.
  std::optional<client::ClientResponse> Follow(const std::string& target,
                                               const std::function<bool(std::string_view)>& on_body) {
    return Succeeded(Reached(client_.Follow(target, on_body)));
  }

  // Call, then parse the body as JSON; a body that is not JSON is an error.
  std::optional<nlohmann::json> CallJson(const std::string& method, const std::string& target,
                                         const std::string& body = {},
                                         const std::map<std::string, std::string>& headers = {},
                                         std::string* raw = nullptr) {
    auto response = Call(method, target, body, headers);
    if (!response) return std::nullopt;
    nlohmann::json parsed = nlohmann::json::parse(response->body, nullptr, false);
    if (parsed.is_discarded()) {
      std::cerr << "error: the daemon at " << settings_.url << " answered " << method << " " << target
                << " with a body that is not JSON\n";
      return std::nullopt;
    }
    if (raw) *raw = std::move(response->body);
    return parsed;
  }

 private:
  // The response, or nullopt after printing why the daemon was not reached.
  std::optional<client::ClientResponse> Reached(Result<client::ClientResponse> response) const {
    if (!response.ok()) {
      std::cerr << FormatConnectionError(settings_.url, response.error().code, response.error().message) << "\n";
      return std::nullopt;
    }
    return std::move(*response);
  }
  // A 2xx response, or nullopt after printing the refusal and a hint.
  static std::optional<client::ClientResponse> Succeeded(std::optional<client::ClientResponse> response) {
    if (!response) return std::nullopt;
    if (response->status < 200 || response->status >= 300) {
      PrintRefusal(*response);
      return std::nullopt;
    }
    return response;
  }

  ConnectionSettings settings_;
  client::HttpClient client_;
};

// What a command calls to print a usage error; it returns the exit status.
using UsageFailureFn = std::function<int(const std::string&)>;

// GET a resource and print it as a table (or the raw JSON with --json);
// the body, or nullopt when the call failed (already reported).
inline std::optional<nlohmann::json> Show(Session& session, const ParsedArgs& args, const std::string& target,
                                          const std::function<std::string(const nlohmann::json&)>& format) {
  std::string raw;
  auto body = session.CallJson("GET", target, {}, {}, &raw);
  if (!body) return std::nullopt;
  if (args.Has("json")) {
    PrintBody(raw);
  } else {
    std::cout << format(*body);
  }
  return body;
}

inline int RunShow(Session& session, const ParsedArgs& args, const std::string& target,
                   std::string (*format)(const nlohmann::json&)) {
  return Show(session, args, target, format) ? 0 : 1;
}

}  // namespace unisched::cli
