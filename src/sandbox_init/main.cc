// unisched-sandbox: the init of one sandbox instance (docs/sandboxes.md).
//
// Started by the daemon as PID 1 of fresh pid, network, mount, UTS and IPC
// namespaces, inside the instance's cgroups, with its control socket as fd 3
// and its spec (JSON) as argv[1]. It isolates itself (EnterIsolation), drops
// to the instance's own uid, installs the system call filter
// (syscall_filter.h), answers {"ready": true}, then serves requests one at a
// time (protocol.h), each exec in a cgroup of its own (ExecGroups). When the
// daemon closes the socket, or dies, it exits, and the kernel kills whatever
// else runs in the pid namespace.
//
// Small and single-threaded: hundreds idle at once, so it links no more than
// libc, libstdc++, libseccomp and the JSON header.

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "unisched/isolation/isolation.h"
#include "unisched/isolation/protocol.h"
#include "unisched/isolation/syscall_filter.h"
#include "unisched/posix/posix.h"

namespace {

using nlohmann::json;
using unisched::isolation::Bytes;
using unisched::isolation::BytesOf;

constexpr int kControlFd = 3;
int g_sigchld_fd = -1;

json ErrorAnswer(const std::string& code, const std::string& message) {
  return {{"error", message}, {"code", code}};
}

// The running exec's first process, whose exit status the reaping keeps.
struct Watched {
  pid_t pid = 0;
  bool done = false;
  int status = 0;
};
Watched g_watched;

// Reaps every exited child (ours, and as PID 1 every orphan of the
// namespace); records the status of the watched one.
void Reap() {
  while (true) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    if (pid == g_watched.pid) {
      g_watched.done = true;
      g_watched.status = status;
    }
  }
}

void DrainSignalFd() {
  signalfd_siginfo info;
  while (::read(g_sigchld_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
  }
}

// One cgroup per exec (docs/sandboxes.md#exec), made under the instance's
// group (the daemon's Containment::SubtreeDir, handed to the instance's uid
// at start): the exec's first process joins it before its exec, and every
// process it starts stays in it whatever it does to its session or parent
// (setsid, double fork, nohup); only root can move a process out, and the
// instance has no way to reach the cgroup file system but this init's
// descriptor. The group is emptied (cgroup.kill, or SIGKILL to each member
// where that is missing) when the exec's time cap is reached, whether the
// command is still running or ended before and left something behind; an
// exec that leaves nothing behind has its group removed when it ends.
struct ExecGroup {
  std::string name;
  std::chrono::steady_clock::time_point deadline;
};

struct ExecGroups {
  int dir_fd = -1;  // the instance's group; -1: no cgroups, the process group is all there is
  uint64_t made = 0;
  std::vector<ExecGroup> pending;  // ended execs whose group still had members
};
ExecGroups g_exec_groups;

// As root, before the isolation hides the cgroup file system: opens the
// instance's group and hands it to the instance's uid, which may then make
// groups in it and move its own processes from it into them (cgroup v2
// delegation; v1 needs only the uid to match).
int OpenExecGroups(const std::string& dir, uid_t uid, const char** step) {
  if (dir.empty()) return 0;
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    *step = "open the instance's cgroup";
    return errno;
  }
  if (::fchown(fd, uid, uid) != 0 || ::fchownat(fd, "cgroup.procs", uid, uid, 0) != 0) {
    const int e = errno;
    ::close(fd);
    *step = "hand the instance's cgroup to its uid";
    return e;
  }
  g_exec_groups.dir_fd = fd;
  return 0;
}

