// Agent sandboxes through the real daemon (docs/sandboxes.md): the API, the
// lifecycle, and the walls, each tried from inside a sandbox with a positive
// control showing the tool it uses works. Needs root; skipped otherwise.

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "testing/config_text.h"
#include "testing/daemon.h"
#include "unisched/isolation/syscall_filter.h"

namespace unisched::testing {
namespace {

using nlohmann::json;

// Processes running as a uid, from the host's /proc.
int ProcessesOf(int64_t uid) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream status(entry.path() / "status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("Uid:", 0) == 0) {
        std::istringstream fields(line.substr(4));
        int64_t real = -1;
        fields >> real;
        if (real == uid) ++count;
        break;
      }
    }
  }
  return count;
}

// Processes running `sleep TOKEN`, from the host's /proc (the command line
// of a shell about to exec it holds the token too, hence the exact match).
int SleepersWith(const std::string& token) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream file(entry.path() / "cmdline");
    std::vector<std::string> argv;
    std::string arg;
    while (std::getline(file, arg, '\0')) argv.push_back(arg);
    if (argv.size() == 2 && std::filesystem::path(argv[0]).filename() == "sleep" && argv[1] == token) ++count;
  }
  return count;
}

// Waits up to 60 s for `done`; whether it came.
bool WaitFor(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "sandboxes need root";
  }
  void StartDaemon(const std::string& extra_config = "", const std::string& config = DefaultConfigText()) {
    d_.UseConfigText(config + extra_config);
    d_.Start();
  }
  std::string Create(const json& body = json::object()) {
    Reply r = d_.Call("POST", "/v1/sandboxes", body);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.json.value("id", "");
  }
  json Exec(const std::string& id, const std::vector<std::string>& argv, int timeout_seconds = 30) {
    Reply r =
        d_.Call("POST", "/v1/sandboxes/" + id + "/exec", json{{"argv", argv}, {"timeout_seconds", timeout_seconds}});
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json;
  }
  json Get(const std::string& id) { return d_.Call("GET", "/v1/sandboxes/" + id).json; }
  // A create over the CLI (a connection of its own) that waits for a slot:
  // after a while it is still waiting (`running` sandboxes listed), then
  // `free_a_slot` runs and the create gets its sandbox.
  void ExpectCreateWaitsFor(size_t running, const std::function<void()>& free_a_slot) {
    TestDaemon::CliResult waited;
    std::thread create([&] { waited = d_.RunCli({"sandbox", "create"}); });
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    EXPECT_EQ(d_.Call("GET", "/v1/sandboxes").json["sandboxes"].size(), running);  // still waiting
    free_a_slot();
    create.join();
    EXPECT_EQ(waited.exit_code, 0) << waited.err;
    EXPECT_EQ(waited.out.rfind("sb-", 0), 0u) << waited.out;
  }
  std::string Sh(const std::string& id, const std::string& script, int timeout_seconds = 30) {
    json r = Exec(id, {"/bin/sh", "-c", script}, timeout_seconds);
    return r.value("stdout", "") + r.value("stderr", "");
  }
  TestDaemon d_;
};

