// kill -9 of the daemon: no acknowledged job is lost, and a job running across
// the crash runs exactly once and is collected after the restart.

#include <gtest/gtest.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "testing/daemon.h"
#include "testing/submission_stream.h"

namespace unisched::testing {
namespace {

using nlohmann::json;

int CountLines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  std::string line;
  while (std::getline(in, line)) ++n;
  return n;
}

TEST(CrashTest, Kill9UnderSubmissionsLosesNothingAndRunsOnce) {
  TestDaemon d;
  d.Start();

  // A job that runs across the crash and leaves one line per run.
  char tmpl[] = "/tmp/unisched-crash-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  ::chmod(dir.c_str(), 0777);
  const std::string marker = dir + "/runs";
  const std::string long_id = d.Submit(
      {{"workload", {{"kind", "hpc"}}}, {"command", {"/bin/sh", "-c", "echo run >> " + marker + "; sleep 3"}}});
  const auto started_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (CountLines(marker) == 0 && std::chrono::steady_clock::now() < started_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(CountLines(marker), 1);

  // A stream of submissions; remember every id that got its 201.
  SubmissionStream stream(d.port(), d.admin_token(), {{"workload", {{"kind", "agent"}}}, {"command", {"true"}}});
  // At least 300 ms of the stream, and until some submissions are
  // acknowledged (a slow host may need longer for its first 201s).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stream.WaitForAcknowledged(5);
  d.Kill9();
  const std::vector<std::string> acknowledged = stream.Stop();
  ASSERT_FALSE(acknowledged.empty());

  d.Start();
  for (const auto& id : acknowledged) {
    Reply r = d.Call("GET", "/v1/jobs/" + id);
    ASSERT_EQ(r.status, 200) << "acknowledged job " << id << " lost";
  }
  for (const auto& id : acknowledged) {
    json job = d.WaitTerminal(id);
    EXPECT_EQ(job["state"], "COMPLETED") << job.dump();
  }
  json long_job = d.WaitTerminal(long_id);
  EXPECT_EQ(long_job["state"], "COMPLETED") << long_job.dump();
  EXPECT_EQ(long_job["attempts"].size(), 1u);
  EXPECT_EQ(CountLines(marker), 1) << "the job ran more than once";
  std::filesystem::remove_all(dir);
}

// The string at `addr` in the stopped thread `tid`.
std::string PeekString(pid_t tid, uint64_t addr) {
  std::string out;
  for (int i = 0; i < 512; ++i) {
    errno = 0;
    const long word = ::ptrace(PTRACE_PEEKDATA, tid, addr + i * sizeof(long), nullptr);
    if (errno != 0) break;
    const char* bytes = reinterpret_cast<const char*>(&word);
    for (size_t b = 0; b < sizeof(long); ++b) {
      if (bytes[b] == '\0') return out;
      out.push_back(bytes[b]);
    }
  }
  return out;
}

// SIGKILLs the daemon `pid` the moment one of its threads enters unlink of
// a path ending in `suffix`, before the call does anything: a crash at an
// exact point of the daemon's own code, found as a debugger would (ptrace
// of every thread, a stop at each system call). `attached` runs once the
// tracer is in place. True if it killed the daemon within `limit`.
bool KillAtUnlink(pid_t pid, const std::string& suffix, const std::function<void()>& attached,
                  std::chrono::seconds limit) {
  std::set<pid_t> traced;
  for (bool added = true; added;) {  // threads started while we attach are listed next round
    added = false;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
      const pid_t tid = std::stoi(entry.path().filename().string());
      if (traced.count(tid) != 0) continue;
      if (::ptrace(PTRACE_SEIZE, tid, nullptr, PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL) != 0) {
        continue;
      }
      ::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
      traced.insert(tid);
      added = true;
    }
  }
  if (traced.count(pid) == 0) return false;
  attached();
  bool killed = false;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!killed && !traced.empty()) {
    int status = 0;
    const pid_t tid = ::waitpid(-1, &status, __WALL | WNOHANG);
    if (tid == 0) {
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (tid < 0) break;
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      traced.erase(tid);
      continue;
    }
    if (!WIFSTOPPED(status)) continue;
    traced.insert(tid);  // a new thread's first stop may come before its parent's clone event
    const int sig = WSTOPSIG(status);
    const int event = status >> 16;
    int deliver = 0;
    if (sig == (SIGTRAP | 0x80)) {
      __ptrace_syscall_info info{};
      if (::ptrace(PTRACE_GET_SYSCALL_INFO, tid, sizeof info, &info) > 0 && info.op == PTRACE_SYSCALL_INFO_ENTRY) {
        const uint64_t path = info.entry.nr == SYS_unlink     ? info.entry.args[0]
                              : info.entry.nr == SYS_unlinkat ? info.entry.args[1]
                                                              : 0;
        if (path != 0 && PeekString(tid, path).ends_with(suffix)) {
          ::kill(pid, SIGKILL);
          killed = true;
          break;
        }
      }
    } else if (event == 0 && sig != SIGTRAP) {
      deliver = sig;  // a signal of its own: passed on
    }
    ::ptrace(PTRACE_SYSCALL, tid, nullptr, deliver);
  }
  if (!killed) {
    ::kill(pid, SIGKILL);  // a daemon left traced and stopped is no use to anyone
  }
  // The dying threads are ours to reap; the leader is left to TestDaemon.
  for (pid_t tid : traced) {
    if (tid != pid) ::waitpid(tid, nullptr, __WALL);
  }
  return killed;
}

