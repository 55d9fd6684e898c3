// The holes found under attack (issue 15), each shown closed against a real
// daemon over real sockets: HTTP details a client gets wrong or an attacker
// uses, connection caps, a descriptor flood while jobs launch, and
// unauthenticated requests that used to write an audit row each.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

int Connect(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// What the server sends on `fd` until it closes the connection or `wait`
// passes without a byte.
std::string ReadUntilClosed(int fd, std::chrono::seconds wait) {
  std::string out;
  char buf[4096];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(wait).count())) <= 0) break;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// One two-CPU node in one pool and one queue, with `server` settings and the
// queue's `queue_policy`.
std::string OneNodeConfig(const std::string& server, const std::string& queue_policy = "{}") {
  return "server: " + server + R"yaml(
pools:
  - {name: cpu, kind: cpu, nodes: [x86-c2m1-hpc-01]}
nodes:
  - {name: x86-c2m1-hpc-01, cpus: 2, memory_mb: 1024}
queues:
  - {name: batch, pool: cpu, policy: )yaml" +
         queue_policy + R"yaml(}
projects:
  - name: default
)yaml";
}

// Sends `request` as it is on a fresh connection; the response as text.
std::string Raw(uint16_t port, const std::string& request, std::chrono::seconds wait = 60s) {
  const int fd = Connect(port);
  if (fd < 0) return "<connect failed>";
  (void)!::write(fd, request.data(), request.size());
  std::string out = ReadUntilClosed(fd, wait);
  ::close(fd);
  return out;
}

std::string StatusLine(const std::string& response) {
  return response.substr(0, response.find("\r\n"));
}

class HttpDetailsTest : public SharedDaemonTest {};

