// Fuzz target: the HTTP request parser and the API dispatch behind it. The
// input is the bytes a client sends on one connection. They go over
// loopback TCP to the daemon's own listener (src/http: Beast's request
// parser with the daemon's header and body limits, the framing checks, the
// conversion into an HttpRequest with percent-decoding and query parsing,
// keep-alive, pipelining, 100-continue, error answers) and every request it
// accepts goes to the real Api::Handle (routing, bearer tokens, query
// parameter checks, the endpoints and their body parsers) over a real
// SQLite store. The daemon's live parts the API asks (controller, agent
// hub) are fakes: they are not parsers.
//
// Through a socket rather than by calling the parser: the session that
// drives Beast's parser is internal to server.cc, and the wire is the
// untrusted input. The store holds three tokens the seeds use:
// "admin-token" (platform-admin), "alice-token" (user) and "node-token" (a
// node agent of gpu-train-pool). It keeps what earlier inputs created
// (jobs, users), as a daemon does.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "fuzz_check.h"
#include "unisched/api/api.h"
#include "unisched/api/server.h"
#include "unisched/auth/auth.h"
#include "unisched/config/config.h"
#include "unisched/metrics/metrics.h"
#include "unisched/service/job_service.h"
#include "unisched/store/store.h"

namespace {

using namespace unisched;  // NOLINT(google-build-using-namespace): a test's own file

class Control final : public service::ControlPlane {
 public:
  void JobCommitted(model::Job) override {}
  void ControlJob(model::JobId, JobAction, std::string, std::function<void(Result<model::Job>)> done) override {
    done(Error::Conflict("job_finished", "the fuzz target's controller runs no job"));
  }
  void SetNodeState(std::string, bool, std::string, std::string,
                    std::function<void(Result<service::ClusterView::Node>)> done) override {
    done(Error::NotFound("the fuzz target's controller has no node"));
  }
  std::shared_ptr<const service::ClusterView> View() const override { return view_; }

 private:
  std::shared_ptr<const service::ClusterView> view_ = std::make_shared<service::ClusterView>();
};

// Answers at once: a parked heartbeat would hold the connection open.
class Agents final : public api::AgentPlane {
 public:
  void Heartbeat(const std::string&, executor::Heartbeat,
                 std::function<void(Result<executor::Commands>)> done) override {
    executor::Commands commands;
    commands.node_state = "up";
    done(std::move(commands));
  }
  Result<std::vector<IgnoredResult>> Results(const std::string&, const std::string&,
                                             std::vector<executor::RunResult>) override {
    return std::vector<IgnoredResult>{};
  }
  Result<int64_t> AppendLog(const std::string&, const std::string&, const executor::AttemptRef&, const std::string&,
                            int64_t offset, std::string_view bytes) override {
    return offset + static_cast<int64_t>(bytes.size());
  }
};

// Long enough for a request under ASan on a loaded machine; an answer (or a
// close) that takes longer is a connection the listener would leave hanging.
constexpr int kReplySeconds = 30;

struct Daemon {
  std::string dir;
  config::Config config;
  std::unique_ptr<config::LiveConfig> live_config;
  std::unique_ptr<store::Store> store;
  Control control;
  Agents agents;
  metrics::Metrics metrics;
  FakeClock clock;
  std::unique_ptr<service::JobService> jobs;
  std::unique_ptr<api::Api> api;
  std::unique_ptr<api::HttpServer> server;
  uint16_t port = 0;
};

Daemon* daemon_ = nullptr;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "http_fuzz: %s\n", what.c_str());
  std::abort();
}

