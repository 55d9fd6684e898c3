// The local executor with the real unisched-supervisor and real processes:
// output capture, exit codes, timeouts, cancel, launch failures, the job
// account and environment, limits, log caps, leftovers, the launch
// handshake, and recovery after a daemon restart.
//
// Needs root and the unisched-job account (scripts/install-deps.sh); the
// supervisor is found through $UNISCHED_SUPERVISOR or next to the tests
// directory of the build tree.

#include "unisched/executor/executor.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "executor/attempt_files.h"

namespace unisched::executor {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kJobUser = "unisched-job";

std::string SupervisorPath() {
  if (const char* env = std::getenv("UNISCHED_SUPERVISOR")) return env;
  // <build>/tests/unit_executor_tests -> <build>/unisched-supervisor
  return (fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "unisched-supervisor").string();
}

// Also reads /proc/<pid>/ files of processes that may exit meanwhile: their
// read fails (ESRCH), which libstdc++ throws from an istreambuf_iterator;
// inserting the buffer reads such a file as empty instead.
std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bool HaveCgroupV1() {
  return fs::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes");
}

// Waits (bounded) for something the supervisor does asynchronously.
template <class F>
bool Eventually(F done, std::chrono::milliseconds limit = 30s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

// Collects what the executor hands to its sink.
class Results {
 public:
  Executor::ResultSink Sink() {
    return [this](RunResult r) {
      std::lock_guard lock(mu_);
      results_.push_back(std::move(r));
      cv_.notify_all();
    };
  }
  std::optional<RunResult> Wait(model::JobId job, int attempt = 1) {
    std::unique_lock lock(mu_);
    std::optional<RunResult> found;
    cv_.wait_for(lock, 90s, [&] {
      for (const RunResult& r : results_) {
        if (r.job_id == job && r.attempt == attempt) found = r;
      }
      return found.has_value();
    });
    return found;
  }
  int Count(model::JobId job, int attempt = 1) {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const RunResult& r : results_) n += (r.job_id == job && r.attempt == attempt) ? 1 : 0;
    return n;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<RunResult> results_;
};

class ExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0 || ::getpwnam(kJobUser) == nullptr) {
      GTEST_SKIP() << "needs root and the " << kJobUser << " account (scripts/install-deps.sh)";
    }
    char tmpl[] = "/tmp/unisched-executor-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    ::chmod(base_.c_str(), 0755);  // the job account must reach its work dir
    options_.runs_dir = base_ + "/runs";
    options_.work_root = base_ + "/work";
    options_.supervisor_path = SupervisorPath();
    ASSERT_TRUE(fs::exists(options_.supervisor_path)) << options_.supervisor_path;
    executor_ = MakeLocalExecutor(options_, results_.Sink());
  }
  void TearDown() override {
    executor_.reset();
    if (!base_.empty()) fs::remove_all(base_);
  }

  LaunchSpec Spec(std::vector<std::string> argv) {
    LaunchSpec spec;
    spec.job_id = ++next_job_;
    spec.argv = std::move(argv);
    spec.unix_user = kJobUser;
    spec.walltime_seconds = 120;
    spec.kill_grace_seconds = 2;
    return spec;
  }
  RunResult Run(const LaunchSpec& spec) {
    Status s = executor_->Launch(spec);
    EXPECT_TRUE(s.ok()) << s.error().message;
    auto r = results_.Wait(spec.job_id, spec.attempt);
    EXPECT_TRUE(r.has_value()) << "no result for job " << spec.job_id;
    return r.value_or(RunResult{});
  }
  std::string Stdout(const LaunchSpec& spec) {
    return ReadFile(executor_->LogPath(spec.job_id, spec.attempt, 0, "stdout"));
  }
  std::string Stderr(const LaunchSpec& spec) {
    return ReadFile(executor_->LogPath(spec.job_id, spec.attempt, 0, "stderr"));
  }
  std::string AttemptDir(const LaunchSpec& spec) {
    return options_.runs_dir + "/" + std::to_string(spec.job_id) + "/" + std::to_string(spec.attempt);
  }

  std::string base_;
  LocalExecutorOptions options_;
  Results results_;
  std::unique_ptr<Executor> executor_;
  model::JobId next_job_ = 0;
};

TEST_F(ExecutorTest, CapturesStdoutAndCompletes) {
  const LaunchSpec spec = Spec({"echo", "hello"});
  const RunResult r = Run(spec);
  EXPECT_EQ(r.outcome, RunOutcome::kCompleted) << r.reason;
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(Stdout(spec), "hello\n");
  EXPECT_EQ(Stderr(spec), "");
  ASSERT_TRUE(r.started_at && r.ended_at);
  EXPECT_LE(*r.started_at, *r.ended_at);
  EXPECT_GT(r.usage.max_rss_kb, 0);
  EXPECT_EQ(ToString(r.outcome), "completed");
}

TEST_F(ExecutorTest, NonZeroExitFails) {
  const RunResult r = Run(Spec({"/bin/sh", "-c", "echo oops >&2; exit 3"}));
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.reason, "exit status 3");
}

TEST_F(ExecutorTest, KilledBySignalFails) {
  const RunResult r = Run(Spec({"/bin/sh", "-c", "kill -USR1 $$"}));
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_EQ(r.exit_code, 128 + SIGUSR1);
  EXPECT_EQ(r.reason, "killed by signal " + std::to_string(SIGUSR1));
}

TEST_F(ExecutorTest, WallTimeLimitTimesOut) {
  LaunchSpec spec = Spec({"/bin/sleep", "30"});
  spec.walltime_seconds = 1;
  const RunResult r = Run(spec);
  EXPECT_EQ(r.outcome, RunOutcome::kTimeout) << r.reason;
  ASSERT_TRUE(r.exit_code.has_value());
  EXPECT_TRUE(*r.exit_code == 143 || *r.exit_code == 137) << *r.exit_code;
}

TEST_F(ExecutorTest, TimeoutEscalatesToSigkillAfterTheGrace) {
  LaunchSpec spec = Spec({"/bin/sh", "-c", "trap '' TERM; echo ready; /bin/sleep 30; exit 0"});
  // The SIGTERM at the wall time must find the trap set: a shell not yet
  // past `trap` (a slow host under the sanitizers) dies of it, 143 not 137.
  spec.walltime_seconds = 3;
  spec.kill_grace_seconds = 1;
  const RunResult r = Run(spec);
  EXPECT_EQ(r.outcome, RunOutcome::kTimeout);
  EXPECT_EQ(r.exit_code, 137);
}

TEST_F(ExecutorTest, CancelStopsTheJob) {
  const LaunchSpec spec = Spec({"/bin/sh", "-c", "echo started; exec /bin/sleep 30"});
  ASSERT_TRUE(executor_->Launch(spec).ok());
  ASSERT_TRUE(Eventually([&] { return Stdout(spec) == "started\n"; }));
  executor_->Cancel(spec.job_id, spec.attempt);
  const auto r = results_.Wait(spec.job_id);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, RunOutcome::kCancelled) << r->reason;
  ASSERT_TRUE(r->exit_code.has_value());
  EXPECT_TRUE(*r->exit_code == 143 || *r->exit_code == 137) << *r->exit_code;
}

TEST_F(ExecutorTest, CancelRightAfterLaunchStillCancels) {
  const LaunchSpec spec = Spec({"/bin/sleep", "30"});
  ASSERT_TRUE(executor_->Launch(spec).ok());
  executor_->Cancel(spec.job_id, spec.attempt);
  const auto r = results_.Wait(spec.job_id);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, RunOutcome::kCancelled) << r->reason;
}

TEST_F(ExecutorTest, CancelOfUnknownAttemptIsANoOp) {
  executor_->Cancel(4242, 1);
}

TEST_F(ExecutorTest, MissingCommandIsALaunchFailure) {
  for (const std::string command : {"/no/such", "no-such-command-unisched"}) {
    SCOPED_TRACE(command);
    const RunResult r = Run(Spec({command, "arg"}));
    EXPECT_EQ(r.outcome, RunOutcome::kLaunchFailed);
    EXPECT_FALSE(r.exit_code.has_value());
    EXPECT_EQ(r.reason, "cannot execute '" + command + "': No such file or directory");
  }
}