TEST_F(HttpDetailsTest, HeadIsAGetWithoutItsBody) {
  const std::string response = Raw(d().port(), "HEAD /v1/pools HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " +
                                                   d().admin_token() + "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusLine(response), "HTTP/1.1 200 OK") << response;
  const std::string get = d().Call("GET", "/v1/pools").body;
  EXPECT_NE(response.find("Content-Length: " + std::to_string(get.size())), std::string::npos) << response;
  EXPECT_EQ(response.substr(response.find("\r\n\r\n") + 4), "") << "HEAD got a body";
}

TEST_F(HttpDetailsTest, TheBearerSchemeIsCaseInsensitive) {
  const std::string none;  // the header below is sent as it is
  for (const std::string scheme : {"bearer", "BEARER", "Bearer  "}) {
    SCOPED_TRACE(scheme);
    const Reply r = d().Call("GET", "/v1/whoami", "", {{"Authorization", scheme + " " + d().admin_token()}}, &none);
    EXPECT_EQ(r.status, 200) << r.body;
  }
  const Reply wrong = d().Call("GET", "/v1/whoami", "", {{"Authorization", "Basic " + d().admin_token()}}, &none);
  EXPECT_EQ(wrong.status, 401) << wrong.body;
}

TEST_F(HttpDetailsTest, AnHttp11RequestWithoutHostIs400) {
  const std::string response =
      Raw(d().port(), "GET /v1/pools HTTP/1.1\r\nAuthorization: Bearer " + d().admin_token() + "\r\n\r\n");
  EXPECT_EQ(StatusLine(response), "HTTP/1.1 400 Bad Request") << response;
  EXPECT_NE(response.find("Host"), std::string::npos) << response;
  // HTTP/1.0 has no Host requirement.
  const std::string old =
      Raw(d().port(), "GET /v1/pools HTTP/1.0\r\nAuthorization: Bearer " + d().admin_token() + "\r\n\r\n");
  EXPECT_EQ(StatusLine(old), "HTTP/1.0 200 OK") << old;
}

TEST_F(HttpDetailsTest, TransferCodingsOtherThanChunkedAre400AndClose) {
  const int64_t before = d().Call("GET", "/v1/jobs?limit=0").json["total"].get<int64_t>();
  const std::string job = R"({"workload":{"kind":"hpc"},"command":["true"]})";
  const std::string auth = "Authorization: Bearer " + d().admin_token() + "\r\n";
  for (const std::string& framing : std::vector<std::string>{
           "Transfer-Encoding: gzip\r\n", "Transfer-Encoding: gzip, chunked\r\n",
           "Transfer-Encoding: chunked\r\nContent-Length: " + std::to_string(job.size()) + "\r\n"}) {
    SCOPED_TRACE(framing);
    // The connection is closed after the 400: ReadUntilClosed returns at once.
    const std::string response =
        Raw(d().port(), "POST /v1/jobs HTTP/1.1\r\nHost: t\r\n" + auth + framing + "\r\n" + job, 30s);
    EXPECT_EQ(StatusLine(response), "HTTP/1.1 400 Bad Request") << response;
    EXPECT_NE(response.find("malformed_request"), std::string::npos) << response;
  }
  // Chunked alone works.
  char size[16];
  std::snprintf(size, sizeof size, "%zx", job.size());
  const std::string chunked = Raw(d().port(), "POST /v1/jobs HTTP/1.1\r\nHost: t\r\n" + auth +
                                                  "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + size +
                                                  "\r\n" + job + "\r\n0\r\n\r\n");
  EXPECT_EQ(StatusLine(chunked), "HTTP/1.1 201 Created") << chunked;
  EXPECT_EQ(d().Call("GET", "/v1/jobs?limit=0").json["total"].get<int64_t>(), before + 1);
}

TEST(HttpTimeoutTest, AStalledRequestGets408) {
  TestDaemon d;
  d.UseConfigText(OneNodeConfig("{header_timeout_seconds: 2, body_timeout_seconds: 2}"));
  d.Start();
  const std::string auth = "Authorization: Bearer " + d.admin_token() + "\r\n";
  const std::string body_stalled =
      Raw(d.port(), "POST /v1/jobs HTTP/1.1\r\nHost: t\r\n" + auth + "Content-Length: 100\r\n\r\n{\"workload\":");
  EXPECT_EQ(StatusLine(body_stalled), "HTTP/1.1 408 Request Timeout") << body_stalled;
  EXPECT_NE(body_stalled.find("request_timeout"), std::string::npos) << body_stalled;
  const std::string header_stalled = Raw(d.port(), "GET /v1/pools HTTP/1.1\r\nHost: t\r\n");
  EXPECT_EQ(StatusLine(header_stalled), "HTTP/1.1 408 Request Timeout") << header_stalled;
  // A connection that sends nothing is closed without an answer.
  EXPECT_EQ(Raw(d.port(), ""), "");
}

TEST(ConnectionCapTest, ConnectionsBeyondTheCapsAre503) {
  TestDaemon d;
  d.UseConfigText(OneNodeConfig("{max_connections: 12, max_connections_per_client: 6, header_timeout_seconds: 60}"));
  d.Start();
  // The test client's keep-alive connection is one of this address's.
  ASSERT_EQ(d.Call("GET", "/healthz").status, 200);
  std::vector<int> idle;
  for (int i = 0; i < 5; ++i) idle.push_back(Connect(d.port()));
  // Connections are counted when accepted: wait until the daemon has the five.
  std::string refused;
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < until) {
    refused = Raw(d.port(), "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n", 30s);
    if (StatusLine(refused) != "HTTP/1.1 200 OK") break;
  }
  EXPECT_EQ(StatusLine(refused), "HTTP/1.1 503 Service Unavailable") << refused;
  EXPECT_NE(refused.find("too_many_connections"), std::string::npos) << refused;
  EXPECT_NE(refused.find("max_connections_per_client"), std::string::npos) << refused;
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos) << refused;
  for (int fd : idle) ::close(fd);
  idle.clear();
  // Freed: the address is served again.
  std::string served;
  const auto again = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < again) {
    served = Raw(d.port(), "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 30s);
    if (StatusLine(served) == "HTTP/1.1 200 OK") break;
  }
  EXPECT_EQ(StatusLine(served), "HTTP/1.1 200 OK") << served;
  EXPECT_GE(d.Metric(R"(unisched_http_connections_refused_total{limit="per_client"})"), 1);
}

