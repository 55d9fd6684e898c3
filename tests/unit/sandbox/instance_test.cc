// A real sandbox instance (unisched-sandbox) started and driven directly,
// without the daemon: the runtime's own contract. Needs root (namespaces,
// cgroups, uid switch); skipped otherwise. The daemon-level security tests
// are tests/integration/sandbox_test.cc.

#include "unisched/sandbox/instance.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "unisched/isolation/protocol.h"

namespace unisched::sandbox {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string InitPath() {
  return (fs::path(UNISCHED_BINARY).parent_path() / "unisched-sandbox").string();
}

class InstanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "sandbox instances need root";
    dir_ = fs::temp_directory_path() / ("unisched-instance-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::unique_ptr<Instance> Start(const std::string& name, containment::Limits limits = {}) {
    InstanceSpec spec;
    spec.name = "test-" + name + "-" + std::to_string(::getpid());
    spec.init_path = InitPath();
    spec.work_dir = (dir_ / name).string();
    spec.limits = limits;
    spec.uid = isolation::UidLease::Acquire((dir_ / "uids").string(), 3'900'000, 1000, ::getpid());
    auto instance = Instance::Start(std::move(spec));
    EXPECT_TRUE(instance.ok()) << (instance.ok() ? "" : instance.error().message);
    return instance.ok() ? std::move(instance).value() : nullptr;
  }

  // The calls' own deadlines are generous: an answer late on a slow host
  // (the sanitizers) is not what these tests check.
  static json Exec(Instance& instance, std::vector<std::string> argv, int timeout_ms = 10'000) {
    auto answer = instance.Call({{"op", "exec"}, {"argv", argv}, {"timeout_ms", timeout_ms}}, timeout_ms + 30'000);
    EXPECT_TRUE(answer.ok());
    return answer.ok() ? *answer : json();
  }
  static std::string Out(const json& answer) { return isolation::BytesOf(answer["stdout"]); }

  fs::path dir_;
};

TEST_F(InstanceTest, RunsCommandsAsItsOwnUidInItsOwnNamespaces) {
  auto instance = Start("basic");
  ASSERT_TRUE(instance);
  json r = Exec(*instance, {"true"});
  EXPECT_EQ(r["exit_code"], 0);
  r = Exec(*instance, {"sh", "-c", "id -u; hostname; pwd; echo $HOME"});
  EXPECT_EQ(Out(r), std::to_string(instance->uid()) + "\nsandbox\n/home/sandbox\n/home/sandbox\n")
      << isolation::BytesOf(r["stderr"]);
  // Its own pid namespace: the init is PID 1, and python the only other.
  r = Exec(*instance, {"python3", "-c",
                       "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit())[:1], len([p for p "
                       "in os.listdir('/proc') if p.isdigit()]))"});
  EXPECT_EQ(Out(r), "[1] 2\n");
  r = Exec(*instance, {"sh", "-c", "exit 7"});
  EXPECT_EQ(r["exit_code"], 7);
  r = Exec(*instance, {"no-such-program"});
  EXPECT_EQ(r["exit_code"], 127);
  EXPECT_NE(isolation::BytesOf(r["stderr"]).find("cannot execute 'no-such-program'"), std::string::npos);
}

TEST_F(InstanceTest, FilesGoToTheWorkDirectoryOnly) {
  auto instance = Start("files");
  ASSERT_TRUE(instance);
  auto put = instance->Call({{"op", "put"}, {"path", "src/a.txt"}, {"data", isolation::Bytes("hello\n")}}, 30'000);
  ASSERT_TRUE(put.ok());
  EXPECT_EQ((*put)["size"], 6) << put->dump();
  json r = Exec(*instance, {"cat", "src/a.txt"});
  EXPECT_EQ(Out(r), "hello\n");
  auto get = instance->Call({{"op", "get"}, {"path", "src/a.txt"}}, 30'000);
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(isolation::BytesOf((*get)["data"]), "hello\n");
  auto missing = instance->Call({{"op", "get"}, {"path", "nope"}}, 30'000);
  EXPECT_EQ((*missing)["code"], "not_found");
  r = Exec(*instance,
           {"sh", "-c", "touch /usr/x 2>&1; touch /var/tmp/x 2>&1; touch /run/lock/x 2>&1; cat /etc/shadow 2>&1"});
  const std::string out = Out(r);
  EXPECT_NE(out.find("/usr/x"), std::string::npos) << out;
  EXPECT_NE(out.find("/run/lock/x"), std::string::npos) << out;
  EXPECT_NE(out.find("Permission denied"), std::string::npos) << out;
}

TEST_F(InstanceTest, TimeoutKillsTheCommandAndDestroyLeavesNothing) {
  auto instance = Start("timeout", {64 << 20, 0, 64});
  ASSERT_TRUE(instance);
  json r = Exec(*instance, {"sleep", "30"}, 300);
  EXPECT_TRUE(r["timed_out"].get<bool>());
  EXPECT_EQ(r["exit_code"], 137);
  const std::string work = instance->work_dir();
  const pid_t pid = instance->pid();
  EXPECT_TRUE(fs::exists(work));
  instance->Destroy();
  EXPECT_FALSE(fs::exists(work));
  EXPECT_NE(::kill(pid, 0), 0);
}

}  // namespace
}  // namespace unisched::sandbox
