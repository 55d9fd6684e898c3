#include "daemon/agent_hub.h"

#include <fcntl.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace unisched::daemon {

namespace {
// Longest a heartbeat is held when there is nothing to send.
constexpr int kMaxWaitMs = 30'000;
}  // namespace

AgentHub::AgentHub(const config::Config& config, const Clock& clock) : config_(config), clock_(clock) {
  for (const auto& node : config_.cluster.nodes) {
    if (!node.agent) continue;
    queues_[node.name];
    agent_pools_.emplace(node.name, config_.cluster.FindPool(node.pool));
  }
}

AgentHub::~AgentHub() {
  Stop();
}

void AgentHub::Start() {
  expirer_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "us-agents");
    ExpireLoop();
  });
}

void AgentHub::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (expirer_.joinable()) expirer_.join();
  // Parked heartbeats get an empty answer; their agents come back.
  std::vector<std::function<void()>> answers;
  {
    std::lock_guard lock(mu_);
    for (auto& [node, q] : queues_) {
      if (!q.parked) continue;
      executor::Commands empty;
      empty.node_state = q.node_state;
      answers.push_back([done = std::move(q.parked->done), empty] { done(empty); });
      q.parked.reset();
    }
  }
  for (auto& answer : answers) answer();
}

Status AgentHub::CheckNode(const std::string& token_pool, const std::string& node) const {
  auto it = agent_pools_.find(node);
  if (it == agent_pools_.end()) {
    return Error::NotFound("node " + node +
                           " is not an agent node of the config; declare it under nodes with agent: true and list "
                           "it in its pool");
  }
  if (it->second->name != token_pool) {
    return Error::Forbidden("node " + node + " belongs to pool " + it->second->name + "; this node token is for pool " +
                            token_pool);
  }
  return Status::Ok();
}

std::vector<executor::StagingProgress> AgentHub::Staging() const {
  std::lock_guard lock(mu_);
  std::vector<executor::StagingProgress> all;
  for (const auto& [node, list] : staging_) all.insert(all.end(), list.begin(), list.end());
  return all;
}

void AgentHub::Heartbeat(const std::string& token_pool, executor::Heartbeat heartbeat,
                         std::function<void(Result<executor::Commands>)> done) {
  if (Status s = CheckNode(token_pool, heartbeat.node); !s) {
    done(s.error());
    return;
  }
  if (heartbeat.pool != token_pool) {
    done(Error::Forbidden("the agent says pool " + heartbeat.pool + " but its token is for pool " + token_pool));
    return;
  }
  const std::string node = heartbeat.node;
  const int wait_ms = std::clamp(heartbeat.wait_ms, 0, kMaxWaitMs);
  std::set<executor::AttemptRef> running(heartbeat.running.begin(), heartbeat.running.end());
  std::vector<executor::AttemptRef> needs_keys = heartbeat.needs_store_keys;
  {
    std::lock_guard lock(mu_);
    if (heartbeat.staging.empty()) {
      staging_.erase(node);
    } else {
      staging_[node] = heartbeat.staging;
    }
  }
  sink_->OnAgentHeartbeat(
      std::move(heartbeat), [this, node, wait_ms, running = std::move(running), needs_keys = std::move(needs_keys),
                             done = std::move(done)](HeartbeatAnswer answer) {
        std::vector<std::function<void()>> answers;
        std::vector<executor::RunResult> never_started;
        {
          std::lock_guard lock(mu_);
          NodeQueue& q = queues_[node];
          q.node_state = answer.node_state;
          // A launch handed to the agent again, once per answer.
          auto send_again = [&q](const executor::LaunchSpec& spec) {
            if (std::none_of(q.launch.begin(), q.launch.end(), [&](const executor::LaunchSpec& s) {
                  return s.job_id == spec.job_id && s.attempt == spec.attempt && s.task == spec.task;
                })) {
              q.launch.push_back(spec);
            }
          };
          for (auto& stale : answer.stale) q.cancel.push_back(stale);
          // The agent sends a heartbeat only after acting on the last answer: an
          // attempt handed to it before and not named now never reached it (its
          // answer was lost with a dying agent or daemon). It is sent again (an
          // agent runs an attempt at most once, and answers one it already ran
          // with its stored result), or, if cancelled meanwhile, ends here.
          for (auto it = q.unconfirmed.begin(); it != q.unconfirmed.end();) {
            auto spec = attempts_.find(it->first);
            if (running.count(it->first) || spec == attempts_.end()) {
              it = q.unconfirmed.erase(it);
              continue;
            }
            if (it->second) {
              executor::RunResult r;
              r.job_id = it->first.job;
              r.attempt = it->first.attempt;
              r.task = it->first.task;
              r.outcome = executor::RunOutcome::kCancelled;
              r.reason = "cancelled before it started on node " + node;
              never_started.push_back(std::move(r));
              it = q.unconfirmed.erase(it);
              continue;
            }
            send_again(spec->second);
            ++it;
          }
          // An agent that restarted keeps no object-store keys: the launch of an
          // attempt whose stage-out needs them goes again, keys and all (the
          // agent starts nothing new for an attempt it runs).
          for (const executor::AttemptRef& ref : needs_keys) {
            auto spec = attempts_.find(ref);
            if (spec == attempts_.end() || spec->second.node != node) continue;
            send_again(spec->second);
          }
          // A newer heartbeat replaces a parked one (the agent gave up on it).
          if (q.parked) {
            executor::Commands empty;
            empty.node_state = q.node_state;
            answers.push_back([old = std::move(q.parked->done), empty] { old(empty); });
            q.parked.reset();
          }
          if (!q.launch.empty() || !q.cancel.empty() || wait_ms == 0) {
            answers.push_back([done, commands = TakeCommands(q, node)] { done(commands); });
          } else {
            q.parked = std::make_unique<Parked>(
                Parked{done, std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms)});
            cv_.notify_all();
          }
        }
        for (auto& a : answers) a();
        for (auto& r : never_started) DeliverResult(std::move(r));
      });
}