// A batch script (LaunchSpec::script): written by the job's account into
// its work directory and executed in argv[0]'s place, so that its #! line
// picks the interpreter and argv[1..] are its arguments; the file goes
// with the attempt.
TEST_F(ExecutorTest, ABatchScriptRunsWithItsInterpreterAndArguments) {
  LaunchSpec spec = Spec({"job.sh", "one", "two words"});
  spec.script = "#!/bin/bash\n#SBATCH -J ignored-here\necho \"$0|$1|$2|$#|${BASH_VERSION:+bash}|$(id -u)\"\n";
  const RunResult r = Run(spec);
  ASSERT_EQ(r.outcome, RunOutcome::kCompleted) << r.reason;
  const std::string work = options_.work_root + "/" + std::to_string(spec.job_id);
  EXPECT_EQ(Stdout(spec),
            work + "/unisched-script.1|one|two words|2|bash|" + std::to_string(::getpwnam(kJobUser)->pw_uid) + "\n");
  EXPECT_FALSE(fs::exists(work + "/unisched-script.1"));
  // Nothing else was left: the work directory goes at once.
  executor_->Release(spec.job_id, spec.attempt);
  EXPECT_FALSE(fs::exists(work));

  // A file of that name left in the work directory (a link, even) is
  // replaced, never written through.
  LaunchSpec again = Spec({"job.sh"});
  again.script = "#!/bin/sh\ncat unisched-script.1 | head -c 9\n";
  const std::string again_work = options_.work_root + "/" + std::to_string(again.job_id);
  fs::create_directories(again_work);
  ASSERT_EQ(::chown(again_work.c_str(), ::getpwnam(kJobUser)->pw_uid, 0), 0);
  const std::string target = base_ + "/not-the-jobs";
  std::ofstream(target) << "untouched\n";
  fs::create_symlink(target, again_work + "/unisched-script.1");
  ASSERT_EQ(Run(again).outcome, RunOutcome::kCompleted);
  EXPECT_EQ(Stdout(again), "#!/bin/sh");
  EXPECT_EQ(ReadFile(target), "untouched\n");
}

TEST_F(ExecutorTest, ABatchScriptsLaunchFailuresSayWhatIsMissing) {
  LaunchSpec no_interpreter = Spec({"job.sh"});
  no_interpreter.script = "#!/no/such/interpreter -x\ntrue\n";
  const RunResult r = Run(no_interpreter);
  EXPECT_EQ(r.outcome, RunOutcome::kLaunchFailed);
  EXPECT_EQ(r.reason,
            "cannot execute the batch script (#!/no/such/interpreter -x): No such file or directory; is its "
            "interpreter installed on the node?");

  LaunchSpec no_dir = Spec({"/bin/pwd"});
  no_dir.chdir = base_ + "/no/such/dir";
  const RunResult d = Run(no_dir);
  EXPECT_EQ(d.outcome, RunOutcome::kLaunchFailed);
  EXPECT_EQ(d.reason, "cannot change to the job's workdir '" + no_dir.chdir + "' as user '" + kJobUser +
                          "': No such file or directory");
}

TEST_F(ExecutorTest, AJobWithAWorkdirStartsThere) {
  const std::string dir = base_ + "/shared";
  ASSERT_TRUE(fs::create_directory(dir));
  ::chmod(dir.c_str(), 0777);
  LaunchSpec spec = Spec({"job.sh"});
  spec.script = "#!/bin/sh\npwd; echo made > here.txt\n";
  spec.chdir = dir;
  const RunResult r = Run(spec);
  ASSERT_EQ(r.outcome, RunOutcome::kCompleted) << r.reason;
  EXPECT_EQ(Stdout(spec), dir + "\n");
  EXPECT_EQ(ReadFile(dir + "/here.txt"), "made\n");
}

// A task that names its node gets TMPDIR=<work>/tmp.<node>, made by its
// account; an empty one goes with the attempt (and the work directory with
// it), one holding files stays with the work directory.
TEST_F(ExecutorTest, ATaskOnANodeHasATmpdirInItsWorkDirectory) {
  LaunchSpec empty = Spec({"/bin/sh", "-c", "echo \"$TMPDIR\"; stat -c '%U %a' \"$TMPDIR\""});
  empty.node = "x86-c4m4-hpc-01";
  ASSERT_EQ(Run(empty).outcome, RunOutcome::kCompleted);
  const std::string work = options_.work_root + "/" + std::to_string(empty.job_id);
  EXPECT_EQ(Stdout(empty), work + "/tmp.x86-c4m4-hpc-01\n" + kJobUser + " 700\n");
  executor_->Release(empty.job_id, empty.attempt);
  EXPECT_FALSE(fs::exists(work)) << "nothing was written: nothing stays";

  LaunchSpec writer = Spec({"/bin/sh", "-c", "echo kept > \"$TMPDIR/file\""});
  writer.node = "x86-c4m4-hpc-02";
  ASSERT_EQ(Run(writer).outcome, RunOutcome::kCompleted);
  executor_->Release(writer.job_id, writer.attempt);
  const std::string kept = options_.work_root + "/" + std::to_string(writer.job_id) + "/tmp.x86-c4m4-hpc-02/file";
  EXPECT_EQ(ReadFile(kept), "kept\n");

  LaunchSpec own = Spec({"/bin/sh", "-c", "echo \"$TMPDIR\""});
  own.node = "x86-c4m4-hpc-01";
  own.env = {{"TMPDIR", "/var/tmp"}};
  ASSERT_EQ(Run(own).outcome, RunOutcome::kCompleted);
  EXPECT_EQ(Stdout(own), "/var/tmp\n");
}

TEST_F(ExecutorTest, RunsAsTheJobAccountWithExactlyTheGivenEnvironment) {
  ::setenv("UNISCHED_TEST_LEAK", "must-not-reach-the-job", 1);
  LaunchSpec env_spec = Spec({"/usr/bin/env"});
  env_spec.env = {{"A", "1"}, {"B", "two words"}};
  const RunResult env_run = Run(env_spec);
  EXPECT_EQ(env_run.outcome, RunOutcome::kCompleted) << env_run.reason;
  EXPECT_EQ(Stdout(env_spec), "A=1\nB=two words\n");  // no PATH, nothing of ours
  ::unsetenv("UNISCHED_TEST_LEAK");

  const LaunchSpec id_spec = Spec({"id", "-u"});
  const RunResult id_run = Run(id_spec);
  EXPECT_EQ(id_run.outcome, RunOutcome::kCompleted) << id_run.reason;
  EXPECT_EQ(Stdout(id_spec), std::to_string(::getpwnam(kJobUser)->pw_uid) + "\n");
  EXPECT_NE(Stdout(id_spec), "0\n");

  // Its groups: the primary and the supplementary ones of the account, as
  // the executor resolved them for the supervisor.
  const LaunchSpec groups_spec = Spec({"id", "-G"});
  ASSERT_EQ(Run(groups_spec).outcome, RunOutcome::kCompleted);
  const passwd* pw = ::getpwnam(kJobUser);
  std::vector<gid_t> expected(64);
  int count = static_cast<int>(expected.size());
  ASSERT_GE(::getgrouplist(kJobUser, pw->pw_gid, expected.data(), &count), 0);
  expected.resize(static_cast<size_t>(count));
  std::set<gid_t> want(expected.begin(), expected.end());
  std::set<gid_t> got;
  std::istringstream ids(Stdout(groups_spec));
  for (gid_t g = 0; ids >> g;) got.insert(g);
  EXPECT_EQ(got, want) << Stdout(groups_spec);

  const LaunchSpec pwd_spec = Spec({"/bin/pwd"});
  EXPECT_EQ(Run(pwd_spec).outcome, RunOutcome::kCompleted);
  EXPECT_EQ(Stdout(pwd_spec), options_.work_root + "/" + std::to_string(pwd_spec.job_id) + "\n");
}

