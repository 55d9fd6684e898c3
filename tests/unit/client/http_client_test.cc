// The client's URL parsing and its transport errors (no server needed).

#include "unisched/client/http_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace unisched::client {
namespace {

TEST(ParseBaseUrlTest, AcceptsTheUsualForms) {
  struct Case {
    std::string url;
    std::string host;
    uint16_t port;
  };
  const Case cases[] = {
      {"http://127.0.0.1:8642", "127.0.0.1", 8642},
      {"http://127.0.0.1:8642/", "127.0.0.1", 8642},
      {"HTTP://localhost:1", "localhost", 1},
      {"127.0.0.1:8642", "127.0.0.1", 8642},
      {"http://example.org", "example.org", 80},
      {"http://[::1]:8642", "::1", 8642},
      {"http://[::1]", "::1", 80},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.url);
    auto r = ParseBaseUrl(c.url);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->first, c.host);
    EXPECT_EQ(r->second, c.port);
  }
}

TEST(ParseBaseUrlTest, RejectsWithAReason) {
  struct Case {
    std::string url;
    std::string reason;
  };
  const Case cases[] = {
      {"", "no host"},
      {"http://", "no host"},
      {"https://127.0.0.1:8642", "https"},
      {"ftp://x:1", "unsupported scheme"},
      {"http://127.0.0.1:8642/v1", "no path"},
      {"http://127.0.0.1:", "empty port"},
      {"http://127.0.0.1:abc", "number"},
      {"http://127.0.0.1:0", "between 1 and 65535"},
      {"http://127.0.0.1:70000", "between 1 and 65535"},
      {"http://::1:8642", "brackets"},
      {"http://[::1", "unterminated"},
      {"http://:8642", "no host"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.url);
    auto r = ParseBaseUrl(c.url);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, "bad_url");
    EXPECT_NE(r.error().message.find(c.reason), std::string::npos) << r.error().message;
  }
}

TEST(HttpClientTest, ConnectionRefusedIsAnError) {
  // Bind a port and close it again: nothing listens there afterwards.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const uint16_t port = ntohs(addr.sin_port);
  close(fd);

  HttpClient c("127.0.0.1", port);
  auto r = c.Request("GET", "/healthz");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "connection_failed");
  EXPECT_NE(r.error().message.find("127.0.0.1:" + std::to_string(port)), std::string::npos);
}

TEST(HttpClientTest, SilentServerTimesOut) {
  // A listening socket nobody accepts from: the connect succeeds (backlog),
  // the answer never comes.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);

  HttpClient c("127.0.0.1", ntohs(addr.sin_port));
  c.SetTimeout(std::chrono::milliseconds(200));
  auto r = c.Request("GET", "/healthz");
  close(fd);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "timeout");
}

}  // namespace
}  // namespace unisched::client

namespace unisched::client {
namespace {

TEST(ParseUrlTest, HttpsIsTlsOnPort443UnlessGiven) {
  auto secure = ParseUrl("https://scheduler.example.org");
  ASSERT_TRUE(secure.ok()) << secure.error().message;
  EXPECT_TRUE(secure->tls);
  EXPECT_EQ(secure->port, 443);
  auto with_port = ParseUrl("HTTPS://[::1]:8642/");
  ASSERT_TRUE(with_port.ok());
  EXPECT_EQ(with_port->host, "::1");
  EXPECT_EQ(with_port->port, 8642);
  auto plain = ParseUrl("127.0.0.1:8642");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tls);
  EXPECT_FALSE(ParseUrl("ftp://x").ok());
}

}  // namespace
}  // namespace unisched::client
