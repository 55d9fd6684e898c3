// Test processes of `unisched agent` (agent_process.h).

#include "testing/agent_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "unisched/containment/containment.h"

namespace unisched::testing {
namespace {

namespace fs = std::filesystem;

// Removes the attempt cgroups (`<job>-<attempt>-<supervisor pid>`) of the
// supervisors `killed`, with the executor's own sweep for a dead owner's
// groups (Containment::Find, KillAllAndDestroy): nobody else will, the
// machine being "dead" for good, and the test host should not keep them.
// The names are listed from one hierarchy; Find opens every one.
void RemoveAttemptGroupsOf(const std::vector<pid_t>& killed) {
  const containment::Options options;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options.cgroup_root + "/pids/" + options.parent, ec)) {
    const std::string name = entry.path().filename();
    const size_t dash = name.find_last_of('-');
    if (dash == std::string::npos || name.rfind("pool-", 0) == 0) continue;
    const std::string suffix = name.substr(dash + 1);
    if (suffix.empty() || suffix.find_first_not_of("0123456789") != std::string::npos) continue;
    if (std::find(killed.begin(), killed.end(), std::stoi(suffix)) == killed.end()) continue;
    if (auto groups = containment::Containment::Find(name, options)) (void)groups->KillAllAndDestroy();
  }
}

}  // namespace

void KillEverythingUnder(const std::string& dir) {
  std::vector<pid_t> killed;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (pid == ::getpid()) continue;
    // Not an istreambuf_iterator: a process that exits meanwhile fails the
    // read (ESRCH), which libstdc++ throws from there; this way it reads as
    // empty.
    std::ifstream cmdline(entry.path() / "cmdline");
    std::ostringstream text;
    text << cmdline.rdbuf();
    const std::string args = text.str();
    std::error_code ec;
    const std::string cwd = fs::read_symlink(entry.path() / "cwd", ec).string();
    if (args.find(dir) != std::string::npos || (!ec && cwd.rfind(dir, 0) == 0)) {
      ::kill(pid, SIGKILL);
      killed.push_back(pid);
    }
  }
  RemoveAttemptGroupsOf(killed);
}

pid_t SpawnAgent(const std::string& server, const std::string& token_file, const std::string& node,
                 const std::string& pool, const std::string& dir, const std::vector<std::string>& extra,
                 const std::string& path, const std::string& netns) {
  const std::string netns_path = netns.empty() ? std::string() : "/var/run/netns/" + netns;
  std::vector<std::string> args = {UNISCHED_BINARY, "agent", "--server",    server, "--token-file", token_file,
                                   "--node",        node,    "--pool",      pool,   "--state-dir",  dir,
                                   "--cpus",        "2",     "--memory-mb", "1024"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log = dir + ".log";
  const pid_t test_process = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Dies with the test process, however it ends (a crash, a timeout's
    // SIGKILL): no daemon or agent outlives its test. (The signal follows
    // the forking thread; tests start these from their main thread.)
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != test_process) ::_exit(127);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    if (!path.empty()) ::setenv("PATH", path.c_str(), 1);
    if (!netns_path.empty()) {
      const int ns = ::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
      if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0 || ::unshare(CLONE_NEWUTS) != 0 ||
          ::sethostname(node.data(), node.size()) != 0) {
        ::_exit(126);
      }
    }
    ::execv(UNISCHED_BINARY, argv.data());
    ::_exit(127);
  }
  return pid;
}

AgentFleet::AgentFleet(TestDaemon& daemon, const std::string& pool, const std::vector<std::string>& nodes,
                       const std::vector<std::string>& netns, const std::string& server)
    : state_dir_(daemon.state_dir()) {
  const Reply token = daemon.Call("POST", "/v1/node-tokens", nlohmann::json{{"pool", pool}});
  EXPECT_EQ(token.status, 201) << token.body;
  token_file_ = state_dir_ + "/node-" + pool + ".token";
  std::ofstream(token_file_) << token.json.value("token", "") << "\n";
  server_ = server.empty() ? daemon.url() : server;
  pool_ = pool;
  for (size_t i = 0; i < nodes.size(); ++i) {
    netns_[nodes[i]] = i < netns.size() ? netns[i] : std::string();
    agents_[nodes[i]] = SpawnAgent(server_, token_file_, nodes[i], pool, Dir(nodes[i]), {}, {}, netns_[nodes[i]]);
  }
}

void AgentFleet::Restart(const std::string& node) {
  ::kill(agents_.at(node), SIGKILL);
  ::waitpid(agents_.at(node), nullptr, 0);
  agents_[node] = SpawnAgent(server_, token_file_, node, pool_, Dir(node), {}, {}, netns_[node]);
}

AgentFleet::~AgentFleet() {
  for (auto& [node, pid] : agents_) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    KillEverythingUnder(Dir(node));
  }
}

}  // namespace unisched::testing