// Writes `value` to the file `path` below the instance's group. 0 or errno.
int WriteGroupFile(const std::string& path, const char* value) {
  const int fd = ::openat(g_exec_groups.dir_fd, path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const size_t len = std::strlen(value);
  const int err = ::write(fd, value, len) == static_cast<ssize_t>(len) ? 0 : errno;
  ::close(fd);
  return err;
}

// SIGKILL to every member of the group.
void KillGroup(const std::string& name) {
  // cgroup.kill (cgroup v2, Linux 5.14+) kills them all at once, a fork in
  // progress included.
  if (WriteGroupFile(name + "/cgroup.kill", "1") == 0) return;
  // Otherwise each member cgroup.procs lists (pids of our own namespace);
  // the caller repeats until the group is gone, for forks in between.
  const int fd = ::openat(g_exec_groups.dir_fd, (name + "/cgroup.procs").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  const char* p = text.c_str();
  while (*p != 0) {
    char* end = nullptr;
    const long pid = std::strtol(p, &end, 10);
    if (end == p) break;
    if (pid > 1) ::kill(static_cast<pid_t>(pid), SIGKILL);
    p = end;
  }
}

// Kills the group's members and removes it, waiting up to `wait` for them to
// leave; false when it could not be removed meanwhile (a member stuck in the
// kernel), and it is to be tried again later.
bool KillAndRemoveGroup(const std::string& name, std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  while (true) {
    KillGroup(name);
    Reap();  // the killed are our orphans (we are PID 1) or our child
    if (::unlinkat(g_exec_groups.dir_fd, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY || std::chrono::steady_clock::now() >= until) return false;
    ::usleep(1000);
  }
}

// Ends the groups whose exec's cap has passed.
void ExpireExecGroups() {
  const auto now = std::chrono::steady_clock::now();
  auto& pending = g_exec_groups.pending;
  for (size_t i = 0; i < pending.size();) {
    if (pending[i].deadline > now) {
      ++i;
      continue;
    }
    if (KillAndRemoveGroup(pending[i].name, std::chrono::milliseconds(200))) {
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      pending[i].deadline = now + std::chrono::milliseconds(100);  // again soon, without holding up the calls
      ++i;
    }
  }
}

// Milliseconds until the next pending group's cap, at most `limit`.
int MillisToNextExpiry(int limit) {
  const auto now = std::chrono::steady_clock::now();
  int64_t wait = limit;
  for (const ExecGroup& g : g_exec_groups.pending) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(g.deadline - now).count() + 1;
    wait = wait < 0 ? left : std::min(wait, left);
  }
  return wait < 0 ? -1 : static_cast<int>(std::max<int64_t>(0, wait));
}

struct Capture {
  int fd = -1;
  std::string data;
  bool truncated = false;
  size_t cap = 0;
  // Reads what is there; false at end of file.
  bool Pump() {
    char buf[65536];
    while (true) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        const size_t room = cap > data.size() ? cap - data.size() : 0;
        const size_t take = std::min(room, static_cast<size_t>(n));
        data.append(buf, take);
        if (take < static_cast<size_t>(n)) truncated = true;
        continue;
      }
      if (n == 0) return false;
      return errno == EAGAIN || errno == EINTR;
    }
  }
};