Result<std::vector<api::AgentPlane::IgnoredResult>> AgentHub::Results(const std::string& token_pool,
                                                                      const std::string& node,
                                                                      std::vector<executor::RunResult> results) {
  if (Status s = CheckNode(token_pool, node); !s) return s.error();
  std::vector<IgnoredResult> ignored;
  std::vector<executor::RunResult> bound;
  {
    std::lock_guard lock(mu_);
    // A result binds to the node the attempt was sent to: a node token is for
    // one pool, and must not end (or charge) work running anywhere else.
    for (const auto& r : results) {
      auto sent = attempts_.find({r.job_id, r.attempt, r.task});
      if (sent != attempts_.end() && sent->second.node != node) {
        return Error::Forbidden("attempt " + std::to_string(r.job_id) + "." + std::to_string(r.attempt) +
                                (r.task == 0 ? std::string() : " task " + std::to_string(r.task)) +
                                " was sent to node " + sent->second.node + ", not " + node +
                                "; a node reports only what it was sent (nothing of this call was applied)");
      }
    }
    NodeQueue& q = queues_[node];
    for (auto& r : results) {
      if (attempts_.count({r.job_id, r.attempt, r.task}) == 0) {
        ignored.push_back({r.job_id, r.attempt,
                           "not an attempt this daemon sent to node " + node +
                               " (a late report of a finished job, or not an agent attempt at all)"});
        continue;
      }
      q.unconfirmed.erase({r.job_id, r.attempt, r.task});
      r.reported_by = node;
      bound.push_back(std::move(r));
    }
  }
  for (const auto& i : ignored) {
    spdlog::warn("node {}: ignored a result for attempt {}.{}: {}", node, i.job_id, i.attempt, i.reason);
  }
  // Stale or repeated results are ignored by the controller (by attempt).
  for (auto& r : bound) DeliverResult(std::move(r));
  return ignored;
}

std::string AgentHub::TaskLogDir(model::JobId job, int attempt, int task) const {
  return logs_dir_ + "/" + std::to_string(job) + "/" + executor::TaskDirName(attempt, task);
}

