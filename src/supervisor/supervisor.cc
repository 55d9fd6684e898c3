// The entry of both modes (supervisor.h): the set-up of the process they share, then the event loop with
// one attempt, or with the executor's socket.
//
// The parts: event_loop.h drives attempt_run.h (one attempt's state machine, which keeps its files with
// control_files.h and attempt_output.h, prepares its job with job_setup.h and starts it with job_launch.h);
// executor_socket.h is the host's requests and notices.

#include "supervisor/supervisor.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "supervisor/attempt_output.h"
#include "supervisor/event_loop.h"
#include "supervisor/executor_socket.h"

namespace unisched::supervisor {
namespace {

// With fds 0-2 closed, a pipe could become the job's "stdout" by accident.
void EnsureStandardFds() {
  for (;;) {
    const int fd = ::open("/dev/null", O_RDWR);
    if (fd < 0) return;
    if (fd > 2) {
      ::close(fd);
      return;
    }
  }
}

// Once per process (docs/execution.md, step 0; the loop's Open makes the
// signalfd and the epoll set). Returns the soft limit of open files for
// the jobs when it is not ours (JobSpec::open_files_limit), else 0.
rlim_t SetUpProcess(bool host) {
  EnsureStandardFds();
  ::umask(077);
  // Blocked before anything else, so that a cancel sent right after the
  // spawn waits in the signalfd instead of killing us without a result.
  const sigset_t signals = EventLoop::Signals();
  ::sigprocmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  (void)::setsid();  // already a session leader when spawned with POSIX_SPAWN_SETSID
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) LogToStderr("cannot become a child subreaper: %s", strerror(errno));
  // A host holds a claim and three pipes per running attempt: thousands of
  // descriptors with many short sandbox tasks. Its jobs get the limit back.
  rlim_t job_open_files_limit = 0;
  rlimit files{};
  if (host && ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    const rlim_t ours = files.rlim_cur;
    files.rlim_cur = files.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &files) == 0) job_open_files_limit = ours;
  }
  return job_open_files_limit;
}

}  // namespace

int RunSupervisor(const std::string& attempt_dir) {
  EventLoop loop(/*socket=*/nullptr, SetUpProcess(/*host=*/false));
  if (!loop.Open()) {
    // Cancel and SIGCHLD would go unnoticed: do not start anything.
    LogToStderr("cannot watch signals (signalfd, epoll): %s", std::strerror(errno));
    return 1;
  }
  loop.Add(attempt_dir, STDIN_FILENO);
  return loop.Serve();
}

int RunHost(int socket_fd) {
  ExecutorSocket socket(socket_fd);
  EventLoop loop(&socket, SetUpProcess(/*host=*/true));
  if (!loop.Open()) {
    LogToStderr("cannot watch signals or the executor (signalfd, epoll): %s", std::strerror(errno));
    return 1;
  }
  return loop.Serve();
}

}  // namespace unisched::supervisor