json Exec(const json& request) {
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::string> args;
  for (const auto& a : request.value("argv", json::array())) args.push_back(a.get<std::string>());
  if (args.empty()) return ErrorAnswer("bad_request", "argv is empty");
  std::map<std::string, std::string> env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                                            {"HOME", unisched::isolation::kSandboxHome},
                                            {"USER", "sandbox"},
                                            {"LANG", "C.UTF-8"},
                                            {"TMPDIR", "/tmp"}};
  const json extra_env = request.value("env", json::object());  // named: items() of a temporary dangles
  for (const auto& [k, v] : extra_env.items()) env[k] = v.get<std::string>();
  const std::string input = BytesOf(request.value("stdin", json()));
  const int64_t timeout_ms = request.value("timeout_ms", int64_t{30000});
  const size_t cap = request.value("output_cap", size_t{1} << 20);

  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string search_path = env["PATH"];

  // The exec's group, and its cgroup.procs for the child to join.
  std::string group;
  int group_procs = -1;
  if (g_exec_groups.dir_fd >= 0) {
    group = "exec-" + std::to_string(++g_exec_groups.made);
    if (::mkdirat(g_exec_groups.dir_fd, group.c_str(), 0755) != 0) {
      return ErrorAnswer("io", "cannot make the command's cgroup: " + unisched::posix::ErrnoText(errno));
    }
    group_procs = ::openat(g_exec_groups.dir_fd, (group + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (group_procs < 0) {
      const int e = errno;
      ::unlinkat(g_exec_groups.dir_fd, group.c_str(), AT_REMOVEDIR);
      return ErrorAnswer("io", "cannot open the command's cgroup: " + unisched::posix::ErrnoText(e));
    }
  }
  auto drop_group = [&] {
    if (group_procs >= 0) ::close(group_procs);
    if (!group.empty()) ::unlinkat(g_exec_groups.dir_fd, group.c_str(), AT_REMOVEDIR);
  };

  int in[2], out[2], err[2], report[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 ||
      ::pipe2(report, O_CLOEXEC) != 0) {
    const int e = errno;
    drop_group();
    return ErrorAnswer("io", "cannot create pipes: " + unisched::posix::ErrnoText(e));
  }
  // What the child reports when it cannot run the command.
  enum Stage : int { kExec = 1, kJoin = 2 };
  struct Failure {
    int stage;
    int err;
  };
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1], report[0], report[1]}) ::close(fd);
    drop_group();
    // The pids cap: a fork bomb of an earlier call may still hold every slot.
    return ErrorAnswer("io", "cannot start the command: " + unisched::posix::ErrnoText(e));
  }
  if (pid == 0) {
    // Into the exec's group before anything else runs: every process the
    // command starts is born in it.
    if (group_procs >= 0 && ::write(group_procs, "0", 1) != 1) {
      const Failure f{kJoin, errno};
      ssize_t ignored = ::write(report[1], &f, sizeof f);
      (void)ignored;
      ::_exit(127);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::setpgid(0, 0);
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::setenv("PATH", search_path.c_str(), 1);  // for execvpe's search only
    ::execvpe(argv[0], argv.data(), envp.data());
    const Failure f{kExec, errno};
    ssize_t ignored = ::write(report[1], &f, sizeof f);
    (void)ignored;
    ::_exit(127);
  }
  if (group_procs >= 0) ::close(group_procs);
  g_watched = Watched{pid, false, 0};
  ::setpgid(pid, pid);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  ::close(report[1]);
  for (int fd : {in[1], out[0], err[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);

  Capture stdout_capture{out[0], {}, false, cap};
  Capture stderr_capture{err[0], {}, false, cap};
  size_t written = 0;
  int stdin_fd = in[1];
  if (input.empty()) {
    ::close(stdin_fd);
    stdin_fd = -1;
  }
  bool out_open = true, err_open = true, timed_out = false;
  const bool& done = g_watched.done;
  const auto deadline = started + std::chrono::milliseconds(timeout_ms);
  std::chrono::steady_clock::time_point exited_at{};
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    if (done) {
      // Set here: any Reap may have seen it end (also one for an earlier
      // exec's group).
      if (exited_at == std::chrono::steady_clock::time_point{}) exited_at = now;
      // A background process may hold the pipes: what it wrote within a
      // moment of the command's exit is kept, the rest is not waited for.
      if ((!out_open && !err_open) || now - exited_at > std::chrono::milliseconds(50)) break;
    } else if (!timed_out && now >= deadline) {
      timed_out = true;
      if (!group.empty()) KillGroup(group);
      ::kill(-pid, SIGKILL);
    }
    ExpireExecGroups();  // earlier execs' caps pass while this one runs
    pollfd fds[4];
    int n = 0;
    fds[n++] = {g_sigchld_fd, POLLIN, 0};
    const int out_i = out_open ? n : -1;
    if (out_open) fds[n++] = {out[0], POLLIN, 0};
    const int err_i = err_open ? n : -1;
    if (err_open) fds[n++] = {err[0], POLLIN, 0};
    const int in_i = stdin_fd >= 0 ? n : -1;
    if (stdin_fd >= 0) fds[n++] = {stdin_fd, POLLOUT, 0};
    int wait_ms = 50;
    if (!done && !timed_out) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
      wait_ms = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left + 1, 1000)));
    }
    wait_ms = MillisToNextExpiry(wait_ms);
    ::poll(fds, static_cast<nfds_t>(n), wait_ms);
    if (fds[0].revents) {
      DrainSignalFd();
      Reap();
    }
    if (out_i >= 0 && fds[out_i].revents) out_open = stdout_capture.Pump();
    if (err_i >= 0 && fds[err_i].revents) err_open = stderr_capture.Pump();
    if (in_i >= 0 && fds[in_i].revents) {
      const ssize_t w = ::write(stdin_fd, input.data() + written, input.size() - written);
      if (w > 0) written += static_cast<size_t>(w);
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) {
        ::close(stdin_fd);
        stdin_fd = -1;
      }
    }
  }
  if (stdin_fd >= 0) ::close(stdin_fd);
  ::close(out[0]);
  ::close(err[0]);
  Failure failure{0, 0};
  const bool failed = ::read(report[0], &failure, sizeof failure) == static_cast<ssize_t>(sizeof failure);
  ::close(report[0]);
  const int status = g_watched.status;
  g_watched = Watched{};
  if (timed_out) {
    // What is left of the process group, until it is gone: a fork bomb
    // forks while it is being killed, and its orphans are ours (PID 1) to
    // reap. Without cgroups that is all there is.
    for (int round = 0; round < 2000 && ::kill(-pid, SIGKILL) == 0; ++round) {
      Reap();
      ::usleep(500);
    }
  }
  if (!group.empty()) {
    if (timed_out) {
      // The exec's cap: everything it started, detached or not, ends now.
      if (!KillAndRemoveGroup(group, std::chrono::seconds(2))) {
        g_exec_groups.pending.push_back({group, std::chrono::steady_clock::now()});
      }
    } else if (::unlinkat(g_exec_groups.dir_fd, group.c_str(), AT_REMOVEDIR) != 0) {
      // EBUSY: it left processes behind. They may run on (a server for the
      // next exec) until the exec's cap, and end there.
      g_exec_groups.pending.push_back({group, deadline});
    }
  }

  int exit_code = 0;
  if (WIFEXITED(status)) exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) exit_code = 128 + WTERMSIG(status);
  std::string err_text = std::move(stderr_capture.data);
  if (failed && failure.stage == kJoin) {
    err_text += "unisched: cannot put the command in its cgroup: " + unisched::posix::ErrnoText(failure.err) + "\n";
  } else if (failed) {
    err_text += "unisched: cannot execute '" + args[0] + "': " + unisched::posix::ErrnoText(failure.err) + "\n";
  }
  const auto elapsed = std::chrono::steady_clock::now() - started;
  return {{"exit_code", exit_code},
          {"stdout", Bytes(stdout_capture.data)},
          {"stderr", Bytes(err_text)},
          {"stdout_truncated", stdout_capture.truncated},
          {"stderr_truncated", stderr_capture.truncated},
          {"timed_out", timed_out},
          {"duration_ms", std::chrono::duration<double, std::milli>(elapsed).count()}};
}

