// Containment against the real kernel: groups, limits, joining, killing a
// whole tree, OOM detection, removal, and the rlimit fallback. Tests that
// need cgroups skip where the machine (or the user) has none.

#include "unisched/containment/containment.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace unisched::containment {
namespace {

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string ReadTrimmed(const std::string& path) {
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool HaveCgroupV1() {
  return ::geteuid() == 0 && Exists("/sys/fs/cgroup/memory/memory.limit_in_bytes") &&
         Exists("/sys/fs/cgroup/pids/cgroup.procs") && Exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
}

std::string UniqueName(const char* what) {
  static int counter = 0;
  return std::string("test-") + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
}

// Waits (bounded) for a condition that the kernel makes true asynchronously.
// The bound is generous: a slow CI host under the sanitizers must not hit it.
template <class F>
bool Eventually(F done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// Forks a child that joins `c` and then runs `body`; returns its pid.
template <class F>
pid_t ForkJoined(const Containment& c, F body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (c.JoinSelf() != 0) ::_exit(100);
    if (c.ApplyRlimitsSelf() != 0) ::_exit(101);
    ::_exit(body());
  }
  return pid;
}

int WaitStatus(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(ContainmentTest, RejectsNamesThatAreNotOnePathComponent) {
  for (const std::string name : {"", ".", "..", "a/b", "/abs"}) {
    SCOPED_TRACE(name);
    auto c = Containment::Create(name, Limits{});
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().code, "bad_containment_name");
  }
}

TEST(ContainmentTest, WithoutHierarchiesFallsBackToRlimits) {
  char tmpl[] = "/tmp/unisched-containment-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  Options options;
  options.cgroup_root = tmpl;  // an empty directory: no controllers at all
  auto c = Containment::Create("job", Limits{64 << 20, 500, 10}, options);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FALSE(c->has_memory_group());
  EXPECT_FALSE(c->has_cpu_group());
  EXPECT_FALSE(c->has_pids_group());
  EXPECT_FALSE(c->has_unified_group());
  EXPECT_EQ(c->Describe(), "rlimits");
  EXPECT_TRUE(c->Destroy().ok());
  ::rmdir(tmpl);
}

// A cgroup v2 host, as a directory tree shaped like one: the files the
// kernel would create are made by hand, and what Create writes is read back.
// (Enforcement itself needs a real v2 host; this machine's v2 has no
// controllers: shared/design/toolchain.md section 4.)
TEST(ContainmentTest, OnACgroupV2HostTheLimitsGoToTheV2Group) {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/unisched-containment-v2-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path root = tmpl;
  auto put = [](const fs::path& file, const std::string& text) { std::ofstream(file) << text; };
  auto get = [](const fs::path& file) {
    std::ifstream in(file);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  put(root / "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
  put(root / "cgroup.subtree_control", "");
  const fs::path group = root / "unisched" / "job";
  fs::create_directories(group);
  put(root / "unisched" / "cgroup.subtree_control", "");
  for (const char* file : {"cgroup.procs", "cgroup.kill", "memory.max", "memory.swap.max", "cpu.max", "pids.max"}) {
    put(group / file, "");
  }
  put(group / "memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n");
  put(group / "memory.peak", "12345\n");
  Options options;
  options.cgroup_root = tmpl;
  auto c = Containment::Create("job", Limits{64 << 20, 500, 10}, options);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FALSE(c->has_memory_group());  // no v1 hierarchies here
  EXPECT_TRUE(c->has_unified_group());
  EXPECT_EQ(get(group / "memory.max"), std::to_string(64 << 20));
  EXPECT_EQ(get(group / "memory.swap.max"), "0");
  EXPECT_EQ(get(group / "cpu.max"), "50000 100000");  // half a CPU of each 100 ms period
  EXPECT_EQ(get(group / "pids.max"), "10");
  EXPECT_EQ(c->Describe(), "cgroup v2 memory,cpu,pids");
  EXPECT_TRUE(c->OomKilled());
  EXPECT_EQ(c->MaxMemoryBytes(), 12345);
  // No rlimit fallback for what the v2 group limits.
  const pid_t pid = ForkJoined(*c, [] {
    rlimit as{};
    ::getrlimit(RLIMIT_AS, &as);
    return as.rlim_cur == RLIM_INFINITY ? 0 : 1;
  });
  const int status = WaitStatus(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  fs::remove_all(root);
}

TEST(ContainmentTest, DisabledAppliesRlimitsInTheChild) {
  const Containment c = Containment::Disabled(Limits{256 << 20, 0, 50});
  const pid_t pid = ForkJoined(c, [] {
    rlimit as{}, nproc{};
    ::getrlimit(RLIMIT_AS, &as);
    ::getrlimit(RLIMIT_NPROC, &nproc);
    return (as.rlim_cur == (256u << 20) && nproc.rlim_cur == 50) ? 0 : 1;
  });
  const int status = WaitStatus(pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ContainmentTest, SetLimitsChangesTheGroupsBothWays) {
  if (!HaveCgroupV1()) GTEST_SKIP() << "needs root and cgroup v1 memory/cpu/pids";
  const std::string name = UniqueName("setlimits");
  auto c = Containment::Create(name, Limits{64 << 20, 250, 7});
  ASSERT_TRUE(c.ok()) << c.error().message;
  const std::string mem = "/sys/fs/cgroup/memory/unisched/" + name;
  const bool memsw = Exists(mem + "/memory.memsw.limit_in_bytes");
  // Up (memsw must be raised first), then down (the plain limit first).
  for (const Limits& limits : {Limits{256 << 20, 2000, 100}, Limits{32 << 20, 500, 5}}) {
    ASSERT_TRUE(c->SetLimits(limits).ok());
    EXPECT_EQ(ReadTrimmed(mem + "/memory.limit_in_bytes"), std::to_string(limits.memory_bytes));
    if (memsw) {
      EXPECT_EQ(ReadTrimmed(mem + "/memory.memsw.limit_in_bytes"), std::to_string(limits.memory_bytes));
    }
    EXPECT_EQ(ReadTrimmed("/sys/fs/cgroup/cpu/unisched/" + name + "/cpu.cfs_quota_us"),
              std::to_string(limits.cpu_millis * 100));
    EXPECT_EQ(ReadTrimmed("/sys/fs/cgroup/pids/unisched/" + name + "/pids.max"), std::to_string(limits.pids));
  }
  EXPECT_EQ(c->limits().pids, 5);
  ASSERT_TRUE(c->Destroy().ok());
  // Without groups the limits are rlimits of the process: not changeable here.
  Containment plain = Containment::Disabled(Limits{64 << 20, 0, 0});
  EXPECT_FALSE(plain.SetLimits(Limits{128 << 20, 0, 0}).ok());
}

TEST(ContainmentTest, CreateWritesLimitsAndDestroyRemovesGroups) {
  if (!HaveCgroupV1()) GTEST_SKIP() << "needs root and cgroup v1 memory/cpu/pids";
  const std::string name = UniqueName("limits");
  auto c = Containment::Create(name, Limits{64 << 20, 250, 7});
  ASSERT_TRUE(c.ok()) << c.error().message;
  const std::string mem = "/sys/fs/cgroup/memory/unisched/" + name;
  const std::string cpu = "/sys/fs/cgroup/cpu/unisched/" + name;
  const std::string pids = "/sys/fs/cgroup/pids/unisched/" + name;
  struct Case {
    std::string file;
    std::string want;
  };
  std::vector<Case> cases = {
      {mem + "/memory.limit_in_bytes", std::to_string(64 << 20)},
      {cpu + "/cpu.cfs_period_us", "100000"},
      {cpu + "/cpu.cfs_quota_us", "25000"},
      {pids + "/pids.max", "7"},
  };
  if (Exists(mem + "/memory.memsw.limit_in_bytes")) {
    cases.push_back({mem + "/memory.memsw.limit_in_bytes", std::to_string(64 << 20)});
  }
  for (const Case& k : cases) {
    SCOPED_TRACE(k.file);
    EXPECT_EQ(ReadTrimmed(k.file), k.want);
  }
  EXPECT_TRUE(c->has_memory_group());
  EXPECT_NE(c->Describe().find("cgroup v1 memory,cpu,pids"), std::string::npos) << c->Describe();

  ASSERT_TRUE(c->Destroy().ok());
  for (const std::string& dir : {mem, cpu, pids, std::string("/sys/fs/cgroup/unified/unisched/") + name}) {
    EXPECT_FALSE(Exists(dir)) << dir;
  }
  EXPECT_TRUE(c->Destroy().ok());  // idempotent
}

TEST(ContainmentTest, KillAllReachesProcessesThatLeftTheProcessGroup) {
  if (!HaveCgroupV1()) GTEST_SKIP() << "needs root and cgroup v1";
  auto c = Containment::Create(UniqueName("kill"), Limits{});
  ASSERT_TRUE(c.ok()) << c.error().message;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  // The child starts a grandchild in a session of its own (out of any
  // process group we know), tells us, and both sleep.
  const pid_t pid = ForkJoined(*c, [&] {
    if (::fork() == 0) {
      ::setsid();
      (void)!::write(ready[1], "x", 1);
      ::pause();
      ::_exit(0);
    }
    ::pause();
    return 0;
  });
  ::close(ready[1]);
  char x;
  ASSERT_EQ(::read(ready[0], &x, 1), 1);
  ::close(ready[0]);
  c->TrackProcessGroup(pid);
  EXPECT_EQ(c->Pids().size(), 2u);

  c->KillAll(SIGKILL);
  const int status = WaitStatus(pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  // The grandchild is re-parented to init; it leaves the groups when it dies.
  EXPECT_TRUE(Eventually([&] { return c->Pids().empty(); }));
  EXPECT_TRUE(c->Destroy().ok());
}

// A dead owner's groups: Find opens what is there and makes nothing, and
// KillAllAndDestroy leaves neither process nor group.
TEST(ContainmentTest, FindOpensLeftoverGroupsWhichKillAllAndDestroyRemoves) {
  if (!HaveCgroupV1()) GTEST_SKIP() << "needs root and cgroup v1";
  const std::string missing = UniqueName("missing");
  EXPECT_FALSE(Containment::Find(missing).has_value());
  EXPECT_FALSE(Exists("/sys/fs/cgroup/memory/unisched/" + missing)) << "Find must not create groups";

  const std::string name = UniqueName("leftover");
  auto owner = Containment::Create(name, Limits{});
  ASSERT_TRUE(owner.ok()) << owner.error().message;
  const pid_t pid = ForkJoined(*owner, [] {
    if (::fork() == 0) ::pause();  // a child of its own, left behind too
    ::pause();
    return 0;
  });
  ASSERT_TRUE(Eventually([&] { return owner->Pids().size() == 2; }));

  auto found = Containment::Find(name);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->has_memory_group(), owner->has_memory_group());
  EXPECT_EQ(found->has_pids_group(), owner->has_pids_group());
  EXPECT_EQ(found->has_unified_group(), owner->has_unified_group());
  EXPECT_EQ(found->Pids().size(), 2u);
  EXPECT_TRUE(found->KillAllAndDestroy().ok());
  const int status = WaitStatus(pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_FALSE(Exists("/sys/fs/cgroup/memory/unisched/" + name));
  EXPECT_FALSE(Exists("/sys/fs/cgroup/pids/unisched/" + name));
  EXPECT_FALSE(Containment::Find(name).has_value());
}

// Groups made under SubtreeDir (a sandbox's per-exec groups) go with the
// containment: a dead owner's KillAllAndDestroy kills their members and
// removes them before the group itself, which they would keep busy.
TEST(ContainmentTest, GroupsMadeUnderTheSubtreeDirAreKilledAndRemoved) {
  if (!HaveCgroupV1()) GTEST_SKIP() << "needs root and cgroup v1";
  const std::string name = UniqueName("subtree");
  auto owner = Containment::Create(name, Limits{});
  ASSERT_TRUE(owner.ok()) << owner.error().message;
  ASSERT_FALSE(owner->SubtreeDir().empty());
  const std::string sub = owner->SubtreeDir() + "/exec-1";
  ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
  // A process of the tree that moved itself into the sub-group.
  const std::string sub_procs = sub + "/cgroup.procs";
  const pid_t pid = ForkJoined(*owner, [&] {
    const int fd = ::open(sub_procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "0", 1) != 1) return 102;
    ::pause();
    return 0;
  });
  ASSERT_TRUE(Eventually([&] { return ReadTrimmed(sub_procs) == std::to_string(pid); }));
  auto found = Containment::Find(name);
  ASSERT_TRUE(found.has_value());
  Status destroyed = found->KillAllAndDestroy();
  EXPECT_TRUE(destroyed.ok()) << destroyed.error().message;
  const int status = WaitStatus(pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_FALSE(Exists(sub));
  EXPECT_FALSE(Exists(owner->SubtreeDir()));
}

TEST(ContainmentTest, MemoryLimitOomKillsAndIsReported) {
  if (!HaveCgroupV1()) GTEST_SKIP() << "needs root and cgroup v1";
  auto c = Containment::Create(UniqueName("oom"), Limits{32 << 20, 0, 0});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FALSE(c->OomKilled());
  const pid_t pid = ForkJoined(*c, [] {
    // Touch every page and read it back, so the allocation cannot be elided.
    const size_t size = 200u << 20;
    volatile char* p = static_cast<volatile char*>(std::malloc(size));
    if (p == nullptr) return 2;
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
    long sum = 0;
    for (size_t i = 0; i < size; i += 4096) sum += p[i];
    return sum > 0 ? 0 : 3;
  });
  const int status = WaitStatus(pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_TRUE(c->OomKilled());
  EXPECT_GT(c->MaxMemoryBytes(), 0);
  EXPECT_TRUE(c->Destroy().ok());
}

TEST(ContainmentTest, PidsLimitRefusesForks) {
  if (!HaveCgroupV1()) GTEST_SKIP() << "needs root and cgroup v1";
  auto c = Containment::Create(UniqueName("pids"), Limits{0, 0, 3});
  ASSERT_TRUE(c.ok()) << c.error().message;
  // The child itself is one of the 3; of 5 forks at most 2 succeed.
  const pid_t pid = ForkJoined(*c, [] {
    int refused = 0;
    std::vector<pid_t> kids;
    for (int i = 0; i < 5; ++i) {
      const pid_t k = ::fork();
      if (k == 0) {
        ::pause();
        ::_exit(0);
      }
      if (k < 0) {
        ++refused;
      } else {
        kids.push_back(k);
      }
    }
    for (pid_t k : kids) {
      ::kill(k, SIGKILL);
      ::waitpid(k, nullptr, 0);
    }
    return refused;
  });
  const int status = WaitStatus(pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  EXPECT_TRUE(c->Destroy().ok());
}

TEST(ContainmentTest, CgroupLimitsLeaveRlimitsAlone) {
  if (!HaveCgroupV1()) GTEST_SKIP() << "needs root and cgroup v1";
  auto c = Containment::Create(UniqueName("norlimit"), Limits{64 << 20, 0, 10});
  ASSERT_TRUE(c.ok()) << c.error().message;
  rlimit parent_as{};
  ::getrlimit(RLIMIT_AS, &parent_as);
  const pid_t pid = ForkJoined(*c, [&] {
    rlimit as{};
    ::getrlimit(RLIMIT_AS, &as);
    return as.rlim_cur == parent_as.rlim_cur ? 0 : 1;
  });
  const int status = WaitStatus(pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(c->Destroy().ok());
}

// The pool of emptied v1 groups, in a parent of this test's own (other
// tests share the default one). A fixture removes what is left.
class ContainmentPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveCgroupV1()) GTEST_SKIP() << "needs root and cgroup v1 memory/cpu/pids";
    options_.parent = UniqueName("pool-parent");
  }
  void TearDown() override {
    for (const std::string& dir : {Parent("memory"), Parent("cpu"), Parent("pids"), Parent("unified")}) {
      if (!Exists(dir)) continue;
      for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.is_directory()) ::rmdir(entry.path().c_str());
      }
      ::rmdir(dir.c_str());
    }
  }
  std::string Parent(const std::string& hierarchy) const {
    return "/sys/fs/cgroup/" + hierarchy + "/" + options_.parent;
  }
  // The pooled groups (pool-<k>) of a hierarchy.
  std::vector<std::string> Pooled(const std::string& hierarchy) const {
    std::vector<std::string> out;
    for (const auto& entry : std::filesystem::directory_iterator(Parent(hierarchy))) {
      if (entry.path().filename().string().rfind("pool-", 0) == 0) out.push_back(entry.path().string());
    }
    return out;
  }
  void EmptyPools() const {
    for (const char* hierarchy : {"memory", "cpu", "pids"}) {
      for (const std::string& dir : Pooled(hierarchy)) ::rmdir(dir.c_str());
    }
  }
  Options options_;
};

TEST_F(ContainmentPoolTest, AnEmptiedGroupIsReusedWithTheNextGroupsOwnLimits) {
  auto first = Containment::Create("first", Limits{64 << 20, 250, 7}, options_);
  ASSERT_TRUE(first.ok()) << first.error().message;
  const pid_t pid = ForkJoined(*first, [] { return 0; });
  ASSERT_EQ(WaitStatus(pid), 0);
  ASSERT_TRUE(first->Destroy().ok());
  for (const char* hierarchy : {"memory", "cpu", "pids"}) {
    SCOPED_TRACE(hierarchy);
    EXPECT_FALSE(Exists(Parent(hierarchy) + "/first"));
    EXPECT_EQ(Pooled(hierarchy).size(), 1u);
  }

  // Taken by the next Create, which asks for no limits at all: none of the
  // first group's may remain.
  auto second = Containment::Create("second", Limits{}, options_);
  ASSERT_TRUE(second.ok()) << second.error().message;
  for (const char* hierarchy : {"memory", "cpu", "pids"}) {
    SCOPED_TRACE(hierarchy);
    EXPECT_TRUE(Pooled(hierarchy).empty());
    EXPECT_TRUE(Exists(Parent(hierarchy) + "/second"));
  }
  EXPECT_GT(std::stoll(ReadTrimmed(Parent("memory") + "/second/memory.limit_in_bytes")), int64_t{1} << 40);
  EXPECT_EQ(ReadTrimmed(Parent("cpu") + "/second/cpu.cfs_quota_us"), "-1");
  EXPECT_EQ(ReadTrimmed(Parent("pids") + "/second/pids.max"), "max");
  EXPECT_FALSE(second->OomKilled());
  ASSERT_TRUE(second->Destroy().ok());
}

// A group whose job was OOM-killed cannot be reset (the kernel's counter
// stays), and one still charged with its job's memory would charge the next
// job: both are removed, not pooled. A group with a process left is never
// pooled either.
TEST_F(ContainmentPoolTest, GroupsThatCannotStartCleanAreRemovedNotPooled) {
  auto oom = Containment::Create("oom", Limits{32 << 20, 0, 0}, options_);
  ASSERT_TRUE(oom.ok()) << oom.error().message;
  const pid_t hog = ForkJoined(*oom, [] {
    const size_t size = 200u << 20;
    volatile char* p = static_cast<volatile char*>(std::malloc(size));
    if (p == nullptr) return 2;
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
    return 0;
  });
  WaitStatus(hog);
  ASSERT_TRUE(oom->OomKilled());
  ASSERT_TRUE(oom->Destroy().ok());
  EXPECT_FALSE(Exists(Parent("memory") + "/oom"));
  EXPECT_TRUE(Pooled("memory").empty()) << "an OOM-killed memory group was pooled";

  // 4 MiB in a tmpfs file stays charged to the group after its writer exits.
  const std::string file = "/dev/shm/" + UniqueName("charge");
  auto charged = Containment::Create("charged", Limits{64 << 20, 0, 0}, options_);
  ASSERT_TRUE(charged.ok()) << charged.error().message;
  const pid_t writer = ForkJoined(*charged, [&file] {
    std::ofstream out(file);
    const std::string block(1 << 20, 'x');
    for (int i = 0; i < 4; ++i) out << block;
    return out.good() ? 0 : 1;
  });
  ASSERT_EQ(WaitStatus(writer), 0);
  ASSERT_TRUE(charged->Destroy().ok());
  std::filesystem::remove(file);
  EXPECT_FALSE(Exists(Parent("memory") + "/charged"));
  EXPECT_TRUE(Pooled("memory").empty()) << "a memory group charged with 4 MiB was pooled";

  auto busy = Containment::Create("busy", Limits{}, options_);
  ASSERT_TRUE(busy.ok()) << busy.error().message;
  // The child joins the groups one after another: it reports only once it
  // is in all of them (seeing it in the first is not enough; CI once
  // checked between two joins and rightly found the pids group empty).
  int joined[2];
  ASSERT_EQ(::pipe(joined), 0);
  const pid_t sleeper = ForkJoined(*busy, [&joined] {
    (void)!::write(joined[1], "j", 1);
    ::pause();
    return 0;
  });
  ::close(joined[1]);
  char byte = 0;
  ASSERT_EQ(::read(joined[0], &byte, 1), 1) << "the child did not join its groups";
  ::close(joined[0]);
  EXPECT_FALSE(busy->Destroy().ok());  // it cannot be removed while the process lives ...
  for (const char* hierarchy : {"memory", "cpu", "pids"}) {
    EXPECT_TRUE(Pooled(hierarchy).empty()) << hierarchy << ": a group with a process was pooled";
  }
  ::kill(sleeper, SIGKILL);
  WaitStatus(sleeper);
  EXPECT_TRUE(busy->Destroy().ok());  // ... and once it is gone, is pooled or removed
  EmptyPools();

  // A thread moved in alone (v1 allows it; its process stays elsewhere)
  // keeps the group busy too.
  auto thread_host = Containment::Create("thread", Limits{0, 0, 5}, options_);
  ASSERT_TRUE(thread_host.ok()) << thread_host.error().message;
  const std::string tasks = Parent("pids") + "/thread/tasks";
  const pid_t owner = ::fork();
  if (owner == 0) {
    std::thread([&tasks] {
      std::ofstream(tasks) << ::gettid() << std::flush;
      ::pause();
    }).detach();
    ::pause();
    ::_exit(0);
  }
  ASSERT_TRUE(Eventually([&] { return ReadTrimmed(Parent("pids") + "/thread/pids.current") == "1"; }));
  EXPECT_FALSE(thread_host->Destroy().ok());  // not removable while the thread is there ...
  EXPECT_TRUE(Pooled("pids").empty()) << "a pids group with a thread in it was pooled";
  ::kill(owner, SIGKILL);
  WaitStatus(owner);
  EXPECT_TRUE(thread_host->Destroy().ok());  // ... and is once it is gone
}

}  // namespace
}  // namespace unisched::containment