// The attack of issue 15: under a 1,024 open-file limit, more idle
// connections than descriptors while jobs launch. The connection cap keeps
// the reserved descriptors for launches: every job completes.
TEST(DescriptorFloodTest, IdleConnectionsCannotFailJobs) {
  constexpr int kFlood = 1100;
  rlimit own{};
  ::getrlimit(RLIMIT_NOFILE, &own);
  if (own.rlim_max != RLIM_INFINITY && own.rlim_max < kFlood + 200) {
    GTEST_SKIP() << "the test process may open only " << own.rlim_max << " files";
  }
  own.rlim_cur = own.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &own);
  TestDaemon d;
  d.SetOpenFileLimit(1024);
  d.UseConfigText(OneNodeConfig(
      "{max_connections_per_client: 0, header_timeout_seconds: 120, scheduler_tick_seconds: 0.2}", "{max_retries: 0}"));
  d.Start();
  // Two at a time on the node: the launches spread over the flood.
  std::vector<std::string> ids;
  for (int i = 0; i < 16; ++i) {
    ids.push_back(d.Submit({{"queue", "batch"},
                            {"workload", {{"kind", "hpc"}}},
                            {"resources", {{"cpus", 1}, {"memory_mb", 16}}},
                            {"command", {"/bin/sh", "-c", "sleep 0.5"}}}));
  }
  std::vector<int> flood;
  for (int i = 0; i < kFlood; ++i) {
    const int fd = Connect(d.port());
    if (fd >= 0) flood.push_back(fd);
  }
  // Hold the flood while the jobs launch.
  std::this_thread::sleep_for(10s);
  const size_t held = flood.size();
  for (int fd : flood) ::close(fd);
  for (const auto& id : ids) {
    const json job = d.WaitTerminal(id, 120s);
    EXPECT_EQ(job["state"], "COMPLETED") << job.dump();
  }
  EXPECT_GE(held, static_cast<size_t>(kFlood / 2));
  EXPECT_GE(d.Metric(R"(unisched_http_connections_refused_total{limit="total"})"), 1);
}

// Requests without a valid token write no audit record each: they are
// counted, and tallied per address and minute in one record.
TEST(UnauthenticatedAuditTest, RefusedRequestsAreTalliedNotWrittenOneByOne) {
  TestDaemon d;
  d.Start();
  const auto audit_rows = [&d] { return d.Call("GET", "/v1/audit?limit=10000").json["audit"]; };
  const size_t before = audit_rows().size();
  const std::string long_path = "/v1/" + std::string(15000, 'a');
  const std::string no_token;
  const std::string bad_token = "not-a-token";
  constexpr int kEach = 100;
  for (int i = 0; i < kEach; ++i) {
    EXPECT_EQ(d.Call("POST", long_path, "{}", {}, &no_token).status, 401);
    EXPECT_EQ(d.Call("POST", "/v1/jobs", "{}", {}, &bad_token).status, 401);
  }
  EXPECT_EQ(audit_rows().size(), before) << "a refused request wrote a record of its own";
  EXPECT_EQ(d.Metric(R"(unisched_http_unauthenticated_requests_total{reason="missing"})"), kEach);
  EXPECT_EQ(d.Metric(R"(unisched_http_unauthenticated_requests_total{reason="invalid"})"), kEach);
  // A clean stop writes the minute's tally (one record per address and minute).
  d.Stop();
  d.Start();
  int64_t tallied = 0;
  for (const auto& row : audit_rows()) {
    if (row["action"] != "auth_failed") continue;
    EXPECT_EQ(row["actor"], "anonymous");
    EXPECT_EQ(row["target"], "127.0.0.1");
    const std::string result = row["result"];
    ASSERT_EQ(result.rfind("401 x", 0), 0u) << result;
    tallied += std::stoll(result.substr(5));
  }
  EXPECT_EQ(tallied, 2 * kEach);
  // An authenticated call is still audited, its long path cut.
  EXPECT_EQ(d.Call("POST", long_path, std::string("{}")).status, 404);
  const json newest = audit_rows()[0];
  EXPECT_EQ(newest["actor"], "admin") << newest.dump();
  EXPECT_LT(newest["target"].get<std::string>().size(), 600u) << newest.dump();
}

}  // namespace
}  // namespace unisched::testing