TEST_F(SandboxTest, CreateExecFilesAndDeleteThroughTheApi) {
  StartDaemon();
  Reply created = d_.Call("POST", "/v1/sandboxes", json{{"limits", {{"memory_mb", 256}}}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.json["id"];
  EXPECT_EQ(created.json["state"], "running");
  EXPECT_EQ(created.json["queue"], "agent-sandbox");
  EXPECT_EQ(created.json["pool"], "elastic-light-pool");
  EXPECT_EQ(created.json["image"], "host:1");
  EXPECT_EQ(created.json["limits"]["memory_mb"], 256);
  EXPECT_EQ(created.json["limits"]["cpus"], 1);

  json r = Exec(id, {"python3", "-c", "print(1)"});
  EXPECT_EQ(r["exit_code"], 0);
  EXPECT_EQ(r["stdout"], "1\n");
  EXPECT_TRUE(r["duration_ms"].is_number());

  Reply put =
      d_.Call("PUT", "/v1/sandboxes/" + id + "/files/src/main.py", std::string("print(open('data.txt').read())\n"));
  ASSERT_EQ(put.status, 200) << put.body;
  ASSERT_EQ(d_.Call("PUT", "/v1/sandboxes/" + id + "/files/src/data.txt", std::string("from the API")).status, 200);
  r = d_.Call("POST", "/v1/sandboxes/" + id + "/exec",
              json{{"argv", {"sh", "-c", "cd src && python3 main.py && cat > out.txt"}}, {"stdin", "piped in"}})
          .json;
  EXPECT_EQ(r["stdout"], "from the API\n") << r.dump();
  Reply got = d_.Call("GET", "/v1/sandboxes/" + id + "/files/src/out.txt");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body, "piped in");
  EXPECT_EQ(d_.Call("GET", "/v1/sandboxes/" + id + "/files/nope.txt").status, 404);
  EXPECT_EQ(d_.Call("GET", "/v1/sandboxes/" + id + "/files/../etc/passwd").status, 422);

  r = d_.Call("POST", "/v1/sandboxes/" + id + "/exec",
              json{{"argv", {"sh", "-c", "echo $A$B"}}, {"env", {{"A", "1"}, {"B", "2"}}}})
          .json;
  EXPECT_EQ(r["stdout"], "12\n") << r.dump();
  r = Exec(id, {"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r["exit_code"], 3);
  EXPECT_EQ(r["stdout"], "out\n");
  EXPECT_EQ(r["stderr"], "err\n");
  r = Exec(id, {"no-such-tool"});
  EXPECT_EQ(r["exit_code"], 127);

  // Each exec is an event; the sandbox is listed with its exec count.
  Reply events = d_.Call("GET", "/v1/events?kind=sandbox_exec&object=sandbox/" + id);
  EXPECT_EQ(events.json["events"].size(), 5u) << events.body;
  EXPECT_EQ(d_.Call("GET", "/v1/sandboxes/" + id).json["execs"], 5);

  Reply deleted = d_.Call("DELETE", "/v1/sandboxes/" + id);
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(deleted.json["state"], "deleted");
  EXPECT_EQ(d_.Call("GET", "/v1/sandboxes/" + id).json["state"], "deleted");
  EXPECT_EQ(d_.Call("POST", "/v1/sandboxes/" + id + "/exec", json{{"argv", {"true"}}}).status, 409);
  EXPECT_EQ(d_.Call("DELETE", "/v1/sandboxes/" + id).status, 409);

  // Metered: instance-seconds on its project and queue.
  Reply usage = d_.Call("GET", "/v1/usage?group_by=project,queue");
  ASSERT_EQ(usage.json["rows"].size(), 1u) << usage.body;
  EXPECT_EQ(usage.json["rows"][0]["queue"], "agent-sandbox");
  EXPECT_GT(usage.json["rows"][0]["instance_seconds"].get<double>(), 0.0);
  // The ledger reconciles with the sandbox's record.
  Reply reconcile = d_.Call("GET", "/v1/usage/reconcile");
  EXPECT_EQ(reconcile.json["missing"], 0) << reconcile.body;
  EXPECT_EQ(reconcile.json["mismatched"], 0) << reconcile.body;
  EXPECT_EQ(reconcile.json["duplicated"], 0) << reconcile.body;
  EXPECT_GE(reconcile.json["attempts_checked"].get<int>(), 1) << reconcile.body;
}

TEST_F(SandboxTest, BadRequestsAreRefusedAndCreateNothing) {
  StartDaemon();
  struct Case {
    json body;
    int status;
    std::string field;
  };
  const std::vector<Case> cases = {
      {{{"imagee", "host"}}, 422, "imagee"},
      {{{"limits", {{"memory_mb", -1}}}}, 422, "limits.memory_mb"},
      {{{"limits", {{"memory_mb", 10'000'000}}}}, 422, "limits.memory_mb"},
      {{{"limits", {{"cpus", 1000}}}}, 422, "limits.cpus"},
      {{{"limits", {{"timeout_seconds", 999'999}}}}, 422, "limits.timeout_seconds"},
      {{{"idle_timeout_seconds", 99'999}}, 422, "idle_timeout_seconds"},
      {{{"image", "nonexistent"}}, 422, "image"},
      {{{"queue", "hpc-precision"}}, 422, "queue"},
      {{{"project", "nope"}}, 422, "project"},
  };
  for (const Case& c : cases) {
    Reply r = d_.Call("POST", "/v1/sandboxes", c.body);
    EXPECT_EQ(r.status, c.status) << c.body.dump() << " -> " << r.body;
    EXPECT_EQ(r.json["error"]["field"], c.field) << r.body;
  }
  EXPECT_EQ(d_.Call("GET", "/v1/sandboxes?all=true").json["sandboxes"].size(), 0u);
  // Refused creates are audited too, with their status.
  Reply audit = d_.Call("GET", "/v1/audit");
  int refused = 0;
  for (const json& a : audit.json["audit"]) {
    if (a["action"] == "POST /v1/sandboxes" && a["result"].get<std::string>().rfind("422", 0) == 0) ++refused;
  }
  EXPECT_EQ(refused, static_cast<int>(cases.size())) << audit.body;
  // Another user sees none of admin's sandboxes.
  const std::string id = Create();
  const std::string token = d_.CreateUser("mallory", "user", {"default"});
  EXPECT_EQ(d_.Call("GET", "/v1/sandboxes/" + id, "", {}, &token).status, 404);
  EXPECT_EQ(d_.Call("POST", "/v1/sandboxes/" + id + "/exec", R"({"argv": ["true"]})", {}, &token).status, 404);
  EXPECT_EQ(d_.Call("GET", "/v1/sandboxes", "", {}, &token).json["sandboxes"].size(), 0u);
  Exec(id, {"echo", "private"});
  EXPECT_EQ(d_.Call("GET", "/v1/events?object=sandbox/" + id).json["events"].size(), 2u);  // created, exec
  EXPECT_EQ(d_.Call("GET", "/v1/events?object=sandbox/" + id, "", {}, &token).json["events"].size(), 0u);
}

TEST_F(SandboxTest, DeleteEndsAnExecInProgress) {
  StartDaemon();
  Reply created = d_.Call("POST", "/v1/sandboxes", json::object());
  ASSERT_EQ(created.status, 201);
  const std::string id = created.json["id"];
  TestDaemon::CliResult exec_reply;  // a connection of its own
  std::thread running([&] {
    exec_reply = d_.RunCli({"sandbox", "exec", id, "--", "sh", "-c", "touch started; exec sleep 60"});
  });
  // The exec runs once its file shows in the work directory (seen from the host).
  const std::string started = d_.state_dir() + "/sandboxes/" + created.json["instance"].get<std::string>() + "/started";
  const auto started_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::filesystem::exists(started) && std::chrono::steady_clock::now() < started_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(std::filesystem::exists(started));  // (no ASSERT: the thread must be joined)
  Reply deleted = d_.Call("DELETE", "/v1/sandboxes/" + id);
  running.join();
  EXPECT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(deleted.json["state"], "deleted");
  // The exec ends with the instance: an error, not the sleep's exit 0 a minute later.
  EXPECT_EQ(exec_reply.exit_code, 1) << exec_reply.out << exec_reply.err;
  EXPECT_NE(exec_reply.err.find("sandbox instance is gone"), std::string::npos) << exec_reply.err;
}

TEST_F(SandboxTest, NoNetworkButItsOwnLoopback) {
  StartDaemon();
  const std::string id = Create();
  // Positive control: sockets work inside, on the sandbox's own loopback.
  const std::string local =
      "import socket\n"
      "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
      "c = socket.create_connection(s.getsockname(), timeout=2); print('LOCAL_OK')\n";
  EXPECT_EQ(Exec(id, {"python3", "-c", local})["stdout"], "LOCAL_OK\n");
  // The daemon listens on the host's 127.0.0.1: unreachable from inside.
  const std::string daemon =
      "import socket\n"
      "try:\n"
      "  socket.create_connection(('127.0.0.1', " +
      std::to_string(d_.port()) +
      "), timeout=2); print('REACHED_DAEMON')\n"
      "except OSError as e: print('BLOCKED')\n";
  EXPECT_EQ(Exec(id, {"python3", "-c", daemon})["stdout"], "BLOCKED\n");
  EXPECT_EQ(Sh(id, "cat /sys/class/net/*/operstate 2>/dev/null | wc -l; ls /sys/class/net"), "1\nlo\n");
}

TEST_F(SandboxTest, CannotReadTheDaemonsStateTokensOrShadow) {
  StartDaemon();
  const std::string id = Create();
  // Positive controls: the tools work and world-readable files are readable.
  EXPECT_EQ(Sh(id, "head -c 5 /etc/passwd"), "root:");
  EXPECT_EQ(Sh(id, "id -u >/dev/null && echo ok"), "ok\n");
  const std::string out =
      Sh(id,
         "cat /etc/shadow >/dev/null 2>&1 && echo READ_SHADOW; "
         "ls " +
             d_.state_dir() +
             " >/dev/null 2>&1 && echo LISTED_STATE; "
             "cat " +
             d_.state_dir() +
             "/unisched.db >/dev/null 2>&1 && echo READ_DB; "
             "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done | grep '^unisched server'; "
             "grep -rl '" +
             d_.admin_token() + "' /proc/[0-9]*/environ 2>/dev/null; echo end");
  EXPECT_EQ(out, "end\n") << out;
  // Only the sandbox's own processes are visible: its init and python.
  EXPECT_EQ(Exec(id, {"python3", "-c",
                      "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit())[:1], len([p for p "
                      "in os.listdir('/proc') if p.isdigit()]))"})["stdout"],
            "[1] 2\n");
}

TEST_F(SandboxTest, CannotWriteOutsideItsWorkDirectoryNorToProcSys) {
  StartDaemon();
  const std::string id = Create();
  // Positive controls: the work directory and /tmp are writable.
  EXPECT_EQ(Sh(id, "echo x > ~/mine && cat ~/mine && echo y > /tmp/t && cat /tmp/t && pwd"), "x\ny\n/home/sandbox\n");
  const std::string out = Sh(id,
                             "for f in /usr/local/x /etc/x /var/tmp/x /run/lock/x /root/x /home/x; do "
                             "  touch $f 2>/dev/null && echo WROTE $f; done; "
                             "{ echo 1 > /proc/sys/kernel/ns_last_pid; } 2>/dev/null && echo WROTE_PROC_SYS; "
                             "{ echo 3 > /proc/sys/vm/drop_caches; } 2>/dev/null && echo WROTE_DROP_CACHES; "
                             "hostname evil 2>/dev/null && echo SET_HOSTNAME; echo end");
  EXPECT_EQ(out, "end\n") << out;
  EXPECT_FALSE(std::filesystem::exists("/var/tmp/x"));
}

TEST_F(SandboxTest, CannotReadAnotherSandboxsWorkDirectory) {
  StartDaemon();
  // An image that shows every instance's work directory (read-only) at /mnt,
  // so only the uid wall stands between two sandboxes.
  Reply image = d_.Call("POST", "/v1/images",
                        json{{"name", "peek"}, {"version", "1"}, {"binds", {d_.state_dir() + "/sandboxes:/mnt"}}});
  ASSERT_EQ(image.status, 201) << image.body;
  Reply a = d_.Call("POST", "/v1/sandboxes", json{{"image", "peek"}});
  Reply b = d_.Call("POST", "/v1/sandboxes", json{{"image", "peek"}});
  ASSERT_EQ(a.status, 201);
  ASSERT_EQ(b.status, 201);
  EXPECT_NE(a.json["uid"], b.json["uid"]);
  const std::string a_id = a.json["id"], b_id = b.json["id"];
  const std::string a_dir = "/mnt/" + a.json["instance"].get<std::string>();
  EXPECT_EQ(Sh(a_id, "echo secret-of-a > note && cat " + a_dir + "/note"), "secret-of-a\n");  // A reads its own
  EXPECT_EQ(Sh(b_id, "test -d " + a_dir + " && echo there"), "there\n");                      // B reaches the path
  const std::string out = Sh(b_id, "cat " + a_dir + "/note 2>&1; ls " + a_dir + " 2>&1; echo end");
  EXPECT_EQ(out.find("secret-of-a"), std::string::npos) << out;
  EXPECT_NE(out.find("Permission denied"), std::string::npos) << out;
}

TEST_F(SandboxTest, MemoryHogIsKilledByItsCap) {
  StartDaemon();
  const std::string id = Create(json{{"limits", {{"memory_mb", 64}}}});
  const std::string touch =
      "import sys\nn = int(sys.argv[1])\nb = bytearray(n << 20)\n"
      "for i in range(0, len(b), 4096): b[i] = 1\nprint('ALLOCATED', sum(b[::4096]) >> 8)\n";
  json small = Exec(id, {"python3", "-c", touch, "16"});
  EXPECT_EQ(small["exit_code"], 0) << small.dump();
  EXPECT_EQ(small["stdout"], "ALLOCATED 16\n");
  json hog = Exec(id, {"python3", "-c", touch, "300"});
  EXPECT_NE(hog["exit_code"], 0) << hog.dump();
  EXPECT_EQ(hog["stdout"], "") << hog.dump();
  EXPECT_EQ(Exec(id, {"true"})["exit_code"], 0);  // the instance itself lives on
}

TEST_F(SandboxTest, ForkBombIsContainedByThePidsCap) {
  StartDaemon("\nsandboxes:\n  pids_max: 64\n");
  const std::string id = Create();
  // Starts sleepers until fork fails; prints how many it got.
  const std::string spawn =
      "import os, time\nkids = []\n"
      "while len(kids) < 1000:\n"
      "  try:\n"
      "    pid = os.fork()\n"
      "  except OSError:\n"
      "    break\n"
      "  if pid == 0:\n"
      "    time.sleep(60); os._exit(0)\n"
      "  kids.append(pid)\n"
      "print(len(kids), flush=True)\n"
      "for k in kids: os.kill(k, 9); os.waitpid(k, 0)\n";
  json r = Exec(id, {"python3", "-c", spawn}, 20);
  ASSERT_EQ(r["exit_code"], 0) << r.dump();
  const int started = std::stoi(r["stdout"].get<std::string>());
  EXPECT_GT(started, 10);  // positive control: forking works
  EXPECT_LT(started, 64);  // the cap holds (init and python count too)
  // A real fork bomb, ended by its time cap; the sandbox answers afterwards.
  json bomb = Exec(id, {"sh", "-c", "b() { b | b; }; b"}, 2);
  // It hits the cap: forks fail ("fork failed" / EAGAIN) and it collapses,
  // or it keeps retrying until its time cap kills the group.
  const std::string bomb_err = bomb.value("stderr", "");
  EXPECT_TRUE(bomb.value("timed_out", false) || bomb_err.find("fork") != std::string::npos ||
              bomb_err.find("Resource temporarily unavailable") != std::string::npos)
      << bomb.dump().substr(0, 2000);
  EXPECT_LE(ProcessesOf(Get(id)["uid"].get<int64_t>()), 64);  // never above the cap, seen from the host
  // The bomb's last processes die out as their forks fail (or are killed at
  // its cap); then the sandbox serves calls again.
  Reply alive;
  const auto alive_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < alive_by) {
    alive = d_.Call("POST", "/v1/sandboxes/" + id + "/exec", json{{"argv", {"sh", "-c", "echo alive"}}});
    if (alive.status == 200 && alive.json["stdout"] == "alive\n") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(alive.json["stdout"], "alive\n") << alive.body;
}

TEST_F(SandboxTest, EndlessLoopEndsAtTheTimeCap) {
  StartDaemon();
  const std::string id = Create(json{{"limits", {{"timeout_seconds", 60}}}});
  EXPECT_EQ(Exec(id, {"sh", "-c", "sleep 0.1; echo done"}, 30)["stdout"], "done\n");  // positive control
  json r = Exec(id, {"sh", "-c", "while :; do :; done"}, 1);
  EXPECT_TRUE(r["timed_out"].get<bool>()) << r.dump();
  EXPECT_EQ(r["exit_code"], 137);
  // The sandbox's own cap bounds a request that asks for more.
  const std::string short_id = Create(json{{"limits", {{"timeout_seconds", 1}}}});
  r = Exec(short_id, {"sleep", "30"}, 600);
  EXPECT_TRUE(r["timed_out"].get<bool>()) << r.dump();
}

// An exec's time cap ends every process it started, also those that left
// its process group and parent (setsid, a double fork, nohup), whether the
// command still runs at the cap or ended before and left them behind.
// Another exec's processes live on to their own cap.
TEST_F(SandboxTest, DetachedProcessesOfAnExecEndAtItsTimeCap) {
  StartDaemon();
  Reply created = d_.Call("POST", "/v1/sandboxes", json{{"limits", {{"timeout_seconds", 600}}}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.json["id"];
  const std::string tag = std::to_string(::getpid());
  auto token = [&](int n) { return "1000." + std::to_string(n) + tag; };  // n: one digit
  // Three detached sleepers; the script goes on once all three run.
  auto detach = [&](int first) {
    const std::string a = token(first), b = token(first + 1), c = token(first + 2);
    return "setsid sleep " + a + " </dev/null >/dev/null 2>&1 & (sleep " + b +
           " </dev/null >/dev/null 2>&1 &); nohup sleep " + c + " </dev/null >/dev/null 2>&1 & for t in " + a + " " +
           b + " " + c + "; do until pgrep -fx \"sleep $t\" >/dev/null; do sleep 0.05; done; done; echo started";
  };
  auto running = [&](int first) {
    return SleepersWith(token(first)) + SleepersWith(token(first + 1)) + SleepersWith(token(first + 2));
  };
  // A: a cap of 10 s, ended at once, three sleepers left behind.
  json a = Exec(id, {"sh", "-c", detach(1)}, 10);
  ASSERT_EQ(a["stdout"], "started\n") << a.dump();
  EXPECT_FALSE(a["timed_out"].get<bool>());
  // B: a cap of 600 s, three of its own.
  json b = Exec(id, {"sh", "-c", detach(4)}, 600);
  ASSERT_EQ(b["stdout"], "started\n") << b.dump();
  EXPECT_EQ(running(4), 3);  // positive control: the host sees them
  // A's end at A's cap; B's run on.
  EXPECT_TRUE(WaitFor([&] { return running(1) == 0; })) << running(1) << " of A's sleepers outlived its cap";
  EXPECT_EQ(running(4), 3);
  // C runs into its cap of 10 s itself: its detached sleepers end with it.
  json c = Exec(id, {"sh", "-c", detach(7) + "; exec sleep 1000"}, 10);
  EXPECT_TRUE(c["timed_out"].get<bool>()) << c.dump();
  EXPECT_EQ(c["stdout"], "started\n") << c.dump();
  EXPECT_TRUE(WaitFor([&] { return running(7) == 0; })) << running(7) << " of C's sleepers outlived its cap";
  EXPECT_EQ(Sh(id, "echo alive"), "alive\n");
  // B's end with the sandbox.
  ASSERT_EQ(d_.Call("DELETE", "/v1/sandboxes/" + id).status, 200);
  EXPECT_EQ(running(4), 0);
}

// The system call filter (docs/sandboxes.md#system-calls) in a real exec:
// each call of its table, made by a probe program, answers EPERM (clone3:
// ENOSYS). tests/unit/isolation shows, as root, that each answer is the
// filter's own and not a missing capability's.
TEST_F(SandboxTest, TheSystemCallFilterRefusesItsTableInsideAnExec) {
  StartDaemon();
  Reply created = d_.Call("POST", "/v1/sandboxes", json::object());
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.json["id"];
  const uid_t uid = created.json["uid"];
  // The probe, copied into the work directory as the instance's own file.
  const std::string probe =
      d_.state_dir() + "/sandboxes/" + created.json["instance"].get<std::string>() + "/syscall-probe";
  std::filesystem::copy_file(UNISCHED_SYSCALL_PROBE, probe);
  ASSERT_EQ(::chown(probe.c_str(), uid, uid), 0);
  ASSERT_EQ(::chmod(probe.c_str(), 0755), 0);
  std::vector<std::string> argv = {"./syscall-probe", "fork", "thread", "unshare-files"};
  for (const isolation::RefusedCall& call : isolation::RefusedCalls()) argv.push_back(call.name);
  json r = Exec(id, argv);
  ASSERT_EQ(r["exit_code"], 0) << r.dump();
  std::map<std::string, std::string> got;
  std::istringstream lines(r["stdout"].get<std::string>());
  for (std::string line; std::getline(lines, line);) {
    if (const size_t space = line.find(' '); space != std::string::npos)
      got[line.substr(0, space)] = line.substr(space + 1);
  }
  // Positive controls: a fork, a thread (clone3's ENOSYS makes libc use
  // clone), unshare without namespace flags.
  EXPECT_EQ(got["fork"], "ok");
  EXPECT_EQ(got["thread"], "ok");
  EXPECT_EQ(got["unshare-files"], "ok");
  for (const isolation::RefusedCall& call : isolation::RefusedCalls()) {
    if (got[call.name] == "absent") continue;  // not a call of this architecture
    EXPECT_EQ(got[call.name], "errno " + std::to_string(call.error)) << call.name << ": " << call.why;
  }
  // The report's case: root in a new user namespace.
  EXPECT_EQ(Sh(id, "unshare -Ur id -u 2>&1 | grep -c 'Operation not permitted'; grep '^Seccomp:' /proc/self/status"),
            "1\nSeccomp:\t2\n");
}

// Ordinary tools under the filter: a shell with pipes and subshells, ls,
// cat, python3 with a thread, a thread pool, fork and a subprocess.
TEST_F(SandboxTest, OrdinaryToolsWorkUnderTheSystemCallFilter) {
  StartDaemon();
  const std::string id = Create();
  EXPECT_EQ(Sh(id, "ls / | grep -c '^usr$'; echo piped | cat | tr a-z A-Z; (echo sub) | cat"), "1\nPIPED\nsub\n");
  const std::string py =
      "import os, subprocess, threading\n"
      "from concurrent.futures import ThreadPoolExecutor\n"
      "out = []\n"
      "t = threading.Thread(target=lambda: out.append('thread')); t.start(); t.join()\n"
      "with ThreadPoolExecutor(4) as pool: out.append(str(sum(pool.map(lambda x: x * x, range(10)))))\n"
      "pid = os.fork()\n"
      "if pid == 0: os._exit(7)\n"
      "out.append('fork %d' % os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
      "out.append(subprocess.run(['cat'], input=b'sub', capture_output=True).stdout.decode())\n"
      "print(' '.join(out))\n";
  json r = Exec(id, {"python3", "-c", py});
  EXPECT_EQ(r["stdout"], "thread 285 fork 7 sub\n") << r.dump();
  EXPECT_EQ(r["exit_code"], 0) << r.dump();
}

TEST_F(SandboxTest, DeleteLeavesNoProcessCgroupOrDirectory) {
  StartDaemon();
  Reply created = d_.Call("POST", "/v1/sandboxes", json::object());
  ASSERT_EQ(created.status, 201);
  const std::string id = created.json["id"];
  const int64_t uid = created.json["uid"];
  const std::string instance = created.json["instance"];
  Sh(id, "(sleep 1000 &) ; (setsid sleep 1000 &) ; echo started");
  EXPECT_GE(ProcessesOf(uid), 3);  // positive control: init and the sleepers
  const std::string work = d_.state_dir() + "/sandboxes/" + instance;
  EXPECT_TRUE(std::filesystem::exists(work));
  std::vector<std::string> groups;
  for (const char* hierarchy : {"memory", "pids", "cpu", "unified"}) {
    const std::string dir = std::string("/sys/fs/cgroup/") + hierarchy + "/unisched/" + instance;
    if (std::filesystem::exists(dir)) groups.push_back(dir);
  }
  if (std::filesystem::exists("/sys/fs/cgroup/memory")) {
    EXPECT_FALSE(groups.empty());
  }

  ASSERT_EQ(d_.Call("DELETE", "/v1/sandboxes/" + id).status, 200);
  EXPECT_EQ(ProcessesOf(uid), 0);
  EXPECT_FALSE(std::filesystem::exists(work));
  for (const auto& dir : groups) EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
}

TEST_F(SandboxTest, DaemonCrashEndsItsSandboxesAndTheRestartChargesThem) {
  StartDaemon("\nimages:\n  - {name: host, version: '1', warm: 1}\n");
  Reply created = d_.Call("POST", "/v1/sandboxes", json{{"limits", {{"memory_mb", 128}}}});
  ASSERT_EQ(created.status, 201);
  const std::string id = created.json["id"];
  const int64_t uid = created.json["uid"];
  const std::string instance = created.json["instance"];
  Sh(id, "(sleep 1000 &); echo started");
  EXPECT_GE(ProcessesOf(uid), 2);
  d_.Kill9();
  // The init sees its control socket close and the namespace ends with it.
  const auto ended_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (ProcessesOf(uid) > 0 && std::chrono::steady_clock::now() < ended_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(ProcessesOf(uid), 0);
  d_.Start();
  Reply after = d_.Call("GET", "/v1/sandboxes/" + id);
  EXPECT_EQ(after.json["state"], "lost") << after.body;
  EXPECT_EQ(d_.Call("POST", "/v1/sandboxes/" + id + "/exec", json{{"argv", {"true"}}}).status, 409);
  Reply usage = d_.Call("GET", "/v1/usage?group_by=queue");
  ASSERT_EQ(usage.json["rows"].size(), 1u) << usage.body;
  EXPECT_GT(usage.json["rows"][0]["instance_seconds"].get<double>(), 0.0);
  // Nothing of the dead run is left: neither that sandbox's nor the warm
  // instance's work directory and cgroups.
  EXPECT_FALSE(std::filesystem::exists(d_.state_dir() + "/sandboxes/" + instance));
  const std::string dead_prefix = instance.substr(0, instance.find('-') + 1);
  for (const auto& entry : std::filesystem::directory_iterator(d_.state_dir() + "/sandboxes")) {
    EXPECT_NE(entry.path().filename().string().rfind(dead_prefix, 0), 0u) << entry.path();
  }
  for (const char* hierarchy : {"memory", "pids", "unified"}) {
    const std::string dir = std::string("/sys/fs/cgroup/") + hierarchy + "/unisched";
    if (!std::filesystem::exists(dir)) continue;
    for (const auto& group : std::filesystem::directory_iterator(dir)) {
      EXPECT_NE(group.path().filename().string().rfind(dead_prefix, 0), 0u) << group.path();
    }
  }
}

TEST_F(SandboxTest, ALivingSandboxIsChargedEveryAccountingInterval) {
  StartDaemon("",
              ReplaceOnce(DefaultConfigText(), "accounting_interval_seconds: 60", "accounting_interval_seconds: 1"));
  const std::string id = Create();
  double charged = 0;
  const auto charged_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (charged < 1.0 && std::chrono::steady_clock::now() < charged_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Reply usage = d_.Call("GET", "/v1/usage?group_by=queue");
    if (!usage.json["rows"].empty()) charged = usage.json["rows"][0].value("instance_seconds", 0.0);
  }
  EXPECT_GE(charged, 1.0);  // seen while it still runs
  EXPECT_EQ(Get(id)["state"], "running");
  ASSERT_EQ(d_.Call("DELETE", "/v1/sandboxes/" + id).status, 200);
  // Interim entries plus the final one add up to its life exactly.
  Reply reconcile = d_.Call("GET", "/v1/usage/reconcile");
  EXPECT_EQ(reconcile.json["missing"], 0) << reconcile.body;
  EXPECT_EQ(reconcile.json["mismatched"], 0) << reconcile.body;
  EXPECT_EQ(reconcile.json["duplicated"], 0) << reconcile.body;
}

TEST_F(SandboxTest, IdleSandboxIsReclaimedAndCharged) {
  StartDaemon();
  const std::string id = Create(json{{"idle_timeout_seconds", 1}});
  json view;
  const auto reclaimed_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < reclaimed_by) {
    view = d_.Call("GET", "/v1/sandboxes/" + id).json;
    if (view["state"] != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(view["state"], "reclaimed") << view.dump();
  EXPECT_EQ(d_.Call("GET", "/v1/events?kind=sandbox_reclaimed").json["events"].size(), 1u);
  Reply usage = d_.Call("GET", "/v1/usage?group_by=queue");
  ASSERT_EQ(usage.json["rows"].size(), 1u) << usage.body;
  EXPECT_GE(usage.json["rows"][0]["instance_seconds"].get<double>(), 1.0);
}

TEST_F(SandboxTest, MaxConcurrencyRefusesWith429AndCountsAgentJobs) {
  StartDaemon(
      "", ReplaceOnce(DefaultConfigText(), "max_concurrency: 500", "max_concurrency: 2\n      quota_action: reject"));
  const std::string first = Create();
  Create();
  Reply third = d_.Call("POST", "/v1/sandboxes", json::object());
  EXPECT_EQ(third.status, 429) << third.body;
  EXPECT_EQ(third.json["error"]["code"], "max_concurrency");
  // An agent job waits while sandboxes fill the queue.
  const std::string job = d_.Submit({{"workload", {{"kind", "agent"}}}, {"command", {"true"}}});
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(d_.Call("GET", "/v1/jobs/" + job).json["state"], "PENDING");
  ASSERT_EQ(d_.Call("DELETE", "/v1/sandboxes/" + first).status, 200);
  EXPECT_EQ(d_.WaitTerminal(job)["state"], "COMPLETED");
  Create();  // the job's slot is free again
}

// Sandboxes and agent jobs pass one admission (the job service): an API
// sandbox and an agent job of one project count against one quota, either
// way round.
TEST_F(SandboxTest, ASandboxAndAnAgentJobOfOneProjectCountAgainstOneQuota) {
  std::string config =
      ReplaceOnce(DefaultConfigText(), "shares: 1                    # fair share relative to other projects",
                  "shares: 1\n    quota: {running_jobs: 1}");
  StartDaemon("", ReplaceOnce(config, "max_concurrency: 500", "max_concurrency: 500\n      quota_action: reject"));
  const json agent_job = {{"workload", {{"kind", "agent"}}}, {"command", {"sleep", "60"}}};
  const std::string sandbox = Create();
  Reply refused = d_.Call("POST", "/v1/jobs", agent_job);
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_EQ(refused.json["error"]["code"], "quota_exceeded");
  EXPECT_NE(refused.json["error"]["message"].get<std::string>().find("project default"), std::string::npos)
      << refused.body;

  ASSERT_EQ(d_.Call("DELETE", "/v1/sandboxes/" + sandbox).status, 200);
  const std::string job = d_.Submit(agent_job);
  ASSERT_TRUE(WaitFor([&] { return d_.Call("GET", "/v1/jobs/" + job).json["state"] == "RUNNING"; }));
  Reply refused_sandbox = d_.Call("POST", "/v1/sandboxes", json::object());
  EXPECT_EQ(refused_sandbox.status, 403) << refused_sandbox.body;
  EXPECT_EQ(refused_sandbox.json["error"]["code"], "quota_exceeded");
  EXPECT_EQ(d_.Call("GET", "/v1/sandboxes").json["sandboxes"].size(), 0u);

  ASSERT_EQ(d_.Call("DELETE", "/v1/jobs/" + job).status, 200);
  EXPECT_EQ(d_.WaitTerminal(job)["state"], "CANCELLED");
  Create();  // the job's share of the quota is free again
}

// Where the queue's quota_action is wait, a create over the quota waits for
// running work to end (a job here), as it waits for max_concurrency.
TEST_F(SandboxTest, OverQuotaAWaitingQueueHoldsTheCreateUntilAJobEnds) {
  StartDaemon("\nsandboxes:\n  create_wait_seconds: 30\n",
              ReplaceOnce(DefaultConfigText(), "shares: 1                    # fair share relative to other projects",
                          "shares: 1\n    quota: {running_jobs: 1}"));
  const std::string job = d_.Submit({{"workload", {{"kind", "agent"}}}, {"command", {"sleep", "60"}}});
  ASSERT_TRUE(WaitFor([&] { return d_.Call("GET", "/v1/jobs/" + job).json["state"] == "RUNNING"; }));
  ExpectCreateWaitsFor(0, [&] { EXPECT_EQ(d_.Call("DELETE", "/v1/jobs/" + job).status, 200); });
}

TEST_F(SandboxTest, AtMaxConcurrencyAWaitingQueueHoldsTheCreateUntilASlotFrees) {
  // quota_action wait (the default): a create waits up to
  // sandboxes.create_wait_seconds for a slot, then gets 429.
  StartDaemon("\nsandboxes:\n  create_wait_seconds: 20\n",
              ReplaceOnce(DefaultConfigText(), "max_concurrency: 500", "max_concurrency: 1"));
  const std::string first = Create();
  ExpectCreateWaitsFor(1, [&] { EXPECT_EQ(d_.Call("DELETE", "/v1/sandboxes/" + first).status, 200); });
}

TEST_F(SandboxTest, WarmPoolServesCreatesAndIsRefilled) {
  StartDaemon("\nimages:\n  - {name: host, version: '1', warm: 2}\n");
  auto warm_ready = [&] { return d_.Call("GET", "/v1/images").json["images"][0]["warm_ready"].get<int>(); };
  // Starting an instance takes a while on a slow host: bounded generously.
  auto wait_warm = [&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (warm_ready() < 2 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  };
  wait_warm();
  ASSERT_EQ(warm_ready(), 2);
  Reply r = d_.Call("POST", "/v1/sandboxes", json::object());
  ASSERT_EQ(r.status, 201);
  EXPECT_TRUE(r.json["warm_start"].get<bool>());
  EXPECT_EQ(Exec(r.json["id"], {"python3", "-c", "print(2)"})["stdout"], "2\n");
  // Other limits than the warm ones: a warm instance with its caps changed,
  // and they hold.
  Reply small = d_.Call("POST", "/v1/sandboxes", json{{"limits", {{"memory_mb", 64}}}});
  ASSERT_EQ(small.status, 201) << small.body;
  EXPECT_TRUE(small.json["warm_start"].get<bool>());
  const std::string touch =
      "import sys\nb = bytearray(int(sys.argv[1]) << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('ok')\n";
  EXPECT_EQ(Exec(small.json["id"], {"python3", "-c", touch, "16"})["stdout"], "ok\n");
  json hog = Exec(small.json["id"], {"python3", "-c", touch, "300"});
  EXPECT_NE(hog["exit_code"], 0) << hog.dump();
  // Another image than the warm one: a cold start.
  ASSERT_EQ(d_.Call("POST", "/v1/images", json{{"name", "other"}, {"version", "1"}}).status, 201);
  EXPECT_FALSE(d_.Call("POST", "/v1/sandboxes", json{{"image", "other"}}).json["warm_start"].get<bool>());
  wait_warm();
  EXPECT_EQ(warm_ready(), 2);  // refilled
  // The gauges are published after the refill's last start, a moment after
  // warm_ready counts it: polled (bounded).
  const std::string warm_series = "unisched_sandboxes{image=\"host\",state=\"warm\"} 2";
  const std::string active_series = "unisched_sandboxes{image=\"host\",state=\"active\"} 2";
  std::string metrics;
  const auto published_by = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < published_by) {
    metrics = d_.Call("GET", "/metrics").body;
    if (metrics.find(warm_series) != std::string::npos && metrics.find(active_series) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(metrics.find(warm_series), std::string::npos) << metrics;
  EXPECT_NE(metrics.find(active_series), std::string::npos) << metrics;
}

TEST_F(SandboxTest, AnImageWithItsOwnRootfs) {
  StartDaemon();
  // A minimal root: dash and the libraries it links, nothing else.
  const std::string root = d_.state_dir() + "/rootfs-mini";
  const std::string build = "set -e; R=" + root +
                            "; mkdir -p $R/bin $R/tmp $R/dev $R/proc $R/sys $R/home; cp /bin/dash $R/bin/sh; "
                            "for l in $(ldd /bin/dash | grep -o '/[^ ]*'); do mkdir -p $R$(dirname $l); cp -L $l $R$l; "
                            "done; chmod -R a+rX $R";
  ASSERT_EQ(std::system(build.c_str()), 0);
  Reply image = d_.Call("POST", "/v1/images", json{{"name", "mini"}, {"version", "1"}, {"rootfs", root}});
  ASSERT_EQ(image.status, 201) << image.body;
  const std::string id = Create(json{{"image", "mini"}});
  ASSERT_FALSE(id.empty());
  // Positive control: its shell runs, and the work directory is writable.
  EXPECT_EQ(Sh(id, "echo inside > f; read x < f; echo $x; echo $HOME"), "inside\n/home/sandbox\n");
  // Nothing of the host's root: no /etc, no python3, no ls.
  json r = Exec(id, {"/bin/sh", "-c",
                     "test -e /etc/passwd || echo no-etc; test -e /usr || echo no-usr; "
                     "echo x > /bin/new 2>/dev/null || echo ro-root; echo x > /dev/null && echo dev-null"});
  EXPECT_EQ(r["stdout"], "no-etc\nno-usr\nro-root\ndev-null\n") << r.dump();
  EXPECT_EQ(Exec(id, {"python3", "-c", "print(1)"})["exit_code"], 127);
  EXPECT_EQ(d_.Call("POST", "/v1/images", json{{"name", "gone"}, {"version", "1"}, {"rootfs", root + "/nope"}}).status,
            422);
}

TEST_F(SandboxTest, ImagesAreVersionedAndRollBack) {
  StartDaemon();
  auto add = [&](const std::string& version, const std::string& bind) {
    return d_.Call("POST", "/v1/images", json{{"name", "tools"}, {"version", version}, {"binds", {bind}}});
  };
  ASSERT_EQ(add("v1", "/etc:/mnt").status, 201);
  Reply v2 = add("v2", "/usr/share:/mnt");
  ASSERT_EQ(v2.status, 201);
  EXPECT_EQ(v2.json["current_version"], "v2");
  EXPECT_EQ(add("v2", "/etc:/mnt").status, 409);  // versions are immutable
  EXPECT_EQ(add("v3", "relative:/mnt").status, 422);

  Reply on_v2 = d_.Call("POST", "/v1/sandboxes", json{{"image", "tools"}});
  EXPECT_EQ(on_v2.json["image"], "tools:v2");
  EXPECT_EQ(Sh(on_v2.json["id"], "test -e /mnt/passwd && echo etc || echo share"), "share\n");

  Reply back = d_.Call("POST", "/v1/images/tools/rollback");
  ASSERT_EQ(back.status, 200) << back.body;
  EXPECT_EQ(back.json["current_version"], "v1");
  Reply on_v1 = d_.Call("POST", "/v1/sandboxes", json{{"image", "tools"}});
  EXPECT_EQ(on_v1.json["image"], "tools:v1");
  EXPECT_EQ(Sh(on_v1.json["id"], "test -e /mnt/passwd && echo etc || echo share"), "etc\n");
  // A pinned version still resolves; there is nothing before v1.
  EXPECT_EQ(d_.Call("POST", "/v1/sandboxes", json{{"image", "tools:v2"}}).json["image"], "tools:v2");
  EXPECT_EQ(d_.Call("POST", "/v1/images/tools/rollback").status, 409);
  const std::string token = d_.CreateUser("bob", "user", {"default"});
  EXPECT_EQ(d_.Call("POST", "/v1/images", R"({"name": "x", "version": "1"})", {}, &token).status, 403);

  // The rollback survives a restart.
  d_.Stop();
  d_.Start();
  Reply images = d_.Call("GET", "/v1/images");
  bool found = false;
  for (const json& i : images.json["images"]) {
    if (i["name"] == "tools") {
      found = true;
      EXPECT_EQ(i["current_version"], "v1");
    }
  }
  EXPECT_TRUE(found);
  // Sandboxes end with the daemon, charged.
  EXPECT_EQ(d_.Call("GET", "/v1/sandboxes/" + on_v1.json["id"].get<std::string>()).json["state"], "stopped");
}

}  // namespace
}  // namespace unisched::testing

namespace unisched::testing {
namespace {

TEST_F(SandboxTest, CliCreatesExecsAndRemoves) {
  StartDaemon();
  auto created = d_.RunCli({"sandbox", "create", "--memory-mb", "256"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string id = created.out.substr(0, created.out.find('\n'));
  EXPECT_EQ(id.rfind("sb-", 0), 0u) << created.out;
  auto ran = d_.RunCli({"sandbox", "exec", id, "--env", "GREETING=hi", "--", "sh", "-c", "echo $GREETING; exit 4"});
  EXPECT_EQ(ran.exit_code, 4);  // the command's own exit status
  EXPECT_EQ(ran.out, "hi\n");
  auto listed = d_.RunCli({"sandbox", "ls"});
  EXPECT_NE(listed.out.find(id), std::string::npos) << listed.out;
  auto removed = d_.RunCli({"sandbox", "rm", id});
  EXPECT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_EQ(d_.RunCli({"sandbox", "exec", id, "true"}).exit_code, 1);
  EXPECT_EQ(d_.RunCli({"sandbox", "frobnicate"}).exit_code, 2);
}

}  // namespace
}  // namespace unisched::testing
