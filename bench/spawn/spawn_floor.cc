// unisched-spawn-floor: how many trivial processes this host can start and
// reap per second, with nothing of unisched in the way. Each variant runs
// `--workers` processes for `--seconds`; each worker forks, (optionally)
// unshares namespaces in the child, execs /bin/true and waits for it, in a
// loop. The end-to-end benchmark (`unisched-bench e2e`) runs a supervisor
// and a job per attempt, each in namespaces of its own, so these rates are a
// ceiling for it on the same host (docs/benchmarks.md).
//
// Needs root for the namespace variants; without it they are reported as
// not permitted. The kernel's deferred work (a network namespace is torn
// down by a kworker) is not in the CPU figure, which counts the workers and
// their children only.

#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Variant {
  const char* name;
  int unshare_flags;
};

struct Outcome {
  long runs = 0;
  bool refused = false;  // unshare not permitted
};

// One worker's loop; returns its runs through the pipe.
[[noreturn]] void Worker(int flags, std::chrono::steady_clock::time_point until, int out_fd) {
  Outcome o;
  while (std::chrono::steady_clock::now() < until) {
    const pid_t pid = ::fork();
    if (pid < 0) break;
    if (pid == 0) {
      if (flags != 0 && ::unshare(flags) != 0) ::_exit(errno == EPERM ? 3 : 2);
      ::execl("/bin/true", "true", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
      o.refused = true;
      break;
    }
    ++o.runs;
  }
  ssize_t ignored = ::write(out_fd, &o, sizeof o);
  (void)ignored;  // the parent counts a missing answer as no runs
  ::_exit(0);
}

double CpuSeconds(const rusage& r) {
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 3;
  int workers = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (arg == "--workers" && i + 1 < argc) {
      workers = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--seconds S (3)] [--workers N (CPUs)]\n", argv[0]);
      return 2;
    }
  }
  if (seconds <= 0 || workers < 1) {
    std::fprintf(stderr, "--seconds must be > 0 and --workers >= 1\n");
    return 2;
  }
  const Variant variants[] = {
      {"fork + exec /bin/true + wait", 0},
      {"  + a new mount namespace", CLONE_NEWNS},
      {"  + a new network namespace", CLONE_NEWNET},
      {"  + both", CLONE_NEWNS | CLONE_NEWNET},
  };
  std::printf("spawn floor: %d workers, %.1f s per variant\n", workers, seconds);
  for (const Variant& v : variants) {
    int fds[2];
    if (::pipe(fds) != 0) {
      std::perror("pipe");
      return 1;
    }
    rusage before{};
    ::getrusage(RUSAGE_CHILDREN, &before);
    const auto start = std::chrono::steady_clock::now();
    const auto until =
        start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    std::vector<pid_t> pids;
    for (int w = 0; w < workers; ++w) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::close(fds[0]);
        Worker(v.unshare_flags, until, fds[1]);
      }
      if (pid > 0) pids.push_back(pid);
    }
    ::close(fds[1]);
    for (pid_t pid : pids) {
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Outcome total;
    Outcome o;
    while (::read(fds[0], &o, sizeof o) == static_cast<ssize_t>(sizeof o)) {
      total.runs += o.runs;
      total.refused = total.refused || o.refused;
    }
    ::close(fds[0]);
    rusage after{};
    ::getrusage(RUSAGE_CHILDREN, &after);
    if (total.refused) {
      std::printf("%-32s not permitted (needs root)\n", v.name);
      continue;
    }
    const double cpu_ms = total.runs > 0 ? (CpuSeconds(after) - CpuSeconds(before)) * 1000 / total.runs : 0;
    std::printf("%-32s %8.0f /s   %.2f ms CPU each\n", v.name, total.runs / wall, cpu_ms);
  }
  return 0;
}
