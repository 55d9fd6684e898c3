#include "testing/daemon.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace unisched::testing {
namespace {

namespace fs = std::filesystem;

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string ReadFd(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

}  // namespace

double Series(const std::string& metrics_text, const std::string& name) {
  const size_t at = metrics_text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(metrics_text.substr(at + name.size() + 2));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> FilesHolding(const std::string& root, const std::vector<std::string>& values) {
  namespace fs = std::filesystem;
  std::vector<std::string> hits;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (!it->is_regular_file(ec)) continue;
    const std::string content = ReadFile(it->path().string());
    for (const auto& v : values) {
      if (content.find(v) != std::string::npos) hits.push_back(it->path().string() + " holds " + v);
    }
  }
  return hits;
}

nlohmann::json ShellJob(const std::string& queue, const std::string& script) {
  return {{"queue", queue},
          {"workload", {{"kind", "hpc"}}},
          {"resources", {{"cpus", 1}, {"memory_mb", 128}}},
          {"command", {"/bin/sh", "-c", script}}};
}

bool IsTerminalState(const std::string& state) {
  return state == "COMPLETED" || state == "FAILED" || state == "CANCELLED" || state == "TIMEOUT" ||
         state == "NODE_FAIL";
}

TestDaemon::TestDaemon(std::string config_path)
    : config_path_(config_path.empty() ? std::string(UNISCHED_SOURCE_DIR) + "/config/unisched.yaml"
                                       : std::move(config_path)) {
  char tmpl[] = "/tmp/unisched-it-XXXXXX";
  state_dir_ = ::mkdtemp(tmpl);
  ::chmod(state_dir_.c_str(), 0711);
}

void TestDaemon::UseConfigText(const std::string& yaml) {
  config_path_ = state_dir_ + "/test-config.yaml";
  std::ofstream(config_path_) << yaml;
}

TestDaemon::~TestDaemon() {
  if (pid_ > 0) Kill9();
  std::error_code ec;
  // The attempts' control files on the tmpfs (docs/execution.md), which a
  // daemon killed mid-run leaves behind; runtime-dir says where they are.
  std::string runtime;
  if (std::ifstream in(state_dir_ + "/runtime-dir"); in && std::getline(in, runtime) && !runtime.empty()) {
    fs::remove_all(fs::path(runtime).parent_path(), ec);
  }
  fs::remove_all(state_dir_, ec);
}

void TestDaemon::Start() {
  StartProcess("/readyz");
}

void TestDaemon::StartStandby() {
  StartProcess("/healthz");
}

void TestDaemon::StartProcess(const std::string& wait_for) {
  std::error_code ec;
  const std::string listen = "127.0.0.1:" + std::to_string(fixed_port_);
  fs::remove(state_dir_ + "/endpoint", ec);
  const std::string log = state_dir_ + "/daemon.log";
  const pid_t test_process = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    // Dies with the test process, however it ends (a crash, a timeout's
    // SIGKILL): no daemon or agent outlives its test. (The signal follows
    // the forking thread; tests start these from their main thread.)
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != test_process) ::_exit(127);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    for (const auto& [k, v] : env_) ::setenv(k.c_str(), v.c_str(), 1);
    if (open_file_limit_ > 0) {
      const rlimit limit{open_file_limit_, open_file_limit_};
      ::setrlimit(RLIMIT_NOFILE, &limit);
    }
    std::vector<std::string> words = {UNISCHED_BINARY, "server",       "--config",    config_path_,
                                      "--listen",      listen.c_str(), "--state-dir", state_dir_};
    words.insert(words.end(), server_args_.begin(), server_args_.end());
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    ::execv(UNISCHED_BINARY, argv.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(state_dir_ + "/endpoint")) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      FAIL() << "daemon exited during start-up; log:\n" << ReadFile(log);
    }
    if (std::chrono::steady_clock::now() > deadline) FAIL() << "daemon did not start; log:\n" << ReadFile(log);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  url_ = Trim(ReadFile(state_dir_ + "/endpoint"));
  port_ = static_cast<uint16_t>(std::stoi(url_.substr(url_.rfind(':') + 1)));
  auto env_token = env_.find("UNISCHED_ADMIN_TOKEN");
  admin_token_ = env_token != env_.end() ? env_token->second : Trim(ReadFile(state_dir_ + "/admin.token"));
  client_ = std::make_unique<client::HttpClient>("127.0.0.1", port_,
                                                 client::TlsOptions{url_.rfind("https://", 0) == 0, ca_file_, "", ""});
  while (Call("GET", wait_for).status != 200) {
    if (std::chrono::steady_clock::now() > deadline) FAIL() << "daemon never answered " << wait_for << " with 200";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

uint16_t FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

void TestDaemon::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  client_.reset();
}