Result<int64_t> AgentHub::AppendLog(const std::string& token_pool, const std::string& node,
                                    const executor::AttemptRef& task, const std::string& stream, int64_t offset,
                                    std::string_view bytes) {
  if (Status s = CheckNode(token_pool, node); !s) return s.error();
  if (logs_dir_.empty()) return Error::Unavailable("this daemon keeps no agents' output");
  if (stream != "stdout" && stream != "stderr") {
    return Error::Unprocessable("invalid_value", "stream must be stdout or stderr", "stream");
  }
  {
    std::lock_guard lock(mu_);
    auto sent = attempts_.find(task);
    if (sent == attempts_.end()) {
      return Error::NotFound("attempt " + std::to_string(task.job) + "." + std::to_string(task.attempt) + " task " +
                             std::to_string(task.task) + " is not one this daemon sent to node " + node);
    }
    if (sent->second.node != node) {
      return Error::Forbidden("that task was sent to node " + sent->second.node + ", not " + node);
    }
  }
  // One writer per task and stream (its agent's shipper), so no lock: the
  // file's size says where the copy ends.
  const std::string dir = TaskLogDir(task.job, task.attempt, task.task);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/" + stream;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Error::Internal("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  int64_t size = ::fstat(fd, &st) == 0 ? st.st_size : 0;
  if (offset == size && !bytes.empty()) {
    const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), offset);
    if (n > 0) size += n;
  }
  ::close(fd);
  return size;
}

executor::Commands AgentHub::TakeCommands(NodeQueue& q, const std::string& node) {
  executor::Commands c;
  c.node_state = q.node_state;
  c.heartbeat_interval_seconds = config_.health.heartbeat_interval_seconds;
  c.launch = std::move(q.launch);
  c.cancel = std::move(q.cancel);
  for (const auto& spec : c.launch)
    q.unconfirmed.emplace(executor::AttemptRef{spec.job_id, spec.attempt, spec.task}, false);
  q.launch.clear();
  q.cancel.clear();
  if (auto it = agent_pools_.find(node); it != agent_pools_.end()) {
    const model::PoolSpec& pool = *it->second;
    c.health_check.command = pool.health_check_command;
    c.health_check.interval_seconds = pool.health_check_interval_seconds;
    c.health_check.timeout_seconds = pool.health_check_timeout_seconds;
  }
  return c;
}

void AgentHub::Wake(const std::string& node) {
  auto it = queues_.find(node);
  if (it == queues_.end() || !it->second.parked) return;
  NodeQueue& q = it->second;
  to_answer_.push_back([done = std::move(q.parked->done), commands = TakeCommands(q, node)] { done(commands); });
  q.parked.reset();
}

void AgentHub::ExpireLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return stopping_ || !to_answer_.empty(); });
    const auto now = std::chrono::steady_clock::now();
    for (auto& [node, q] : queues_) {
      if (q.parked && q.parked->deadline <= now) {
        to_answer_.push_back([done = std::move(q.parked->done), commands = TakeCommands(q, node)] { done(commands); });
        q.parked.reset();
      }
    }
    auto answers = std::move(to_answer_);
    to_answer_.clear();
    lock.unlock();
    for (auto& a : answers) a();
    lock.lock();
  }
}

Status AgentHub::Launch(const executor::LaunchSpec& spec) {
  std::lock_guard lock(mu_);
  attempts_[{spec.job_id, spec.attempt, spec.task}] = spec;
  queues_[spec.node].launch.push_back(spec);
  Wake(spec.node);
  cv_.notify_all();
  return Status::Ok();
}

std::vector<const executor::LaunchSpec*> AgentHub::TasksOf(model::JobId job_id, int attempt) const {
  std::vector<const executor::LaunchSpec*> tasks;
  for (auto it = attempts_.lower_bound({job_id, attempt, 0});
       it != attempts_.end() && it->first.job == job_id && it->first.attempt == attempt; ++it) {
    tasks.push_back(&it->second);
  }
  return tasks;
}

// Every task of the attempt (or the ones named), on whichever nodes they
// were sent to: one cancel per node, naming the tasks when only some go.
void AgentHub::Cancel(model::JobId job_id, int attempt, bool preempt) {
  std::lock_guard lock(mu_);
  CancelLocked(job_id, attempt, preempt, nullptr);
}