std::vector<std::string> FilesUnder(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); !ec && it != decltype(it)();
       it.increment(ec)) {
    found.push_back(it->path().string());
  }
  return found;
}

// kill -9 at the moments that matter for the attempts' control files on the
// tmpfs (docs/execution.md): right after a result is committed (before its
// Release), in the middle of a Release, while a job runs (its result comes
// while the daemon is down), and right after a submission. After a clean
// stop nothing of a finished attempt is left: the files of a committed
// result go at the next start.
TEST(CrashTest, KilledAtEveryMomentAndStoppedCleanlyTheDaemonLeavesNoControlFiles) {
  TestDaemon d;
  char tmpl[] = "/tmp/unisched-crash-XXXXXX";
  const std::string gates = ::mkdtemp(tmpl);
  ::chmod(gates.c_str(), 0777);
  int next_gate = 0;
  // A job that ends once the test creates its gate file.
  const auto gated = [&](std::string* gate) {
    *gate = gates + "/" + std::to_string(next_gate++);
    return json{{"workload", {{"kind", "hpc"}}},
                {"command", {"/bin/sh", "-c", "while [ ! -e " + *gate + " ]; do sleep 0.02; done"}}};
  };
  const auto wait_running = [&](const std::string& id) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (d.Call("GET", "/v1/jobs/" + id).json.value("state", "") != "RUNNING" &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  const auto open_gate = [](const std::string& gate) { std::ofstream(gate) << "go\n"; };
  std::vector<std::string> ids;

  // Killed as Release begins (the result committed, its files all there),
  // and after Release removed result.json but not state.json and claim.
  for (const char* file : {"result.json", "state.json"}) {
    SCOPED_TRACE(file);
    d.Start();
    std::string gate;
    const std::string id = d.Submit(gated(&gate));
    wait_running(id);
    const bool killed = KillAtUnlink(
        d.pid(), "/runs/" + id + "/1/" + file, [&] { open_gate(gate); }, std::chrono::seconds(120));
    d.Kill9();
    ASSERT_TRUE(killed) << "the daemon never released attempt " << id << ".1";
    ids.push_back(id);
  }
  // Killed while a job runs: it ends while the daemon is down.
  d.Start();
  std::string gate;
  ids.push_back(d.Submit(gated(&gate)));
  wait_running(ids.back());
  d.Kill9();
  open_gate(gate);
  // Killed right after a submission: its launch may be in flight.
  d.Start();
  ids.push_back(d.Submit({{"workload", {{"kind", "hpc"}}}, {"command", {"true"}}}));
  d.Kill9();

  d.Start();
  for (const auto& id : ids) {
    const json job = d.WaitTerminal(id);
    EXPECT_EQ(job["state"], "COMPLETED") << job.dump();
    EXPECT_EQ(job["attempts"].size(), 1u) << job.dump();
  }
  d.Stop();
  std::string runtime;
  ASSERT_TRUE(std::getline(std::ifstream(d.state_dir() + "/runtime-dir"), runtime));
  const std::vector<std::string> left = FilesUnder(runtime);
  std::string listing;
  for (const auto& path : left) listing += path + "\n";
  EXPECT_TRUE(left.empty()) << "left in " << runtime << " after a clean stop:\n" << listing;
  EXPECT_FALSE(std::filesystem::exists(runtime)) << "a clean stop with nothing left removes it";
  std::filesystem::remove_all(gates);
}

TEST(CrashTest, CleanRestartKeepsJobsAndTokens) {
  TestDaemon d;
  d.Start();
  const std::string id = d.Submit({{"workload", {{"kind", "agent"}}}, {"command", {"true"}}});
  d.WaitTerminal(id);
  d.Stop();
  d.Start();
  Reply r = d.Call("GET", "/v1/jobs/" + id);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json["state"], "COMPLETED");
}

}  // namespace
}  // namespace unisched::testing