json PutFile(const json& request) {
  const std::string path = request.value("path", "");
  if (std::string why = unisched::isolation::CheckRelativePath(path); !why.empty()) return ErrorAnswer("bad_path", why);
  // Parents first, as the instance's own uid: only what it may write.
  for (size_t i = path.find('/'); i != std::string::npos; i = path.find('/', i + 1)) {
    if (::mkdir(path.substr(0, i).c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrorAnswer("io",
                         "cannot make directory '" + path.substr(0, i) + "': " + unisched::posix::ErrnoText(errno));
    }
  }
  const std::string data = BytesOf(request.value("data", json()));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return ErrorAnswer("io", "cannot write '" + path + "': " + unisched::posix::ErrnoText(errno));
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      return ErrorAnswer("io", "cannot write '" + path + "': " + unisched::posix::ErrnoText(e));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return {{"size", data.size()}};
}

json GetFile(const json& request) {
  const std::string path = request.value("path", "");
  if (std::string why = unisched::isolation::CheckRelativePath(path); !why.empty()) return ErrorAnswer("bad_path", why);
  const size_t max = request.value("max", size_t{8} << 20);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return ErrorAnswer(errno == ENOENT ? "not_found" : "io",
                       "cannot read '" + path + "': " + unisched::posix::ErrnoText(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return ErrorAnswer("bad_path", "'" + path + "' is not a regular file");
  }
  if (static_cast<size_t>(st.st_size) > max) {
    ::close(fd);
    return ErrorAnswer(
        "too_large", "'" + path + "' holds " + std::to_string(st.st_size) + " bytes, more than " + std::to_string(max));
  }
  std::string data;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0 && data.size() <= max) data.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return {{"data", Bytes(data)}};
}

}  // namespace

#if defined(__SANITIZE_ADDRESS__)
// LeakSanitizer stops a process with ptrace to look for leaks, which the
// system call filter refuses: its check at exit could only fail.
extern "C" const char* __asan_default_options() {
  return "detect_leaks=0";
}
#endif