TEST_F(ExecutorTest, CannotReadARootPrivateDirectory) {
  const std::string secret = base_ + "/secret";
  ASSERT_TRUE(fs::create_directory(secret));
  ::chmod(secret.c_str(), 0700);
  std::ofstream(secret + "/key") << "root only\n";
  const LaunchSpec spec = Spec({"/bin/cat", secret + "/key"});
  const RunResult r = Run(spec);
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(Stderr(spec).find("Permission denied"), std::string::npos) << Stderr(spec);
  EXPECT_EQ(Stdout(spec), "");
}

TEST_F(ExecutorTest, MemoryLimitKillsAJobThatTouchesMore) {
  // bytes * n writes every byte: the memory is really used.
  LaunchSpec spec = Spec({"/usr/bin/python3", "-c", "s = b'x' * (300 << 20); print(len(s))"});
  spec.limits.memory_bytes = 64 << 20;
  const RunResult r = Run(spec);
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_EQ(Stdout(spec), "");
  if (HaveCgroupV1()) {
    EXPECT_EQ(r.exit_code, 137);
    EXPECT_EQ(r.reason, "out of memory (cgroup limit 64 MB)");
  }
}

TEST_F(ExecutorTest, WithoutCgroupsTheMemoryLimitIsAnRlimit) {
  executor_.reset();
  options_.use_cgroups = false;
  executor_ = MakeLocalExecutor(options_, results_.Sink());
  LaunchSpec spec = Spec({"/usr/bin/python3", "-c", "s = b'x' * (300 << 20); print(len(s))"});
  spec.limits.memory_bytes = 64 << 20;
  const RunResult r = Run(spec);
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_NE(Stderr(spec).find("MemoryError"), std::string::npos) << Stderr(spec);
}

TEST_F(ExecutorTest, OutputBeyondTheCapIsTruncatedWithAMarker) {
  LaunchSpec spec = Spec({"/bin/sh", "-c", "/usr/bin/yes abc | /usr/bin/head -c 100000; echo tail >&2"});
  spec.log_cap_bytes = 1000;
  const RunResult r = Run(spec);
  EXPECT_EQ(r.outcome, RunOutcome::kCompleted) << r.reason;
  const std::string out = Stdout(spec);
  const std::string marker = "[unisched: output truncated at 1000 bytes]\n";
  ASSERT_EQ(out.size(), 1000 + marker.size());
  EXPECT_EQ(out.substr(0, 8), "abc\nabc\n");
  EXPECT_EQ(out.substr(1000), marker);
  EXPECT_EQ(Stderr(spec), "tail\n");  // under the cap: untouched
}

TEST_F(ExecutorTest, BackgroundLeftoversAreKilledWhenTheMainProcessExits) {
  const LaunchSpec spec = Spec({"/bin/sh", "-c", "/bin/sleep 100 & echo $!"});
  const RunResult r = Run(spec);
  EXPECT_EQ(r.outcome, RunOutcome::kCompleted) << r.reason;
  const pid_t leftover = std::atoi(Stdout(spec).c_str());
  ASSERT_GT(leftover, 0);
  EXPECT_EQ(::kill(leftover, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(ExecutorTest, LaunchingTheSameAttemptTwiceRunsItOnce) {
  const LaunchSpec spec = Spec({"/bin/sh", "-c", "echo ran >> count; /bin/sleep 1"});
  Results other_results;
  auto other = MakeLocalExecutor(options_, other_results.Sink());
  ASSERT_TRUE(executor_->Launch(spec).ok());
  ASSERT_TRUE(executor_->Launch(spec).ok());
  ASSERT_TRUE(other->Launch(spec).ok());  // a second daemon instance: the claim decides
  const auto mine = results_.Wait(spec.job_id);
  const auto theirs = other_results.Wait(spec.job_id);
  ASSERT_TRUE(mine && theirs);
  EXPECT_EQ(mine->outcome, RunOutcome::kCompleted) << mine->reason;
  EXPECT_EQ(theirs->outcome, RunOutcome::kCompleted) << theirs->reason;
  EXPECT_EQ(mine->started_at, theirs->started_at);
  const std::string count = ReadFile(options_.work_root + "/" + std::to_string(spec.job_id) + "/count");
  EXPECT_EQ(count, "ran\n");
  EXPECT_EQ(results_.Count(spec.job_id), 1);
}

// A finished attempt leaves the watcher's map at once (its scan would grow
// with every attempt ever run), yet it is still never run twice.
TEST_F(ExecutorTest, AFinishedAttemptLaunchedOrRecoveredAgainIsNotRunAgain) {
  const LaunchSpec spec = Spec({"/bin/sh", "-c", "echo ran >> count"});
  ASSERT_EQ(Run(spec).outcome, RunOutcome::kCompleted);
  ASSERT_TRUE(executor_->Launch(spec).ok());
  executor_->Recover(spec);
  // A later attempt's result comes after any the watcher would have made
  // for the repeated calls (one watcher, results in order of its passes).
  const LaunchSpec later = Spec({"true"});
  ASSERT_EQ(Run(later).outcome, RunOutcome::kCompleted);
  std::this_thread::sleep_for(500ms);  // a few periodic scans, which would find a second run
  EXPECT_EQ(results_.Count(spec.job_id), 1);
  EXPECT_EQ(ReadFile(options_.work_root + "/" + std::to_string(spec.job_id) + "/count"), "ran\n");
}

// Many supervisors ending together: each end is seen through its pidfd,
// and every result is delivered exactly once.
TEST_F(ExecutorTest, ManyShortAttemptsEndingTogetherAreEachDeliveredOnce) {
  std::vector<LaunchSpec> specs;
  for (int i = 0; i < 40; ++i) specs.push_back(Spec({"true"}));
  for (const LaunchSpec& spec : specs) ASSERT_TRUE(executor_->Launch(spec).ok());
  for (const LaunchSpec& spec : specs) {
    const auto r = results_.Wait(spec.job_id);
    ASSERT_TRUE(r.has_value()) << "no result for job " << spec.job_id;
    EXPECT_EQ(r->outcome, RunOutcome::kCompleted) << r->reason;
  }
  std::this_thread::sleep_for(500ms);  // a few periodic scans, which would deliver a duplicate
  for (const LaunchSpec& spec : specs) EXPECT_EQ(results_.Count(spec.job_id), 1) << spec.job_id;
}

TEST_F(ExecutorTest, RecoverDeliversTheResultOfAFinishedAttempt) {
  const LaunchSpec spec = Spec({"/bin/sh", "-c", "echo done; exit 4"});
  const RunResult first = Run(spec);
  executor_.reset();  // the daemon restarts

  Results after;
  auto restarted = MakeLocalExecutor(options_, after.Sink());
  restarted->Recover(spec);
  const auto r = after.Wait(spec.job_id);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, RunOutcome::kFailed);
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_EQ(r->started_at, first.started_at);
  EXPECT_EQ(r->ended_at, first.ended_at);
  EXPECT_EQ(ReadFile(restarted->LogPath(spec.job_id, 1, 0, "stdout")), "done\n");
}

TEST_F(ExecutorTest, RecoverAdoptsARunningAttemptAndDeliversItsResult) {
  const LaunchSpec spec = Spec({"/bin/sh", "-c", "echo started; /bin/sleep 2; echo finished"});
  ASSERT_TRUE(executor_->Launch(spec).ok());
  ASSERT_TRUE(Eventually([&] { return Stdout(spec) == "started\n"; }));
  executor_->Shutdown();  // the supervisor keeps running
  executor_.reset();

  Results after;
  auto restarted = MakeLocalExecutor(options_, after.Sink());
  restarted->Recover(spec);
  restarted->Recover(spec);  // repeated: still one result
  const auto r = after.Wait(spec.job_id);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, RunOutcome::kCompleted) << r->reason;
  EXPECT_EQ(ReadFile(restarted->LogPath(spec.job_id, 1, 0, "stdout")), "started\nfinished\n");
  EXPECT_EQ(results_.Count(spec.job_id), 0);  // the old instance said nothing
  EXPECT_EQ(after.Count(spec.job_id), 1);
}

TEST_F(ExecutorTest, CancelReachesAnAdoptedAttempt) {
  const LaunchSpec spec = Spec({"/bin/sh", "-c", "echo started; exec /bin/sleep 60"});
  ASSERT_TRUE(executor_->Launch(spec).ok());
  ASSERT_TRUE(Eventually([&] { return Stdout(spec) == "started\n"; }));
  executor_.reset();

  Results after;
  auto restarted = MakeLocalExecutor(options_, after.Sink());
  restarted->Recover(spec);
  restarted->Cancel(spec.job_id, spec.attempt);
  const auto r = after.Wait(spec.job_id);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, RunOutcome::kCancelled) << r->reason;
}

