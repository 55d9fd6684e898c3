#pragma once
// A lean closed-loop HTTP/1.1 load generator (what wrk does, for one fixed
// request): many keep-alive connections on one epoll thread, each sending the
// same request again as soon as the previous response has arrived. It keeps
// the load generator's own CPU small, since it shares the machine's cores
// with the daemon it measures (the Beast-based HttpClient, one thread per
// connection, took ~15% of the two cores at 7,000 requests/s).

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace unisched::bench {

struct ClosedLoopResult {
  std::vector<double> latencies_ms;       // one per response with the expected status
  std::map<std::string, int64_t> errors;  // "http_503", "connect_failed", "closed", ...
  std::string first_error;                // the first error, with its response body's start
};

// Runs `connections` connections to host:port (a numeric IPv4 or IPv6
// address) on the calling thread from `start` until `deadline`. `request` is
// the complete request (headers and body); responses must carry
// Content-Length (Beast's do). A connection the server closes is reopened.
ClosedLoopResult RunClosedLoop(const std::string& host, uint16_t port, const std::string& request, int connections,
                               int expected_status, std::chrono::steady_clock::time_point deadline);

// The bytes of a POST with a JSON body, a bearer token and keep-alive.
std::string JsonPost(const std::string& host, uint16_t port, const std::string& target, const std::string& token,
                     const std::string& body);

}  // namespace unisched::bench
