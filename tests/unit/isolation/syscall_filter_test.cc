// The sandbox's system call filter (src/isolation/syscall_filter.cc): every
// call of its table tried by tests/probe/syscall_probe.cc as root, with
// every capability, once under the filter and once without. Under it, each
// answers the table's errno; without it, none answers that, so the refusal
// is the filter's (not a missing capability's) and each assertion fails
// when the filter does not refuse that call. Needs root (the calls a
// capability gates must get past that gate in the control run).

#include "unisched/isolation/syscall_filter.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace unisched::isolation {
namespace {

// NAME -> "ok", "errno N", "absent", "unknown", "died".
std::map<std::string, std::string> Probe(bool filtered, const std::vector<std::string>& names) {
  const char* step = "";
  EXPECT_EQ(PrepareSyscallFilter(&step), 0) << step;
  std::vector<std::string> args = {UNISCHED_SYSCALL_PROBE};
  args.insert(args.end(), names.begin(), names.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2];
  EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    if (filtered && (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || InstallSyscallFilter() != 0)) ::_exit(3);
    ::execv(argv[0], argv.data());
    ::_exit(4);
  }
  ::close(out[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "probe status " << status << ": " << text;
  std::map<std::string, std::string> results;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t space = line.find(' ');
    if (space != std::string::npos) results[line.substr(0, space)] = line.substr(space + 1);
  }
  return results;
}

class SyscallFilterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the unfiltered control run needs root's capabilities";
  }
};

TEST_F(SyscallFilterTest, EveryCallOfTheTableIsRefusedByTheFilterItself) {
  std::vector<std::string> names;
  for (const RefusedCall& call : RefusedCalls()) names.push_back(call.name);
  const auto filtered = Probe(true, names);
  const auto control = Probe(false, names);
  int tried = 0;
  for (const RefusedCall& call : RefusedCalls()) {
    const std::string refused = "errno " + std::to_string(call.error);
    ASSERT_TRUE(filtered.count(call.name)) << call.name << " missing from the probe's answer";
    const std::string& got = filtered.at(call.name);
    EXPECT_NE(got, "unknown") << "tests/probe/syscall_probe.cc has no recipe for " << call.name;
    if (got == "absent") continue;  // not a call of this architecture
    ++tried;
    EXPECT_EQ(got, refused) << call.name << " under the filter";
    EXPECT_NE(control.at(call.name), refused) << call.name << " without the filter: the probe cannot tell";
  }
  EXPECT_GE(tried, 50);  // x86-64 lacks only the few obsolete ones
}

TEST_F(SyscallFilterTest, OrdinaryCallsStillWork) {
  // fork (a clone without namespace flags), a thread (clone3 answers ENOSYS
  // and libc falls back to clone), unshare without namespace flags.
  const auto filtered = Probe(true, {"fork", "thread", "unshare-files"});
  EXPECT_EQ(filtered.at("fork"), "ok");
  EXPECT_EQ(filtered.at("thread"), "ok");
  EXPECT_EQ(filtered.at("unshare-files"), "ok");
}

TEST_F(SyscallFilterTest, CallsOfAnotherAbiKillTheProcess) {
#if defined(__x86_64__)
  const auto control = Probe(false, {"i386-getpid", "x32-getpid"});
  const auto filtered = Probe(true, {"i386-getpid", "x32-getpid"});
  // A kernel without 32-bit emulation refuses int 0x80 itself (SIGSEGV):
  // then there is nothing to filter.
  if (control.at("i386-getpid") == "ok") {
    EXPECT_EQ(filtered.at("i386-getpid"), "died");
  }
  EXPECT_EQ(filtered.at("x32-getpid"), "died") << "without the filter: " << control.at("x32-getpid");
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

}  // namespace
}  // namespace unisched::isolation