void AgentHub::CancelTasks(model::JobId job_id, int attempt, const std::vector<int>& tasks) {
  std::lock_guard lock(mu_);
  const std::set<int> only(tasks.begin(), tasks.end());
  CancelLocked(job_id, attempt, false, &only);
}

void AgentHub::CancelLocked(model::JobId job_id, int attempt, bool preempt, const std::set<int>* only) {
  std::map<std::string, std::vector<int>> nodes;
  for (const executor::LaunchSpec* spec : TasksOf(job_id, attempt)) {
    if (only && only->count(spec->task) == 0) continue;
    const executor::AttemptRef ref{job_id, attempt, spec->task};
    NodeQueue& q = queues_[spec->node];
    // Not launched yet: it never starts.
    auto queued = std::find_if(q.launch.begin(), q.launch.end(), [&](const executor::LaunchSpec& s) {
      return s.job_id == job_id && s.attempt == attempt && s.task == spec->task;
    });
    const bool was_queued = queued != q.launch.end();
    if (was_queued) q.launch.erase(queued);
    if (auto unconfirmed = q.unconfirmed.find(ref); unconfirmed != q.unconfirmed.end()) {
      unconfirmed->second = true;  // ends at the next heartbeat unless the agent names it
    } else if (was_queued) {
      // Never handed out: it ends now, reported like any cancel.
      executor::RunResult r;
      r.job_id = job_id;
      r.attempt = attempt;
      r.task = spec->task;
      r.outcome = executor::RunOutcome::kCancelled;
      r.reason = "cancelled before it started on node " + spec->node;
      to_answer_.push_back([this, r] { DeliverResult(r); });
    }
    nodes[spec->node].push_back(spec->task);
  }
  for (auto& [node, tasks] : nodes) {
    executor::CancelCommand cancel{job_id, attempt, preempt, false};
    if (only) cancel.tasks = std::move(tasks);
    queues_[node].cancel.push_back(std::move(cancel));
    Wake(node);
  }
  cv_.notify_all();
}

void AgentHub::Recover(const executor::LaunchSpec& spec) {
  // After a daemon restart: the agent still runs it (it says so in its
  // heartbeat) or it ended and the agent sends the result again; if the
  // agent does not name it, it is sent again (see Heartbeat).
  std::lock_guard lock(mu_);
  attempts_[{spec.job_id, spec.attempt, spec.task}] = spec;
  queues_[spec.node].unconfirmed.emplace(executor::AttemptRef{spec.job_id, spec.attempt, spec.task}, false);
}

std::string AgentHub::LogPath(model::JobId job_id, int attempt, int task, std::string_view stream) const {
  if (logs_dir_.empty() || (stream != "stdout" && stream != "stderr")) return {};
  return TaskLogDir(job_id, attempt, task) + "/" + std::string(stream);  // as the agent shipped it
}

void AgentHub::Forget(model::JobId job_id, int attempt) {
  // The output agents shipped: the attempt's tasks' (attempt 0: the job's).
  if (!logs_dir_.empty()) {
    std::error_code ec;
    const std::string job_dir = logs_dir_ + "/" + std::to_string(job_id);
    if (attempt <= 0) {
      std::filesystem::remove_all(job_dir, ec);
    } else {
      for (const auto& entry : std::filesystem::directory_iterator(job_dir, ec)) {
        const auto task = executor::ParseTaskDirName(entry.path().filename().string());
        if (task && task->first == attempt) {
          std::filesystem::remove_all(entry.path(), ec);
        }
      }
      if (std::filesystem::is_empty(job_dir, ec)) std::filesystem::remove(job_dir, ec);
    }
  }
  std::lock_guard lock(mu_);
  for (auto it = attempts_.lower_bound({job_id, attempt, 0});
       it != attempts_.end() && it->first.job == job_id && (attempt == 0 || it->first.attempt == attempt);) {
    it = attempts_.erase(it);
  }
}

void AgentHub::DeliverResult(executor::RunResult result) {
  if (results_) {
    results_(std::move(result));
  } else {
    sink_->OnRunResult(std::move(result));
  }
}

void AgentHub::Shutdown() {
  Stop();
}

}  // namespace unisched::daemon