TEST_F(ExecutorTest, RecoverLaunchesAnAttemptThatNeverStarted) {
  const LaunchSpec spec = Spec({"echo", "late"});
  executor_->Recover(spec);
  const auto r = results_.Wait(spec.job_id);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, RunOutcome::kCompleted) << r->reason;
  EXPECT_EQ(Stdout(spec), "late\n");
}

TEST_F(ExecutorTest, RecoverOfAClaimWithoutLiveSupervisorOrResultIsLost) {
  // With state.json the supervisor had locked its claim; without, it may
  // have died between creating and locking it (the executor looks twice).
  for (const bool with_state : {true, false}) {
    SCOPED_TRACE(with_state ? "claim and state" : "claim only");
    const LaunchSpec spec = Spec({"echo", "never"});
    const std::string dir = AttemptDir(spec);
    fs::create_directories(dir);
    std::ofstream(dir + "/claim") << "999999\n";
    if (with_state) std::ofstream(dir + "/state.json") << R"({"phase":"running","supervisor_pid":999999})";
    executor_->Recover(spec);
    const auto r = results_.Wait(spec.job_id);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->outcome, RunOutcome::kLost);
    EXPECT_EQ(r->reason, "the supervisor died without a result");
    EXPECT_FALSE(r->exit_code.has_value());
    EXPECT_FALSE(fs::exists(dir + "/result.json"));  // recovery ran nothing
  }
}

// The attempt's pids group, where the hierarchy has one: the v1 pids
// hierarchy, else the unified one (hybrid or pure v2).
std::string PidsGroup(const std::string& name) {
  for (const char* parent :
       {"/sys/fs/cgroup/pids/unisched/", "/sys/fs/cgroup/unified/unisched/", "/sys/fs/cgroup/unisched/"}) {
    if (fs::exists(std::string(parent) + name + "/cgroup.procs")) return parent + name;
  }
  return {};
}

bool Dead(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;  // reaped since the kill: a live process always has its stat
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';  // an unreaped orphan
}

// A supervisor killed with SIGKILL leaves no result: the attempt is lost, and
// its job (here a shell and a background child) must not go on running
// beside a retry. Its cgroups go too.
TEST_F(ExecutorTest, ASupervisorKilledWithSigkillLeavesNoJobRunning) {
  const LaunchSpec spec = Spec({"/bin/sh", "-c", "sleep 60 & sleep 60; wait"});
  ASSERT_TRUE(executor_->Launch(spec).ok());
  const std::string dir = AttemptDir(spec);
  pid_t supervisor = 0;
  ASSERT_TRUE(Eventually([&] {
    supervisor = std::atoi(ReadFile(dir + "/claim").c_str());
    return supervisor > 0;
  }));
  const std::string name = std::to_string(spec.job_id) + "-1-" + std::to_string(supervisor);
  std::vector<pid_t> job_pids;
  const bool grouped = Eventually([&] {
    const std::string group = PidsGroup(name);
    if (group.empty()) return false;
    job_pids.clear();
    std::istringstream procs(ReadFile(group + "/cgroup.procs"));
    for (pid_t pid = 0; procs >> pid;) job_pids.push_back(pid);
    return job_pids.size() >= 3;  // the shell and both sleeps
  });
  if (!grouped) {
    ::kill(supervisor, SIGTERM);
    results_.Wait(spec.job_id);
    GTEST_SKIP() << "no pids or unified cgroup for the attempt on this host";
  }
  ASSERT_EQ(::kill(supervisor, SIGKILL), 0);
  const auto r = results_.Wait(spec.job_id);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, RunOutcome::kLost) << r->reason;
  // By the time the lost result is out, nothing of the job runs.
  for (pid_t pid : job_pids) {
    EXPECT_TRUE(Dead(pid)) << "job process " << pid << " outlived its supervisor";
    if (!Dead(pid)) ::kill(pid, SIGKILL);
  }
  EXPECT_EQ(PidsGroup(name), "") << "the attempt's cgroup is left";
}

TEST_F(ExecutorTest, AnAdoptedAttemptWhoseClaimIsLockedWaitsForItsResult) {
  const LaunchSpec spec = Spec({"echo", "never"});
  const std::string dir = AttemptDir(spec);
  fs::create_directories(dir);
  // A live supervisor, as far as the files tell: the claim is locked.
  const int claim = ::open((dir + "/claim").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(claim, 0);
  ASSERT_EQ(::flock(claim, LOCK_EX), 0);
  executor_->Recover(spec);
  executor_->Recover(spec);
  // Well past the executor's re-probe of a claim without state.json.
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(results_.Count(spec.job_id), 0);
  // Atomically, as the supervisor does: the executor may read it any time.
  std::ofstream(dir + "/.result.tmp") << R"({"job_id":)" << spec.job_id
                                      << R"(,"attempt":1,"outcome":"completed","exit_code":0,"reason":""})";
  fs::rename(dir + "/.result.tmp", dir + "/result.json");
  ::close(claim);
  const auto r = results_.Wait(spec.job_id);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, RunOutcome::kCompleted) << r->reason;
  EXPECT_EQ(results_.Count(spec.job_id), 1);
}

TEST_F(ExecutorTest, AQuietAttemptLeavesOnlyClaimStateAndResult) {
  // No spec file (the spec travels on the supervisor's stdin), no empty
  // output files, no supervisor.log without a diagnostic.
  const LaunchSpec spec = Spec({"/bin/true"});
  ASSERT_EQ(Run(spec).outcome, RunOutcome::kCompleted);
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(AttemptDir(spec))) names.insert(entry.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"claim", "result.json", "state.json"}));
  EXPECT_NE(ReadFile(AttemptDir(spec) + "/state.json").find(R"("phase":"running")"), std::string::npos);
  EXPECT_EQ(Stdout(spec), "");  // the log endpoint reads a missing file as empty output
  EXPECT_EQ(Stderr(spec), "");

  const LaunchSpec loud = Spec({"/bin/sh", "-c", "echo err >&2"});
  ASSERT_EQ(Run(loud).outcome, RunOutcome::kCompleted);
  EXPECT_FALSE(fs::exists(AttemptDir(loud) + "/stdout"));
  EXPECT_EQ(Stderr(loud), "err\n");
}

TEST_F(ExecutorTest, TheSupervisorReadsItsSpecFromStdin) {
  const std::string dir = options_.runs_dir + "/77/1";
  fs::create_directories(options_.runs_dir);
  const std::string command = "echo 'not a spec' | " + options_.supervisor_path + " " + dir;
  ASSERT_EQ(std::system(command.c_str()), 0);
  const std::string result = ReadFile(dir + "/result.json");
  EXPECT_NE(result.find(R"("outcome": "launch_failed")"), std::string::npos) << result;
  EXPECT_NE(result.find("malformed spec: "), std::string::npos) << result;
  // A second supervisor of the same attempt finds it claimed and runs nothing.
  ASSERT_EQ(std::system(command.c_str()), 0);
  EXPECT_EQ(ReadFile(dir + "/result.json"), result);
}