void StartDaemon() {
  auto d = std::make_unique<Daemon>();
  auto loaded = config::LoadConfigText(config::EmbeddedDefaultConfig(), "<embedded>");
  if (const auto* errors = std::get_if<std::vector<config::ConfigError>>(&loaded)) {
    Fail("the embedded config does not load: " + errors->front().ToString());
  }
  d->config = std::get<config::Config>(loaded);
  std::string tmpl = (std::filesystem::temp_directory_path() / "unisched-http-fuzz-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) Fail("mkdtemp failed");
  d->dir = tmpl;
  // synchronous=off: the target tests parsing, not durability.
  auto store = store::Store::Open({d->dir + "/db", "off", 64});
  if (!store.ok()) Fail("cannot open the store: " + store.error().message);
  d->store = std::move(store.value());
  Status seeded = d->store->WriteSync([](store::Transaction& t) -> Status {
    for (const store::UserRecord& user : {store::UserRecord{"admin", "platform-admin", {"default"}, {}, "", true},
                                          store::UserRecord{"alice", "user", {"default"}, {}, "", false}}) {
      if (Status s = t.UpsertUser(user); !s.ok()) return s;
    }
    if (Status s = t.InsertToken({auth::HashToken("admin-token"), "admin", "user", "", {}}); !s.ok()) return s;
    if (Status s = t.InsertToken({auth::HashToken("alice-token"), "alice", "user", "", {}}); !s.ok()) return s;
    return t.InsertToken({auth::HashToken("node-token"), "admin", "node", "gpu-train-pool", {}});
  });
  if (!seeded.ok()) Fail("cannot seed the store: " + seeded.error().message);
  d->live_config = std::make_unique<config::LiveConfig>(d->config);
  d->jobs =
      std::make_unique<service::JobService>(*d->live_config, *d->store, d->control, nullptr, d->metrics, d->clock);

  api::ApiContext ctx;
  ctx.config = d->live_config.get();
  ctx.store = d->store.get();
  ctx.control = &d->control;
  ctx.jobs = d->jobs.get();
  ctx.agents = &d->agents;
  ctx.metrics = &d->metrics;
  ctx.clock = &d->clock;
  ctx.read_log = [](const model::Job&, int, int, std::string_view, LogRange range) {
    return range.offset == 0 ? std::string("fuzz\n") : std::string();
  };
  ctx.ready = [] { return true; };
  d->api = std::make_unique<api::Api>(ctx);

  // The daemon's listener settings (daemon.cc), on a free loopback port;
  // one I/O thread, as the machine fuzzes on few cores.
  const auto& s = d->config.server;
  api::ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.threads = 1;
  options.max_body_bytes = s.max_body_bytes;
  options.header_timeout_seconds = s.header_timeout_seconds;
  options.body_timeout_seconds = s.body_timeout_seconds;
  options.idle_timeout_seconds = s.idle_timeout_seconds;
  options.max_connections = s.max_connections;
  options.max_connections_per_client = s.max_connections_per_client;
  api::Api* api = d->api.get();
  auto server = api::StartHttpServer(options, [api](api::HttpRequest request, api::Respond respond) {
    // The daemon's handler is api->Handle itself; the wrapper only watches
    // for a 500, which the API gives when an endpoint threw: an input no
    // check refused cleanly, a bug to look at like a crash.
    api->Handle(std::move(request), [respond = std::move(respond)](api::HttpResponse response) {
      if (response.status == 500) Fail("the API answered 500: " + response.body);
      respond(std::move(response));
    });
  });
  if (!server.ok()) Fail("cannot start the listener: " + server.error().message);
  d->server = std::move(server.value());
  d->port = d->server->port();
  daemon_ = d.release();
}

// At exit (libFuzzer's time limit, the end of a replay): the listener's
// threads are joined before anything they use goes, and the store's files
// are removed. A crash leaves the directory behind, with the evidence.
void StopDaemon() {
  if (!daemon_) return;
  daemon_->server->Stop();
  daemon_->api.reset();
  daemon_->jobs.reset();
  daemon_->store->Close();
  std::error_code ec;
  std::filesystem::remove_all(daemon_->dir, ec);
  delete daemon_;
  daemon_ = nullptr;
}

// Sends `data` on a new connection, closes the sending side (so every
// request the input leaves unfinished ends as a client going away), and
// reads until the listener closes. Returns what it answered.
std::string Exchange(const uint8_t* data, size_t size) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) Fail(std::string("socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(daemon_->port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    Fail(std::string("connect: ") + std::strerror(errno));
  }
  const timeval timeout{kReplySeconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the listener closed early (it refused the request): fine
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string reply;
  char buffer[16384];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      reply.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      Fail("the listener neither answered nor closed within " + std::to_string(kReplySeconds) + " s");
    }
    break;  // closed, or reset after a refusal
  }
  // Close with a reset: no TIME_WAIT per input, so a million inputs do not
  // run out of local ports.
  const linger reset{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  ::close(fd);
  return reply;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // the API logs what it refuses; noise here
  StartDaemon();
  std::atexit(StopDaemon);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string reply = Exchange(data, size);
  // Whatever the listener sends is an HTTP/1.x response.
  FUZZ_CHECK(reply.empty() || reply.rfind("HTTP/1.", 0) == 0);
  return 0;
}