void TestDaemon::Kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  client_.reset();
}

Reply TestDaemon::Call(const std::string& method, const std::string& target, const std::string& body,
                       std::map<std::string, std::string> headers, const std::string* token) {
  Reply reply;
  if (!client_) return reply;
  const std::string& bearer = token ? *token : admin_token_;
  if (!bearer.empty()) headers["Authorization"] = "Bearer " + bearer;
  client_->SetBearerToken("");
  auto r = client_->Request(method, target, body, headers);
  if (!r.ok()) {
    ADD_FAILURE() << method << " " << target << ": " << r.error().message;
    return reply;
  }
  reply.status = r->status;
  reply.body = r->body;
  reply.headers = r->headers;
  reply.json = nlohmann::json::parse(r->body, nullptr, false);
  if (reply.json.is_discarded()) reply.json = nullptr;
  return reply;
}

Reply TestDaemon::Call(const std::string& method, const std::string& target, const nlohmann::json& body) {
  return Call(method, target, body.dump());
}

std::string TestDaemon::Submit(const nlohmann::json& job) {
  Reply r = Call("POST", "/v1/jobs", job);
  EXPECT_EQ(r.status, 201) << r.body;
  if (r.status != 201) return "";
  return r.json["id"].get<std::string>();
}

nlohmann::json TestDaemon::WaitTerminal(const std::string& id, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  nlohmann::json job;
  auto pause = std::chrono::milliseconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    Reply r = Call("GET", "/v1/jobs/" + id);
    if (r.status == 200) {
      job = r.json;
      if (IsTerminalState(job["state"].get<std::string>())) return job;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
  ADD_FAILURE() << "job " << id << " did not end in time; last seen: " << job.dump();
  return job;
}

nlohmann::json TestDaemon::WaitJob(const std::string& id, const std::function<bool(const nlohmann::json&)>& done,
                                   std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  nlohmann::json job;
  while (std::chrono::steady_clock::now() < deadline) {
    job = Call("GET", "/v1/jobs/" + id).json;
    if (done(job)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return job;
}

double TestDaemon::Metric(const std::string& series) {
  const std::string text = Call("GET", "/metrics").body;
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return 0;
  return std::stod(text.substr(at + series.size() + 2));
}

bool TestDaemon::WaitNodes(const std::string& state, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    const nlohmann::json nodes = Call("GET", "/v1/nodes").json;
    bool all = nodes.contains("nodes") && !nodes["nodes"].empty();
    for (const auto& n : nodes.value("nodes", nlohmann::json::array())) all = all && n.value("state", "") == state;
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::string TestDaemon::CreateUser(const std::string& name, const std::string& role,
                                   const std::vector<std::string>& projects, const std::vector<std::string>& queues) {
  nlohmann::json body = {{"name", name}, {"role", role}, {"projects", projects}};
  if (!queues.empty()) body["queues"] = queues;
  Reply u = Call("POST", "/v1/users", body);
  EXPECT_EQ(u.status, 201) << u.body;
  Reply t = Call("POST", "/v1/users/" + name + "/tokens", std::string());
  EXPECT_EQ(t.status, 201) << t.body;
  return t.json.value("token", "");
}

TestDaemon::CliResult TestDaemon::RunCli(const std::vector<std::string>& args,
                                         const std::map<std::string, std::string>& env,
                                         std::chrono::seconds limit) const {
  int out_pipe[2], err_pipe[2];
  if (::pipe(out_pipe) != 0 || ::pipe(err_pipe) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    ::setenv("UNISCHED_URL", url_.c_str(), 1);
    ::setenv("UNISCHED_TOKEN", admin_token_.c_str(), 1);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    if (limit.count() > 0) ::alarm(static_cast<unsigned>(limit.count()));  // kept across execv
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(UNISCHED_BINARY));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(UNISCHED_BINARY, argv.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  CliResult result;
  std::thread err_reader([&] { result.err = ReadFd(err_pipe[0]); });
  result.out = ReadFd(out_pipe[0]);
  err_reader.join();
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace unisched::testing