TEST_F(ExecutorTest, LaunchErrorsStartNothing) {
  struct Case {
    std::string name;
    std::string supervisor;
    std::string user;
    ErrorKind kind;
  };
  const std::vector<Case> cases = {
      {"missing supervisor", "/no/such/unisched-supervisor", kJobUser, ErrorKind::kUnavailable},
      {"no account as root", SupervisorPath(), "", ErrorKind::kUnprocessable},
      {"unknown account", SupervisorPath(), "no-such-user-unisched", ErrorKind::kUnprocessable},
      {"root account", SupervisorPath(), "root", ErrorKind::kUnprocessable},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    LocalExecutorOptions options = options_;
    options.supervisor_path = c.supervisor;
    auto executor = MakeLocalExecutor(options, results_.Sink());
    LaunchSpec spec = Spec({"echo", "x"});
    spec.unix_user = c.user;
    const Status s = executor->Launch(spec);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().kind, c.kind) << s.error().message;
    EXPECT_FALSE(fs::exists(AttemptDir(spec) + "/claim"));
  }
  EXPECT_FALSE(executor_->Launch(Spec({})).ok());
}

TEST_F(ExecutorTest, ForgetRemovesTheAttemptAndThenTheWorkDir) {
  LaunchSpec first = Spec({"/bin/sh", "-c", "echo data > file"});
  ASSERT_EQ(Run(first).outcome, RunOutcome::kCompleted);
  LaunchSpec second = first;
  second.attempt = 2;
  ASSERT_EQ(Run(second).outcome, RunOutcome::kCompleted);
  const std::string work = options_.work_root + "/" + std::to_string(first.job_id);
  ASSERT_TRUE(fs::exists(work + "/file"));

  executor_->Forget(first.job_id, 1);
  EXPECT_FALSE(fs::exists(AttemptDir(first)));
  EXPECT_TRUE(fs::exists(work));  // attempt 2 still has its files
  executor_->Forget(first.job_id, 2);
  EXPECT_FALSE(fs::exists(AttemptDir(second)));
  EXPECT_FALSE(fs::exists(work));
  EXPECT_FALSE(fs::exists(options_.runs_dir + "/" + std::to_string(first.job_id)));
}

TEST_F(ExecutorTest, ForgetLeavesARunningAttemptAlone) {
  const LaunchSpec spec = Spec({"/bin/sh", "-c", "echo started; exec /bin/sleep 30"});
  ASSERT_TRUE(executor_->Launch(spec).ok());
  ASSERT_TRUE(Eventually([&] { return Stdout(spec) == "started\n"; }));
  executor_->Forget(spec.job_id, spec.attempt);
  EXPECT_TRUE(fs::exists(AttemptDir(spec) + "/claim"));
  executor_->Cancel(spec.job_id, spec.attempt);
  ASSERT_TRUE(results_.Wait(spec.job_id).has_value());
}

TEST_F(ExecutorTest, AttemptAndWorkDirectoriesArePrivate) {
  const LaunchSpec spec = Spec({"/bin/true"});
  ASSERT_EQ(Run(spec).outcome, RunOutcome::kCompleted);
  struct stat st {};
  ASSERT_EQ(::stat(AttemptDir(spec).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, 0u);
  const std::string work = options_.work_root + "/" + std::to_string(spec.job_id);
  ASSERT_EQ(::stat(work.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, ::getpwnam(kJobUser)->pw_uid);
}

// The daemon's layout: control files in runs_dir (a tmpfs), output in
// logs_dir (disk). Output goes to the logs directory, made only by output;
// Release takes the control files once the result is recorded and leaves
// the output; Forget takes the rest.
TEST_F(ExecutorTest, WithALogsDirOutputStaysOnDiskAndReleaseTakesOnlyTheControlFiles) {
  executor_.reset();
  options_.logs_dir = base_ + "/logs";
  executor_ = MakeLocalExecutor(options_, results_.Sink());
  const auto logs_of = [&](const LaunchSpec& spec) {
    return options_.logs_dir + "/" + std::to_string(spec.job_id) + "/" + std::to_string(spec.attempt);
  };

  const LaunchSpec talker = Spec({"/bin/sh", "-c", "echo hello; echo oops >&2"});
  ASSERT_EQ(Run(talker).outcome, RunOutcome::kCompleted);
  EXPECT_EQ(executor_->LogPath(talker.job_id, talker.attempt, 0, "stdout"), logs_of(talker) + "/stdout");
  EXPECT_EQ(Stdout(talker), "hello\n");
  EXPECT_EQ(Stderr(talker), "oops\n");
  EXPECT_TRUE(fs::exists(AttemptDir(talker) + "/result.json"));
  EXPECT_TRUE(fs::exists(AttemptDir(talker) + "/claim"));
  EXPECT_FALSE(fs::exists(AttemptDir(talker) + "/stdout"));
  EXPECT_FALSE(fs::exists(logs_of(talker) + "/claim"));

  const LaunchSpec quiet = Spec({"true"});
  ASSERT_EQ(Run(quiet).outcome, RunOutcome::kCompleted);
  EXPECT_FALSE(fs::exists(options_.logs_dir + "/" + std::to_string(quiet.job_id))) << "a silent attempt made a dir";
  EXPECT_EQ(Stdout(quiet), "");

  const auto work_of = [&](const LaunchSpec& spec) { return options_.work_root + "/" + std::to_string(spec.job_id); };
  ASSERT_TRUE(fs::is_empty(work_of(quiet)));
  executor_->Release(quiet.job_id, quiet.attempt);
  EXPECT_FALSE(fs::exists(work_of(quiet))) << "an empty work directory goes with the attempt";
  const LaunchSpec writer = Spec({"/bin/sh", "-c", "echo kept > result.txt"});
  ASSERT_EQ(Run(writer).outcome, RunOutcome::kCompleted);
  executor_->Release(writer.job_id, writer.attempt);
  EXPECT_TRUE(fs::exists(work_of(writer) + "/result.txt")) << "what a job wrote stays until retention";

  executor_->Release(talker.job_id, talker.attempt);
  EXPECT_FALSE(fs::exists(options_.runs_dir + "/" + std::to_string(talker.job_id)));
  EXPECT_EQ(Stdout(talker), "hello\n");
  // Released: launching it again still runs nothing.
  ASSERT_TRUE(executor_->Launch(talker).ok());
  EXPECT_FALSE(fs::exists(AttemptDir(talker)));

  // A running attempt keeps its files whatever Release says.
  const LaunchSpec sleeper = Spec({"/bin/sleep", "30"});
  ASSERT_TRUE(executor_->Launch(sleeper).ok());
  ASSERT_TRUE(Eventually([&] { return fs::exists(AttemptDir(sleeper) + "/state.json"); }));
  executor_->Release(sleeper.job_id, sleeper.attempt);
  EXPECT_TRUE(fs::exists(AttemptDir(sleeper) + "/claim"));
  executor_->Cancel(sleeper.job_id, sleeper.attempt);
  ASSERT_TRUE(results_.Wait(sleeper.job_id).has_value());

  executor_->Forget(talker.job_id, 0);
  EXPECT_FALSE(fs::exists(options_.logs_dir + "/" + std::to_string(talker.job_id)));
  EXPECT_FALSE(fs::exists(options_.work_root + "/" + std::to_string(talker.job_id)));
}

// With pin_cpus, a task runs on its CPU set only: logical CPU k is the k-th
// CPU this process may run on, modulo their count. Without it, the set is
// only named in the environment and the task may run anywhere it could.
TEST_F(ExecutorTest, APinnedTaskRunsOnlyOnItsCpuSet) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mine)) cpus.push_back(c);
  }
  ASSERT_FALSE(cpus.empty());
  const std::string all = [&] {
    std::string text;
    for (int c : cpus) text += (text.empty() ? "" : ",") + std::to_string(c);
    return text;
  }();
  // Cpus_allowed_list as a comma list, ranges expanded ("0-2" -> "0,1,2").
  const std::string allowed_list =
      "awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status | tr ',' '\\n' | "
      "awk -F- '{ if (NF == 2) { for (i = $1; i <= $2; i++) print i } else print $1 }' | paste -sd,";
  LaunchSpec unpinned = Spec({"/bin/sh", "-c", allowed_list});
  unpinned.cpu_set = {static_cast<int>(cpus.size())};  // logical id = the count: the first CPU again
  ASSERT_EQ(Run(unpinned).outcome, RunOutcome::kCompleted);
  EXPECT_EQ(Stdout(unpinned), all + "\n") << "not pinned without pin_cpus";

  executor_.reset();
  options_.pin_cpus = true;
  executor_ = MakeLocalExecutor(options_, results_.Sink());
  LaunchSpec last = Spec({"/bin/sh", "-c", allowed_list});
  last.cpu_set = {static_cast<int>(cpus.size()) - 1};
  ASSERT_EQ(Run(last).outcome, RunOutcome::kCompleted);
  EXPECT_EQ(Stdout(last), std::to_string(cpus.back()) + "\n");
  LaunchSpec wrapped = Spec({"/bin/sh", "-c", allowed_list});
  wrapped.cpu_set = {static_cast<int>(cpus.size())};  // past the last: modulo, the first
  ASSERT_EQ(Run(wrapped).outcome, RunOutcome::kCompleted);
  EXPECT_EQ(Stdout(wrapped), std::to_string(cpus.front()) + "\n");
  EXPECT_NE(ReadFile(options_.runs_dir + "/" + std::to_string(wrapped.job_id) + "/1/supervisor.log")
                .find("pinned to CPUs " + std::to_string(cpus.front())),
            std::string::npos);
}