int main(int argc, char** argv) {
  // SIGCHLD arrives through a signalfd; nothing else of the daemon's world
  // may stop us (PID 1 ignores unhandled signals from inside anyway).
  sigset_t all;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  // The control socket is the daemon's alone: no command inherits it.
  if (::fcntl(kControlFd, F_SETFD, FD_CLOEXEC) != 0) return 2;
  if (argc < 2) {
    (void)unisched::isolation::WriteFrame(
        kControlFd, ErrorAnswer("usage", "usage: unisched-sandbox SPEC_JSON (started by the daemon)"));
    return 2;
  }
  const json spec = json::parse(argv[1], nullptr, false);
  if (!spec.is_object()) {
    (void)unisched::isolation::WriteFrame(kControlFd, ErrorAnswer("usage", "the spec is not a JSON object"));
    return 2;
  }
  unisched::isolation::IsolationSpec isolation;
  isolation.work_dir = spec.value("work_dir", "");
  isolation.rootfs = spec.value("rootfs", "");
  isolation.tmp_size = spec.value("tmp_size", "64m");
  for (const auto& b : spec.value("binds", json::array())) {
    isolation.binds.emplace_back(b.at(0).get<std::string>(), b.at(1).get<std::string>());
  }
  const auto uid = spec.value("uid", 0u);
  if (uid == 0) {
    (void)unisched::isolation::WriteFrame(kControlFd, ErrorAnswer("isolation", "refusing to run an instance as root"));
    return 1;
  }
  auto isolation_failed = [](const char* step, int e) {
    (void)unisched::isolation::WriteFrame(
        kControlFd, ErrorAnswer("isolation", std::string("cannot ") + step + ": " + unisched::posix::ErrnoText(e)));
    return 1;
  };
  const char* step = "";
  if (int e = OpenExecGroups(spec.value("exec_cgroup", ""), uid, &step)) return isolation_failed(step, e);
  if (int e = unisched::isolation::EnterIsolation(isolation, &step)) return isolation_failed(step, e);
  if (int e = unisched::isolation::DropPrivileges(uid, uid, &step)) return isolation_failed(step, e);
  // The system call filter, last: the steps above need some of what it
  // refuses (mount, pivot_root). Installed here rather than in each exec's
  // child: every command inherits it, this init is covered too, and it is
  // built (~0.8 ms of CPU here, libseccomp) and attached (~0.3 ms: the
  // kernel compiles it and runs it for each call number to cache the ones
  // always allowed) once per instance, not once per exec.
  if (int e = unisched::isolation::PrepareSyscallFilter(&step)) {
    return isolation_failed((std::string("build the system call filter (") + step + ")").c_str(), e);
  }
  if (int e = unisched::isolation::InstallSyscallFilter()) return isolation_failed("install the system call filter", e);
  // Building the filter (libseccomp) dirtied ~80 KiB of heap, all freed now:
  // give the pages back, as hundreds of inits may idle at once.
  ::malloc_trim(0);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  g_sigchld_fd = ::signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (g_sigchld_fd < 0) {
    (void)unisched::isolation::WriteFrame(kControlFd,
                                          ErrorAnswer("io", "signalfd: " + unisched::posix::ErrnoText(errno)));
    return 1;
  }
  if (unisched::isolation::WriteFrame(kControlFd, {{"ready", true}}) != 0) return 1;
  while (true) {
    // Between calls: orphans of earlier commands end up here, PID 1, and
    // are reaped as they exit; the groups of earlier execs end at their
    // caps.
    while (true) {
      ExpireExecGroups();
      pollfd fds[2] = {{kControlFd, POLLIN, 0}, {g_sigchld_fd, POLLIN, 0}};
      ::poll(fds, 2, MillisToNextExpiry(-1));
      if (fds[1].revents) {
        DrainSignalFd();
        Reap();
      }
      if (fds[0].revents) break;
    }
    json request;
    const int rc = unisched::isolation::ReadFrame(kControlFd, request, -1);
    if (rc != 0) return 0;  // the daemon let go: the namespace ends with us
    const std::string op = request.value("op", "");
    json answer;
    try {
      if (op == "exec") {
        answer = Exec(request);
      } else if (op == "put") {
        answer = PutFile(request);
      } else if (op == "get") {
        answer = GetFile(request);
      } else {
        answer = ErrorAnswer("bad_request", "unknown op '" + op + "'");
      }
    } catch (const std::exception& e) {
      answer = ErrorAnswer("bad_request", e.what());
    }
    DrainSignalFd();
    Reap();
    if (unisched::isolation::WriteFrame(kControlFd, answer) != 0) return 0;
  }
}
