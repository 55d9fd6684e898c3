// The test harness itself: a daemon a test started dies with the test
// process, however that ends, so a crashed or killed test run leaves no
// daemon behind (it would hold its port and keep running jobs).

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "testing/daemon.h"

namespace unisched::testing {
namespace {

bool Alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  // A zombie (dead, not yet reaped by init) counts as gone.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, name, state;
  stat >> pid_field >> name >> state;
  return state != "Z";
}

TEST(HarnessTest, ADaemonDiesWithTheTestProcessThatStartedIt) {
  char dir_template[] = "/tmp/unisched-harness-XXXXXX";
  const std::string dir = ::mkdtemp(dir_template);
  const std::string pid_file = dir + "/daemon.pid";
  const pid_t test_process = ::fork();
  if (test_process == 0) {
    // A test process that starts a daemon and is then killed outright.
    TestDaemon* daemon = new TestDaemon();  // never destroyed: the process is killed
    daemon->Start();
    std::ofstream(dir + "/state-dir") << daemon->state_dir() << "\n";
    std::ofstream(pid_file) << daemon->pid() << "\n";
    ::pause();
    ::_exit(0);
  }
  pid_t daemon_pid = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (daemon_pid <= 0 && std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(pid_file);
    in >> daemon_pid;
    if (daemon_pid <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(daemon_pid, 0) << "the test process never started its daemon";
  ASSERT_TRUE(Alive(daemon_pid));
  ::kill(test_process, SIGKILL);
  ::waitpid(test_process, nullptr, 0);
  while (Alive(daemon_pid) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(Alive(daemon_pid)) << "daemon " << daemon_pid << " outlived the test process that started it";
  std::string state_dir;
  std::ifstream(dir + "/state-dir") >> state_dir;
  if (!state_dir.empty()) std::filesystem::remove_all(state_dir);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace unisched::testing