// A finished job's work directory that is not empty stays for the
// retention after its end, then goes; one of a running attempt, or of one
// whose result is not recorded yet (its claim still there), stays however
// old it looks.
TEST_F(ExecutorTest, AKeptWorkDirectoryGoesAfterItsRetentionAndOnlyOnceItsJobEnded) {
  executor_.reset();
  options_.logs_dir = base_ + "/logs";
  options_.work_dir_retention = std::chrono::seconds(2);
  executor_ = MakeLocalExecutor(options_, results_.Sink());
  const auto work_of = [&](const LaunchSpec& spec) { return options_.work_root + "/" + std::to_string(spec.job_id); };
  const auto age = [](const std::string& path) {
    const timespec long_ago[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), long_ago, 0), 0) << path;
  };

  const LaunchSpec writer = Spec({"/bin/sh", "-c", "echo said; echo kept > result.txt"});
  ASSERT_EQ(Run(writer).outcome, RunOutcome::kCompleted);
  const LaunchSpec unrecorded = Spec({"/bin/sh", "-c", "echo mine > out.txt"});
  ASSERT_EQ(Run(unrecorded).outcome, RunOutcome::kCompleted);  // never Released: its claim stays
  age(work_of(unrecorded));
  const LaunchSpec sleeper = Spec({"/bin/sh", "-c", "echo x > busy.txt; exec sleep 30"});
  ASSERT_TRUE(executor_->Launch(sleeper).ok());
  ASSERT_TRUE(Eventually([&] { return fs::exists(work_of(sleeper) + "/busy.txt"); }));
  age(work_of(sleeper));

  const auto released = std::chrono::steady_clock::now();
  executor_->Release(writer.job_id, writer.attempt);
  ASSERT_TRUE(fs::exists(work_of(writer) + "/result.txt"));
  ASSERT_TRUE(Eventually([&] { return !fs::exists(work_of(writer)); }, 20s)) << "kept past its retention";
  EXPECT_GE(std::chrono::steady_clock::now() - released, std::chrono::milliseconds(1900)) << "removed too early";
  EXPECT_TRUE(fs::exists(work_of(sleeper) + "/busy.txt")) << "a running job's directory went";
  EXPECT_TRUE(fs::exists(work_of(unrecorded) + "/out.txt")) << "the directory of an unrecorded end went";
  EXPECT_EQ(Stdout(writer), "said\n") << "the output goes with the job's record, not its work directory";

  executor_->Cancel(sleeper.job_id, sleeper.attempt);
  ASSERT_TRUE(results_.Wait(sleeper.job_id).has_value());
  executor_->Release(sleeper.job_id, sleeper.attempt);  // its end makes it new again: kept for the retention
  EXPECT_TRUE(fs::exists(work_of(sleeper) + "/busy.txt"));
  EXPECT_TRUE(Eventually([&] { return !fs::exists(work_of(sleeper)); }, 20s));
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.work_root, ec)) {
    EXPECT_EQ(entry.path().filename().string().rfind(".expired-", 0), std::string::npos) << entry.path();
  }
}

// After a host restart the tmpfs runs_dir is gone while the output
// directory remains: an attempt the store records as running may have run,
// so it is lost (the retry policy decides), not started again unseen.
TEST_F(ExecutorTest, AnAttemptRecoveredAfterTheRunsDirVanishedIsLostNotRunAgain) {
  executor_.reset();
  options_.logs_dir = base_ + "/logs";
  fs::create_directories(options_.logs_dir);
  ASSERT_FALSE(fs::exists(options_.runs_dir));
  executor_ = MakeLocalExecutor(options_, results_.Sink());
  const LaunchSpec spec = Spec({"true"});  // launched, it would complete
  executor_->Recover(spec);
  const auto r = results_.Wait(spec.job_id);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, RunOutcome::kLost);
  EXPECT_NE(r->reason.find("are gone"), std::string::npos) << r->reason;
  EXPECT_FALSE(fs::exists(AttemptDir(spec)));
}

// Attempts run side by side in supervisor hosts (one per CPU, launches in
// turn), the executor's children, which name themselves in the claims
// ("<pid> shared"). One attempt is cancelled alone (a cancel file and
// SIGUSR2). A host that dies takes its running attempts with it (lost), and
// the next launches start a new host.
TEST_F(ExecutorTest, AttemptsShareSupervisorHostsAndADeadHostIsReplaced) {
  const auto parent_and_cmdline = [](pid_t pid) {
    const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
    const size_t close = stat.rfind(')');
    const pid_t ppid = close == std::string::npos ? 0 : std::atoi(stat.c_str() + close + 4);
    std::string cmdline = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    return std::make_pair(ppid, cmdline);
  };
  const auto claim_of = [&](const LaunchSpec& spec) {
    std::string claim;
    EXPECT_TRUE(Eventually([&] {
      claim = ReadFile(AttemptDir(spec) + "/claim");
      return claim.find('\n') != std::string::npos;
    }));
    return claim;
  };

  // Twice as many attempts as hosts: some host runs two at once.
  const size_t hosts = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  std::vector<LaunchSpec> sleepers;
  std::map<pid_t, int> attempts_by_host;
  for (size_t i = 0; i < 2 * hosts; ++i) {
    sleepers.push_back(Spec({"/bin/sleep", "30"}));
    ASSERT_TRUE(executor_->Launch(sleepers.back()).ok());
  }
  for (const LaunchSpec& spec : sleepers) {
    const std::string claim = claim_of(spec);
    EXPECT_NE(claim.find(" shared"), std::string::npos) << claim;
    const pid_t host = std::atoi(claim.c_str());
    const auto [ppid, cmdline] = parent_and_cmdline(host);
    EXPECT_EQ(ppid, ::getpid());
    EXPECT_NE(cmdline.find("--host"), std::string::npos) << cmdline;
    ++attempts_by_host[host];
  }
  EXPECT_EQ(attempts_by_host.size(), hosts);
  for (const auto& [pid, count] : attempts_by_host) EXPECT_EQ(count, 2) << "host " << pid;
  const LaunchSpec& first = sleepers[0];
  const LaunchSpec& second = sleepers[hosts];  // the same host as the first, in turn
  const pid_t host = std::atoi(claim_of(second).c_str());
  ASSERT_EQ(std::atoi(claim_of(first).c_str()), host);

  executor_->Cancel(first.job_id, first.attempt);
  const auto cancelled = results_.Wait(first.job_id);
  ASSERT_TRUE(cancelled.has_value());
  EXPECT_EQ(cancelled->outcome, RunOutcome::kCancelled) << cancelled->reason;
  EXPECT_EQ(results_.Count(second.job_id), 0) << "the cancel reached the other attempt";

  ASSERT_EQ(::kill(host, SIGKILL), 0);
  const auto lost = results_.Wait(second.job_id);
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->outcome, RunOutcome::kLost) << lost->reason;
  for (const LaunchSpec& spec : sleepers) executor_->Cancel(spec.job_id, spec.attempt);  // the other hosts' ones
  for (const LaunchSpec& spec : sleepers) EXPECT_TRUE(results_.Wait(spec.job_id).has_value());
  for (int i = 0; i < 3; ++i) {  // the first after the death may find it gone; all use a new one
    const LaunchSpec next = Spec({"/bin/sh", "-c", "echo again"});
    const RunResult r = Run(next);
    EXPECT_EQ(r.outcome, RunOutcome::kCompleted) << r.reason;
    EXPECT_EQ(Stdout(next), "again\n");
    EXPECT_NE(std::atoi(ReadFile(AttemptDir(next) + "/claim").c_str()), host);
  }
  EXPECT_TRUE(Eventually([&] { return !fs::exists("/proc/" + std::to_string(host)); }))
      << "the dead host was not reaped";
}

