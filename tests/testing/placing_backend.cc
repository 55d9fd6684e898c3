#include "testing/placing_backend.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

extern char** environ;

namespace unisched::testing {

PlacingBackend::PlacingBackend(std::vector<std::string> nodes, ResultSink sink)
    : nodes_(std::move(nodes)), sink_(std::move(sink)) {}

PlacingBackend::~PlacingBackend() {
  Shutdown();
}

Status PlacingBackend::Launch(const backend::AttemptLaunch& launch) {
  std::lock_guard lock(mu_);
  const executor::LaunchSpec& spec = launch.spec;
  if (!launch.allocation.empty()) saw_allocation_ = true;
  last_launch_ = launch;
  const Key key{spec.job_id, spec.attempt};
  if (runs_.count(key)) return Status::Ok();  // idempotent per attempt
  // Its own placement: the node running the fewest attempts now.
  std::map<std::string, int> busy;
  for (const auto& n : nodes_) busy[n] = 0;
  for (const auto& [k, run] : runs_) {
    if (!run.ended) ++busy[run.node];
  }
  const std::string node = std::min_element(busy.begin(), busy.end(), [](const auto& a, const auto& b) {
                             return a.second < b.second;
                           })->first;
  runs_[key].node = node;
  ++launches_;
  // Where it runs is this backend's to say, as a cluster's own launcher would.
  executor::LaunchSpec placed = spec;
  placed.env["UNISCHED_NODELIST"] = node;
  threads_.emplace_back([this, placed, node] { Execute(placed, node); });
  return Status::Ok();
}

void PlacingBackend::Execute(executor::LaunchSpec spec, std::string node) {
  const Key key{spec.job_id, spec.attempt};
  executor::RunResult result;
  result.job_id = spec.job_id;
  result.attempt = spec.attempt;
  result.placed_on = {node};
  result.started_at = SystemClock().Now();
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    result.outcome = executor::RunOutcome::kLaunchFailed;
    result.reason = std::string("pipe: ") + std::strerror(errno);
    Finish(key, std::move(result));
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  // A process group of its own, so a stop reaches what the command started too.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  std::vector<std::string> env_text;
  for (const auto& [k, v] : spec.env) env_text.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (auto& a : spec.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = ::posix_spawnp(&pid, argv[0], &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ::close(out[1]);
  if (spawned != 0) {
    ::close(out[0]);
    result.outcome = executor::RunOutcome::kLaunchFailed;
    result.reason = spec.argv[0] + ": " + std::strerror(spawned);
    Finish(key, std::move(result));
    return;
  }
  bool cancel_now = false;
  {
    std::lock_guard lock(mu_);
    runs_[key].pid = pid;
    cancel_now = runs_[key].cancelled;
  }
  if (cancel_now) ::kill(-pid, SIGTERM);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(out[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.ended_at = SystemClock().Now();
  result.usage.wall_seconds = std::chrono::duration<double>(*result.ended_at - *result.started_at).count();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  bool cancelled = false;
  {
    std::lock_guard lock(mu_);
    runs_[key].stdout_text = std::move(text);
    runs_[key].pid = -1;
    cancelled = runs_[key].cancelled;
  }
  result.outcome = cancelled                ? executor::RunOutcome::kCancelled
                   : *result.exit_code == 0 ? executor::RunOutcome::kCompleted
                                            : executor::RunOutcome::kFailed;
  Finish(key, std::move(result));
}

void PlacingBackend::Finish(const Key& key, executor::RunResult result) {
  {
    std::lock_guard lock(mu_);
    runs_[key].ended = true;
  }
  sink_(std::move(result));
}

void PlacingBackend::Cancel(model::JobId job, int attempt, bool) {
  std::lock_guard lock(mu_);
  auto it = runs_.find({job, attempt});
  if (it == runs_.end() || it->second.ended) return;
  it->second.cancelled = true;
  if (it->second.pid > 0) ::kill(-it->second.pid, SIGTERM);
}

void PlacingBackend::Recover(const backend::AttemptLaunch& launch) {
  const executor::LaunchSpec& spec = launch.spec;
  executor::RunResult lost;
  lost.job_id = spec.job_id;
  lost.attempt = spec.attempt;
  lost.outcome = executor::RunOutcome::kLost;
  lost.reason = "the test backend cannot adopt runs of a previous daemon";
  sink_(std::move(lost));
}

std::string PlacingBackend::ReadLog(model::JobId job, int attempt, int task, std::string_view stream,
                                    LogRange range) const {
  std::lock_guard lock(mu_);
  auto it = runs_.find({job, attempt});
  if (it == runs_.end() || stream != "stdout" || task != 0) return {};
  const std::string& text = it->second.stdout_text;
  return range.offset >= text.size() ? std::string() : text.substr(range.offset, range.max_bytes);
}

void PlacingBackend::Forget(model::JobId job, int attempt) {
  std::lock_guard lock(mu_);
  for (auto it = runs_.begin(); it != runs_.end();) {
    const bool match = it->first.first == job && (attempt == 0 || it->first.second == attempt);
    it = match && it->second.ended ? runs_.erase(it) : std::next(it);
  }
}

void PlacingBackend::Shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    // Runs still going end now: their results reach the sink as cancels.
    for (auto& [key, run] : runs_) {
      if (run.ended) continue;
      run.cancelled = true;
      if (run.pid > 0) ::kill(-run.pid, SIGKILL);
    }
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
}

int PlacingBackend::launches() const {
  std::lock_guard lock(mu_);
  return launches_;
}

backend::AttemptLaunch PlacingBackend::last_launch() const {
  std::lock_guard lock(mu_);
  return last_launch_;
}

bool PlacingBackend::saw_allocation() const {
  std::lock_guard lock(mu_);
  return saw_allocation_;
}

}  // namespace unisched::testing
