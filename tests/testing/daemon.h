#pragma once
// A real unisched daemon for integration tests: started as a child process on
// a free loopback port with a fresh state directory, driven over real HTTP.

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "unisched/client/http_client.h"

namespace unisched::testing {

struct Reply {
  int status = 0;
  nlohmann::json json;  // null when the body is not JSON
  std::string body;
  std::map<std::string, std::string> headers;
};

class TestDaemon {
 public:
  // config_path: empty = config/unisched.yaml of the source tree.
  explicit TestDaemon(std::string config_path = {});
  ~TestDaemon();  // SIGKILL if still running, then removes the state directory

  // Runs the daemon on this YAML text instead (before Start): written into
  // the state directory, removed with it.
  void UseConfigText(const std::string& yaml);
  // Adds to the daemon's environment (before Start).
  void SetEnv(const std::string& name, const std::string& value) { env_[name] = value; }
  // Starts the daemon with this open-file limit, soft and hard (before Start).
  void SetOpenFileLimit(uint64_t limit) { open_file_limit_ = limit; }
  // The CA that signed an https:// daemon's certificate (before Start).
  void SetCaFile(std::string file) { ca_file_ = std::move(file); }
  // Listens on this loopback port instead of a free one (before Start): a
  // replica that executes itself again comes back on it.
  void SetPort(uint16_t port) { fixed_port_ = port; }
  // Further arguments of `unisched server` at the next Start (e.g.
  // --apply-config); cleared with an empty list.
  void SetServerArgs(std::vector<std::string> args) { server_args_ = std::move(args); }
  // Starts the daemon and waits until /readyz answers 200. Keeps the state dir.
  void Start();
  // Starts it and waits only for /healthz: a replica that stands by never
  // becomes ready (docs/replicas.md).
  void StartStandby();
  // SIGTERM and wait.
  void Stop();
  // SIGKILL, no clean-up: the crash case.
  void Kill9();
  bool Running() const { return pid_ > 0; }
  // The daemon's process (its children include the supervisor hosts); -1 when stopped.
  pid_t pid() const { return pid_; }

  const std::string& state_dir() const { return state_dir_; }
  const std::string& admin_token() const { return admin_token_; }
  const std::string& url() const { return url_; }
  uint16_t port() const { return port_; }

  // A request with the admin token (or `token` when given; "" sends none).
  Reply Call(const std::string& method, const std::string& target, const std::string& body = {},
             std::map<std::string, std::string> headers = {}, const std::string* token = nullptr);
  Reply Call(const std::string& method, const std::string& target, const nlohmann::json& body);
  // POST /v1/jobs, expecting 201; returns the job id.
  std::string Submit(const nlohmann::json& job);
  // Polls the job until it reaches a terminal state (or the deadline); returns it.
  nlohmann::json WaitTerminal(const std::string& id, std::chrono::seconds deadline = std::chrono::seconds(60));
  // Polls the job until `done` holds of it (or the deadline); returns it as last seen.
  nlohmann::json WaitJob(const std::string& id, const std::function<bool(const nlohmann::json&)>& done,
                         std::chrono::seconds deadline = std::chrono::seconds(30));
  // Polls GET /v1/nodes until every node is `state` (or the deadline).
  bool WaitNodes(const std::string& state, std::chrono::seconds deadline = std::chrono::seconds(60));
  // The value of one series of /metrics, named with its labels as exposed
  // (`name{label="value"}`); 0 when absent.
  double Metric(const std::string& series);
  // Creates a user with a token; returns the token.
  std::string CreateUser(const std::string& name, const std::string& role, const std::vector<std::string>& projects,
                         const std::vector<std::string>& queues = {});
  // Runs the unisched binary with args and env additions; returns exit code and stdout.
  struct CliResult {
    int exit_code = -1;
    std::string out;
    std::string err;
  };
  // A run longer than `limit` (when not zero) is killed by SIGALRM
  // (exit_code 128 + 14): for commands that should stop on their own.
  CliResult RunCli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
                   std::chrono::seconds limit = std::chrono::seconds(0)) const;

 private:
  std::string config_path_;
  std::map<std::string, std::string> env_;
  std::string state_dir_;
  std::string admin_token_;
  std::string url_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
  uint64_t open_file_limit_ = 0;  // 0: inherited
  uint16_t fixed_port_ = 0;       // 0: a free one
  std::vector<std::string> server_args_;
  void StartProcess(const std::string& wait_for);
  std::string ca_file_;
  std::unique_ptr<client::HttpClient> client_;
};

bool IsTerminalState(const std::string& state);

// A file's whole text ("" when it cannot be read).
std::string ReadFile(const std::string& path);

// Every regular file under `root` that holds one of `values`, as "<path>
// holds <value>" (the secrets' leak searches).
std::vector<std::string> FilesHolding(const std::string& root, const std::vector<std::string>& values);

// A batch job of one CPU and 128 MB in `queue`, running `script` with /bin/sh -c.
nlohmann::json ShellJob(const std::string& queue, const std::string& script);

// The value of the series `name` in a /metrics text (labels included as
// printed, e.g. unisched_config_version{role="current"}); -1 when absent.
double Series(const std::string& metrics_text, const std::string& name);

// A loopback TCP port nobody listens on at this moment.
uint16_t FreeLoopbackPort();

// A fixture whose tests share one daemon (started once per test suite; ctest
// runs each test in its own process, so usually one daemon per test).
class SharedDaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new TestDaemon();
    daemon_->Start();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static TestDaemon& d() { return *daemon_; }

 private:
  static inline TestDaemon* daemon_ = nullptr;
};

}  // namespace unisched::testing