// An isolated job runs under a PID 1 that is a copy of its host and never
// execs. It must keep nothing of the host open: not the socket to the
// executor (a dead host would go unnoticed for as long as the job runs)
// and not another attempt's claim (its lock would outlive the attempt).
TEST_F(ExecutorTest, AnIsolatedJobKeepsNothingOfItsHostOpen) {
  if (::geteuid() != 0) GTEST_SKIP() << "isolated jobs need root";
  LaunchSpec isolated = Spec({"/bin/sleep", "30"});
  isolated.isolate = true;
  isolated.sandbox_uid_lock_dir = base_ + "/uids";
  ASSERT_TRUE(executor_->Launch(isolated).ok());
  const std::string dir = AttemptDir(isolated);
  ASSERT_TRUE(Eventually([&] { return fs::exists(dir + "/state.json"); }));
  const pid_t host = std::atoi(ReadFile(dir + "/claim").c_str());
  ASSERT_GT(host, 0);
  // The PID 1 and the job: the host's children in the attempt's pids group.
  std::vector<pid_t> job_pids;
  ASSERT_TRUE(Eventually([&] {
    const std::string group = PidsGroup(std::to_string(isolated.job_id) + "-1-" + std::to_string(host));
    if (group.empty()) return false;
    job_pids.clear();
    std::istringstream procs(ReadFile(group + "/cgroup.procs"));
    for (pid_t pid = 0; procs >> pid;) job_pids.push_back(pid);
    return job_pids.size() >= 2;  // the PID 1 and sleep
  })) << "no pids group with the job's two processes";
  // Until the job's exec its process holds the report pipe (close-on-exec);
  // after it, nothing above fd 2 may be left in either process.
  std::string held;
  const bool clean = Eventually([&] {
    held.clear();
    for (pid_t pid : job_pids) {
      std::error_code ec;
      for (const auto& fd : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
        if (std::atoi(fd.path().filename().c_str()) < 3) continue;
        held += "process " + std::to_string(pid) + " holds fd " + fd.path().filename().string() + " -> " +
                fs::read_symlink(fd.path(), ec).string() + "\n";
      }
    }
    return held.empty();
  });
  EXPECT_TRUE(clean) << held;
  ASSERT_EQ(::kill(host, SIGKILL), 0);
  const auto lost = results_.Wait(isolated.job_id);
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->outcome, RunOutcome::kLost) << lost->reason;
}

// A host that takes no launch for 5 s (here: stopped, as when a job's exec
// hangs on a network filesystem while the host waits for it) is retired,
// not killed: launches go to a new host (this one to a supervisor of its
// own), and the launches queued in the stuck host's socket run once it goes
// on. None is reported lost meanwhile.
TEST_F(ExecutorTest, AStuckHostIsRetiredAndTheLaunchesQueuedThereStillRun) {
  const LaunchSpec probe = Spec({"true"});
  ASSERT_EQ(Run(probe).outcome, RunOutcome::kCompleted);
  const pid_t stuck = std::atoi(ReadFile(AttemptDir(probe) + "/claim").c_str());
  ASSERT_GT(stuck, 0);
  ASSERT_EQ(::kill(stuck, SIGSTOP), 0);
  // Whatever fails below, the host is let go on (it exits once its socket
  // is closed and its attempts are over).
  struct Resume {
    pid_t pid;
    ~Resume() { ::kill(pid, SIGCONT); }
  } resume{stuck};
  // Enough launches to fill its socket (a few hundred requests) whichever
  // host they go to in turn.
  std::vector<LaunchSpec> specs;
  const size_t hosts = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  for (size_t i = 0; i < 600 * hosts; ++i) {
    specs.push_back(Spec({"true"}));
    ASSERT_TRUE(executor_->Launch(specs.back()).ok());
  }
  // Launched past the stuck host: a new one (or a supervisor of its own).
  const LaunchSpec later = Spec({"/bin/sh", "-c", "echo later"});
  EXPECT_EQ(Run(later).outcome, RunOutcome::kCompleted);
  EXPECT_NE(std::atoi(ReadFile(AttemptDir(later) + "/claim").c_str()), stuck);
  std::this_thread::sleep_for(500ms);  // the watcher's scans see the queued ones unclaimed
  for (const LaunchSpec& spec : specs) {
    if (results_.Count(spec.job_id) == 0) continue;
    const auto r = results_.Wait(spec.job_id);
    EXPECT_NE(r->outcome, RunOutcome::kLost) << "job " << spec.job_id << ": " << r->reason;
  }
  ASSERT_EQ(::kill(stuck, SIGCONT), 0);
  for (const LaunchSpec& spec : specs) {
    const auto r = results_.Wait(spec.job_id);
    ASSERT_TRUE(r.has_value()) << "no result for job " << spec.job_id;
    EXPECT_EQ(r->outcome, RunOutcome::kCompleted) << "job " << spec.job_id << ": " << r->reason;
  }
}

// The supervisor of one attempt (`unisched-supervisor ATTEMPT_DIR`, the
// executor's fallback when no host takes a launch) runs the same steps as
// the host: the job to its result, a claim without " shared", exit 0 once
// the result is written; SIGTERM cancels, with the kill grace.
TEST_F(ExecutorTest, ASupervisorOfOneAttemptRunsItsJobAndStopsOnSigterm) {
  fs::create_directories(options_.runs_dir);
  fs::create_directories(options_.work_root);
  ::chmod(options_.work_root.c_str(), 0711);
  const passwd* pw = ::getpwnam(kJobUser);
  ASSERT_NE(pw, nullptr);
  const files::ResolvedAccount account{pw->pw_uid, pw->pw_gid, {pw->pw_gid}};
  // Starts the supervisor with the spec on its stdin, as the executor does.
  const auto start = [&](const LaunchSpec& spec) {
    const std::string spec_file = base_ + "/spec-" + std::to_string(spec.job_id) + ".json";
    std::ofstream(spec_file) << files::SpecToJson(
        files::AttemptSpec{spec, options_.work_root + "/" + std::to_string(spec.job_id), true, account, std::string()});
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int in = ::open(spec_file.c_str(), O_RDONLY);
      if (in < 0 || ::dup2(in, 0) < 0) ::_exit(120);
      ::execl(options_.supervisor_path.c_str(), options_.supervisor_path.c_str(), AttemptDir(spec).c_str(),
              static_cast<char*>(nullptr));
      ::_exit(121);
    }
    return pid;
  };
  const auto wait_exit = [](pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  };

  const LaunchSpec echo = Spec({"/bin/sh", "-c", "echo alone"});
  EXPECT_EQ(wait_exit(start(echo)), 0);
  const std::string result = ReadFile(AttemptDir(echo) + "/result.json");
  EXPECT_NE(result.find(R"("outcome": "completed")"), std::string::npos) << result;
  EXPECT_EQ(ReadFile(AttemptDir(echo) + "/stdout"), "alone\n");
  const std::string claim = ReadFile(AttemptDir(echo) + "/claim");
  EXPECT_EQ(claim.find("shared"), std::string::npos) << claim;

  const LaunchSpec sleeper = Spec({"/bin/sleep", "30"});
  const pid_t supervisor = start(sleeper);
  ASSERT_TRUE(Eventually([&] { return fs::exists(AttemptDir(sleeper) + "/state.json"); }));
  ASSERT_EQ(::kill(supervisor, SIGTERM), 0);
  EXPECT_EQ(wait_exit(supervisor), 0);
  const std::string cancelled = ReadFile(AttemptDir(sleeper) + "/result.json");
  EXPECT_NE(cancelled.find(R"("outcome": "cancelled")"), std::string::npos) << cancelled;
}

// The daemon out of descriptors (idle connections took them all): the
// account lookup fails with EMFILE. That says nothing about the account, so
// the launch error is transient, and the next attempt, once descriptors are
// free again, runs.
TEST_F(ExecutorTest, AnAccountLookupOutOfDescriptorsIsATransientLaunchError) {
  // A fresh executor: no account found yet, so the launch looks it up.
  auto executor = MakeLocalExecutor(options_, results_.Sink());
  LaunchSpec spec = Spec({"/bin/sh", "-c", "echo ran"});
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit none = saved;
  none.rlim_cur = 0;  // no new descriptor for any thread of this process
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &none), 0);
  const Status s = executor->Launch(spec);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, kTransientLaunchCode) << s.error().message;
  EXPECT_NE(s.error().message.find("cannot look up user 'unisched-job': Too many open files"), std::string::npos)
      << s.error().message;
  EXPECT_FALSE(fs::exists(AttemptDir(spec) + "/claim"));
  // What the daemon and an agent make of it, and what reaches the daemon.
  const RunResult failed = LaunchFailure(spec.job_id, spec.attempt, s.error(), "on node n1: ");
  EXPECT_EQ(failed.outcome, RunOutcome::kLaunchFailed);
  EXPECT_TRUE(failed.transient);
  EXPECT_EQ(failed.reason, "on node n1: " + s.error().message);
  auto decoded = files::ResultFromJson(files::ResultToJson(failed).dump());
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(decoded->transient);

  spec.attempt = 2;
  ASSERT_TRUE(executor->Launch(spec).ok());
  const auto r = results_.Wait(spec.job_id, 2);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, RunOutcome::kCompleted) << r->reason;
  EXPECT_EQ(Stdout(spec), "ran\n");
}

// A permanent launch error stays permanent, and a result that predates the
// flag (or an agent's that does not send it) is permanent too.
TEST_F(ExecutorTest, OnlyTransientLaunchErrorsAreMarkedTransient) {
  LaunchSpec spec = Spec({"echo", "x"});
  spec.unix_user = "no-such-user-unisched";
  const Status s = executor_->Launch(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().code, kTransientLaunchCode);
  EXPECT_FALSE(LaunchFailure(spec.job_id, spec.attempt, s.error()).transient);
  auto old = files::ResultFromJson(R"({"job_id": 1, "attempt": 1, "outcome": "launch_failed", "reason": "x"})");
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->transient);
  // The flag means something only for a launch failure.
  auto completed = files::ResultFromJson(R"({"job_id": 1, "attempt": 1, "outcome": "completed", "transient": true})");
  ASSERT_TRUE(completed.ok());
  EXPECT_FALSE(completed->transient);
}

// A supervisor host out of descriptors cannot take the spec's descriptor
// from a launch request: it says so at once (it used to drop the request
// and leave the attempt waiting for as long as it lived), the attempt is a
// transient launch failure, and the next one runs once the host has
// descriptors again.
TEST_F(ExecutorTest, AHostOutOfDescriptorsReportsATransientLaunchFailure) {
  // Every host started (one per CPU, each at its turn); their pids from the claims.
  const size_t count = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  std::set<pid_t> hosts;
  for (size_t i = 0; i < count; ++i) {
    const LaunchSpec warm = Spec({"/bin/true"});
    ASSERT_EQ(Run(warm).outcome, RunOutcome::kCompleted);
    const std::string claim = ReadFile(AttemptDir(warm) + "/claim");
    ASSERT_NE(claim.find(" shared"), std::string::npos) << claim;
    hosts.insert(std::atoi(claim.c_str()));
  }
  ASSERT_EQ(hosts.size(), count);
  std::map<pid_t, rlimit> saved;
  for (pid_t host : hosts) {
    rlimit old{};
    ASSERT_EQ(::prlimit(host, RLIMIT_NOFILE, nullptr, &old), 0);
    rlimit none = old;
    none.rlim_cur = 0;
    ASSERT_EQ(::prlimit(host, RLIMIT_NOFILE, &none, nullptr), 0);
    saved[host] = old;
  }
  LaunchSpec spec = Spec({"/bin/sh", "-c", "echo ran"});
  ASSERT_TRUE(executor_->Launch(spec).ok());
  const auto failed = results_.Wait(spec.job_id, 1);
  for (const auto& [host, limit] : saved) EXPECT_EQ(::prlimit(host, RLIMIT_NOFILE, &limit, nullptr), 0);
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->outcome, RunOutcome::kLaunchFailed) << failed->reason;
  EXPECT_TRUE(failed->transient) << failed->reason;
  EXPECT_NE(failed->reason.find("Too many open files"), std::string::npos) << failed->reason;
  EXPECT_FALSE(fs::exists(AttemptDir(spec) + "/claim"));

  spec.attempt = 2;
  const RunResult r = Run(spec);
  EXPECT_EQ(r.outcome, RunOutcome::kCompleted) << r.reason;
  EXPECT_EQ(Stdout(spec), "ran\n");
  EXPECT_TRUE(hosts.count(std::atoi(ReadFile(AttemptDir(spec) + "/claim").c_str())) > 0) << "not run by the same hosts";
}

// A supervisor of one attempt that cannot create its claim for want of
// descriptors exits 75 (EX_TEMPFAIL) with nothing claimed, which the
// executor reports as a transient launch failure instead of `lost`.
TEST_F(ExecutorTest, ASupervisorOutOfDescriptorsExitsTempfailWithoutAClaim) {
  fs::create_directories(options_.runs_dir);
  const LaunchSpec spec = Spec({"/bin/true"});
  const std::string spec_file = base_ + "/spec.json";
  std::ofstream(spec_file) << files::SpecToJson(files::AttemptSpec{spec, "", false, std::nullopt, std::string()});
  // Leak checking at exit needs descriptors (LeakSanitizer reads
  // /proc/<pid>/task), which this supervisor has none of: off in a
  // sanitizer build, a no-op otherwise.
  std::vector<std::string> env_text = {"ASAN_OPTIONS=detect_leaks=0"};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).rfind("ASAN_OPTIONS=", 0) != 0) env_text.emplace_back(*e);
  }
  std::vector<char*> env;
  for (std::string& e : env_text) env.push_back(e.data());
  env.push_back(nullptr);
  const std::string dir = AttemptDir(spec);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int in = ::open(spec_file.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0 || ::dup2(in, 0) < 0) ::_exit(120);
    ::close_range(3, ~0U, 0);
    // Its signalfd and epoll set take 3 and 4; the claim finds none free.
    rlimit five{};
    ::getrlimit(RLIMIT_NOFILE, &five);
    five.rlim_cur = 5;
    if (::setrlimit(RLIMIT_NOFILE, &five) != 0) ::_exit(122);
    char* const argv[] = {options_.supervisor_path.data(), const_cast<char*>(dir.c_str()), nullptr};
    ::execve(options_.supervisor_path.c_str(), argv, env.data());
    ::_exit(121);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), files::kExitTransient);
  EXPECT_FALSE(fs::exists(AttemptDir(spec) + "/claim"));
  EXPECT_FALSE(fs::exists(AttemptDir(spec) + "/result.json"));
}

}  // namespace
}  // namespace unisched::executor
